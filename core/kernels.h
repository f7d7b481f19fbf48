/* kernels.h — the numeric building blocks of every model: linear layers,
 * LayerNorm, activations, softmax, attention, normalisation.
 * Pure functions: outputs first, then inputs, then sizes; shapes in comments.
 * Each tuned kernel has a plain-loop twin named *_reference that the tests
 * use as the oracle. No model or file knowledge here. */
#ifndef GLIMPSE_CORE_KERNELS_H
#define GLIMPSE_CORE_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/kernel_types.h"
#include "core/pool.h"
#include "core/profile.h"


struct kernel_q8;
struct kernel_bf16x3;
/* A linear layer's weight [out_features, in_features], rows contiguous, in
 * the checkpoint's own type: float16 and bfloat16 stay 16-bit in memory
 * (half the bytes each caption step reads) and are widened exactly, a few
 * columns at a time, inside the products. q8 is its int8 twin when the model
 * was quantized (quantize.h), used in its place. */
typedef struct kernel_weight {
    const void *data;
    weight_type type;
    const struct kernel_q8 *q8;
    const struct kernel_bf16x3 *bf16x3; /* its float32 values split for AMX's bfloat16 tiles (bf16x3.h), or NULL */
} kernel_weight;
/* Makes a twin of weight[out_features, in_features] into set and points weight at it (q8_set_add_twin,
 * bf16x3_set_add): how a model hands its layers' weights to either kind of twin. */
typedef glimpse_status (*kernel_twin_add)(void *set, kernel_weight *weight, size_t out_features, size_t in_features);
static inline kernel_weight kernel_weight_f32(const float *data) {
    return (kernel_weight){.data = data, .type = WEIGHT_TYPE_F32};
}

/* Exact widening of one float16 / bfloat16 value, and of n values of any type. */
float kernel_f16_to_f32(uint16_t half);
float kernel_bf16_to_f32(uint16_t half);
void kernel_widen(float *out, const void *data, weight_type type, size_t n);
/* out[0..width) = row `row` of weight (rows width long) + add[0..width): an embedding lookup. */
void kernel_weight_row_add(float *out, const kernel_weight *weight, size_t row, size_t width, const float *add);

/* The linear layer, the one entry point every model calls:
 *   out[rows, out_features] (+)= in[rows, in_features] · weight[out_features, in_features]ᵀ + bias
 * "+=" when accumulate (a residual connection without a temporary and a
 * separate pass). The weight comes in whatever storage it has (kernel_weight):
 * float32; float16 or bfloat16, widened exactly inside the product; or, when
 * weight->q8 is set (quantize.h), its int8 twin, used in its place. bias may
 * be NULL. in rows are in_stride floats apart (>= in_features), out rows
 * out_stride apart (>= out_features); out must not alias in. Split over the
 * pool's threads by output columns (threads may be NULL: the caller alone).
 * Runs on the AVX-512 kernels where cpu.h says they run, else on OpenBLAS
 * (one row: sgemv), or on plain loops for 16-bit and int8 weights. */
void kernel_linear(float *out, size_t out_stride, const float *in, size_t in_stride, const kernel_weight *weight,
                   const float *bias, size_t rows, size_t in_features, size_t out_features, bool accumulate,
                   pool *threads);
/* Rows below this go to the few-rows products (dot products) in kernel_linear on AVX-512: each row's result is
 * then the one a one-row call gives, whatever rows come with it. */
#define KERNEL_LINEAR_FEW_ROWS 16
/* Whether kernel_linear over `rows` rows gives every row bit for bit as kernel_linear_rowwise (and a one-row
 * call) does: one row always; on AVX-512 fewer than KERNEL_LINEAR_FEW_ROWS; without it (OpenBLAS's sgemm for
 * several rows) only one. */
bool kernel_linear_rows_exact(size_t rows);
/* kernel_linear with every row computed as a one-row call computes it, at any row count (the few-rows
 * kernels throughout; without AVX-512, one sgemv per row over the same column blocks as a one-row call): a
 * batched caption step's rows then come out bit for bit as each picture's own steps would
 * (fusion/caption_batch.c). Each weight is still read once per 64 rows on the AVX-512 kernels; int8
 * products are row-exact at any count already. */
void kernel_linear_rowwise(float *out, size_t out_stride, const float *in, size_t in_stride,
                           const kernel_weight *weight, const float *bias, size_t rows, size_t in_features,
                           size_t out_features, bool accumulate, pool *threads);
/* A step that makes rows of a product's input just before the product reads them: a LayerNorm writing them from
 * the residual rows, an activation in place. run(argument, first, count) makes rows first .. first+count-1; it
 * may run on any thread and on any split of the rows, each row once. kind: what --profile counts it as where it
 * runs apart from the product. */
typedef struct kernel_rows_step {
    void (*run)(const void *argument, size_t first, size_t count);
    const void *argument;
    profile_kind kind;
} kernel_rows_step;
/* step over rows 0 .. rows-1 of `width` values, in blocks spread over the pool (a few a thread, none so small
 * that handing it over costs more than it does). */
