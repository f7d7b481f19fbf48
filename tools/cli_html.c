/* cli_html.c — the --html pages (see cli_html.h): thumbnails resized as
 * Pillow would (vision/resize.h), PNG through libpng, base64, HTML escaped. */
#include <png.h>
#include <stdlib.h>
#include <string.h>

#include "tools/cli_html.h"
#include "tools/cli_inputs.h"

/* Thumbnails fit in a square of this many pixels. */
#define THUMBNAIL_PIXELS 200

typedef struct png_buffer {
    uint8_t *bytes;
    size_t size;
    bool failed;
} png_buffer;

static void append_png_bytes(png_structp png, png_bytep data, png_size_t length) {
    png_buffer *buffer = png_get_io_ptr(png);
    uint8_t *grown = buffer->failed ? NULL : realloc(buffer->bytes, buffer->size + length);
    if (!grown) {
        buffer->failed = true;
        return;
    }
    memcpy(grown + buffer->size, data, length);
    buffer->bytes = grown;
    buffer->size += length;
}

static void flush_png(png_structp png) { (void)png; }

uint8_t *cli_png_encode(const uint8_t *rgb, int width, int height, size_t *size) {
    png_buffer buffer = {NULL, 0, false};
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!png || !info || setjmp(png_jmpbuf(png))) {
        png_destroy_write_struct(&png, &info);
        free(buffer.bytes);
        return NULL;
    }
    png_set_write_fn(png, &buffer, append_png_bytes, flush_png);
    png_set_IHDR(png, info, (png_uint_32)width, (png_uint_32)height, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    for (int y = 0; y < height; y++) png_write_row(png, (png_const_bytep)(rgb + (size_t)y * width * 3));
    png_write_end(png, info);
    png_destroy_write_struct(&png, &info);
    if (buffer.failed) {
        free(buffer.bytes);
        return NULL;
    }
    *size = buffer.size;
    return buffer.bytes;
}

static void html_text(FILE *page, const char *text) {
    for (const char *c = text; *c; c++) {
        switch (*c) {
        case '<': fputs("&lt;", page); break;
        case '>': fputs("&gt;", page); break;
        case '&': fputs("&amp;", page); break;
        case '"': fputs("&quot;", page); break;
        default: fputc(*c, page);
        }
    }
}

FILE *cli_html_open(const char *path, const char *title) {
    FILE *page = fopen(path, "w");
    if (!page) {
        cli_error("%s: cannot write the page", path);
        exit(CLI_EXIT_FAILURE);
    }
    fputs("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>", page);
    html_text(page, title);
    fputs("</title>\n<style>body{font-family:sans-serif;margin:1em}h2{font-size:1.1em;margin:1.2em 0 .4em}"
          ".row{display:flex;flex-wrap:wrap;gap:12px}figure{margin:0;width:210px}"
          "img{max-width:200px;max-height:200px;display:block;border:1px solid #ccc}"
          "figcaption{font-size:.8em;word-break:break-all}.score{font-weight:bold}"
          ".missing{width:200px;height:60px;background:#eee;font-size:.8em}</style></head><body>\n<h1>",
          page);
    html_text(page, title);
    fputs("</h1>\n", page);
    return page;
}

void cli_html_row(FILE *page, const char *heading) {
    fputs("<h2>", page);
    html_text(page, heading);
    fputs("</h2>\n<div class=\"row\">\n", page);
}

void cli_html_row_end(FILE *page) { fputs("</div>\n", page); }

/* The thumbnail of the image file at path as a PNG (malloc'd), or NULL with the reason in glimpse_last_error(). */
static uint8_t *thumbnail(const cli_options *options, const char *path, double seconds, size_t *size) {
    glimpse_image_params params = glimpse_image_default_params();
    params.max_pixels = options->max_pixels;
    params.ignore_exif_orientation = options->no_exif_rotate;
    glimpse_image *image, *small = NULL;
    if (seconds >= 0 ? cli_video_frame_at(options, path, seconds, &image)
                     : glimpse_image_load_file(path, &params, &image))
        return NULL;
    int width = glimpse_image_width(image), height = glimpse_image_height(image);
    int longest = width > height ? width : height;
    uint8_t *png = NULL;
    if (longest > THUMBNAIL_PIXELS) {
        int new_width = width * THUMBNAIL_PIXELS / longest, new_height = height * THUMBNAIL_PIXELS / longest;
        if (glimpse_image_resize(image, new_width ? new_width : 1, new_height ? new_height : 1, &small))
            small = NULL;
    }
    const glimpse_image *shown = small ? small : image;
    if (!longest || longest <= THUMBNAIL_PIXELS || small)
        png = cli_png_encode(glimpse_image_pixels(shown), glimpse_image_width(shown), glimpse_image_height(shown),
                             size);
    glimpse_image_free(small);
    glimpse_image_free(image);
    return png;
}

void cli_html_picture(FILE *page, const cli_options *options, const char *path, double seconds,
                      const char *caption) {
    size_t size = 0;
    uint8_t *png = thumbnail(options, path, seconds, &size);
    fputs("<figure>", page);
    if (png) {
        fputs("<img alt=\"\" src=\"data:image/png;base64,", page);
        json_base64(page, png, size);
        fputs("\">", page);
    } else {
        fputs("<div class=\"missing\">", page);
        html_text(page, glimpse_last_error());
        fputs("</div>", page);
    }
    fputs("<figcaption><span class=\"score\">", page);
    html_text(page, caption);
    fputs("</span><br>", page);
    html_text(page, path);
    if (seconds >= 0) {
        char time[CLI_TIME_CAPACITY];
        cli_format_time(time, seconds);
        fputs(" @ ", page);
        html_text(page, time);
    }
    fputs("</figcaption></figure>\n", page);
    free(png);
}

bool cli_html_close(FILE *page, const char *path) {
    fputs("</body></html>\n", page);
    bool written = !ferror(page);
    if (fclose(page) != 0) written = false;
    if (!written) cli_error("%s: writing the page failed", path);
    return written;
}
