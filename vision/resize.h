/* resize.h — Pillow's Image.resize reproduced bit for bit for 8-bit RGB:
 * separable convolution with antialiasing when shrinking, coefficients in
 * 22-bit fixed point, horizontal pass first, rounding to 8 bits between the
 * passes. Only the filters CLIP and BLIP processors use are offered. */
#ifndef GLIMPSE_VISION_RESIZE_H
#define GLIMPSE_VISION_RESIZE_H

#include <stdbool.h>

#include "vision/image.h"

typedef enum resize_filter {
    RESIZE_FILTER_BILINEAR = 2, /* Pillow's Image.BILINEAR */
    RESIZE_FILTER_BICUBIC = 3,  /* Pillow's Image.BICUBIC */
    RESIZE_FILTER_LANCZOS = 1   /* Pillow's Image.LANCZOS */
} resize_filter;

/* 1 if the Pillow resample code is one we implement. */
int resize_filter_supported(int pillow_resample);

/* A new image of width × height resampled from source. Caller frees. */
glimpse_status image_resize(const glimpse_image *source, int width, int height, resize_filter filter,
                            glimpse_image **out);
/* The same on the AVX-512 passes (vectorised, where built and cpu_has_avx512()) or the plain loops: the
 * results are identical either way (the tests compare them). */
glimpse_status image_resize_on(const glimpse_image *source, int width, int height, resize_filter filter,
                               bool vectorised, glimpse_image **out);

#endif
