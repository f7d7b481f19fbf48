/* image.h — decoded RGB8 images and the decoders that make them: JPEG
 * (libjpeg-turbo), PNG (libpng), WebP (libwebp), TIFF (libtiff), HEIF and
 * AVIF (libheif), and BMP, GIF, TGA, PNM through stb_image. Colour conversion
 * follows Pillow 9.4's convert("RGB") (HEIF/AVIF: heif-convert's output), after
 * ImageOps.exif_transpose's orientation. No resizing or model knowledge here. */
#ifndef GLIMPSE_VISION_IMAGE_H
#define GLIMPSE_VISION_IMAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "glimpse.h"

/* Pillow's decompression-bomb error threshold: 2 × 89478485 pixels. */
#define IMAGE_DEFAULT_MAX_PIXELS 178956970ull
/* The largest image file read whole into memory (4 GiB). */
#define IMAGE_FILE_MAX_BYTES ((size_t)1 << 32)

struct glimpse_image {
    int width, height;
    uint8_t *pixels; /* width × height × 3, rows packed, owned */
};

/* Decodes encoded bytes. label names the input in errors (a path, or
 * "image in memory"). Images over max_pixels are refused from their header,
 * before any pixel is decoded. The EXIF orientation is applied as transformers'
 * load_image applies it (ImageOps.exif_transpose). Caller frees with glimpse_image_free. */
glimpse_status image_decode(const uint8_t *bytes, size_t size, const char *label, uint64_t max_pixels,
                            glimpse_image **out);
/* The same, with the orientation applied only when apply_orientation is nonzero. */
glimpse_status image_decode_with(const uint8_t *bytes, size_t size, const char *label, uint64_t max_pixels,
                                 int apply_orientation, glimpse_image **out);

/* The same, but a JPEG is decoded scaled down in the DCT domain (libjpeg-turbo's
 * scale_num/8) to the smallest size whose sides are both at least min_side:
 * faster, and close to (not the same as) the full decode resized. min_side
 * 0, and every other format, decode at full size. */
glimpse_status image_decode_scaled(const uint8_t *bytes, size_t size, const char *label, uint64_t max_pixels,
                                   int apply_orientation, int min_side, glimpse_image **out);

/* Whether one of the dedicated decoders (JPEG, PNG, WebP, TIFF, HEIF/AVIF)
 * claims the bytes by their magic numbers. */
bool image_known_format(const uint8_t *bytes, size_t size);

/* An image of the given size with uninitialised pixels. */
glimpse_status image_allocate(int width, int height, glimpse_image **out);

#endif
