/* kernels_avx512.h — the AVX-512 kernels behind the dispatching ones
 * (kernels.h): declarations for the files that choose them (linear.c, attention.c,
 * kernels.c, quantize.c) and the files that define them (linear_avx512.c,
 * activations_avx512.c, linear_q8_vnni.c). Models never include this: they
 * call kernel_linear, kernel_softmax, ... and those ask core/cpu.h.
 * Built only with GLIMPSE_AVX512 (x86-64); call only where cpu.h says so. */
#ifndef GLIMPSE_CORE_KERNELS_AVX512_H
#define GLIMPSE_CORE_KERNELS_AVX512_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/kernel_types.h"

/* How far ahead the few-rows dot-product kernels (float and 16-bit: linear_avx512.c; int8: linear_q8_vnni.c)
 * ask for each weight row: one tile of tile_bytes (the same place a tile's columns on), at most 16 KiB. These
 * read every weight once and the hardware's prefetching alone sets too slow a pace: with rows of 768 features a
 * fixed 1 KiB ahead left 16-bit weights at 25 GB/s and float32 at 36, a tile ahead reached 37-47 (1-3 input
 * rows, 2 threads, bandwidth probe 46.7); longer rows (3072) did best capped near 16 KiB. */
static inline size_t kernel_dot_prefetch_distance(size_t tile_bytes) {
    return tile_bytes < 16384 ? tile_bytes : 16384;
}

/* Asks for the cache line holding p to be this core's to write (prefetchw). Where another core last read or wrote
 * the line, a store to it waits for that core to give it up (228-241 ns one way between the two cores of the EPYC
 * that bench/roof.c's core_to_core measured); asked for ahead, that happens during other work.
 * The address goes in a register, not as a memory operand: with a memory operand (a char lvalue) gcc 12 kept the
 * float32 micro-kernel's 24 sums on the stack, storing them at every step of its loop (a third of the FMA loop's
 * rate on an AMD EPYC Zen 4); test_kernel_loops (tests/kernel_loops.py) guards the kernels' loops against that. */
static inline void kernel_prefetch_to_write(const void *p) {
    __asm__ volatile("prefetchw (%0)" ::"r"(p));
}

/* The next block of `left` rows or columns, at most `most` (3 vectors of 16, as the kernels' registers hold them):
 * `most`, except that most+1 .. most+16 left go as two blocks of (most+16)/2, not `most` and a block of one vector
 * (whose 8 sums in flight are too few for the FMAs' or the dot products' latency: linear_avx512.c's panels,
 * linear_q8_vnni.c's pieces of columns), and fewer than `most` as they are. */
static inline size_t kernel_next_block(size_t left, size_t most) {
    return left <= most ? left : left <= most + 16 ? (most + 16) / 2 : most;
}

/* ------------------------------------------------ float products (linear_avx512.c) */

/* Where a product's columns come from when the tasks that share it balance them (linear.c): take() gives the
 * calling task's next columns of the pass over rows `pass` (first; count, a multiple of 8 but at the last
 * column), false once none is left for it. */
typedef struct kernel_columns {
    bool (*take)(struct kernel_columns *columns, size_t pass, size_t *first, size_t *count);
} kernel_columns;

/* One matrix product:
 *   out[r][c] (+)= scale · Σ_k in[r][k] · weight[c·column_stride + k·depth_stride] + bias[c]
 * for r < rows, k < depth; "+=" when accumulate. A linear layer has
 * column_stride = in_features, depth_stride = 1; attention's P·V reads the
 * values as weight with column_stride 1, depth_stride = their row stride
 * (allowed only with 16 rows or more, and float32 weights). 16-bit weights
 * (weight_type) are read with depth_stride 1 only. Build it with designated
 * initializers: unnamed fields are then 0 (no bias, no accumulate). */
typedef struct kernel_product {
    float *out;
    size_t out_stride;
    const float *in;
    size_t in_stride;
    const void *weight; /* of weight_type */
    weight_type weight_type;
    size_t column_stride, depth_stride;
    const float *bias; /* may be NULL */
    float scale;
    int accumulate; /* (0 or 1) */
    size_t rows, depth;
    int rowwise; /* (0 or 1) the few-rows kernel at any row count: each row as a one-row product gives it */
    kernel_columns *columns; /* where kernel_product_column_passes: the columns, taken pass by pass as the
                              * kernel goes, in place of first_column .. first_column+columns (NULL: those) */
} kernel_product;

/* Columns first_column .. first_column+columns of the product. scratch
 * (64-byte aligned, scratch_floats long, may be NULL) holds the transposed
 * input panels; without room for 48 rows × depth the panels are cut along
 * the depth into blocks on the stack. */
