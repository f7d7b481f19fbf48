/* test_vision.c — image decoding and preprocessing on images the test makes
 * itself: every PNG colour type and depth converted as Pillow's
 * convert("RGB") does, JPEG, BMP and PNM, raw pixel input, and hostile files
 * (huge claimed sizes, lying lengths, garbage after a signature, truncation)
 * refused with clear errors. Exactness against Pillow itself is proven by
 * test_clip_parity on the fixtures. */
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include <jpeglib.h>
#include <png.h>
#include <zlib.h>

#include "core/cpu.h"
#include "vision/image.h"
#include "vision/preprocess.h"
#include "vision/resize.h"

/* ------------------------------------------------------------ PNG writer */

typedef struct buffer {
    uint8_t *bytes;
    size_t size;
    size_t capacity; /* of bytes, when buffer_write grew it; 0 for a buffer made otherwise */
} buffer;

static void buffer_write(png_structp png, png_bytep data, png_size_t length) {
    buffer *b = png_get_io_ptr(png);
    if (b->size + length > b->capacity) { /* by doubling: libpng writes a large picture a row at a time */
        size_t capacity = 2 * (b->size + length);
        uint8_t *grown = realloc(b->bytes, capacity);
        if (!grown) png_error(png, "out of memory");
        b->bytes = grown, b->capacity = capacity;
    }
    memcpy(b->bytes + b->size, data, length);
    b->size += length;
}
static void buffer_flush(png_structp png) { (void)png; }

/* rows: height rows of raw samples in the PNG's own layout (big-endian 16-bit). */
static buffer make_png(int width, int height, int colour, int depth, const uint8_t *rows, size_t row_bytes,
                       const png_color *palette, int palette_size, int interlace) {
    buffer out = {0};
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png_create_info_struct(png);
    if (setjmp(png_jmpbuf(png))) fail_msg("png writing failed");
    png_set_write_fn(png, &out, buffer_write, buffer_flush);
    png_set_IHDR(png, info, (png_uint_32)width, (png_uint_32)height, depth, colour,
                 interlace ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
                 PNG_FILTER_TYPE_DEFAULT);
    if (palette) png_set_PLTE(png, info, palette, palette_size);
    png_write_info(png, info);
    int passes = png_set_interlace_handling(png);
    for (int pass = 0; pass < passes; pass++)
        for (int y = 0; y < height; y++) png_write_row(png, rows + (size_t)y * row_bytes);
    png_write_end(png, info);
    png_destroy_write_struct(&png, &info);
    return out;
}

static glimpse_image *decode_ok(buffer b) {
    glimpse_image *image = NULL;
    glimpse_status status = image_decode(b.bytes, b.size, "made.png", IMAGE_DEFAULT_MAX_PIXELS, &image);
    if (status) fail_msg("decode failed: %s", glimpse_last_error());
    return image;
}

static void expect_pixel(const glimpse_image *image, int x, int y, int r, int g, int b) {
    const uint8_t *p = image->pixels + ((size_t)y * image->width + x) * 3;
    if (p[0] != r || p[1] != g || p[2] != b)
        fail_msg("pixel (%d,%d) is %d,%d,%d, expected %d,%d,%d", x, y, p[0], p[1], p[2], r, g, b);
}

