/* quantize.h — int8 linear layers: weights quantized once per output channel
 * (symmetric, w ≈ q · scale, q in [-127, 127]) and activations quantized per
 * row at each call (symmetric, 127 steps either side of the row's largest
 * magnitude). A quantized weight is the q8 twin of its kernel_weight, and
 * kernel_linear (kernels.h) then runs the int8 product: on AVX-512 VNNI
 * integer dot products (linear_q8_vnni.c) where cpu_has_avx512_vnni(), else
 * on plain loops that give bit-identical results (the integer sums are exact
 * and both paths finish them with the same float operations in the same order). */
#ifndef GLIMPSE_CORE_QUANTIZE_H
#define GLIMPSE_CORE_QUANTIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "glimpse.h"
#include "core/kernels.h"

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
/* Columns first .. first+count of out[rows, q->out_features] (+)= the int8
 * product of in and q, + bias ("+=" when accumulate), in plain loops: the
 * oracle of the VNNI kernels and their stand-in on other CPUs. */
void q8_product_plain(float *out, size_t out_stride, const float *in, size_t in_stride, const kernel_q8 *q,
                      const float *bias, size_t rows, bool accumulate, size_t first, size_t count);
/* The same on AVX2 (linear_q8_avx2.c; x86-64 builds, where cpu_has_avx2()):
 * identical outputs. scratch (64-byte aligned) must hold at least one input
 * row twice over (signs and magnitudes) plus 5 floats: q8_avx2_scratch_fits. */
void q8_product_avx2(float *out, size_t out_stride, const float *in, size_t in_stride, const kernel_q8 *q,
                     const float *bias, size_t rows, bool accumulate, size_t first, size_t count, void *scratch,
                     size_t scratch_bytes);
/* kernel_q8_quantize's weight row on AVX2 (identical): returns the row's sum, writes its scale. */
int32_t q8_quantize_weight_row_avx2(int8_t *out, const float *row, size_t n, float *scale_out);
static inline bool q8_avx2_scratch_fits(const kernel_q8 *q, size_t scratch_bytes) {
    return scratch_bytes >= q->depth * 2 + 5 * sizeof(float);
}
/* Bytes of scratch the VNNI kernels need for q (64-byte aligned). */
size_t q8_scratch_bytes(const kernel_q8 *q);

#endif
