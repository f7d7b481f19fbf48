/* decode.c — format sniffing and the three decoders. Every decoder reads
 * from memory with bounds it cannot exceed, reports truncation as an error
 * (as Pillow does without LOAD_TRUNCATED_IMAGES), prints nothing, and checks
 * the pixel count against the limit before allocating. */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jerror.h>
#include <jpeglib.h>
#include <png.h>

#include <stb/stb_image.h>

#include "core/error.h"
#include "core/file.h"
#include "vision/image.h"

glimpse_status image_allocate(int width, int height, glimpse_image **out) {
    *out = NULL;
    if (width <= 0 || height <= 0)
        return error_set(GLIMPSE_STATUS_BAD_FORMAT, "image has no pixels (%dx%d)", width, height);
    size_t bytes = (size_t)width * (size_t)height;
    if (bytes > SIZE_MAX / 3) return ERROR_OOM();
    glimpse_image *image = calloc(1, sizeof *image);
    if (!image) return ERROR_OOM();
    image->pixels = malloc(bytes * 3);
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

static glimpse_status check_dimensions(const char *label, uint64_t width, uint64_t height, uint64_t max_pixels) {
    if (width == 0 || height == 0)
        return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: image has no pixels (%llux%llu)", label,
                         (unsigned long long)width, (unsigned long long)height);
    if (width > 0x7fffffff || height > 0x7fffffff || width * height > max_pixels)
        return error_set(GLIMPSE_STATUS_TOO_LARGE,
                         "%s: %llux%llu pixels is over the limit of %llu pixels (a decompression bomb?)", label,
                         (unsigned long long)width, (unsigned long long)height, (unsigned long long)max_pixels);
    return GLIMPSE_STATUS_OK;
}

/* ------------------------------------------------------------------ JPEG */

typedef struct jpeg_failure {
    struct jpeg_error_mgr manager;
    jmp_buf jump;
    char message[JMSG_LENGTH_MAX];
} jpeg_failure;

static void jpeg_fail(j_common_ptr info) {
    jpeg_failure *failure = (jpeg_failure *)info->err;
    info->err->format_message(info, failure->message);
    longjmp(failure->jump, 1);
}

/* Warnings go nowhere, except running out of data: Pillow refuses a
 * truncated JPEG ("image file is truncated"), so do we. */
static void jpeg_message(j_common_ptr info, int level) {
    if (level < 0 && info->err->msg_code == JWRN_JPEG_EOF) {
        jpeg_failure *failure = (jpeg_failure *)info->err;
        snprintf(failure->message, sizeof failure->message, "image file is truncated");
        longjmp(failure->jump, 1);
    }
}

static void jpeg_silent(j_common_ptr info) { (void)info; }

