/* decode.c — format sniffing by magic bytes, the stb_image formats (BMP, GIF,
 * TGA; PNM goes to decode_pnm.c), the EXIF orientation step, and the public image API. Every
 * decoder (here and in decode_FORMAT.c) reads from memory with bounds it
 * cannot exceed, reports truncation as an error (as Pillow does without
 * LOAD_TRUNCATED_IMAGES), prints nothing, and checks the pixel count against
 * the limit before allocating. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <stb/stb_image.h>

#include "core/error.h"
#include "core/file.h"
#include "core/memory.h"
#include "vision/decode_pnm.h"
#include "vision/decode_stb_checks.h"
#include "vision/decoders.h"

glimpse_status image_allocate(int width, int height, glimpse_image **out) {
    *out = NULL;
    if (width <= 0 || height <= 0)
        return error_set(GLIMPSE_STATUS_BAD_FORMAT, "image has no pixels (%dx%d)", width, height);
    size_t bytes = (size_t)width * (size_t)height;
    if (bytes > SIZE_MAX / 3) return ERROR_OOM();
    glimpse_image *image = calloc(1, sizeof *image);
    if (!image) return ERROR_OOM();
    image->pixels = memory_large(bytes * 3); /* (a 12-megapixel picture: 36 MB written once, on huge pages) */
    if (!image->pixels) {
        free(image);
        return ERROR_OOM();
    }
    image->width = width;
    image->height = height;
    *out = image;
    return GLIMPSE_STATUS_OK;
}

void glimpse_image_free(glimpse_image *image) {
    if (!image) return;
    free(image->pixels);
    free(image);
}

glimpse_status check_dimensions(const char *label, uint64_t width, uint64_t height, uint64_t max_pixels) {
    if (width == 0 || height == 0)
        return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: image has no pixels (%llux%llu)", label,
                         (unsigned long long)width, (unsigned long long)height);
    if (width > 0x7fffffff || height > 0x7fffffff || width * height > max_pixels)
        return error_set(GLIMPSE_STATUS_TOO_LARGE,
                         "%s: %llux%llu pixels is over the limit of %llu pixels (a decompression bomb?)", label,
                         (unsigned long long)width, (unsigned long long)height, (unsigned long long)max_pixels);
    return GLIMPSE_STATUS_OK;
}

/* ------------------------------------------------------- stb_image formats */

/* stb_image reads through callbacks so that we can see a read past the end
 * of the data: stb itself pads a short file with zeros and reports success,
 * where Pillow says "image file is truncated". */
typedef struct stb_reader {
    const uint8_t *bytes;
    size_t size, at;
    int ran_out;
} stb_reader;

static int stb_read(void *user, char *target, int wanted) {
    stb_reader *reader = user;
    size_t left = reader->size - reader->at, count = (size_t)wanted < left ? (size_t)wanted : left;
    if (wanted > 0 && left == 0) reader->ran_out = 1;
    memcpy(target, reader->bytes + reader->at, count);
    reader->at += count;
    return (int)count;
}

static void stb_skip(void *user, int count) {
    stb_reader *reader = user;
    if (count < 0) {
        size_t back = (size_t)-(long)count;
        reader->at = back > reader->at ? 0 : reader->at - back;
    } else if ((size_t)count > reader->size - reader->at) {
        reader->at = reader->size;
        reader->ran_out = 1;
    } else {
        reader->at += (size_t)count;
    }
}

static int stb_end(void *user) {
    stb_reader *reader = user;
    return reader->at >= reader->size;
}