static void test_png_colour_types(void **state) {
    (void)state;
    /* 8-bit grey replicates */
    uint8_t grey[4] = {0, 50, 200, 255};
    buffer b = make_png(4, 1, PNG_COLOR_TYPE_GRAY, 8, grey, 4, NULL, 0, 0);
    glimpse_image *image = decode_ok(b);
    expect_pixel(image, 1, 0, 50, 50, 50);
    glimpse_image_free(image), free(b.bytes);
    /* 1-bit grey scales to 0/255, 4-bit by 17 */
    uint8_t bits[1] = {0xa0}; /* 1 0 1 0 */
    b = make_png(4, 1, PNG_COLOR_TYPE_GRAY, 1, bits, 1, NULL, 0, 0);
    image = decode_ok(b);
    expect_pixel(image, 0, 0, 255, 255, 255);
    expect_pixel(image, 1, 0, 0, 0, 0);
    glimpse_image_free(image), free(b.bytes);
    uint8_t nibbles[1] = {0x3f};
    b = make_png(2, 1, PNG_COLOR_TYPE_GRAY, 4, nibbles, 1, NULL, 0, 0);
    image = decode_ok(b);
    expect_pixel(image, 0, 0, 51, 51, 51);
    expect_pixel(image, 1, 0, 255, 255, 255);
    glimpse_image_free(image), free(b.bytes);
    /* 16-bit grey: Pillow's I;16 → RGB clips at 255 rather than scaling */
    uint8_t wide[8] = {0x00, 0x64, 0x00, 0xff, 0x01, 0x00, 0xff, 0xff};
    b = make_png(4, 1, PNG_COLOR_TYPE_GRAY, 16, wide, 8, NULL, 0, 0);
    image = decode_ok(b);
    expect_pixel(image, 0, 0, 100, 100, 100);
    expect_pixel(image, 1, 0, 255, 255, 255);
    expect_pixel(image, 2, 0, 255, 255, 255);
    glimpse_image_free(image), free(b.bytes);
    /* grey + alpha: alpha dropped */
    uint8_t grey_alpha[4] = {80, 0, 160, 255};
    b = make_png(2, 1, PNG_COLOR_TYPE_GRAY_ALPHA, 8, grey_alpha, 4, NULL, 0, 0);
    image = decode_ok(b);
    expect_pixel(image, 0, 0, 80, 80, 80);
    glimpse_image_free(image), free(b.bytes);
    /* 16-bit RGB keeps the high byte */
    uint8_t rgb16[6] = {0x12, 0x34, 0xab, 0xcd, 0xff, 0x00};
    b = make_png(1, 1, PNG_COLOR_TYPE_RGB, 16, rgb16, 6, NULL, 0, 0);
    image = decode_ok(b);
    expect_pixel(image, 0, 0, 0x12, 0xab, 0xff);
    glimpse_image_free(image), free(b.bytes);
    /* RGBA: alpha dropped, colour kept even where transparent (no compositing) */
    uint8_t rgba[8] = {10, 20, 30, 0, 40, 50, 60, 128};
    b = make_png(2, 1, PNG_COLOR_TYPE_RGBA, 8, rgba, 8, NULL, 0, 0);
    image = decode_ok(b);
    expect_pixel(image, 0, 0, 10, 20, 30);
    expect_pixel(image, 1, 0, 40, 50, 60);
    glimpse_image_free(image), free(b.bytes);
    /* palette */
    png_color palette[3] = {{255, 0, 0}, {0, 255, 0}, {1, 2, 3}};
    uint8_t indices[3] = {2, 0, 1};
    b = make_png(3, 1, PNG_COLOR_TYPE_PALETTE, 8, indices, 3, palette, 3, 0);
    image = decode_ok(b);
    expect_pixel(image, 0, 0, 1, 2, 3);
    expect_pixel(image, 2, 0, 0, 255, 0);
    glimpse_image_free(image), free(b.bytes);
    /* interlaced */
    uint8_t gradient[8 * 8 * 3];
    for (int i = 0; i < 8 * 8 * 3; i++) gradient[i] = (uint8_t)(i * 3);
    b = make_png(8, 8, PNG_COLOR_TYPE_RGB, 8, gradient, 24, NULL, 0, 1);
    image = decode_ok(b);
    assert_memory_equal(image->pixels, gradient, sizeof gradient);
    glimpse_image_free(image), free(b.bytes);
}

/* ----------------------------------------------------------- JPEG writer */

static buffer make_jpeg_coded(int width, int height, int components, const uint8_t *pixels, bool progressive) {
    struct jpeg_compress_struct info;
    struct jpeg_error_mgr errors;
    info.err = jpeg_std_error(&errors);
    jpeg_create_compress(&info);
    unsigned char *bytes = NULL;
    unsigned long size = 0;
    jpeg_mem_dest(&info, &bytes, &size);
    info.image_width = (JDIMENSION)width;
    info.image_height = (JDIMENSION)height;
    info.input_components = components;
    info.in_color_space = components == 1 ? JCS_GRAYSCALE : JCS_RGB;
    jpeg_set_defaults(&info);
    jpeg_set_quality(&info, 95, TRUE);
    if (progressive) jpeg_simple_progression(&info);
    jpeg_start_compress(&info, TRUE);
    while (info.next_scanline < info.image_height) {
        JSAMPROW row = (JSAMPROW)(pixels + (size_t)info.next_scanline * width * components);
        jpeg_write_scanlines(&info, &row, 1);
    }
    jpeg_finish_compress(&info);
    jpeg_destroy_compress(&info);
    buffer out = {bytes, size, 0};
    return out;
}