void kernel_product_avx512(const kernel_product *product, size_t first_column, size_t columns, float *scratch,
                           size_t scratch_floats);
/* Whether kernel_product_avx512 can take the product's columns from product->columns with this much scratch:
 * float32 weights, 16 rows or more, each pass over 48 rows (the last with up to 2 rows more) in one panel of
 * the whole depth; the number of passes. 0: it cannot. */
size_t kernel_product_column_passes(const kernel_product *product, size_t scratch_floats);

/* One head's attention for a block of queries (linear_avx512.c):
 *   out[t] = Σ_j softmax_j(scale · q[t]·k[j] (masked)) · v[j]   for t < count, j < keys,
 * rows of q, k and v head_dim long (q_stride, kv_stride apart). With causal,
 * query t sees keys j <= t + visible. probabilities (or NULL) gets row t's
 * probabilities at probabilities + t·probability_stride. */
typedef struct kernel_attention_block {
    float *out;
    size_t out_stride;
    const float *q;
    size_t q_stride;
    const float *k, *v;
    size_t kv_stride, count, keys, head_dim;
    size_t seen; /* with causal, the keys any query of the block may see (the first `seen`, ≤ keys; 0: all): the
                  * rest are left out, their probabilities recorded as zeros */
    float scale;
    bool causal;
    long long visible;
    float *probabilities;
    size_t probability_stride;
    /* v regrouped by kernel_attention_pack_values_avx512 (NULL: v read in place) */
    const float *packed_v;
} kernel_attention_block;

/* Floats kernel_attention_pack_values_avx512 writes for keys × head_dim values. */
size_t kernel_attention_packed_floats(size_t keys, size_t head_dim);
/* A head's values, v[j][d] (rows kv_stride apart), regrouped for the block
 * kernel: 8 dimensions at a time, each group's keys back to back (32 bytes
 * a key), so the values' product streams them instead of reading one line
 * per key of rows thousands of bytes apart. The same values: results are
 * unchanged. Worth it for a head's several blocks of queries. */
void kernel_attention_pack_values_avx512(float *packed, const float *v, size_t kv_stride, size_t keys,
                                         size_t head_dim);

/* The block's scores, softmax and weighted values in one pass over the
 * thread's scratch: the scores stay as the micro-kernel makes them (a line
 * of the queries per key), so neither they nor the probabilities are
 * transposed, and the softmax runs down the keys. Bit for bit what
 * kernel_product_avx512, kernel_softmax_avx512 and kernel_product_avx512
 * again give. Returns false, having done nothing, where those would not put
 * every query in one panel (fewer than 16, more than 48, or 1-4 past a
 * multiple of 16) or the scratch lacks (head_dim + keys) · 48 floats. */
bool kernel_attention_block_avx512(const kernel_attention_block *block, float *scratch, size_t scratch_floats);

/* ---------------------------------------- attention on bfloat16 (attention_bf16_avx512.c) */

/* 32-bit words kernel_attention_bf16_pack_avx512 writes for a head of keys × head_dim. */
size_t kernel_attention_bf16_packed_words(size_t keys, size_t head_dim);
/* A head's keys and values rounded to bfloat16 (to nearest, even) and laid out for the block kernel below:
 * each key's features in pairs, then the values 8 features a group, each group's keys in pairs. */
void kernel_attention_bf16_pack_avx512(uint32_t *packed, const float *k, const float *v, size_t kv_stride,
                                       size_t keys, size_t head_dim);
/* kernel_attention_block_avx512's work with its two products on bfloat16 (the queries and probabilities rounded
 * as the keys and values in packed, every sum float32): for the int8 models' encoder layers, on a CPU with
 * AVX512_BF16 only. block's k, v and packed_v are not read. Returns false, having done nothing, for more than 48
 * queries or where the scratch lacks (⌈head_dim / 32⌉ · 16 + keys + ⌈keys / 2⌉) · 48 floats. */
bool kernel_attention_block_bf16_avx512(const kernel_attention_block *block, const uint32_t *packed, float *scratch,
                                        size_t scratch_floats);

/* out[q][0..width) = Σ_j weights[q][j] · rows[j][0..width) for q < count, j < n
 * (rows j are row_stride apart): attention's P·V for a few queries (fewer than 16 of a prompt's, or a
 * caption step's against BLIP's transposed image keys). */
void kernel_weighted_rows_avx512(float *out, size_t out_stride, const float *weights, size_t weight_stride,
                                 const float *rows, size_t row_stride, size_t count, size_t n, size_t width);
