/* quantize.h — int8 linear layers: weights quantized once per output channel
 * (symmetric, w ≈ q · scale, q in [-127, 127]) and activations quantized per
 * row at each call (symmetric, 127 steps either side of the row's largest
 * magnitude). Products run on AVX-512 VNNI integer dot products
 * (linear_q8_vnni.c) where the CPU has them, else on plain loops that give
 * bit-identical results: the integer sums are exact and both paths finish them
 * with the same float operations in the same order. */
#ifndef GLIMPSE_CORE_QUANTIZE_H
#define GLIMPSE_CORE_QUANTIZE_H

#include <stddef.h>
#include <stdint.h>

#include "glimpse.h"
#include "core/kernels.h"
#include "core/pool.h"

typedef struct kernel_q8 {
    int8_t *weight;     /* [out_features, depth], each row zero-padded from in_features to depth */
    float *scale;       /* [out_features]: max |w| of the row / 127 */
    int32_t *sum;       /* [out_features]: Σ of the row's q (activations go in offset by 128) */
    size_t out_features, in_features, depth; /* depth: in_features rounded up to a multiple of 4 */
} kernel_q8;

/* Quantizes weight[out_features, in_features] of any type (16-bit ones
 * widened a row at a time); q owns what it allocates. */
glimpse_status kernel_q8_quantize(kernel_q8 *q, const kernel_weight *weight, size_t out_features,
                                  size_t in_features);
void kernel_q8_free(kernel_q8 *q);

/* out[rows, out_features] (+)= dequantized(quantized(in) · qᵀ) + bias ("+=" when accumulate). */
void kernel_linear_q8(float *out, size_t out_stride, const float *in, size_t in_stride, const kernel_q8 *q,
                      const float *bias, size_t rows, int accumulate, pool *threads);

/* What every model layer calls: the int8 product when the weight has its q8
 * twin, else the product in the weight's own type (kernel_linear_typed);
 * "+=" when accumulate. */
void kernel_project(float *out, size_t out_stride, const float *in, size_t in_stride, const kernel_weight *weight,
                    const float *bias, size_t rows, size_t in_features, size_t out_features, int accumulate,
                    pool *threads);

/* The int8 weights a model owns (each allocated apart, so pointers to them stay valid). */
typedef struct q8_set {
    kernel_q8 **items;
    size_t count, capacity;
} q8_set;
/* Quantizes weight[out_features, in_features] into the set and sets weight->q8 to it. */
glimpse_status q8_set_add(q8_set *set, kernel_weight *weight, size_t out_features, size_t in_features);
void q8_set_free(q8_set *set);

/* ------------------------------------------------ shared with the kernels */

/* One row quantized: u8[k] = round(x[k] / scale) + 128 for k < in_features,
 * 128 up to depth; returns scale (max |x| / 127, or 1 for an all-zero row). */
float q8_quantize_row(uint8_t *u8, const float *x, size_t in_features, size_t depth);
/* The float result of one integer sum, as every path computes it. */
static inline float q8_finish(int32_t total, int32_t weight_sum, float row_scale, float weight_scale,
                              const float *bias) {
    float value = (float)(total - 128 * weight_sum) * (row_scale * weight_scale);
    return bias ? value + *bias : value;
}

/* 1 if the VNNI kernels run here (AVX-512 F, BW and VNNI, GLIMPSE_NO_AVX512 unset). */
int q8_vnni_available(void);
/* The VNNI kernels (linear_q8_vnni.c): columns first .. first+count of the
 * product, scratch at least q8_scratch_bytes(q) bytes, 64-byte aligned. */
void q8_product_vnni(float *out, size_t out_stride, const float *in, size_t in_stride, const kernel_q8 *q,
                     const float *bias, size_t rows, int accumulate, size_t first, size_t count, uint8_t *scratch);
size_t q8_scratch_bytes(const kernel_q8 *q);
/* One weight row quantized on AVX-512 as kernel_q8_quantize does (identical
 * results): q[k] for k < n, the row's scale in *scale; returns Σ q. */
int32_t q8_quantize_weight_row_avx512(int8_t *q, const float *w, size_t n, float *scale);
/* q8_quantize_row on AVX-512 (identical results). */
float q8_quantize_row_avx512(uint8_t *u8, const float *x, size_t in_features, size_t depth);

#endif
