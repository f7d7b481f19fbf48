/* quantize.h — int8 linear layers: weights quantized once per output channel
 * (symmetric, w ≈ q · scale, q in [-127, 127]) and activations quantized per
 * row at each call (symmetric, 127 steps either side of the row's largest
 * magnitude). A quantized weight is the q8 twin of its kernel_weight, and
 * kernel_linear (kernels.h) then runs the int8 product: on AMX tiles
 * (linear_q8_amx.c) for 16 rows or more where cpu_has_amx_int8(), on AVX-512
 * VNNI integer dot products (linear_q8_vnni.c) where cpu_has_avx512_vnni(), else
 * on plain loops that give bit-identical results (the integer sums are exact
 * and both paths finish them with the same float operations in the same order). */
#ifndef GLIMPSE_CORE_QUANTIZE_H
#define GLIMPSE_CORE_QUANTIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "glimpse.h"
#include "core/kernel_types.h"
#include "core/kernels.h"


/* Quantizes weight[out_features, in_features] of any type (16-bit ones
 * widened a row at a time) into `layout`, over the pool's threads (NULL: this
 * one); q owns what it allocates. */
glimpse_status kernel_q8_quantize(kernel_q8 *q, const kernel_weight *weight, size_t out_features,
                                  size_t in_features, q8_layout layout, pool *threads);
void kernel_q8_free(kernel_q8 *q);
/* The layout this CPU's kernels run fastest: strips where VNNI runs the products of many rows (they then read
 * the weights as they lie, where they would rearrange them into strips at every product), rows where AMX tiles
 * run them or there is no VNNI. Every path reads either layout bit for bit alike (q8_path_choose). */
q8_layout q8_layout_best(void);
/* Where feature k of output column c lies in q->weight. */
static inline size_t q8_weight_offset(const kernel_q8 *q, size_t c, size_t k) {
    if (q->layout == Q8_LAYOUT_ROWS) return c * q->depth + k;
    return ((c / Q8_STRIP_COLUMNS * (q->depth / 4) + k / 4) * Q8_STRIP_COLUMNS + c % Q8_STRIP_COLUMNS) * 4 + k % 4;
}

/* The int8 weights a model owns (each allocated apart, so pointers to them stay valid). */
typedef struct q8_set {
    kernel_q8 **items;
    size_t count, capacity;
    /* Called (when set) with each weight's stored values once its twin is made: a loader gives their pages
     * back to the file mapping, so the process does not hold both (the values stay readable). */
    void (*release)(void *user, const void *data, size_t bytes);
    void *release_user;
    pool *threads; /* what quantizes the weights (NULL: the calling thread) */
    void **owned;  /* other memory the twins need (q8_set_own), freed with them */
    size_t owned_count;
} q8_set;
/* Quantizes weight[out_features, in_features] into the set (q8_layout_best) and sets weight->q8 to it. */
glimpse_status q8_set_add(q8_set *set, kernel_weight *weight, size_t out_features, size_t in_features);
/* The same as a kernel_twin_add (set: a q8_set). */
glimpse_status q8_set_add_twin(void *set, kernel_weight *weight, size_t out_features, size_t in_features);
/* Gives the set memory its twins need (a fused projection's bias), to free with them; on failure (out of memory)
 * frees it and returns the error. */
glimpse_status q8_set_own(q8_set *set, void *memory);
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
/* kernel_q8_quantize's weight row on AVX2 (identical): returns the row's sum, writes its scale. */
int32_t q8_quantize_weight_row_avx2(int8_t *out, const float *row, size_t n, float *scale_out);


/* ------------------------------------------------ the product in two steps (q8_path, kernel_types.h) */

/* Plain loops (any CPU) and AVX2 (linear_q8_avx2.c; x86-64 builds, where
 * cpu_has_avx2()); VNNI's is in kernels_avx512.h. */
extern const q8_path q8_path_plain;
#ifdef GLIMPSE_HAVE_AVX2
extern const q8_path q8_path_avx2;
#endif
/* The fastest path this CPU runs for a product of `rows` rows with q (AMX's tiles take 16 rows or more; fewer, a
 * decoder step's, are bound by reading the weights, which the VNNI kernel does as fast; strips run on VNNI, or
 * without it on the plain loops). */
const q8_path *q8_path_choose(const kernel_q8 *q, size_t rows);

/* The plain and AVX2 paths' prepared rows: a scale per row (padded to 64
 * bytes), then `planes` planes of rows × depth bytes; prepared 16 rows a part. */
#define Q8_PART_ROWS 16
static inline size_t q8_planes_offset(size_t rows) { return (rows * sizeof(float) + 63) / 64 * 64; }
static inline size_t q8_planes_bytes(const kernel_q8 *q, size_t rows, size_t planes) {
    return q8_planes_offset(rows) + (planes * rows * q->depth + 63) / 64 * 64;
}
/* Their q8_path parts and temp_bytes (none). */
size_t q8_planes_parts(const kernel_q8 *q, size_t rows);
size_t q8_planes_temp_bytes(const kernel_q8 *q);
/* The most rows (of rows_left) whose planes fit in scratch_bytes. */
static inline size_t q8_planes_chunk_rows(const kernel_q8 *q, size_t rows_left, size_t scratch_bytes,
                                          size_t planes) {
    size_t rows = scratch_bytes < 128 ? 0 : (scratch_bytes - 128) / (planes * q->depth + sizeof(float));
    return rows < rows_left ? rows : rows_left;
}

#endif
