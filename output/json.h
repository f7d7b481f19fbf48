/* json.h — JSON text written to a FILE (json.c): what the CLI's --json lines and glimpse serve's replies
 * share, so both escape strings and print numbers the same way; and one check of JSON text before cJSON
 * parses it. No model knowledge. */
#ifndef GLIMPSE_OUTPUT_JSON_H
#define GLIMPSE_OUTPUT_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* JSON writing: strings escaped (invalid UTF-8 becomes U+FFFD), floats
 * printed with 9 significant digits (enough to round-trip a float). */
bool json_string(FILE *out, const char *text); /* false if some byte was not UTF-8 (written as U+FFFD) */
/* A file name as a JSON string and, when it is not UTF-8, the field
 * `, "path_bytes": [bytes...]` after it, so that a program can reopen it. */
void json_path(FILE *out, const char *path);
/* Whether text is valid UTF-8 throughout; and a new copy (malloc'd; NULL when out of memory) where each byte
 * that is not part of a valid sequence is U+FFFD, as json_string writes it: for JSON made with cJSON, which
 * copies bytes as they are. */
bool json_utf8_valid(const char *text);
char *json_utf8_repaired(const char *text);
void json_float(FILE *out, float value);
void json_floats(FILE *out, const float *values, size_t count);
/* text without the whitespace at its ends, in place (returned): how a caption or an answer is shown, as the
 * model cards print them (BLIP-2's decode begins with a space); every printer of one (the CLI's lines and JSON,
 * glimpse chat, explanations' JSON) shows the same text. */
char *json_text_trimmed(char *text);

/* Whether the JSON text[0..size) holds the escape \u0000 in a string: a NUL character, which cJSON keeps and every
 * C string then ends at, so that a text would be taken cut short. (Read as JSON reads escapes: "\\u0000" is a
 * backslash and five letters.) */
bool json_has_nul_escape(const char *text, size_t size);
/* bytes in base64 (RFC 4648, padded): HTML pages' data: URIs, and /v1/explain's contact sheet. */
void json_base64(FILE *out, const uint8_t *bytes, size_t size);

#endif
