/* render.c — heat maps over pictures, text labels and PNG encoding for explanations (see render.h). The
 * glyphs come from stb_truetype (Debian's libstb), the PNG from libpng written into memory. */
#include "explain/render.h"

#include <math.h>
#include <png.h>
#include <stdlib.h>
#include <string.h>
#include <stb_truetype.h>

#include "core/error.h"
#include "core/file.h"
#include "explain/stb_truetype_impl.h"
#include "text/utf8.h"

/* Larger files are refused as fonts (DejaVu Sans is 757 KB). */
#define EXPLAIN_FONT_MAX_BYTES (64u << 20)

struct explain_font {
    stbtt_fontinfo info;
    uint8_t *data;
};

glimpse_status explain_font_load(const char *path, explain_font **out) {
    *out = NULL;
    if (!path) path = EXPLAIN_DEFAULT_FONT;
    explain_font *font = calloc(1, sizeof *font);
    if (!font) return ERROR_OOM();
    size_t size = 0;
    glimpse_status status = file_read_all(path, EXPLAIN_FONT_MAX_BYTES, &font->data, &size);
    if (status) {
        free(font);
        return error_set(status, "the label font %s: %s (install fonts-dejavu-core, or name another TrueType file)",
                         path, glimpse_last_error());
    }
    int offset = size >= 12 ? stbtt_GetFontOffsetForIndex(font->data, 0) : -1;
    if (offset < 0 || !stbtt_InitFont(&font->info, font->data, offset)) {
        explain_font_free(font);
        return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s is not a TrueType font", path);
    }
    *out = font;
    return GLIMPSE_STATUS_OK;
}

void explain_font_free(explain_font *font) {
    if (!font) return;
    free(font->data);
    free(font);
}

/* The width in pixels of text at scale. */
static float text_width(const explain_font *font, const char *text, float scale) {
    float width = 0;
    size_t length = strlen(text);
    int32_t previous = 0;
    for (size_t at = 0; at < length;) {
        int32_t codepoint;
        at += utf8_next((const uint8_t *)text + at, length - at, &codepoint);
        int advance, bearing;
        stbtt_GetCodepointHMetrics(&font->info, codepoint, &advance, &bearing);
        if (previous) width += scale * (float)stbtt_GetCodepointKernAdvance(&font->info, previous, codepoint);
        width += scale * (float)advance;
        previous = codepoint;
    }
    return width;
}

glimpse_status explain_draw_text(explain_canvas *canvas, const explain_font *font, const char *text, int x, int y,
                       int box_width, int pixel_height, const uint8_t colour[3]) {
    float scale = stbtt_ScaleForPixelHeight(&font->info, (float)pixel_height);
    int ascent, descent, gap;
    stbtt_GetFontVMetrics(&font->info, &ascent, &descent, &gap);
    int baseline = y + (int)lroundf((float)ascent * scale);
    float width = text_width(font, text, scale);
    float pen = (float)x + ((float)box_width - width) / 2;
    if (pen < (float)x) pen = (float)x; /* too wide: left-aligned, clipped at the box's right */
    size_t length = strlen(text);
    int32_t previous = 0;
    for (size_t at = 0; at < length;) {
        int32_t codepoint;
        at += utf8_next((const uint8_t *)text + at, length - at, &codepoint);
        if (previous) pen += scale * (float)stbtt_GetCodepointKernAdvance(&font->info, previous, codepoint);
        int advance, bearing, x0, y0, x1, y1;
        stbtt_GetCodepointHMetrics(&font->info, codepoint, &advance, &bearing);
        stbtt_GetCodepointBitmapBox(&font->info, codepoint, scale, scale, &x0, &y0, &x1, &y1);
        int glyph_width = x1 - x0, glyph_height = y1 - y0;
        if (glyph_width > 0 && glyph_height > 0) {
            uint8_t *coverage = malloc((size_t)glyph_width * (size_t)glyph_height);
            if (!coverage) return ERROR_OOM();
            stbtt_MakeCodepointBitmap(&font->info, coverage, glyph_width, glyph_height, glyph_width, scale, scale,
                                      codepoint);
            if (truetype_allocation_failed()) {
                free(coverage);
                return ERROR_OOM();
            }
            int left = (int)lroundf(pen) + x0, top = baseline + y0;
            for (int gy = 0; gy < glyph_height; gy++)
                for (int gx = 0; gx < glyph_width; gx++) {
                    int px = left + gx, py = top + gy;
                    if (px < x || px >= x + box_width || px < 0 || py < 0 || px >= canvas->width ||
                        py >= canvas->height)
                        continue;
                    unsigned a = coverage[gy * glyph_width + gx];
                    uint8_t *p = canvas->pixels + ((size_t)py * (size_t)canvas->width + (size_t)px) * 3;
                    for (int c = 0; c < 3; c++) p[c] = (uint8_t)((p[c] * (255 - a) + colour[c] * a + 127) / 255);
                }
            free(coverage);
        }
        pen += scale * (float)advance;
        previous = codepoint;
    }
    return GLIMPSE_STATUS_OK;
}