static buffer make_jpeg(int width, int height, int components, const uint8_t *pixels) {
    return make_jpeg_coded(width, height, components, pixels, false);
}

/* A progressive JPEG whose last scan is repeated until it has `scans` scans (a scan again over coefficients it
 * already refined is only a warning to libjpeg, so each one is decoded). */
static buffer jpeg_with_scans(const buffer *progressive, size_t scans) {
    size_t starts[64], count = 0, end = 0;
    for (size_t i = 2; i + 1 < progressive->size;) {
        assert_int_equal(progressive->bytes[i], 0xff);
        uint8_t marker = progressive->bytes[i + 1];
        if (marker == 0xd9) {
            end = i;
            break;
        }
        assert_true(i + 3 < progressive->size);
        size_t length = (size_t)progressive->bytes[i + 2] << 8 | progressive->bytes[i + 3];
        if (marker == 0xda) {
            assert_true(count < 64);
            starts[count++] = i;
            for (i += 2 + length; i + 1 < progressive->size; i++) /* the entropy-coded data: to the next marker */
                if (progressive->bytes[i] == 0xff && progressive->bytes[i + 1] && (progressive->bytes[i + 1] & 0xf8) != 0xd0)
                    break;
        } else {
            i += 2 + length;
        }
    }
    assert_true(end && count >= 2 && scans >= count);
    size_t last = end - starts[count - 1], size = progressive->size + (scans - count) * last;
    buffer out = {malloc(size), size, 0};
    assert_non_null(out.bytes);
    memcpy(out.bytes, progressive->bytes, end);
    for (size_t n = count; n < scans; n++) memcpy(out.bytes + end + (n - count) * last, progressive->bytes + starts[count - 1], last);
    memcpy(out.bytes + size - (progressive->size - end), progressive->bytes + end, progressive->size - end);
    return out;
}

/* Each progressive scan is a pass over the whole picture however few bytes it takes: 100 are decoded, more
 * refused (1,000 over 4000 x 4000 pixels had taken 10 s from 172 KB). */
static void test_jpeg_scan_bomb(void **state) {
    (void)state;
    uint8_t pixels[64 * 48 * 3];
    for (size_t i = 0; i < sizeof pixels; i++) pixels[i] = (uint8_t)(i * 7);
    buffer progressive = make_jpeg_coded(64, 48, 3, pixels, true);
    glimpse_image *image = decode_ok(progressive), *refused = NULL;
    buffer most = jpeg_with_scans(&progressive, 100), more = jpeg_with_scans(&progressive, 101);
    glimpse_image *repeated = decode_ok(most); /* (a repeated refinement scan refines again: other pixels) */
    assert_int_equal(repeated->width, image->width);
    assert_int_equal(repeated->height, image->height);
    assert_int_equal(image_decode(more.bytes, more.size, "scans.jpg", IMAGE_DEFAULT_MAX_PIXELS, &refused),
                     GLIMPSE_STATUS_BAD_FORMAT);
    assert_null(refused);
    assert_non_null(strstr(glimpse_last_error(), "scans.jpg: broken JPEG: more than 100 progressive scans"));
    glimpse_image_free(image), glimpse_image_free(repeated);
    free(progressive.bytes), free(most.bytes), free(more.bytes);
}

