/* resize_kernels.h — resize.c's passes on AVX-512 (resize_avx512.c, built
 * where GLIMPSE_HAVE_AVX512 and run where cpu_has_avx512()): the same
 * integer arithmetic, so bit for bit resize.c's plain loops and Pillow's. */
#ifndef GLIMPSE_VISION_RESIZE_KERNELS_H
#define GLIMPSE_VISION_RESIZE_KERNELS_H

#include <stdint.h>

/* Pillow's fixed point: weights × 2^22. */
#define RESIZE_PRECISION_BITS (32 - 8 - 2)

/* The horizontal pass: out[height][out_width × 3] from in[height][in_width × 3] with output sample x's weights
 * weights[x × window ...], count[x] of them from input pixel first[x]. columns holds in_width × 3 vectors of 16
 * and results out_width × 3, both 64-byte aligned (the scratch of 16 rows at a time). */
void resize_horizontal_avx512(uint8_t *out, int out_width, const uint8_t *in, int in_width, int height,
                              const int *first, const int *count, const int32_t *weights, int window,
                              int32_t (*columns)[16], int32_t (*results)[16]);
/* The vertical pass: out[out_height][width × 3] from in[...][width × 3], output row y from count[y] input
 * rows from first[y]. */
void resize_vertical_avx512(uint8_t *out, int out_height, const uint8_t *in, int width, const int *first,
                            const int *count, const int32_t *weights, int window);

#endif
