/* make_pictures.c — glimpse-make-pictures: writes synthetic shape pictures
 * (pictures.c) as PNG files with a captions.tsv, or as one raw RGB stream
 * for training tools. The same seed always draws the same pictures. */
#include <errno.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tools/pictures.h"

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
    png_set_IHDR(png, info, PICTURE_SIDE, PICTURE_SIDE, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    for (int y = 0; y < PICTURE_SIDE; y++) png_write_row(png, (png_const_bytep)(pixels + (size_t)y * PICTURE_SIDE * 3));
    png_write_end(png, info);
    png_destroy_write_struct(&png, &info);
    return fclose(f) == 0;
}

static const char usage[] =
    "Usage: glimpse-make-pictures --out FOLDER [--count N] [--seed S] [--first I] [--raw]\n"
    "Draws N pictures (default 8) of one or two coloured shapes on a light background\n"
    "and writes FOLDER/NNNNN.png and FOLDER/captions.tsv (file name, tab, caption).\n"
    "--first skips the first I pictures of the seed's sequence. --raw writes\n"
    "FOLDER/pictures.rgb instead (N pictures of 224x224x3 bytes, back to back).\n"
    "The same seed always draws the same pictures.\n";

int main(int argc, char **argv) {
    const char *folder = NULL;
    long count = 8, first = 0;
    unsigned long long seed = 1;
    int raw = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--out") == 0 && i + 1 < argc) folder = argv[++i];
        else if (strcmp(argv[i], "--count") == 0 && i + 1 < argc) count = strtol(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--first") == 0 && i + 1 < argc) first = strtol(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) seed = strtoull(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--raw") == 0) raw = 1;
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
    char path[4096];
    snprintf(path, sizeof path, "%s/captions.tsv", folder);
    FILE *captions = fopen(path, "w");
    snprintf(path, sizeof path, "%s/pictures.rgb", folder);
    FILE *stream = raw ? fopen(path, "wb") : NULL;
    if (!captions || (raw && !stream)) {
        fprintf(stderr, "glimpse-make-pictures: %s: %s\n", folder, strerror(errno));
        return 1;
    }
    picture_generator generator;
    picture_generator_init(&generator, seed);
    uint8_t *pixels = malloc(PICTURE_SIDE * PICTURE_SIDE * 3);
    for (long i = 0; i < first + count; i++) {
        picture_scene scene;
        picture_draw(&generator, pixels, &scene);
        if (i < first) continue;
        snprintf(path, sizeof path, "%s/%05ld.png", folder, i);
        if (raw ? fwrite(pixels, 1, PICTURE_SIDE * PICTURE_SIDE * 3, stream) != PICTURE_SIDE * PICTURE_SIDE * 3
                : !write_png(path, pixels)) {
            fprintf(stderr, "glimpse-make-pictures: %s: cannot write\n", raw ? "pictures.rgb" : path);
            return 1;
        }
        fprintf(captions, "%05ld.png\t%s\n", i, scene.caption);
    }
    free(pixels);
    if (stream && fclose(stream) != 0) return 1;
    return fclose(captions) == 0 ? 0 : 1;
}