static void test_jpeg(void **state) {
    (void)state;
    uint8_t pixels[16 * 16 * 3];
    for (int i = 0; i < 16 * 16; i++) {
        pixels[3 * i] = 200;
        pixels[3 * i + 1] = 100;
        pixels[3 * i + 2] = 50;
    }
    buffer b = make_jpeg(16, 16, 3, pixels);
    glimpse_image *image = decode_ok(b);
    assert_int_equal(image->width, 16);
    for (int i = 0; i < 3; i++) assert_true(abs(image->pixels[i] - pixels[i]) <= 3);
    glimpse_image_free(image);
    /* cut short: refused as truncated, as Pillow refuses it */
    glimpse_image *cut = NULL;
    assert_int_equal(image_decode(b.bytes, b.size / 2, "cut.jpg", IMAGE_DEFAULT_MAX_PIXELS, &cut),
                     GLIMPSE_STATUS_BAD_FORMAT);
    assert_non_null(strstr(glimpse_last_error(), "cut.jpg"));
    assert_non_null(strstr(glimpse_last_error(), "truncated"));
    assert_null(cut);
    /* a header claiming 30000x30000: patch the SOF0 marker */
    for (size_t i = 0; i + 9 < b.size; i++)
        if (b.bytes[i] == 0xff && b.bytes[i + 1] == 0xc0) {
            b.bytes[i + 5] = 30000 >> 8, b.bytes[i + 6] = 30000 & 0xff;
            b.bytes[i + 7] = 30000 >> 8, b.bytes[i + 8] = 30000 & 0xff;
            break;
        }
    assert_int_equal(image_decode(b.bytes, b.size, "huge.jpg", IMAGE_DEFAULT_MAX_PIXELS, &cut),
                     GLIMPSE_STATUS_TOO_LARGE);
    assert_non_null(strstr(glimpse_last_error(), "30000x30000"));
    free(b.bytes);
    /* greyscale JPEG becomes grey RGB */
    uint8_t grey[8 * 8];
    memset(grey, 77, sizeof grey);
    b = make_jpeg(8, 8, 1, grey);
    image = decode_ok(b);
    assert_true(abs(image->pixels[0] - 77) <= 2 && image->pixels[0] == image->pixels[1] &&
                image->pixels[1] == image->pixels[2]);
    glimpse_image_free(image);
    free(b.bytes);
}

/* A file another process cuts short while glimpse_image_load_file decodes it (a photo being rewritten): an error
 * or the picture as it was, never SIGBUS. The file was mapped, and a decoding that reached its lost pages ended the
 * process; now it is read first. */
typedef struct cutter {
    const char *path;
    useconds_t after;
} cutter;

static double seconds_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void *cut_file(void *argument) {
    const cutter *c = argument;
    usleep(c->after);
    if (truncate(c->path, 1000) != 0) return (void *)1;
    return NULL;
}

static void test_file_cut_while_decoded(void **state) {
    (void)state;
    enum { SIDE = 1200 };
    uint8_t *noise = malloc(SIDE * SIDE * 3);
    assert_non_null(noise);
    uint32_t seed = 1;
    for (size_t i = 0; i < SIDE * SIDE * 3; i++) seed = seed * 1664525u + 1013904223u, noise[i] = (uint8_t)(seed >> 24);
    buffer png = make_png(SIDE, SIDE, PNG_COLOR_TYPE_RGB, 8, noise, SIDE * 3, NULL, 0, 0);
    free(noise);
    char path[] = "/tmp/glimpse-cut-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    double started = seconds_now();
    glimpse_image *image = NULL;
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(png.bytes, 1, png.size, f), png.size);
    fclose(f);
    assert_int_equal(glimpse_image_load_file(path, NULL, &image), GLIMPSE_STATUS_OK);
    glimpse_image_free(image);
    double decoding = seconds_now() - started;
    int whole = 0, refused = 0;
    for (int i = 0; i < 16; i++) {
        f = fopen(path, "wb");
        assert_non_null(f);
        assert_int_equal(fwrite(png.bytes, 1, png.size, f), png.size);
        fclose(f);
        cutter c = {path, (useconds_t)(decoding * 1e6 * (i + 1) / 17)};
        pthread_t thread;
        assert_int_equal(pthread_create(&thread, NULL, cut_file, &c), 0);
        image = NULL;
        glimpse_status status = glimpse_image_load_file(path, NULL, &image);
        void *result;
        pthread_join(thread, &result);
        assert_null(result);
        if (status == GLIMPSE_STATUS_OK) whole++;
        else refused++, assert_null(image);
        glimpse_image_free(image);
    }
    printf("%zu-byte PNG cut during its decoding (%.0f ms): %d decoded whole, %d refused\n", png.size, decoding * 1e3,
           whole, refused);
    unlink(path);
    free(png.bytes);
}

