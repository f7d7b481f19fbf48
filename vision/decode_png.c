/* decode_png.c — PNG through libpng as Pillow 9.4's convert("RGB") sees it:
 * palette images look their indices up themselves (Pillow's grey ramp past
 * the palette's end, transparency ignored), 16-bit grey clips to 255, other
 * 16-bit samples keep their high byte, alpha is dropped. The orientation
 * comes from eXIf, else a "Raw profile type exif" text, else XMP text, before
 * or after the image data, as Pillow reads them. */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <png.h>

#include "core/error.h"
#include "vision/decoders.h"

typedef struct png_reader {
    const uint8_t *bytes;
    size_t size, at;
    jmp_buf jump;
    char message[256];
} png_reader;

static void png_fail(png_structp png, png_const_charp message) {
    png_reader *reader = png_get_error_ptr(png);
    snprintf(reader->message, sizeof reader->message, "%s", message);
    longjmp(reader->jump, 1);
}

static void png_warn(png_structp png, png_const_charp message) {
    (void)png;
    (void)message;
}

static void png_read_memory(png_structp png, png_bytep target, png_size_t length) {
    png_reader *reader = png_get_io_ptr(png);
    if (length > reader->size - reader->at) png_error(png, "image file is truncated");
    memcpy(target, reader->bytes + reader->at, length);
    reader->at += length;
}

/* The chunks after the image data, for their metadata. Pillow reads on
 * until IEND and stops quietly where the file ends, so an error here is
 * not the image's: what libpng stored before it stays readable. */
static void png_read_trailer(png_structp png, png_infop info, png_reader *reader) {
    if (setjmp(reader->jump) == 0) png_read_end(png, info);
}

static int hex_digit(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* ImageMagick's "Raw profile type exif": three header lines, then hex that
 * Pillow reads with bytes.fromhex (whitespace between bytes allowed). */
static int raw_profile_orientation(const char *text, size_t length) {
    size_t at = 0;
    for (int lines = 0; lines < 3; at++) {
        if (at >= length) return ORIENTATION_ABSENT;
        if (text[at] == '\n') lines++;
    }
    uint8_t *block = malloc(length / 2 + 1);
    if (!block) return ORIENTATION_ABSENT;
    size_t size = 0;
    int orientation = ORIENTATION_ABSENT, valid = 1;
    while (at < length) {
        char c = text[at];
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f') {
            at++;
            continue;
        }
        int high = hex_digit(c), low = at + 1 < length ? hex_digit(text[at + 1]) : -1;
        if (high < 0 || low < 0) {
            valid = 0; /* Pillow raises; nothing to apply */
            break;
        }
        block[size++] = (uint8_t)(high * 16 + low);
        at += 2;
    }
    if (valid) orientation = exif_orientation(block, size);
    free(block);
    return orientation;
}

static int png_orientation(png_structp png, png_infop info) {
    png_uint_32 exif_size = 0;
    png_bytep exif = NULL;
    int orientation = ORIENTATION_ABSENT, have_exif = 0;
#ifdef PNG_eXIf_SUPPORTED
    if (png_get_eXIf_1(png, info, &exif_size, &exif) && exif) {
        orientation = exif_orientation(exif, exif_size);
        have_exif = 1;
    }
#endif
    png_textp texts = NULL;
    int count = 0;
    png_get_text(png, info, &texts, &count);
    const png_text *raw_profile = NULL, *xmp = NULL; /* the last of each, as Pillow's info dict keeps */
    for (int i = 0; i < count; i++) {
        if (!texts[i].key || !texts[i].text) continue;
        if (strcmp(texts[i].key, "Raw profile type exif") == 0) raw_profile = &texts[i];
        if (strcmp(texts[i].key, "XML:com.adobe.xmp") == 0) xmp = &texts[i];
    }
#define TEXT_LENGTH(t) ((t)->compression > 0 ? (t)->itxt_length : (t)->text_length)
    if (!have_exif && raw_profile) orientation = raw_profile_orientation(raw_profile->text, TEXT_LENGTH(raw_profile));
    if (orientation == ORIENTATION_ABSENT && xmp)
        orientation = xmp_orientation((const uint8_t *)xmp->text, TEXT_LENGTH(xmp));
#undef TEXT_LENGTH
    return orientation;
}

