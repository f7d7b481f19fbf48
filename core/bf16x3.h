/* bf16x3.h — float32 linear layers on AMX's bfloat16 tiles, as exact as
 * float32: every float32 weight and input value is split into three bfloat16
 * parts, x = hi + mid + lo, exactly (each part takes the next 8 significant
 * bits of the 24), for every float32 from 2^-110 to 2^127: below, the
 * remainders under 2^-126 are flushed to zero, as the conversions and the
 * tiles flush them (an error under 2^-126); from 2^127 up, and infinities and
 * NaNs, hi is the value cut to bfloat16 and the other parts zero, so they stay
 * infinite or NaN as in float32. A product sums the six part products that reach 2^-24 of
 * the result (hi·hi, hi·mid, hi·lo, mid·hi, mid·mid, lo·hi) into float32
 * tiles. The three left out are below float32's own rounding; measured
 * against double sums, the error is below that of plain float32 loops.
 * Where the CPU has AMX-BF16 (Sapphire Rapids and later) six tdpbf16ps do
 * 6 × 8,192 multiply-adds where an AVX-512 FMA does 16.
 *
 * A weight's twin is made once at load (the towers of a float32 load when
 * GLIMPSE_FLOAT32_TILES=always, api/model.c) and used in its place by
 * kernel_linear (linear.c), as an int8 twin is. Not for 16-bit weights (they stay 16-bit), nor for attention's
 * products (activations on both sides: they stay on the FMA kernels). */
#ifndef GLIMPSE_CORE_BF16X3_H
#define GLIMPSE_CORE_BF16X3_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "glimpse.h"
#include "core/kernels.h"
#include "core/pool.h"

typedef struct kernel_bf16x3 {
    /* the A tiles, each 16 weight rows × 32 features of one part, 1 KiB in a row: in order of the column tile
     * (16 columns), then the chunk (32 features), then the part (hi, mid, lo); features from in_features to
     * depth (in_features rounded up to 32) and columns past out_features are zero; 64-byte aligned */
    uint16_t *tiles;
    size_t out_features, in_features, depth, column_tiles;
} kernel_bf16x3;

/* true where the twins run: cpu_has_amx_bf16() (core/cpu.h). */
bool bf16x3_available(void);

/* Splits weight[out_features, in_features] (float32) into s, over the pool's threads (NULL: this one); s owns
 * what it allocates. Fails with GLIMPSE_STATUS_UNSUPPORTED where !bf16x3_available(). */
glimpse_status kernel_bf16x3_make(kernel_bf16x3 *s, const float *weight, size_t out_features, size_t in_features,
                                  pool *threads);
void kernel_bf16x3_free(kernel_bf16x3 *s);

/* The product in two steps, as the int8 one (quantize.h): prepare() splits rows of in (in_stride floats apart)
 * into input_bytes(rows) bytes (64-byte aligned) in the layout of the tiles, then product() runs any range of
 * output columns against them:
 *   out[r][c] (+)= Σ_k in[r][k] · weight[c][k] + bias[c]  for r < rows, first <= c < first + count
 * ("+=" when accumulate: out + (sum + bias) where the depth is at most 768 features, as the FMA kernels
 * round it; a deeper product adds the sums of each 768 features to out in turn). Each row's results depend on that
 * row alone, never on the rows beside it or on the column range. first is a multiple of 16 (a column tile). */
size_t bf16x3_input_bytes(const kernel_bf16x3 *s, size_t rows);
/* prepare() works in blocks of 16 rows (any range of them, so threads can share the work): how many. */
size_t bf16x3_input_blocks(size_t rows);
void bf16x3_prepare(void *prepared, const float *in, size_t in_stride, const kernel_bf16x3 *s, size_t rows,
                    size_t first_block, size_t block_count);
void bf16x3_product(float *out, size_t out_stride, const void *prepared, const kernel_bf16x3 *s, const float *bias,
                    size_t rows, bool accumulate, size_t first, size_t count);

/* The three parts of one value, as the kernels split it (the tests' oracle): hi + mid + lo == x. */
void bf16x3_split_value(float x, uint16_t parts[3]);

/* The twins a model owns (each allocated apart, so pointers to them stay valid). */
typedef struct bf16x3_set {
    kernel_bf16x3 **items;
    size_t count, capacity;
    /* Called (when set) with each weight's stored values once its twin is made (as q8_set's release). */
    void (*release)(void *user, const void *data, size_t bytes);
    void *release_user;
    pool *threads; /* what splits the weights (NULL: the calling thread) */
} bf16x3_set;
/* Splits weight (float32; others are left as they are, with success) into the set and sets weight->bf16x3.
 * set is a bf16x3_set (void *: the shape of kernel_twin_add, kernels.h). */
glimpse_status bf16x3_set_add(void *set, kernel_weight *weight, size_t out_features, size_t in_features);
void bf16x3_set_free(bf16x3_set *set);
/* A kernel_twin_add that takes a weight's bf16x3 twin away (weight->bf16x3 = NULL; set unused): before freeing a
 * set whose making failed part way, so no weight points into it. */
glimpse_status bf16x3_twin_clear(void *set, kernel_weight *weight, size_t out_features, size_t in_features);

#endif