static void put_u32_be(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8), p[3] = (uint8_t)v;
}

static void test_hostile_files(void **state) {
    (void)state;
    glimpse_image *image = NULL;
    uint8_t one[3] = {1, 2, 3};
    buffer b = make_png(1, 1, PNG_COLOR_TYPE_RGB, 8, one, 3, NULL, 0, 0);
    /* IHDR claims 30000x30000 (CRC fixed so only the size is wrong) */
    buffer huge = {malloc(b.size), b.size, 0};
    memcpy(huge.bytes, b.bytes, b.size);
    put_u32_be(huge.bytes + 16, 30000);
    put_u32_be(huge.bytes + 20, 30000);
    put_u32_be(huge.bytes + 29, (uint32_t)crc32(0, huge.bytes + 12, 17));
    assert_int_equal(image_decode(huge.bytes, huge.size, "huge.png", IMAGE_DEFAULT_MAX_PIXELS, &image),
                     GLIMPSE_STATUS_TOO_LARGE);
    assert_non_null(strstr(glimpse_last_error(), "over the limit"));
    /* IHDR claims 100x100 but the data holds one pixel: the size lies */
    put_u32_be(huge.bytes + 16, 100);
    put_u32_be(huge.bytes + 20, 100);
    put_u32_be(huge.bytes + 29, (uint32_t)crc32(0, huge.bytes + 12, 17));
    assert_int_equal(image_decode(huge.bytes, huge.size, "lying.png", IMAGE_DEFAULT_MAX_PIXELS, &image),
                     GLIMPSE_STATUS_BAD_FORMAT);
    assert_non_null(strstr(glimpse_last_error(), "lying.png"));
    free(huge.bytes);
    /* truncated PNG */
    assert_int_equal(image_decode(b.bytes, b.size - 20, "short.png", IMAGE_DEFAULT_MAX_PIXELS, &image),
                     GLIMPSE_STATUS_BAD_FORMAT);
    /* a configurable limit */
    assert_int_equal(image_decode(b.bytes, b.size, "one.png", 0, &image), GLIMPSE_STATUS_TOO_LARGE);
    free(b.bytes);
    /* garbage after valid signatures */
    uint8_t garbage[64];
    for (int i = 0; i < 64; i++) garbage[i] = (uint8_t)(i * 37 + 11);
    static const uint8_t png_signature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    memcpy(garbage, png_signature, 8);
    assert_int_equal(image_decode(garbage, 64, "garbage.png", IMAGE_DEFAULT_MAX_PIXELS, &image),
                     GLIMPSE_STATUS_BAD_FORMAT);
    garbage[0] = 0xff, garbage[1] = 0xd8, garbage[2] = 0xff;
    assert_int_equal(image_decode(garbage, 64, "garbage.jpg", IMAGE_DEFAULT_MAX_PIXELS, &image),
                     GLIMPSE_STATUS_BAD_FORMAT);
    /* empty and text files */
    assert_int_equal(image_decode(garbage, 0, "empty.jpg", IMAGE_DEFAULT_MAX_PIXELS, &image),
                     GLIMPSE_STATUS_BAD_FORMAT);
    assert_non_null(strstr(glimpse_last_error(), "empty"));
    const char *text = "this is not an image at all\n";
    assert_int_equal(image_decode((const uint8_t *)text, strlen(text), "note.png", IMAGE_DEFAULT_MAX_PIXELS, &image),
                     GLIMPSE_STATUS_UNSUPPORTED);
    assert_non_null(strstr(glimpse_last_error(), "not an image"));
    /* a BMP header claiming 30000x30000 with no pixel data */
    uint8_t bmp[54] = {'B', 'M'};
    bmp[10] = 54, bmp[14] = 40;
    bmp[18] = 30000 & 0xff, bmp[19] = 30000 >> 8;
    bmp[22] = 30000 & 0xff, bmp[23] = 30000 >> 8;
    bmp[26] = 1, bmp[28] = 24;
    assert_int_equal(image_decode(bmp, sizeof bmp, "huge.bmp", IMAGE_DEFAULT_MAX_PIXELS, &image),
                     GLIMPSE_STATUS_TOO_LARGE);
    /* the same at 4x4 has no data: broken, not a crash */
    bmp[18] = 4, bmp[19] = 0, bmp[22] = 4, bmp[23] = 0;
    assert_int_not_equal(image_decode(bmp, sizeof bmp, "short.bmp", IMAGE_DEFAULT_MAX_PIXELS, &image), GLIMPSE_STATUS_OK);
    assert_null(image);
}