void kernel_rows_run(const kernel_rows_step *step, size_t rows, size_t width, pool *threads);
/* kernel_linear on an input that `before` makes first (NULL: kernel_linear), the same results as kernel_rows_run
 * and then kernel_linear. Where the product's column tasks quantize its input in parts (int8 on VNNI, several rows,
 * several tasks), each part's rows are made by the task that quantizes them, just before: no pass, no wait for
 * the pool and no rows handed between the cores of their own (the step's time is then the product's, for
 * --profile); elsewhere before runs over all rows first. */
void kernel_linear_after(float *out, size_t out_stride, const float *in, size_t in_stride,
                         const kernel_rows_step *before, const kernel_weight *weight, const float *bias, size_t rows,
                         size_t in_features, size_t out_features, bool accumulate, pool *threads);
/* kernel_linear or kernel_linear_rowwise: the type of both. */
typedef void (*kernel_linear_fn)(float *out, size_t out_stride, const float *in, size_t in_stride,
                                 const kernel_weight *weight, const float *bias, size_t rows, size_t in_features,
                                 size_t out_features, bool accumulate, pool *threads);
/* kernel_linear's oracle: float32 weights, double sums, no accumulate. */
void kernel_linear_reference(float *out, size_t out_stride, const float *in, size_t in_stride,
                             const float *weight, const float *bias, size_t rows, size_t in_features,
                             size_t out_features);

/* The row-wise kernels below run vectorised where cpu.h says AVX-512 runs
 * and are otherwise their *_reference twin: the plain loop (statistics in
 * double, libm's erff and expf), which the tests hold the fast one to. */

/* out[rows, dim] = LayerNorm(in) · weight + bias, statistics over dim,
 * biased variance, as torch.nn.LayerNorm. out may equal in. */
void kernel_layernorm(float *out, const float *in, const float *weight, const float *bias, size_t rows,
                      size_t dim, float epsilon);
void kernel_layernorm_reference(float *out, const float *in, const float *weight, const float *bias, size_t rows,
                                size_t dim, float epsilon);

/* In place over n values. */
void kernel_gelu(float *x, size_t n);       /* exact: 0.5·x·(1 + erf(x/√2)) */
void kernel_gelu_tanh(float *x, size_t n);  /* the tanh approximation ("gelu_new"); AVX2 where it runs */
void kernel_gelu_tanh_reference(float *x, size_t n);
void kernel_gelu_tanh_avx2(float *x, size_t n); /* (activations_avx2.c; x86-64 builds, where cpu_has_avx2()) */
void kernel_quick_gelu(float *x, size_t n); /* x·sigmoid(1.702·x), OpenAI CLIP */
void kernel_gelu_reference(float *x, size_t n);
void kernel_quick_gelu_reference(float *x, size_t n);

/* x[n] += y[n] */
void kernel_add(float *x, const float *y, size_t n);
/* x[n] += a[n] · b[n], each product rounded to float before it is added (a depthwise conv's taps): on x86-64
 * the same bits vectorised as in the plain loop (which the portable build compiles without fused multiply-adds). */
void kernel_multiply_add(float *x, const float *a, const float *b, size_t n);

/* Softmax of each row of x[rows, n] in place. A row whose entries are all
 * -inf (every key masked) becomes all zeros. */
void kernel_softmax(float *x, size_t rows, size_t n);
void kernel_softmax_reference(float *x, size_t rows, size_t n);

/* Scales x[n] to unit L2 norm (left as is when the norm is 0). */
void kernel_l2_normalize(float *x, size_t n);

/* out[i] = Σ_d matrix[rows[i]·dim + d] · x[d] for i < n (rows NULL: row i):
 * a search's exact scores of its candidates, read straight from the stored
 * vectors (a mapped vectors.npy), and a query's centroid scores. Rows are
 * read in the order given (sorted, a mapped file is read forward), the next
 * ones prefetched while one is summed, in blocks over the pool's threads
 * (NULL: the caller alone). Every row must be below the matrix's count: the
 * caller checks. The reference sums in double; the AVX-512 kernel in float,
 * 64 lanes (within a few float rounding steps of it). */
void kernel_dot_rows(float *out, const float *matrix, size_t dim, const int64_t *rows, size_t n, const float *x,
                     pool *threads);
void kernel_dot_rows_reference(float *out, const float *matrix, size_t dim, const int64_t *rows, size_t n,
                               const float *x);

/* The int8 scan of stored codes (a search's first pass over the int8 twins
 * of its rows): for r in [first, first + count) of codes[rows, depth],
 *   dots[r] = Σ_k query[k] · codes[r·depth + k],  sums[r] = Σ_k codes[r·depth + k]
 * every code read once (sums let the caller compare a row's codes with the
 * sum it stored: a damaged code shows there). query: depth signed codes. The
 * sums are exact integers: AVX2 (kernel_dot_codes_avx2, dot_codes_avx2.c;
 * x86-64 builds, where cpu_has_avx2()) and the plain twin give the same. */