static glimpse_status decode_stb(const uint8_t *bytes, size_t size, const char *label, uint64_t max_pixels,
                                 glimpse_image **out, int *orientation) {
    if (pnm_signature(bytes, size)) return decode_pnm(bytes, size, label, max_pixels, out, orientation);
    *orientation = ORIENTATION_ABSENT; /* Pillow reads no EXIF from these */
    static const stbi_io_callbacks callbacks = {stb_read, stb_skip, stb_end};
    int width, height, components;
    stb_reader reader = {bytes, size, 0, 0};
    if (!stbi_info_from_callbacks(&callbacks, &reader, &width, &height, &components))
        return error_set(GLIMPSE_STATUS_UNSUPPORTED,
                         "%s: not an image (not JPEG, PNG, WebP, TIFF, HEIF, AVIF, BMP, GIF, TGA or PNM)", label);
    glimpse_status status = check_dimensions(label, (uint64_t)width, (uint64_t)height, max_pixels);
    if (!status) status = stb_check_data(bytes, size, label);
    if (status) return status;
    reader = (stb_reader){bytes, size, 0, 0};
    uint8_t *pixels = stbi_load_from_callbacks(&callbacks, &reader, &width, &height, &components, 3);
    if (!pixels) return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: broken image: %s", label, stbi_failure_reason());
    if (reader.ran_out) {
        stbi_image_free(pixels);
        return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: broken image: image file is truncated", label);
    }
    glimpse_image *image;
    status = image_allocate(width, height, &image);
    if (status) {
        stbi_image_free(pixels);
        return error_prefix(status, "%s", label);
    }
    memcpy(image->pixels, pixels, (size_t)width * (size_t)height * 3);
    stbi_image_free(pixels);
    *out = image;
    return GLIMPSE_STATUS_OK;
}

void cmyk_to_rgb(uint8_t *rgb, int c, int m, int y, int k) {
    int nk = 255 - k, t;
#define MULDIV255(a, b) (t = (a) * (b) + 128, ((t >> 8) + t) >> 8)
    int r = nk - MULDIV255(c, nk), g = nk - MULDIV255(m, nk), b = nk - MULDIV255(y, nk);
#undef MULDIV255
    rgb[0] = (uint8_t)(r < 0 ? 0 : r);
    rgb[1] = (uint8_t)(g < 0 ? 0 : g);
    rgb[2] = (uint8_t)(b < 0 ? 0 : b);
}

/* The decoder for these bytes, by their magic numbers. */
static image_decoder *sniff(const uint8_t *bytes, size_t size) {
    static const uint8_t png_signature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    if (size >= 3 && bytes[0] == 0xff && bytes[1] == 0xd8 && bytes[2] == 0xff) return decode_jpeg;
    if (size >= 8 && memcmp(bytes, png_signature, 8) == 0) return decode_png;
    if (size >= 12 && memcmp(bytes, "RIFF", 4) == 0 && memcmp(bytes + 8, "WEBP", 4) == 0) return decode_webp;
    if (size >= 4 && (memcmp(bytes, "II*\0", 4) == 0 || memcmp(bytes, "MM\0*", 4) == 0 ||
                      memcmp(bytes, "II+\0", 4) == 0 || memcmp(bytes, "MM\0+", 4) == 0))
        return decode_tiff;
    /* ISO base media: an ftyp box whose brands libheif knows (HEIC, AVIF, ...) */
    if (size >= 12 && memcmp(bytes + 4, "ftyp", 4) == 0 && heif_sniff(bytes, size)) return decode_heif;
    return decode_stb;
}

bool image_known_format(const uint8_t *bytes, size_t size) { return sniff(bytes, size) != decode_stb; }

glimpse_status image_decode_with(const uint8_t *bytes, size_t size, const char *label, uint64_t max_pixels,
                                 int apply_orientation, glimpse_image **out) {
    return image_decode_scaled(bytes, size, label, max_pixels, apply_orientation, 0, out);
}

glimpse_status image_decode_scaled(const uint8_t *bytes, size_t size, const char *label, uint64_t max_pixels,
                                   int apply_orientation, int min_side, glimpse_image **out) {
    *out = NULL;
    if (size == 0) return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: empty file, not an image", label);
    int orientation = ORIENTATION_ABSENT;
    image_decoder *decoder = sniff(bytes, size);
    glimpse_status status = decoder == decode_jpeg && min_side > 0
                                ? decode_jpeg_scaled(bytes, size, label, max_pixels, min_side, out, &orientation)
                                : decoder(bytes, size, label, max_pixels, out, &orientation);
    if (status || !apply_orientation) return status;
    status = image_orient(out, orientation);
    if (status) {
        glimpse_image_free(*out);
        *out = NULL;
        return error_prefix(status, "%s", label);
    }
    return GLIMPSE_STATUS_OK;
}