static void test_other_formats(void **state) {
    (void)state;
    /* PNM P6 */
    const char header[] = "P6\n2 1\n255\n";
    uint8_t ppm[sizeof header - 1 + 6];
    memcpy(ppm, header, sizeof header - 1);
    uint8_t values[6] = {1, 2, 3, 250, 251, 252};
    memcpy(ppm + sizeof header - 1, values, 6);
    glimpse_image *image = NULL;
    assert_int_equal(image_decode(ppm, sizeof ppm, "x.ppm", IMAGE_DEFAULT_MAX_PIXELS, &image), GLIMPSE_STATUS_OK);
    expect_pixel(image, 1, 0, 250, 251, 252);
    glimpse_image_free(image);
    image = NULL;
    assert_int_equal(image_decode(ppm, sizeof ppm - 2, "short.ppm", IMAGE_DEFAULT_MAX_PIXELS, &image),
                     GLIMPSE_STATUS_BAD_FORMAT);
    assert_non_null(strstr(glimpse_last_error(), "truncated"));
    assert_null(image);
    /* GIF, 1x1, palette entry 0 = red */
    static const uint8_t gif[] = {'G', 'I', 'F', '8', '9', 'a', 1, 0, 1, 0, 0x80, 0, 0, 0xff, 0, 0, 0, 0, 0,
                                  ',', 0, 0, 0, 0, 1, 0, 1, 0, 0, 2, 2, 'D', 1, 0, ';'};
    assert_int_equal(image_decode(gif, sizeof gif, "x.gif", IMAGE_DEFAULT_MAX_PIXELS, &image), GLIMPSE_STATUS_OK);
    expect_pixel(image, 0, 0, 255, 0, 0);
    glimpse_image_free(image);
    /* TGA, uncompressed 24-bit 1x1 (BGR) */
    static const uint8_t tga[18 + 3] = {0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 0, 24, 0, 7, 8, 9};
    assert_int_equal(image_decode(tga, sizeof tga, "x.tga", IMAGE_DEFAULT_MAX_PIXELS, &image), GLIMPSE_STATUS_OK);
    expect_pixel(image, 0, 0, 9, 8, 7);
    glimpse_image_free(image);
    /* 24-bit BMP, 2x1, bottom-up, BGR, rows padded to 4 bytes */
    uint8_t bmp[54 + 8] = {'B', 'M'};
    bmp[2] = sizeof bmp, bmp[10] = 54, bmp[14] = 40, bmp[18] = 2, bmp[22] = 1, bmp[26] = 1, bmp[28] = 24;
    uint8_t row[8] = {30, 20, 10, 60, 50, 40, 0, 0};
    memcpy(bmp + 54, row, 8);
    assert_int_equal(image_decode(bmp, sizeof bmp, "x.bmp", IMAGE_DEFAULT_MAX_PIXELS, &image), GLIMPSE_STATUS_OK);
    expect_pixel(image, 0, 0, 10, 20, 30);
    expect_pixel(image, 1, 0, 40, 50, 60);
    glimpse_image_free(image);
}

