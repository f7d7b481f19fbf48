/* task_draw.c — glimpse_task_draw: a task's regions drawn over the picture (boxes, OCR quads and polygons
 * outlined, each region's label on a band of its colour above it) and encoded as PNG, for `--draw` and media
 * applications that show what Florence-2 found. Lines and bands only; text and PNG are explain/render.h's. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "explain/render.h"
#include "glimpse.h"

/* Colours told apart on photographs, one per region in turn. */
static const uint8_t palette[][3] = {{230, 25, 75}, {60, 180, 75}, {255, 225, 25}, {0, 130, 200}, {245, 130, 48},
                                     {145, 30, 180}, {70, 240, 240}, {240, 50, 230}, {210, 245, 60}, {0, 128, 128}};
#define PALETTE_SIZE (sizeof palette / sizeof palette[0])

static void put(explain_canvas *c, long x, long y, const uint8_t colour[3]) {
    if (x < 0 || y < 0 || x >= c->width || y >= c->height) return;
    memcpy(c->pixels + ((size_t)y * (size_t)c->width + (size_t)x) * 3, colour, 3);
}

/* A line `thickness` pixels wide from (x0, y0) to (x1, y1), clipped to the canvas. */
static void draw_line(explain_canvas *c, float x0, float y0, float x1, float y1, int thickness,
                      const uint8_t colour[3]) {
    float dx = x1 - x0, dy = y1 - y0;
    float length = fmaxf(fabsf(dx), fabsf(dy));
    /* points past a few canvas sizes are off it: stop there, never loop for ever on a huge coordinate */
    float limit = 4.0f * (float)(c->width + c->height);
    if (!(length <= limit)) length = limit;
    long steps = (long)ceilf(length);
    for (long i = 0; i <= steps; i++) {
        float t = steps ? (float)i / (float)steps : 0;
        long x = lroundf(x0 + t * dx), y = lroundf(y0 + t * dy);
        for (int a = -(thickness / 2); a < thickness - thickness / 2; a++)
            for (int b = -(thickness / 2); b < thickness - thickness / 2; b++) put(c, x + a, y + b, colour);
    }
}

/* The outline of a region: a box's four sides, or the closed path through a quad's or polygon's points. */
static void draw_outline(explain_canvas *c, const glimpse_region *g, int thickness, const uint8_t colour[3]) {
    const float *p = g->coords;
    if (g->shape == GLIMPSE_REGION_BOX && g->coord_count == 4) {
        float box[8] = {p[0], p[1], p[2], p[1], p[2], p[3], p[0], p[3]};
        for (int i = 0; i < 4; i++)
            draw_line(c, box[2 * i], box[2 * i + 1], box[(2 * i + 2) % 8], box[(2 * i + 3) % 8], thickness, colour);
        return;
    }
    size_t points = g->coord_count / 2;
    for (size_t i = 0; points > 1 && i < points; i++) {
        size_t j = (i + 1) % points;
        draw_line(c, p[2 * i], p[2 * i + 1], p[2 * j], p[2 * j + 1], thickness, colour);
    }
}

/* The region's label on a band of its colour just above its top left (inside the picture). */
static glimpse_status draw_label(explain_canvas *c, const explain_font *font, const glimpse_region *g,
                                 int pixels, const uint8_t colour[3]) {
    if (!g->label || !g->label[0] || g->coord_count < 2) return GLIMPSE_STATUS_OK;
    float left = INFINITY, top = INFINITY, right = -INFINITY;
    for (size_t i = 0; i + 1 < g->coord_count; i += 2) {
        left = fminf(left, g->coords[i]), right = fmaxf(right, g->coords[i]);
        top = fminf(top, g->coords[i + 1]);
    }
    if (!isfinite(left) || !isfinite(top)) return GLIMPSE_STATUS_OK;
    int band = pixels + 4;
    long width = lroundf(fmaxf(right - left, (float)(pixels * 6)));
    long x = lroundf(fmaxf(0, fminf(left, (float)c->width - 1)));
    long y = lroundf(fmaxf(0, fminf(top - (float)band, (float)c->height - band)));
    if (width > c->width - x) width = c->width - x;
    for (long row = y; row < y + band; row++)
        for (long column = x; column < x + width; column++) put(c, column, row, colour);
    static const uint8_t white[3] = {255, 255, 255};
    return explain_draw_text(c, font, g->label, (int)x, (int)y + 2, (int)width, pixels, white);
}

glimpse_status glimpse_task_draw(const glimpse_image *image, const glimpse_task_result *result, void **png,
                                 size_t *size) {
    if (!image || !result || !png || !size)
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_task_draw: NULL argument");
    *png = NULL, *size = 0;
    explain_canvas canvas = {NULL, glimpse_image_width(image), glimpse_image_height(image)};
    size_t bytes = (size_t)canvas.width * (size_t)canvas.height * 3;
    canvas.pixels = malloc(bytes);
    if (!canvas.pixels) return ERROR_OOM();
    memcpy(canvas.pixels, glimpse_image_pixels(image), bytes);
    int shorter = canvas.width < canvas.height ? canvas.width : canvas.height;
    int thickness = shorter >= 400 ? 3 : shorter >= 100 ? 2 : 1;
    int pixels = shorter / 40 < 12 ? 12 : shorter / 40 > 40 ? 40 : shorter / 40;
    explain_font *font = NULL;
    glimpse_status status = result->region_count ? explain_font_load(NULL, &font) : GLIMPSE_STATUS_OK;
    for (size_t i = 0; i < result->region_count && !status; i++) {
        const glimpse_region *g = &result->regions[i];
        const uint8_t *colour = palette[(g->shape == GLIMPSE_REGION_POLYGON ? g->instance : i) % PALETTE_SIZE];
        draw_outline(&canvas, g, thickness, colour);
        /* a polygon's label once, on the first polygon of its object */
        bool first = g->shape != GLIMPSE_REGION_POLYGON || i == 0 || result->regions[i - 1].instance != g->instance;
        if (first) status = draw_label(&canvas, font, g, pixels, colour);
    }
    if (!status) status = explain_png_encode(&canvas, png, size);
    explain_font_free(font);
    free(canvas.pixels);
    return status;
}