glimpse_status decode_png(const uint8_t *bytes, size_t size, const char *label, uint64_t max_pixels,
                          glimpse_image **out, int *orientation) {
    png_reader reader;
    memset(&reader, 0, sizeof reader);
    reader.bytes = bytes;
    reader.size = size;
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &reader, png_fail, png_warn);
    if (!png) return ERROR_OOM();
    png_infop info = png_create_info_struct(png);
    glimpse_image *volatile image = NULL;
    uint8_t *volatile samples = NULL; /* 16-bit grey rows or palette indices */
    png_bytep *volatile rows = NULL;
    if (!info) {
        png_destroy_read_struct(&png, NULL, NULL);
        return ERROR_OOM();
    }
    if (setjmp(reader.jump)) {
        png_destroy_read_struct(&png, &info, NULL);
        glimpse_image_free(image);
        free(samples);
        free(rows);
        return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: broken PNG: %s", label, reader.message);
    }
    png_set_read_fn(png, &reader, png_read_memory);
    /* Our own limit is checked below; lift libpng's default 1M-pixel row cap. */
    png_set_user_limits(png, 0x7fffffff, 0x7fffffff);
    png_read_info(png, info);
    png_uint_32 width = png_get_image_width(png, info), height = png_get_image_height(png, info);
    glimpse_status status = check_dimensions(label, width, height, max_pixels);
    if (status) {
        png_destroy_read_struct(&png, &info, NULL);
        return status;
    }
    int colour = png_get_color_type(png, info), depth = png_get_bit_depth(png, info);
    /* Pillow opens 16-bit greyscale as mode I and convert("RGB") clips each
     * value to 255; other 16-bit images keep their high byte. Palette images
     * are read as one index a byte and looked up below. */
    int grey16 = colour == PNG_COLOR_TYPE_GRAY && depth == 16;
    int palette = colour == PNG_COLOR_TYPE_PALETTE;
    if (palette) {
        png_set_packing(png);
    } else {
        if (colour == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
        if (depth == 16 && !grey16) png_set_strip_16(png);
        if (colour & PNG_COLOR_MASK_ALPHA) png_set_strip_alpha(png);
        if ((colour == PNG_COLOR_TYPE_GRAY || colour == PNG_COLOR_TYPE_GRAY_ALPHA) && !grey16)
            png_set_gray_to_rgb(png);
    }
    png_set_interlace_handling(png);
    png_read_update_info(png, info);
    size_t row_bytes = png_get_rowbytes(png, info);
    if (row_bytes != (palette ? 1u : grey16 ? 2u : 3u) * width)
        png_error(png, "unexpected row layout after conversion");
    glimpse_image *made;
    status = image_allocate((int)width, (int)height, &made);
    if (status) {
        png_destroy_read_struct(&png, &info, NULL);
        return error_prefix(status, "%s", label);
    }
    image = made;
    int separate = palette || grey16; /* read into samples, then convert */
    rows = malloc(height * sizeof(png_bytep));
    if (separate) samples = malloc((size_t)height * row_bytes);
    if (!rows || (separate && !samples)) png_error(png, "out of memory");
    for (png_uint_32 y = 0; y < height; y++)
        rows[y] = separate ? samples + y * row_bytes : image->pixels + (size_t)y * width * 3;
    png_read_image(png, rows);
    size_t pixels = (size_t)width * height;
    if (grey16)
        for (size_t i = 0; i < pixels; i++) {
            unsigned value = ((unsigned)samples[2 * i] << 8) | samples[2 * i + 1];
            uint8_t clipped = value > 255 ? 255 : (uint8_t)value;
            image->pixels[3 * i] = image->pixels[3 * i + 1] = image->pixels[3 * i + 2] = clipped;
        }
    if (palette) {
        /* Pillow's palette starts as a grey ramp that PLTE overwrites from the
         * start: an index past the palette's end is grey at its own value. */
        uint8_t lookup[256][3];
        png_colorp entries = NULL;
        int entry_count = 0;
        png_get_PLTE(png, info, &entries, &entry_count);
        for (int i = 0; i < 256; i++) {
            if (i < entry_count) {
                lookup[i][0] = entries[i].red;
                lookup[i][1] = entries[i].green;
                lookup[i][2] = entries[i].blue;
            } else {
                lookup[i][0] = lookup[i][1] = lookup[i][2] = (uint8_t)i;
            }
        }
        for (size_t i = 0; i < pixels; i++) memcpy(image->pixels + 3 * i, lookup[samples[i]], 3);
    }
    png_read_trailer(png, info, &reader);
    *orientation = png_orientation(png, info);
    png_destroy_read_struct(&png, &info, NULL);
    free(rows);
    free(samples);
    *out = image;
    return GLIMPSE_STATUS_OK;
}