static void test_raw_pixels_and_memory(void **state) {
    (void)state;
    uint8_t bgra[2 * 2 * 4 + 8]; /* 2 rows of 2 pixels, stride 12 */
    memset(bgra, 0, sizeof bgra);
    bgra[0] = 3, bgra[1] = 2, bgra[2] = 1, bgra[3] = 255;
    bgra[12 + 4] = 9, bgra[12 + 5] = 8, bgra[12 + 6] = 7;
    glimpse_image *image;
    assert_int_equal(glimpse_image_from_pixels(bgra, 2, 2, 12, GLIMPSE_PIXEL_FORMAT_BGRA8, &image), GLIMPSE_STATUS_OK);
    expect_pixel(image, 0, 0, 1, 2, 3);
    expect_pixel(image, 1, 1, 7, 8, 9);
    glimpse_image_free(image);
    assert_int_equal(glimpse_image_from_pixels(bgra, 2, 2, 7, GLIMPSE_PIXEL_FORMAT_RGBA8, &image),
                     GLIMPSE_STATUS_INVALID_ARGUMENT);
    assert_int_equal(glimpse_image_from_pixels(NULL, 2, 2, 0, GLIMPSE_PIXEL_FORMAT_RGB8, &image),
                     GLIMPSE_STATUS_INVALID_ARGUMENT);
    assert_int_equal(glimpse_image_from_pixels(bgra, 0, 2, 0, GLIMPSE_PIXEL_FORMAT_RGB8, &image),
                     GLIMPSE_STATUS_INVALID_ARGUMENT);
    uint8_t rgb[3] = {5, 6, 7};
    buffer b = make_png(1, 1, PNG_COLOR_TYPE_RGB, 8, rgb, 3, NULL, 0, 0);
    assert_int_equal(glimpse_image_load_memory(b.bytes, b.size, NULL, &image), GLIMPSE_STATUS_OK);
    assert_int_equal(glimpse_image_width(image), 1);
    assert_memory_equal(glimpse_image_pixels(image), rgb, 3);
    glimpse_image_free(image);
    free(b.bytes);
    assert_int_equal(glimpse_image_load_file("/nonexistent/photo.jpg", NULL, &image), GLIMPSE_STATUS_NOT_FOUND);
    assert_non_null(strstr(glimpse_last_error(), "/nonexistent/photo.jpg"));
    assert_int_equal(glimpse_image_load_file("/tmp", NULL, &image), GLIMPSE_STATUS_IO);
    assert_non_null(strstr(glimpse_last_error(), "directory"));
}

static void test_resize_properties(void **state) {
    (void)state;
    glimpse_image *source, *out;
    assert_int_equal(image_allocate(37, 23, &source), GLIMPSE_STATUS_OK);
    memset(source->pixels, 123, 37 * 23 * 3);
    /* a constant image stays constant through shrinking and enlarging */
    const int sizes[][2] = {{5, 7}, {64, 64}, {37, 11}, {100, 23}};
    for (size_t s = 0; s < 4; s++) {
        assert_int_equal(image_resize(source, sizes[s][0], sizes[s][1], RESIZE_FILTER_BICUBIC, &out), GLIMPSE_STATUS_OK);
        assert_int_equal(out->width, sizes[s][0]);
        for (int i = 0; i < out->width * out->height * 3; i++) assert_int_equal(out->pixels[i], 123);
        glimpse_image_free(out);
    }
    /* the same size is an exact copy */
    for (int i = 0; i < 37 * 23 * 3; i++) source->pixels[i] = (uint8_t)(i * 7);
    assert_int_equal(image_resize(source, 37, 23, RESIZE_FILTER_BICUBIC, &out), GLIMPSE_STATUS_OK);
    assert_memory_equal(out->pixels, source->pixels, 37 * 23 * 3);
    glimpse_image_free(out);
    glimpse_image_free(source);
}

/* The AVX-512 passes against the plain loops (where this CPU runs them): noise, which reaches the clipping at
 * both ends, at sizes around the 16-row and 16-sample blocks, shrinking (windows of up to 2 x 27 taps at 13.5x,
 * as a 12-megapixel photo shrunk for CLIP) and enlarging, every filter: identical bytes. */