static glimpse_status decode_jpeg(const uint8_t *bytes, size_t size, const char *label, uint64_t max_pixels,
                                  glimpse_image **out) {
    struct jpeg_decompress_struct info;
    jpeg_failure failure;
    glimpse_image *volatile image = NULL;
    JSAMPLE *volatile row = NULL;
    info.err = jpeg_std_error(&failure.manager);
    failure.manager.error_exit = jpeg_fail;
    failure.manager.emit_message = jpeg_message;
    failure.manager.output_message = jpeg_silent;
    if (setjmp(failure.jump)) {
        jpeg_destroy_decompress(&info);
        glimpse_image_free(image);
        free(row);
        return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: broken JPEG: %s", label, failure.message);
    }
    jpeg_create_decompress(&info);
    jpeg_mem_src(&info, bytes, (unsigned long)size);
    jpeg_read_header(&info, TRUE);
    glimpse_status status = check_dimensions(label, info.image_width, info.image_height, max_pixels);
    if (status) {
        jpeg_destroy_decompress(&info);
        return status;
    }
    /* Pillow: YCbCr and RGB decode to RGB, grey to L, CMYK/YCCK to CMYK
     * (inverted when an Adobe marker says so), then convert("RGB"). */
    int cmyk = info.jpeg_color_space == JCS_CMYK || info.jpeg_color_space == JCS_YCCK;
    int grey = info.jpeg_color_space == JCS_GRAYSCALE;
    info.out_color_space = cmyk ? JCS_CMYK : grey ? JCS_GRAYSCALE : JCS_RGB;
    info.dct_method = JDCT_ISLOW;
    info.do_fancy_upsampling = TRUE;
    jpeg_start_decompress(&info);
    glimpse_image *made;
    status = image_allocate((int)info.output_width, (int)info.output_height, &made);
    if (status) {
        jpeg_destroy_decompress(&info);
        return error_prefix(status, "%s", label);
    }
    image = made;
    int components = info.output_components;
    row = malloc((size_t)info.output_width * (size_t)components);
    if (!row) {
        jpeg_destroy_decompress(&info);
        glimpse_image_free(image);
        return ERROR_OOM();
    }
    int inverted = cmyk && info.saw_Adobe_marker;
    while (info.output_scanline < info.output_height) {
        JSAMPROW rows[1] = {row};
        uint8_t *target = image->pixels + (size_t)info.output_scanline * (size_t)info.output_width * 3;
        jpeg_read_scanlines(&info, rows, 1);
        for (size_t x = 0; x < info.output_width; x++) {
            const uint8_t *p = row + x * (size_t)components;
            if (components == 1) {
                target[3 * x] = target[3 * x + 1] = target[3 * x + 2] = p[0];
            } else if (components == 3) {
                memcpy(target + 3 * x, p, 3);
            } else { /* CMYK → RGB as Pillow's cmyk2rgb */
                int c = p[0], m = p[1], y = p[2], k = p[3];
                if (inverted) {
                    c = 255 - c;
                    m = 255 - m;
                    y = 255 - y;
                    k = 255 - k;
                }
                int nk = 255 - k, t;
#define MULDIV255(a, b) (t = (a) * (b) + 128, ((t >> 8) + t) >> 8)
                int r = nk - MULDIV255(c, nk), g = nk - MULDIV255(m, nk), b = nk - MULDIV255(y, nk);
#undef MULDIV255
                target[3 * x] = (uint8_t)(r < 0 ? 0 : r);
                target[3 * x + 1] = (uint8_t)(g < 0 ? 0 : g);
                target[3 * x + 2] = (uint8_t)(b < 0 ? 0 : b);
            }
        }
    }
    jpeg_finish_decompress(&info);
    jpeg_destroy_decompress(&info);
    free(row);
    *out = image;
    return GLIMPSE_STATUS_OK;
}

/* ------------------------------------------------------------------- PNG */

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

