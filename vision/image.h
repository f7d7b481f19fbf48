/* image.h — decoded RGB8 images and the decoders that make them: JPEG
 * (libjpeg-turbo, as Pillow decodes), PNG (libpng, every colour type and
 * depth), and BMP, GIF, TGA, PNM through stb_image. Colour conversion follows
 * Pillow's convert("RGB"). No resizing or model knowledge here. */
#ifndef GLIMPSE_VISION_IMAGE_H
#define GLIMPSE_VISION_IMAGE_H

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
 * before any pixel is decoded. Caller frees with glimpse_image_free. */
glimpse_status image_decode(const uint8_t *bytes, size_t size, const char *label, uint64_t max_pixels,
                            glimpse_image **out);

/* An image of the given size with uninitialised pixels. */
glimpse_status image_allocate(int width, int height, glimpse_image **out);

#endif