static void test_resize_vectorised_is_exact(void **state) {
    (void)state;
    if (!cpu_has_avx512()) skip();
    const int sizes[][4] = {{1, 1, 3, 2},    {17, 15, 5, 31},  {33, 16, 32, 17}, {405, 40, 30, 33},
                            {64, 47, 64, 3}, {10, 10, 101, 7}, {311, 18, 23, 18}, {6, 35, 6, 2}};
    const resize_filter filters[] = {RESIZE_FILTER_BICUBIC, RESIZE_FILTER_BILINEAR, RESIZE_FILTER_LANCZOS};
    uint32_t seed = 12345;
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        glimpse_image *source;
        assert_int_equal(image_allocate(sizes[s][0], sizes[s][1], &source), GLIMPSE_STATUS_OK);
        for (size_t i = 0; i < (size_t)sizes[s][0] * sizes[s][1] * 3; i++) {
            seed = seed * 1664525u + 1013904223u;
            source->pixels[i] = (uint8_t)(i % 7 == 0 ? 255 * (seed >> 31) : seed >> 24);
        }
        for (size_t f = 0; f < 3; f++) {
            glimpse_image *fast, *plain;
            assert_int_equal(image_resize_on(source, sizes[s][2], sizes[s][3], filters[f], true, &fast), 0);
            assert_int_equal(image_resize_on(source, sizes[s][2], sizes[s][3], filters[f], false, &plain), 0);
            assert_memory_equal(fast->pixels, plain->pixels, (size_t)sizes[s][2] * sizes[s][3] * 3);
            glimpse_image_free(fast), glimpse_image_free(plain);
        }
        glimpse_image_free(source);
    }
}

static void test_preprocess_sizes_and_padding(void **state) {
    (void)state;
    preprocess_config config = preprocess_default_clip(64);
    int height, width;
    preprocess_output_size(&config, 451, 300, &height, &width);
    assert_int_equal(height, 64);
    assert_int_equal(width, 64);
    /* a crop larger than the image pads with zeros (transformers' center_crop) */
    config.do_resize = 0;
    config.crop_height = config.crop_width = 4;
    glimpse_image *image;
    assert_int_equal(image_allocate(2, 2, &image), GLIMPSE_STATUS_OK);
    memset(image->pixels, 255, 12);
    float values[3 * 4 * 4];
    assert_int_equal(preprocess_image(values, image, &config), GLIMPSE_STATUS_OK);
    float padded = (0.0f - config.mean[0]) / config.std[0];
    float white = (1.0f - config.mean[0]) / config.std[0];
    assert_float_equal(values[0], padded, 1e-6);
    assert_float_equal(values[1 * 4 + 1], white, 1e-6);
    assert_float_equal(values[2 * 4 + 2], white, 1e-6);
    assert_float_equal(values[3 * 4 + 3], padded, 1e-6);
    glimpse_image_free(image);
    /* preprocessor_config.json forms: int size for CLIP is the shortest edge */
    cJSON *json = cJSON_Parse("{\"size\": 224, \"crop_size\": 224, \"resample\": 3}");
    config = preprocess_default_clip(64);
    assert_int_equal(preprocess_config_read(json, "p", 0, &config), GLIMPSE_STATUS_OK);
    assert_int_equal(config.shortest_edge, 224);
    assert_int_equal(config.crop_width, 224);
    cJSON_Delete(json);
    json = cJSON_Parse("{\"size\": {\"height\": 384, \"width\": 384}, \"do_center_crop\": false}");
    config = preprocess_default_blip(64);
    assert_int_equal(preprocess_config_read(json, "p", 1, &config), GLIMPSE_STATUS_OK);
    assert_int_equal(config.resize_height, 384);
    assert_int_equal(config.shortest_edge, 0);
    cJSON_Delete(json);
    json = cJSON_Parse("{\"resample\": 0}");
    assert_int_equal(preprocess_config_read(json, "p", 0, &config), GLIMPSE_STATUS_UNSUPPORTED);
    cJSON_Delete(json);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_png_colour_types),      cmocka_unit_test(test_jpeg), cmocka_unit_test(test_jpeg_scan_bomb),
        cmocka_unit_test(test_file_cut_while_decoded),
        cmocka_unit_test(test_hostile_files),         cmocka_unit_test(test_other_formats),
        cmocka_unit_test(test_raw_pixels_and_memory), cmocka_unit_test(test_resize_properties), cmocka_unit_test(test_resize_vectorised_is_exact),
        cmocka_unit_test(test_preprocess_sizes_and_padding),
    };
    return cmocka_run_group_tests_name("vision", tests, NULL, NULL);
}
