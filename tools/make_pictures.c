/* make_pictures.c — glimpse-make-pictures: draws synthetic pictures whose
 * true captions are known (one or two coloured shapes on a light
 * background) and writes them as PNG files with a captions.tsv. Used to make
 * the example pictures, the demo models' training data and the accuracy
 * tests; the same seed always draws the same pictures. */
#include <errno.h>
#include <png.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define SIDE 224

typedef enum shape_kind { SHAPE_CIRCLE, SHAPE_SQUARE, SHAPE_TRIANGLE } shape_kind;
static const char *shape_names[] = {"circle", "square", "triangle"};
static const char *colour_names[] = {"red", "green", "blue", "yellow"};
static const int colour_values[4][3] = {{220, 30, 30}, {30, 170, 60}, {40, 70, 220}, {235, 200, 20}};

typedef struct shape {
    shape_kind kind;
    int colour;
    uint8_t rgb[3];
    int x, y, size; /* bounding box: top-left corner and side */
} shape;

static uint64_t rng;
static uint32_t next_u32(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 32);
}
/* uniform in [low, high] */
static int uniform(int low, int high) { return low + (int)(next_u32() % (uint32_t)(high - low + 1)); }

static void random_shape(shape *s) {
    s->kind = (shape_kind)uniform(0, 2);
    s->colour = uniform(0, 3);
    for (int c = 0; c < 3; c++) {
        int v = colour_values[s->colour][c] + uniform(-15, 15);
        s->rgb[c] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
    }
    s->size = uniform(50, 100);
    s->x = uniform(0, SIDE - s->size);
    s->y = uniform(0, SIDE - s->size);
}

static int overlap(const shape *a, const shape *b) {
    return a->x < b->x + b->size && b->x < a->x + a->size && a->y < b->y + b->size && b->y < a->y + a->size;
}

static int inside(const shape *s, int px, int py) {
    double x = px + 0.5, y = py + 0.5;
    if (x < s->x || x >= s->x + s->size || y < s->y || y >= s->y + s->size) return 0;
    double half = s->size / 2.0, cx = s->x + half, cy = s->y + half;
    switch (s->kind) {
    case SHAPE_SQUARE: return 1;
    case SHAPE_CIRCLE: return (x - cx) * (x - cx) + (y - cy) * (y - cy) <= half * half;
    case SHAPE_TRIANGLE: {
        /* apex (cx, top), base along the bottom edge: the half-width grows linearly downwards */
        double depth = (y - s->y) / s->size;
        return x >= cx - depth * half && x <= cx + depth * half;
    }
    }
    return 0;
}

static void describe(const shape *s, char *out, size_t capacity) {
    snprintf(out, capacity, "a %s %s", colour_names[s->colour], shape_names[s->kind]);
}

/* Draws one picture into pixels and writes its caption. */
static void draw(uint8_t *pixels, char *caption, size_t capacity) {
    uint8_t background[3];
    for (int c = 0; c < 3; c++) background[c] = (uint8_t)uniform(180, 255);
    shape shapes[2];
    int count = uniform(1, 2);
    random_shape(&shapes[0]);
    if (count == 1) {
        describe(&shapes[0], caption, capacity);
    } else {
        for (;;) {
            random_shape(&shapes[1]);
            if (overlap(&shapes[0], &shapes[1])) continue;
            double dx = (shapes[0].x + shapes[0].size / 2.0) - (shapes[1].x + shapes[1].size / 2.0);
            double dy = (shapes[0].y + shapes[0].size / 2.0) - (shapes[1].y + shapes[1].size / 2.0);
            double ax = dx < 0 ? -dx : dx, ay = dy < 0 ? -dy : dy;
            if ((ax > ay ? ax - ay : ay - ax) < 30) continue;
            const char *relation = ay > ax ? (dy < 0 ? "above" : "below") : (dx < 0 ? "left of" : "right of");
            char first[64], second[64];
            describe(&shapes[0], first, sizeof first);
            describe(&shapes[1], second, sizeof second);
            snprintf(caption, capacity, "%s %s %s", first, relation, second);
            break;
        }
    }
    for (int y = 0; y < SIDE; y++)
        for (int x = 0; x < SIDE; x++) {
            uint8_t *p = pixels + ((size_t)y * SIDE + x) * 3;
            memcpy(p, background, 3);
            for (int i = 0; i < count; i++)
                if (inside(&shapes[i], x, y)) memcpy(p, shapes[i].rgb, 3);
        }
}

static int write_png(const char *path, const uint8_t *pixels) {
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png_create_info_struct(png);
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_write_struct(&png, &info);
        fclose(f);
        return 0;
    }
    png_init_io(png, f);
    png_set_IHDR(png, info, SIDE, SIDE, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
                 PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    for (int y = 0; y < SIDE; y++) png_write_row(png, (png_const_bytep)(pixels + (size_t)y * SIDE * 3));
    png_write_end(png, info);
    png_destroy_write_struct(&png, &info);
    return fclose(f) == 0;
}

static const char usage[] =
    "Usage: glimpse-make-pictures --out FOLDER [--count N] [--seed S] [--first I]\n"
    "Draws N pictures (default 8) of one or two coloured shapes and writes\n"
    "FOLDER/NNNNN.png and FOLDER/captions.tsv (file name, tab, caption).\n"
    "The same seed always draws the same pictures.\n";

int main(int argc, char **argv) {
    const char *folder = NULL;
    long count = 8, first = 0;
    unsigned long long seed = 1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--out") == 0 && i + 1 < argc) folder = argv[++i];
        else if (strcmp(argv[i], "--count") == 0 && i + 1 < argc) count = strtol(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--first") == 0 && i + 1 < argc) first = strtol(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) seed = strtoull(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--help") == 0) {
            fputs(usage, stdout);
            return 0;
        } else {
            fprintf(stderr, "glimpse-make-pictures: unexpected argument '%s'\n%s", argv[i], usage);
            return 2;
        }
    }
    if (!folder || count < 1 || first < 0) {
        fputs(usage, stderr);
        return 2;
    }
    if (mkdir(folder, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "glimpse-make-pictures: %s: %s\n", folder, strerror(errno));
        return 1;
    }
    rng = seed * 0x9e3779b97f4a7c15ull + 0x2545f4914f6cdd1dull;
    for (int warm = 0; warm < 8; warm++) next_u32();
    char path[4096];
    snprintf(path, sizeof path, "%s/captions.tsv", folder);
    FILE *captions = fopen(path, "w");
    if (!captions) {
        fprintf(stderr, "glimpse-make-pictures: %s: %s\n", path, strerror(errno));
        return 1;
    }
    uint8_t *pixels = malloc(SIDE * SIDE * 3);
    for (long i = 0; i < first + count; i++) {
        char caption[160];
        draw(pixels, caption, sizeof caption);
        if (i < first) continue;
        snprintf(path, sizeof path, "%s/%05ld.png", folder, i);
        if (!write_png(path, pixels)) {
            fprintf(stderr, "glimpse-make-pictures: %s: cannot write\n", path);
            return 1;
        }
        fprintf(captions, "%05ld.png\t%s\n", i, caption);
    }
    free(pixels);
    return fclose(captions) == 0 ? 0 : 1;
}
