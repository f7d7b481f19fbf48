/* cli_html.h — self-contained HTML pages of pictures for --html (search,
 * duplicates): each picture a thumbnail embedded as a PNG data URI, with its
 * caption, so the page opens anywhere without the files. CLI only. */
#ifndef GLIMPSE_TOOLS_CLI_HTML_H
#define GLIMPSE_TOOLS_CLI_HTML_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "tools/cli_common.h"

/* An encoded PNG of rgb[height, width, 3] (malloc'd, *size bytes), or NULL when out of memory. */
uint8_t *cli_png_encode(const uint8_t *rgb, int width, int height, size_t *size);

/* Opens the page at path with its title; exits with a message if it cannot be written. */
FILE *cli_html_open(const char *path, const char *title);
/* A heading and a row of pictures after it, until cli_html_row_end. */
void cli_html_row(FILE *page, const char *heading);
void cli_html_row_end(FILE *page);
/* One picture: its thumbnail (at most 200 pixels a side; the reason if it
 * cannot be read), the caption (a score) and its path; with seconds >= 0,
 * the video's frame at that time, and the time after the path. */
void cli_html_picture(FILE *page, const cli_options *options, const char *path, double seconds,
                      const char *caption);
/* Ends the page; false (with a message) if writing it failed. */
bool cli_html_close(FILE *page, const char *path);

#endif