static glimpse_status decode_png(const uint8_t *bytes, size_t size, const char *label, uint64_t max_pixels,
                                 glimpse_image **out) {
    png_reader reader;
    memset(&reader, 0, sizeof reader);
    reader.bytes = bytes;
    reader.size = size;
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &reader, png_fail, png_warn);
    if (!png) return ERROR_OOM();
    png_infop info = png_create_info_struct(png);
    glimpse_image *volatile image = NULL;
    uint8_t *volatile wide = NULL; /* 16-bit grey rows */
    png_bytep *volatile rows = NULL;
    if (!info) {
        png_destroy_read_struct(&png, NULL, NULL);
        return ERROR_OOM();
    }
    if (setjmp(reader.jump)) {
        png_destroy_read_struct(&png, &info, NULL);
        glimpse_image_free(image);
        free(wide);
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
    /* Pillow opens 16-bit greyscale as mode I;16 and convert("RGB") clips
     * each value to 255; other 16-bit images keep their high byte. */
    int grey16 = colour == PNG_COLOR_TYPE_GRAY && depth == 16;
    if (colour == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
    if (colour == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
    if (depth == 16 && !grey16) png_set_strip_16(png);
    if (colour & PNG_COLOR_MASK_ALPHA) png_set_strip_alpha(png);
    if ((colour == PNG_COLOR_TYPE_GRAY || colour == PNG_COLOR_TYPE_GRAY_ALPHA) && !grey16) png_set_gray_to_rgb(png);
    png_set_interlace_handling(png);
    png_read_update_info(png, info);
    size_t row_bytes = png_get_rowbytes(png, info);
    if (row_bytes != (grey16 ? 2u : 3u) * width) png_error(png, "unexpected row layout after conversion");
    glimpse_image *made;
    status = image_allocate((int)width, (int)height, &made);
    if (status) {
        png_destroy_read_struct(&png, &info, NULL);
        return error_prefix(status, "%s", label);
    }
    image = made;
    rows = malloc(height * sizeof(png_bytep));
    if (grey16) wide = malloc((size_t)height * row_bytes);
    if (!rows || (grey16 && !wide)) png_error(png, "out of memory");
    for (png_uint_32 y = 0; y < height; y++)
        rows[y] = grey16 ? wide + y * row_bytes : image->pixels + (size_t)y * width * 3;
    png_read_image(png, rows);
    if (grey16)
        for (size_t i = 0; i < (size_t)width * height; i++) {
            unsigned value = ((unsigned)wide[2 * i] << 8) | wide[2 * i + 1];
            uint8_t clipped = value > 255 ? 255 : (uint8_t)value;
            image->pixels[3 * i] = image->pixels[3 * i + 1] = image->pixels[3 * i + 2] = clipped;
        }
    /* The image data is complete; trailing chunks are not needed (Pillow
     * does not read past the image data either). */
    png_destroy_read_struct(&png, &info, NULL);
    free(rows);
    free(wide);
    *out = image;
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
                                 glimpse_image **out) {
    static const stbi_io_callbacks callbacks = {stb_read, stb_skip, stb_end};
    int width, height, components;
    stb_reader reader = {bytes, size, 0, 0};
    if (!stbi_info_from_callbacks(&callbacks, &reader, &width, &height, &components))
        return error_set(GLIMPSE_STATUS_UNSUPPORTED,
                         "%s: not an image (not JPEG, PNG, BMP, GIF, TGA or PNM)", label);
    glimpse_status status = check_dimensions(label, (uint64_t)width, (uint64_t)height, max_pixels);
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

glimpse_status image_decode(const uint8_t *bytes, size_t size, const char *label, uint64_t max_pixels,
                            glimpse_image **out) {
    *out = NULL;
    if (size == 0) return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: empty file, not an image", label);
    if (size >= 3 && bytes[0] == 0xff && bytes[1] == 0xd8 && bytes[2] == 0xff)
        return decode_jpeg(bytes, size, label, max_pixels, out);
    static const uint8_t png_signature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    if (size >= 8 && memcmp(bytes, png_signature, 8) == 0) return decode_png(bytes, size, label, max_pixels, out);
    return decode_stb(bytes, size, label, max_pixels, out);
}

/* ------------------------------------------------------------ public API */

glimpse_image_params glimpse_image_default_params(void) {
    return (glimpse_image_params){.max_pixels = IMAGE_DEFAULT_MAX_PIXELS};
}

glimpse_status glimpse_image_load_file(const char *path, const glimpse_image_params *params, glimpse_image **out) {
    if (!out) return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_image_load_file: out is NULL");
    *out = NULL;
    if (!path) return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_image_load_file: path is NULL");
    uint64_t limit = params ? params->max_pixels : IMAGE_DEFAULT_MAX_PIXELS;
    const uint8_t *map;
    size_t size;
    glimpse_status status = file_map(path, &map, &size);
    if (status) return status;
    status = image_decode(map, size, path, limit, out);
    file_unmap(map, size);
    return status;
}

glimpse_status glimpse_image_load_memory(const void *bytes, size_t size, const glimpse_image_params *params,
                                         glimpse_image **out) {
    if (!out) return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_image_load_memory: out is NULL");
    *out = NULL;
    if (!bytes && size) return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_image_load_memory: bytes is NULL");
    uint64_t limit = params ? params->max_pixels : IMAGE_DEFAULT_MAX_PIXELS;
    return image_decode(bytes, size, "image in memory", limit, out);
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
