/* pictures.c — drawing the synthetic shape pictures and checking captions
 * against them. */
#include "tools/pictures.h"

#include <stdio.h>
#include <string.h>

const char *const picture_shape_names[3] = {"circle", "square", "triangle"};
const char *const picture_colour_names[4] = {"red", "green", "blue", "yellow"};
static const int colour_values[4][3] = {{220, 30, 30}, {30, 170, 60}, {40, 70, 220}, {235, 200, 20}};

static uint32_t next_u32(picture_generator *g) {
    g->state ^= g->state << 13;
    g->state ^= g->state >> 7;
    g->state ^= g->state << 17;
    return (uint32_t)(g->state >> 32);
}

/* uniform in [low, high] */
static int uniform(picture_generator *g, int low, int high) {
    return low + (int)(next_u32(g) % (uint32_t)(high - low + 1));
}

void picture_generator_init(picture_generator *g, uint64_t seed) {
    g->state = seed * 0x9e3779b97f4a7c15ull + 0x2545f4914f6cdd1dull;
    for (int warm = 0; warm < 8; warm++) next_u32(g);
}

static void random_shape(picture_generator *g, picture_shape *s) {
    s->kind = (picture_shape_kind)uniform(g, 0, 2);
    s->colour = uniform(g, 0, 3);
    for (int c = 0; c < 3; c++) {
        int v = colour_values[s->colour][c] + uniform(g, -15, 15);
        s->rgb[c] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
    }
    s->size = uniform(g, 50, 100);
    s->x = uniform(g, 0, PICTURE_SIDE - s->size);
    s->y = uniform(g, 0, PICTURE_SIDE - s->size);
}

static int overlap(const picture_shape *a, const picture_shape *b) {
    return a->x < b->x + b->size && b->x < a->x + a->size && a->y < b->y + b->size && b->y < a->y + a->size;
}

static int inside(const picture_shape *s, int px, int py) {
    double x = px + 0.5, y = py + 0.5;
    if (x < s->x || x >= s->x + s->size || y < s->y || y >= s->y + s->size) return 0;
    double half = s->size / 2.0, cx = s->x + half, cy = s->y + half;
    switch (s->kind) {
    case PICTURE_SQUARE: return 1;
    case PICTURE_CIRCLE: return (x - cx) * (x - cx) + (y - cy) * (y - cy) <= half * half;
    case PICTURE_TRIANGLE: {
        /* apex at the top centre, base along the bottom edge */
        double depth = (y - s->y) / s->size;
        return x >= cx - depth * half && x <= cx + depth * half;
    }
    }
    return 0;
}

/* The relation of a to b on the axis where their centres are farther apart;
 * NULL when the two distances are within 30 pixels of each other. */
static const char *relation(const picture_shape *a, const picture_shape *b) {
    double dx = (a->x + a->size / 2.0) - (b->x + b->size / 2.0);
    double dy = (a->y + a->size / 2.0) - (b->y + b->size / 2.0);
    double ax = dx < 0 ? -dx : dx, ay = dy < 0 ? -dy : dy;
    if ((ax > ay ? ax - ay : ay - ax) < 30) return NULL;
    return ay > ax ? (dy < 0 ? "above" : "below") : (dx < 0 ? "left of" : "right of");
}

static void describe(const picture_shape *s, char *out, size_t capacity) {
    snprintf(out, capacity, "a %s %s", picture_colour_names[s->colour], picture_shape_names[s->kind]);
}

void picture_draw(picture_generator *g, uint8_t *pixels, picture_scene *scene) {
    uint8_t background[3];
    for (int c = 0; c < 3; c++) background[c] = (uint8_t)uniform(g, 180, 255);
    memset(scene, 0, sizeof *scene);
    scene->count = uniform(g, 1, 2);
    random_shape(g, &scene->shapes[0]);
    if (scene->count == 1) {
        describe(&scene->shapes[0], scene->caption, sizeof scene->caption);
    } else {
        for (;;) { /* draw again until the shapes are apart and the relation is clear */
            random_shape(g, &scene->shapes[1]);
            if (overlap(&scene->shapes[0], &scene->shapes[1])) continue;
            const char *r = relation(&scene->shapes[0], &scene->shapes[1]);
            if (!r) continue;
            char first[64], second[64];
            describe(&scene->shapes[0], first, sizeof first);
            describe(&scene->shapes[1], second, sizeof second);
            snprintf(scene->caption, sizeof scene->caption, "%s %s %s", first, r, second);
            break;
        }
    }
    for (int y = 0; y < PICTURE_SIDE; y++)
        for (int x = 0; x < PICTURE_SIDE; x++) {
            uint8_t *p = pixels + ((size_t)y * PICTURE_SIDE + x) * 3;
            memcpy(p, background, 3);
            for (int i = 0; i < scene->count; i++)
                if (inside(&scene->shapes[i], x, y)) memcpy(p, scene->shapes[i].rgb, 3);
        }
}

int picture_caption_is_true(const picture_scene *scene, const char *caption) {
    char expected[160];
    if (scene->count == 1) {
        describe(&scene->shapes[0], expected, sizeof expected);
        return strcmp(caption, expected) == 0;
    }
    for (int first = 0; first < 2; first++) {
        const picture_shape *a = &scene->shapes[first], *b = &scene->shapes[1 - first];
        char named_a[64], named_b[64];
        describe(a, named_a, sizeof named_a);
        describe(b, named_b, sizeof named_b);
        snprintf(expected, sizeof expected, "%s %s %s", named_a, relation(a, b), named_b);
        if (strcmp(caption, expected) == 0) return 1;
    }
    return 0;
}