/* A decoder step's attention (one query a head) over a cache whose rows hold every key/value head side by side
 * (kv_stride apart), in blocks of keys: each block's rows read front to back once for all the heads, so that a
 * thread streams its blocks' memory (two threads each reading a 4 KiB row's half, or each head's 256-byte
 * slice of every row, drew 23 and 31 GB/s where a stream of its own drew 62). Query head h (q[h · head_dim ...])
 * uses key/value head h / group.
 *
 * scores[h · score_stride + j] = scale · q_h · k_j for keys first .. first + count. */
void kernel_step_scores_avx512(float *scores, size_t score_stride, const float *q, const float *k, size_t kv_stride,
                               size_t first, size_t count, size_t kv_heads, size_t group, size_t head_dim,
                               float scale);
/* sums[h · w + d] = Σ_j probabilities[h · probability_stride + j] · v_j[h / group · head_dim + d] over keys
 * first .. first + count in order (w: head_dim rounded up to 16; sums 64-byte aligned). */
void kernel_step_values_avx512(float *sums, const float *probabilities, size_t probability_stride, const float *v,
                               size_t kv_stride, size_t first, size_t count, size_t kv_heads, size_t group,
                               size_t head_dim);
/* out[q][0..width) = Σ_j weights[q][j] · rows[j][0..width) for q < count, j < n, each row's 16-lane slices read
 * once for up to 8 queries (a grouped-query step's heads sharing their key/value head's rows): the rows in
 * blocks of `block`, each block summed from zero in order and the blocks' sums added in order, as
 * kernel_step_values_avx512's blocks and their combination give. */
void kernel_weighted_rows_blocked_avx512(float *out, size_t out_stride, const float *weights, size_t weight_stride,
                                         const float *rows, size_t row_stride, size_t count, size_t n, size_t width,
                                         size_t block);

/* ------------------------------------------------ scores of stored rows (dot_rows_avx512.c) */

/* kernel_dot_rows for rows first .. first + n of the list (or of the matrix, rows NULL), on one thread. */
void kernel_dot_rows_avx512(float *out, const float *matrix, size_t dim, const int64_t *rows, size_t n,
                            const float *x);

/* ------------------------------------------- row-wise maths (activations_avx512.c) */

/* What kernel_softmax, kernel_gelu, kernel_quick_gelu and kernel_layernorm
 * compute, vectorised; their *_reference twins are the oracle (within a few
 * float rounding steps: exp and erf are polynomials here, libm there). */
void kernel_softmax_avx512(float *x, size_t rows, size_t n);
void kernel_gelu_avx512(float *x, size_t n);
void kernel_quick_gelu_avx512(float *x, size_t n);
void kernel_layernorm_avx512(float *out, const float *in, const float *weight, const float *bias, size_t rows,
                             size_t dim, float epsilon);

/* kernel_add and kernel_multiply_add, 16 values at a time: the same bits as their plain loops. */
void kernel_add_avx512(float *x, const float *y, size_t n);
void kernel_multiply_add_avx512(float *x, const float *a, const float *b, size_t n);

/* kernel_widen of float16 / bfloat16 values, 16 at a time (identical results: the conversion is exact). */
void kernel_widen_avx512(float *out, const void *data, weight_type type, size_t n);

/* ------------------------------------------------ int8 products (linear_q8_vnni.c) */

/* The int8 product on VNNI (quantize.h's q8_path): rows quantized once, then
 * any columns against them, the weights packed 48 columns at a time in each
 * task's scratch; bit for bit what q8_product_plain gives. */
extern const q8_path q8_path_vnni;
/* The same on AMX tiles (linear_q8_amx.c; where cpu_has_amx_int8(), 16 rows or more). */
extern const q8_path q8_path_amx;
/* One weight row quantized as kernel_q8_quantize does (identical results):
 * q[k] for k < n, the row's scale in *scale; returns Σ q. */
int32_t q8_quantize_weight_row_avx512(int8_t *q, const float *w, size_t n, float *scale);
/* q8_quantize_row, vectorised (identical results). */
float q8_quantize_row_avx512(uint8_t *u8, const float *x, size_t in_features, size_t depth);
/* count (≤ Q8_STRIP_COLUMNS) int8 rows of depth bytes (a multiple of 4) laid out as a Q8_LAYOUT_STRIPS block
 * at strip (64-byte aligned; its other columns left as they are). */
void q8_strip_from_rows_avx512(int8_t *strip, const int8_t *rows, size_t depth, size_t count);

#endif