void explain_draw_heat(explain_canvas *canvas, int x, int y, const uint8_t *picture, const float *values, int width,
                       int height, float maximum, float alpha) {
    for (int row = 0; row < height; row++) {
        if (y + row < 0 || y + row >= canvas->height) continue;
        for (int column = 0; column < width; column++) {
            if (x + column < 0 || x + column >= canvas->width) continue;
            size_t at = (size_t)row * (size_t)width + (size_t)column;
            uint8_t *p = canvas->pixels + ((size_t)(y + row) * (size_t)canvas->width + (size_t)(x + column)) * 3;
            const uint8_t *source = picture + at * 3;
            float value = values ? values[at] : NAN;
            if (!(maximum > 0) || isnan(value)) {
                memcpy(p, source, 3);
                continue;
            }
            float level = value / maximum;
            level = level < 0 ? 0 : level > 1 ? 1 : level;
            const uint8_t *colour = explain_inferno[(int)lroundf(level * 255)];
            for (int c = 0; c < 3; c++)
                p[c] = (uint8_t)lroundf((float)source[c] * (1 - alpha) + (float)colour[c] * alpha);
        }
    }
}

/* Memory the PNG is written into. */
typedef struct png_buffer {
    uint8_t *bytes;
    size_t size, capacity;
    int failed;
} png_buffer;

static void png_buffer_write(png_structp png, png_bytep data, png_size_t length) {
    png_buffer *buffer = png_get_io_ptr(png);
    if (buffer->failed) return;
    if (buffer->size + length > buffer->capacity) {
        size_t capacity = (buffer->size + length) * 2;
        uint8_t *grown = realloc(buffer->bytes, capacity);
        if (!grown) {
            buffer->failed = 1;
            return;
        }
        buffer->bytes = grown;
        buffer->capacity = capacity;
    }
    memcpy(buffer->bytes + buffer->size, data, length);
    buffer->size += length;
}

static void png_buffer_flush(png_structp png) { (void)png; }

glimpse_status explain_png_encode(const explain_canvas *canvas, void **png_out, size_t *size) {
    *png_out = NULL;
    *size = 0;
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    png_bytep *rows = malloc((size_t)canvas->height * sizeof *rows);
    png_buffer buffer = {0};
    if (!png || !info || !rows) {
        png_destroy_write_struct(&png, &info);
        free(rows);
        return ERROR_OOM();
    }
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_write_struct(&png, &info);
        free(rows);
        free(buffer.bytes);
        return error_set(GLIMPSE_STATUS_INTERNAL, "libpng could not encode the picture");
    }
    png_set_write_fn(png, &buffer, png_buffer_write, png_buffer_flush);
    png_set_IHDR(png, info, (png_uint_32)canvas->width, (png_uint_32)canvas->height, 8, PNG_COLOR_TYPE_RGB,
                 PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    for (int y = 0; y < canvas->height; y++) rows[y] = canvas->pixels + (size_t)y * (size_t)canvas->width * 3;
    png_set_rows(png, info, rows);
    png_write_png(png, info, PNG_TRANSFORM_IDENTITY, NULL);
    png_destroy_write_struct(&png, &info);
    free(rows);
    if (buffer.failed) {
        free(buffer.bytes);
        return ERROR_OOM();
    }
    *png_out = buffer.bytes;
    *size = buffer.size;
    return GLIMPSE_STATUS_OK;
}