glimpse_status image_decode(const uint8_t *bytes, size_t size, const char *label, uint64_t max_pixels,
                            glimpse_image **out) {
    return image_decode_with(bytes, size, label, max_pixels, 1, out);
}

/* ------------------------------------------------------------ public API */

glimpse_image_params glimpse_image_default_params(void) {
    return (glimpse_image_params){.max_pixels = IMAGE_DEFAULT_MAX_PIXELS, .ignore_exif_orientation = false};
}

glimpse_status glimpse_image_load_file(const char *path, const glimpse_image_params *params, glimpse_image **out) {
    if (!out) return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_image_load_file: out is NULL");
    *out = NULL;
    if (!path) return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_image_load_file: path is NULL");
    uint64_t limit = params ? params->max_pixels : IMAGE_DEFAULT_MAX_PIXELS;
    int orient = params ? !params->ignore_exif_orientation : 1;
    file_contents file;
    glimpse_status status = file_contents_open(path, &file);
    if (status) return status;
    status = image_decode_with(file.bytes, file.size, path, limit, orient, out);
    file_contents_release(&file);
    return status;
}

glimpse_status glimpse_image_load_memory(const void *bytes, size_t size, const glimpse_image_params *params,
                                         glimpse_image **out) {
    if (!out) return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_image_load_memory: out is NULL");
    *out = NULL;
    if (!bytes && size) return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_image_load_memory: bytes is NULL");
    uint64_t limit = params ? params->max_pixels : IMAGE_DEFAULT_MAX_PIXELS;
    int orient = params ? !params->ignore_exif_orientation : 1;
    return image_decode_with(bytes, size, "image in memory", limit, orient, out);
}

glimpse_status glimpse_image_from_pixels(const uint8_t *pixels, int width, int height, size_t stride,
                                         glimpse_pixel_format format, glimpse_image **out) {
    if (!out) return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_image_from_pixels: out is NULL");
    *out = NULL;
    size_t bytes_per_pixel;
    switch (format) {
    case GLIMPSE_PIXEL_FORMAT_RGB8: bytes_per_pixel = 3; break;
    case GLIMPSE_PIXEL_FORMAT_RGBA8:
    case GLIMPSE_PIXEL_FORMAT_BGRA8: bytes_per_pixel = 4; break;
    default: return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "unknown pixel format %d", (int)format);
    }
    if (!pixels || width <= 0 || height <= 0)
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "pixels must be non-NULL with a positive width and height");
    if (stride == 0) stride = (size_t)width * bytes_per_pixel;
    if (stride < (size_t)width * bytes_per_pixel)
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "stride %zu is shorter than a row of %d pixels", stride,
                         width);
    glimpse_image *image;
    glimpse_status status = image_allocate(width, height, &image);
    if (status) return status;
    for (int y = 0; y < height; y++) {
        const uint8_t *source = pixels + (size_t)y * stride;
        uint8_t *target = image->pixels + (size_t)y * (size_t)width * 3;
        for (int x = 0; x < width; x++, source += bytes_per_pixel, target += 3) {
            if (format == GLIMPSE_PIXEL_FORMAT_BGRA8) {
                target[0] = source[2];
                target[1] = source[1];
                target[2] = source[0];
            } else {
                memcpy(target, source, 3);
            }
        }
    }
    *out = image;
    return GLIMPSE_STATUS_OK;
}

int glimpse_image_width(const glimpse_image *image) { return image ? image->width : 0; }
int glimpse_image_height(const glimpse_image *image) { return image ? image->height : 0; }
const uint8_t *glimpse_image_pixels(const glimpse_image *image) { return image ? image->pixels : NULL; }