void kernel_dot_codes(int32_t *dots, int32_t *sums, const int8_t *query, const int8_t *codes, size_t depth,
                      size_t first, size_t count);
void kernel_dot_codes_reference(int32_t *dots, int32_t *sums, const int8_t *query, const int8_t *codes, size_t depth,
                                size_t first, size_t count);
void kernel_dot_codes_avx2(int32_t *dots, int32_t *sums, const int8_t *query, const int8_t *codes, size_t depth,
                           size_t first, size_t count);

/* x[n] · y[n] summed in double, in order; with y_l1, Σ |y[d]| too (the bound
 * a search puts on its int8 scores' error needs the row's L1 norm). A plain
 * loop, its own twin: a search's exact score of a candidate. */
double kernel_dot_double(const float *x, const float *y, size_t n, double *y_l1);

typedef enum kernel_mask {
    KERNEL_MASK_NONE = 0,  /* every query sees every key */
    KERNEL_MASK_CAUSAL = 1 /* query i sees keys 0..i (+ key_offset) */
} kernel_mask;

/* Where an attention kernel copies its probabilities, an optional output
 * (NULL: none): head h's row for query i goes to
 * out[h·head_stride + i·row_stride], the keys' probabilities first, then
 * zeros up to row_stride (keys ≤ row_stride): a cached step's row ends in the
 * causal zeros of the keys it cannot see yet. Copied right after the softmax,
 * whichever product computed the scores. */
typedef struct kernel_attention_rows {
    float *out;
    size_t head_stride, row_stride;
} kernel_attention_rows;

/* Multi-head scaled dot-product attention for one sequence.
 *   out[queries, heads·head_dim]          (row stride out_stride)
 *   probabilities                         (optional, see kernel_attention_rows)
 *   q[queries, heads·head_dim]            (row stride q_stride)
 *   k, v[keys, heads·head_dim]            (row strides kv_stride)
 * scores = q·kᵀ · scale, masked, softmax over keys, times v. With a causal
 * mask query i sees keys 0 .. i + (keys - queries), so a step with a cache
 * sees everything before it. scratch holds heads × queries × keys floats.
 * Heads run in parallel on the pool. */
void kernel_attention(float *out, size_t out_stride, const kernel_attention_rows *probabilities, const float *q,
                      size_t q_stride, const float *k, const float *v, size_t kv_stride, size_t queries, size_t keys,
                      size_t heads, size_t head_dim, float scale, kernel_mask mask, float *scratch, pool *threads);
/* The same with the products of scores and values on bfloat16 where cpu_has_avx512_bf16() (else exactly
 * kernel_attention): queries, keys, values and probabilities rounded to bfloat16 (to nearest, even), every sum,
 * the scores and the softmax float32 (attention_bf16_avx512.c). For the int8 models' encoder layers, whose
 * products are 8-bit already: 12 heads of 50, 77 (causal) and 577 tokens 1.3, 1.6 and 1.6 times as fast as
 * float32 on 2 threads of an AMD EPYC Zen 4. A decoder step's one query, and a call without a pool (whose
 * scratch the blocks need), run kernel_attention's way. */
void kernel_attention_bf16(float *out, size_t out_stride, const kernel_attention_rows *probabilities, const float *q,
                           size_t q_stride, const float *k, const float *v, size_t kv_stride, size_t queries,
                           size_t keys, size_t heads, size_t head_dim, float scale, kernel_mask mask, float *scratch,
                           pool *threads);
/* The same with grouped queries (Llama's and Qwen2's grouped-query attention): k and v hold heads / group
 * heads, and query head h attends through key/value head h / group, every head in one call (its heads
 * shared over the pool, as kernel_attention's). */
void kernel_attention_grouped(float *out, size_t out_stride, const kernel_attention_rows *probabilities,
                              const float *q, size_t q_stride, const float *k, const float *v, size_t kv_stride,
                              size_t queries, size_t keys, size_t heads, size_t group, size_t head_dim, float scale,
                              kernel_mask mask, float *scratch, pool *threads);
/* The same over keys stored transposed per head:
 * keys_t[(head·head_dim + d)·key_stride + j] is dimension d of key j. On
 * AVX-512 a caption step's few queries then have their scores as weighted
 * sums of rows rather than many short dot products (16 queries or more take
 * the panel kernel); without it OpenBLAS runs the same maths, slower than
 * kernel_attention on keys in rows, which is why the decoder stores keys
 * transposed only where cpu_has_avx512(). No mask. */
void kernel_attention_keys_transposed(float *out, size_t out_stride, const kernel_attention_rows *probabilities,
                                      const float *q, size_t q_stride, const float *keys_t, size_t key_stride,
                                      const float *v, size_t v_stride, size_t queries, size_t keys, size_t heads,
                                      size_t head_dim, float scale, float *scratch, pool *threads);
void kernel_attention_reference(float *out, size_t out_stride, const float *q, size_t q_stride,
                                const float *k, const float *v, size_t kv_stride, size_t queries, size_t keys,
                                size_t heads, size_t head_dim, float scale, kernel_mask mask);

#endif
