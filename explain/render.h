/* render.h — drawing explanation pictures: heat maps coloured with the inferno table and blended over a
 * picture, labels set in a TrueType font (stb_truetype), PNG encoding to memory (libpng). Works on RGB8
 * canvases the caller owns; knows nothing of models. */
#ifndef GLIMPSE_EXPLAIN_RENDER_H
#define GLIMPSE_EXPLAIN_RENDER_H

#include <stddef.h>
#include <stdint.h>

#include "glimpse.h"

/* inferno, 256 entries: 0 darkest (no attention) to 255 lightest (the most). */
extern const uint8_t explain_inferno[256][3];

/* The font labels are set in when the caller names none (Debian's fonts-dejavu-core). */
#define EXPLAIN_DEFAULT_FONT "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"

typedef struct explain_font explain_font;
/* Reads a TrueType file (path NULL: EXPLAIN_DEFAULT_FONT). Caller frees with explain_font_free. */
glimpse_status explain_font_load(const char *path, explain_font **out);
void explain_font_free(explain_font *font);

/* An RGB8 canvas, rows packed. */
typedef struct explain_canvas {
    uint8_t *pixels;
    int width, height;
} explain_canvas;

/* Writes text (UTF-8) pixel_height pixels tall, in colour, centred in the box [x, x + box_width) whose top is
 * y; what falls outside the canvas or the box is clipped. GLIMPSE_STATUS_OUT_OF_MEMORY if a glyph could not be
 * drawn. */
glimpse_status explain_draw_text(explain_canvas *canvas, const explain_font *font, const char *text, int x, int y,
                       int box_width, int pixel_height, const uint8_t colour[3]);

/* Copies picture [height × width × 3] to the canvas at (x, y) and blends values [height × width] over it:
 * each value (NAN: left uncoloured) is divided by maximum (values ≤ 0 give the colour map's first entry),
 * coloured with inferno and blended with opacity alpha. maximum ≤ 0: the picture alone. */
void explain_draw_heat(explain_canvas *canvas, int x, int y, const uint8_t *picture, const float *values, int width,
                       int height, float maximum, float alpha);

/* Encodes the canvas as an 8-bit RGB PNG in new memory (*png, *size; caller frees with free()). */
glimpse_status explain_png_encode(const explain_canvas *canvas, void **png, size_t *size);

#endif
