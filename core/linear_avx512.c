/* linear_avx512.c — the linear layer and attention's products on CPUs with
 * AVX-512 (linear.c's kernel_linear and attention.c's kernel_attention call these in place
 * of OpenBLAS where cpu_has_avx512()). Both kernels read the weights as the
 * checkpoint stores them ([out_features, in_features], rows contiguous):
 * nothing is packed or converted at load, so a model starts as fast as its
 * file can be mapped.
 *
 * Many rows (16 or more tokens: the vision and text towers, batches): the
 * input is the small side, so it is the one we rearrange. A block of up to
 * 48 rows × all features (49-64 rows left: two blocks of 32) is transposed
 * into a panel in the thread's scratch (pool.h), one feature per line of its rows; the micro-kernel then keeps 8
 * output columns × 48 rows in 24 registers and, for each feature, broadcasts one weight of each
 * of the 8 columns against the panel's line: 24 FMAs for 3 vector loads and 8
 * broadcasts, so the FMA units rather than the loads set the pace. Each weight
 * is read once per 48 rows. The 8 × 16 blocks of sums are transposed in
 * registers on the way out. A remainder of 1–4 rows (ViT's 50 tokens, BLIP's
 * 577) would waste most of a 16-row vector: 1 or 2 rows fold into the
 * micro-kernel's loop as dot products on the weights it is reading (pack_fold),
 * 3 or 4 take dot products against each micro-kernel's 8 columns right after
 * it, while its weights are in cache (remainder_micro). Either way the same
 * sums in the same order.
 *
 * Few rows (1–15: a caption step's beams): dot products. A tile of 4 input
 * rows × 6 weight rows keeps 24 vectors of partial sums while both run along
 * in_features, 16 at a time, prefetching the weight rows (these products are
 * bound by reading the weights), and each sum is reduced once at the end.
 *
 * Float16 and bfloat16 weights (kernel_weight) are read as stored too: the
 * dot products widen 16 of them per load, and the panel kernel widens one
 * micro-kernel's 8 columns into the scratch once per pass over as many panels
 * as the scratch holds. Either way the float32 arithmetic is unchanged, so the
 * results are bit for bit those of a float32 copy of the weights.
 *
 * Last, attention's P·V for a step's few queries: weighted sums of value rows.
 */
#include <immintrin.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/avx512_math.h"
#include "core/avx512_tiles.h"
#include "core/kernels_avx512.h"

/* ----------------------------------------------------------- 16-bit weights */

/* 16 weights from k on, widened exactly to float32 (float16: vcvtph2ps;
 * bfloat16: the 16 bits are the top half of the float). The 16-bit kernels
 * below are the float32 ones with this load: the same sums in the same order,
 * so a 16-bit weight gives bit for bit what its widened copy would. */
static inline __attribute__((always_inline)) __m512 load_weights(const void *weight, size_t k, const weight_type type) {
    if (type == WEIGHT_TYPE_F32) return _mm512_loadu_ps((const float *)weight + k);
    __m256i half = _mm256_loadu_si256((const __m256i *)((const uint16_t *)weight + k));
    if (type == WEIGHT_TYPE_F16) return _mm512_cvtph_ps(half);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(half), 16));
}

/* The last n < 16 weights from k on, zero beyond (no 16-bit masked loads without AVX-512 BW). */
static inline __attribute__((always_inline)) __m512 load_weights_tail(const void *weight, size_t k, size_t n,
                                                                       const weight_type type) {
    __mmask16 mask = (__mmask16)((1u << n) - 1);
    if (type == WEIGHT_TYPE_F32) return _mm512_maskz_loadu_ps(mask, (const float *)weight + k);
    uint16_t copy[16] = {0};
    memcpy(copy, (const char *)weight + 2 * k, 2 * n); /* (a file may place 16-bit values at odd addresses) */
    return load_weights(copy, 0, type);
}

void kernel_widen_avx512(float *out, const void *data, weight_type type, size_t n) {
    size_t k = 0;
    if (type == WEIGHT_TYPE_F16)
        for (; k + 16 <= n; k += 16) _mm512_storeu_ps(out + k, load_weights(data, k, WEIGHT_TYPE_F16));
    else
        for (; k + 16 <= n; k += 16) _mm512_storeu_ps(out + k, load_weights(data, k, WEIGHT_TYPE_BF16));
    if (k < n)
        _mm512_mask_storeu_ps(out + k, (__mmask16)((1u << (n - k)) - 1), load_weights_tail(data, k, n - k, type));
}

/* ------------------------------------------------------------ dot products */

#define DOT_ROWS 4
#define DOT_COLUMNS 6
/* Rows per block: their inputs stay in L2 while the block's weight rows stream past. */
#define DOT_ROW_BLOCK 64

/* sum[r][c] = Σ_k in[r][k] · weight[c][k] over k < depth for r < rows (at most DOT_ROWS), c < columns (at
 * most DOT_SUM_COLUMNS): 16 partial sums each, from zero. With `ahead` (bytes, or 0: none), one prefetch per
 * line that far ahead in each weight row. The dot-product tiles here and the panels' remainder rows share it. */
#define DOT_SUM_COLUMNS 8
static inline __attribute__((always_inline)) void dot_sums(__m512 sum[DOT_ROWS][DOT_SUM_COLUMNS], const float *in,
                                                            size_t in_stride, const void *weight,
                                                            size_t weight_stride, size_t depth, size_t ahead,
                                                            const int rows, const int columns,
                                                            const weight_type type) {
    const size_t element = weight_type_bytes(type);
    const char *bytes = weight;
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < columns; c++) sum[r][c] = _mm512_setzero_ps();
    size_t k = 0;
    for (; k + 16 <= depth; k += 16) {
        __m512 x[DOT_ROWS];
        for (int r = 0; r < rows; r++) x[r] = _mm512_loadu_ps(in + (size_t)r * in_stride + k);
        for (int c = 0; c < columns; c++) {
            if (ahead && (type == WEIGHT_TYPE_F32 || (k & 16) == 0)) /* one prefetch per 64-byte line */
                _mm_prefetch(bytes + ((size_t)c * weight_stride + k) * element + ahead, _MM_HINT_T0);
            __m512 w = load_weights(bytes + (size_t)c * weight_stride * element, k, type);
            if (rows > 1) __asm__("" : "+v"(w)); /* one load per weight vector, not one per row */
            for (int r = 0; r < rows; r++) sum[r][c] = _mm512_fmadd_ps(x[r], w, sum[r][c]);
        }
    }
    if (k < depth) { /* the last 1..15 features, masked */
        __mmask16 mask = (__mmask16)((1u << (depth - k)) - 1);
        __m512 x[DOT_ROWS];
        for (int r = 0; r < rows; r++) x[r] = _mm512_maskz_loadu_ps(mask, in + (size_t)r * in_stride + k);
        for (int c = 0; c < columns; c++) {
            __m512 w = load_weights_tail(bytes + (size_t)c * weight_stride * element, k, depth - k, type);
            for (int r = 0; r < rows; r++) sum[r][c] = _mm512_fmadd_ps(x[r], w, sum[r][c]);
        }
    }
}

/* out[r][c] (+)= scale · Σ_k in[r][k] · weight[c][k] over k < depth, for a rows × columns
 * tile; the bias is added with the first block of the depth (first == 1). A few rows read each weight once:
 * memory-bound, and the hardware's prefetching alone reaches two thirds of the bandwidth, so the weights are
 * prefetched. */
static inline __attribute__((always_inline)) void dot_tile(float *out, size_t out_stride, const float *in,
                                                            size_t in_stride, const void *weight,
                                                            size_t weight_stride, size_t depth, const float *bias,
                                                            float scale, int accumulate, int first, const int rows,
                                                            const int columns, const weight_type type) {
    __m512 sum[DOT_ROWS][DOT_SUM_COLUMNS];
    size_t ahead = kernel_dot_prefetch_distance(DOT_COLUMNS * weight_stride * weight_type_bytes(type));
    dot_sums(sum, in, in_stride, weight, weight_stride, depth, ahead, rows, columns, type);
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < columns; c++) {
            float *cell = out + (size_t)r * out_stride + c;
            float total = scale * _mm512_reduce_add_ps(sum[r][c]) + (first && bias ? bias[c] : 0.0f);
            *cell = accumulate ? *cell + total : total;
        }
}

/* Each (rows, columns) shape of a tile gets its own fully unrolled copy. */
#define DOT_CASE(R, C)                                                                                                 \
    case (R)*8 + (C):                                                                                                  \
        dot_tile(out, out_stride, in, in_stride, weight, weight_stride, depth, bias, scale, accumulate, first, R, C,   \
                 TYPE);                                                                                                \
        break;
#define DOT_CASES(R) DOT_CASE(R, 1) DOT_CASE(R, 2) DOT_CASE(R, 3) DOT_CASE(R, 4) DOT_CASE(R, 5) DOT_CASE(R, 6)

/* One copy of every tile shape per weight type. */
#define DOT_ANY_TILE(NAME, WEIGHT_TYPE)                                                                                \
    static void NAME(float *out, size_t out_stride, const float *in, size_t in_stride, const void *weight,             \
                     size_t weight_stride, size_t depth, const float *bias, float scale, int accumulate, int first,    \
                     int rows, int columns) {                                                                          \
        const weight_type TYPE = WEIGHT_TYPE;                                                                          \
        switch (rows * 8 + columns) {                                                                                  \
            DOT_CASES(1)                                                                                               \
            DOT_CASES(2)                                                                                               \
            DOT_CASES(3)                                                                                               \
            DOT_CASES(4)                                                                                               \
        default: break;                                                                                                \
        }                                                                                                              \
    }
DOT_ANY_TILE(dot_any_tile_f32, WEIGHT_TYPE_F32)
DOT_ANY_TILE(dot_any_tile_f16, WEIGHT_TYPE_F16)
DOT_ANY_TILE(dot_any_tile_bf16, WEIGHT_TYPE_BF16)

/* The dot-product kernel over rows × columns (weight and bias start at the first column). */
static void dot_block(float *out, size_t out_stride, const float *in, size_t in_stride, const void *weight,
                      weight_type type, size_t weight_stride, size_t depth, const float *bias, float scale,
                      int accumulate, int first, size_t rows, size_t columns) {
    void (*tile)(float *, size_t, const float *, size_t, const void *, size_t, size_t, const float *, float, int, int,
                 int, int) = type == WEIGHT_TYPE_F16    ? dot_any_tile_f16
                             : type == WEIGHT_TYPE_BF16 ? dot_any_tile_bf16
                                                   : dot_any_tile_f32;
    const char *bytes = weight;
    for (size_t r0 = 0; r0 < rows; r0 += DOT_ROW_BLOCK) {
        size_t row_end = r0 + DOT_ROW_BLOCK < rows ? r0 + DOT_ROW_BLOCK : rows;
        for (size_t c = 0; c < columns; c += DOT_COLUMNS) {
            int tile_columns = (int)(columns - c < DOT_COLUMNS ? columns - c : DOT_COLUMNS);
            for (size_t r = r0; r < row_end; r += DOT_ROWS) {
                int tile_rows = (int)(row_end - r < DOT_ROWS ? row_end - r : DOT_ROWS);
                tile(out + r * out_stride + c, out_stride, in + r * in_stride, in_stride,
                     bytes + c * weight_stride * weight_type_bytes(type), weight_stride, depth, bias ? bias + c : NULL,
                     scale, accumulate, first, tile_rows, tile_columns);
            }
        }
    }
}

/* ------------------------------------------------------------------ panels */

#define PANEL_VECTORS 3                    /* rows of a panel, in vectors of 16 */
#define PANEL_ROWS (16 * PANEL_VECTORS)    /* 48 */
#define STACK_PANEL_DEPTH 256              /* features per panel without scratch: 48 KiB on the stack */
#define MICRO_COLUMNS 8                    /* output columns per micro-kernel */
#define WEIGHT_PREFETCH 64                 /* features ahead that the micro-kernel prefetches weights */
#define REMAINDER_ROWS 4                   /* at most this many rows % 16 go to dot products */
#define FOLD_ROWS 2                        /* up to this many of them fold into the micro-kernel (below) */
#define FOLD_VECTORS 2                     /* vectors of folded inputs per 16 features */

/* The rows of the next panel of `left` rows: kernel_next_block's (49-64 rows, SigLIP's 64-token text, as two
 * panels of 32, not 48 and 16). In-process paired medians of alternating calls, AMD EPYC Zen 5, 2 threads, the same
 * bits: ViT-B/32-sized products at 64 rows 404 -> 455 GFLOP/s; SigLIP base's text tower at batch 1 0.953-0.960
 * (3 rounds of 30), at batch 8 (256 rows a thread) 0.997-1.010; CLIP ViT-B/32 vision at batch 8 (400 rows)
 * 0.989-0.995. Which panel a row falls in changes none of its sums. */
static size_t panel_group(size_t left) { return kernel_next_block(left, PANEL_ROWS); }

/* The rows of the next pass over the columns, of `left` rows, with room for `panels` panels a pass: one panel as
 * panel_group gives it, else as many panels of 48 as fit (kernel_product_avx512's passes, and their count that
 * kernel_product_column_passes gives the tasks that balance their columns pass by pass). */
static size_t pass_rows(size_t left, size_t panels) {
    return panels == 1 ? panel_group(left) : left < panels * PANEL_ROWS ? left : panels * PANEL_ROWS;
}

/* The fold. The micro-kernel's loop holds 8 columns × 48 rows of sums in 24 registers; one or two rows more as
 * dot products would take 16 more. Folded, each column's dot products with rows a and b take 2 vectors of sums,
 * kept in memory: for the 16 features from k, weight[c][k..k+15] times [a[k..k+7], b[k+8..k+15]] is added to
 * one and times [b[k..k+7], a[k+8..k+15]] to the other, once a column every 2 features, while those weights are
 * in L1 for the panel. Lane i of the sums is then what dot_sums' lane i holds for the same row (the same products
 * added in the same order), and fold_store reassembles them and reduces them as remainder_micro does: the same
 * bits. Run after the micro-kernel, the dot products read the weights again from L2 (at ViT-B/32's 50 rows, 76-85
 * µs of a 768 -> 2304 product's 830-930 on one thread, for 4% of its work). On an AMD EPYC (Zen 5), one thread,
 * 50 rows, folded against after: 768 -> 768 295 -> 284 µs, 3072 -> 768 1221-1244 -> 1208-1218, 768 -> 2304
 * 901-908 -> 887-891, 768 -> 3072 unchanged (1303-1313).
 *
 * pack_fold: the remainder's rows a and b (b zero for one row) for the fold: for each 16 features k..k+15,
 * [a[k..k+7], b[k+8..k+15]] and [b[k..k+7], a[k+8..k+15]], zero past depth (2 · depth rounded up to 16 floats). */
static void pack_fold(float *folded, const float *in, size_t in_stride, size_t rows, size_t depth) {
    for (size_t k = 0; k < depth; k += 16) {
        __mmask16 mask = (__mmask16)(depth - k >= 16 ? 0xFFFF : (1u << (depth - k)) - 1);
        __m512 a = _mm512_maskz_loadu_ps(mask, in + k);
        __m512 b = rows > 1 ? _mm512_maskz_loadu_ps(mask, in + in_stride + k) : _mm512_setzero_ps();
        _mm512_store_ps(folded + 2 * k, _mm512_mask_blend_ps((__mmask16)0xFF00, a, b));
        _mm512_store_ps(folded + 2 * k + 16, _mm512_mask_blend_ps((__mmask16)0xFF00, b, a));
    }
}

/* The fold's sums (micro_sums_on) for the depth's last features, short of 16, in every column. Apart from the
 * micro-kernel's loop, whose registers its code would take. */
static __attribute__((noinline)) void fold_tail(float *fold_sums, const float *folded, const float *weight,
                                                size_t column_stride, size_t depth, int columns) {
    size_t k0 = depth & ~(size_t)15;
    __mmask16 mask = (__mmask16)((1u << (depth - k0)) - 1);
    __m512 first_half = _mm512_load_ps(folded + 2 * k0), second_half = _mm512_load_ps(folded + 2 * k0 + 16);
    for (int c = 0; c < columns; c++) {
        __m512 w = _mm512_maskz_loadu_ps(mask, weight + (size_t)c * column_stride + k0);
        float *s0 = fold_sums + 16 * c, *s1 = fold_sums + 16 * MICRO_COLUMNS + 16 * c;
        _mm512_store_ps(s0, _mm512_fmadd_ps(w, first_half, _mm512_load_ps(s0)));
        _mm512_store_ps(s1, _mm512_fmadd_ps(w, second_half, _mm512_load_ps(s1)));
    }
}

/* panel[k][t] = in[t][k] for t < rows (zero up to vectors · 16), k < depth. */
static void pack_panel(float *panel, const float *in, size_t in_stride, size_t rows, size_t depth, int vectors) {
    size_t width = (size_t)vectors * 16;
    for (int block = 0; block < vectors; block++) {
        size_t first = (size_t)block * 16;
        size_t count = rows > first ? (rows - first < 16 ? rows - first : 16) : 0;
        size_t k = 0;
        if (count == 16)
            for (; k + 16 <= depth; k += 16) {
                __m512 r[16];
                for (int i = 0; i < 16; i++) {
                    const float *row = in + (first + (size_t)i) * in_stride + k;
                    _mm_prefetch((const char *)(row + 64), _MM_HINT_T0); /* 16 rows are 16 streams: help the prefetcher */
                    r[i] = _mm512_loadu_ps(row);
                }
                transpose16(r);
                for (int j = 0; j < 16; j++) _mm512_store_ps(panel + (k + (size_t)j) * width + first, r[j]);
            }
        for (; k < depth; k++)
            for (size_t i = 0; i < 16; i++)
                panel[k * width + first + i] = i < count ? in[(first + i) * in_stride + k] : 0.0f;
    }
}

/* out[t][c] (+)= scale · Σ_k panel[k][t] · weight[c·column_stride + k·depth_stride]
 * for t < rows, c < columns; the bias is added when the sums are written
 * rather than accumulated (first == 1: the first block of the depth).
 * next_weight (or NULL) is the next micro-kernel's weights, which the loop prefetches (below). */
/* sum[c][v] (lane i: row 16v + i) = Σ_k panel[k][16v + i] · weight[c·column_stride + k·depth_stride] for
 * c < columns, k < depth: the micro-kernel's loop, which the attention kernel shares. Its prefetches: up to
 * SPREAD_MAX_DEPTH features (depth_stride 1), the next micro-kernel's 8 columns whole, a line every second
 * feature, so that they are in L1 when it starts; deeper, or without a next, this one's 8 streams
 * WEIGHT_PREFETCH features ahead, running on into the next's first features. Weights read once from memory
 * (a batch of 1) with 8 columns 2-3 KiB apart are 8 short streams that the hardware's prefetcher learns
 * late: on an AMD EPYC (Zen 4), one thread, 50 rows, the whole next block took 768x768 from 108.2 to 111.3
 * GFLOP/s, 768x3072 106.7 to 109.3, 1152x1152 110.4 to 112.2, 1536x1536 110.0 to 112.3; at 2048 features (a
 * 64 KiB block, more than L1) it gained under 1%, at 3072 it lost 3-4%. Prefetching this block's streams
 * besides lost what it won. Two loops: with the choice inside one, GCC's code lost more than the prefetch won. */
#define SPREAD_MAX_DEPTH 1536
static inline __attribute__((always_inline)) void micro_sums_on(__m512 sum[MICRO_COLUMNS][PANEL_VECTORS],
                                                                 const float *panel, size_t depth,
                                                                 const float *weight, size_t column_stride,
                                                                 size_t depth_stride, const float *next_weight,
                                                                 const int vectors, const int columns,
                                                                 const float *folded, float *fold_sums) {
    const size_t width = (size_t)vectors * 16;
#define MICRO_STEP(K)                                                                                                  \
    do {                                                                                                               \
        __m512 x[PANEL_VECTORS];                                                                                       \
        for (int v = 0; v < vectors; v++) x[v] = _mm512_load_ps(panel + (K) * width + 16 * (size_t)v);              \
        for (int c = 0; c < columns; c++) {                                                                            \
            __m512 w = _mm512_set1_ps(weight[(size_t)c * column_stride + (K) * depth_stride]);                        \
            for (int v = 0; v < vectors; v++) sum[c][v] = _mm512_fmadd_ps(w, x[v], sum[c][v]);                       \
        }                                                                                                              \
    } while (0)
    /* with every 2 features, one column's fold of the whole 16 they fall in (all 8 by the 16th). Its sums stay in
     * memory, the compiler told nothing of them: GCC 12 kept them in registers and moved the panel's sums to the
     * stack, as it did for the fold of all columns after the 16th feature, and as a change as small as loading the
     * weights masked made it do again (each 50-row product took twice as long; test_kernel_loops fails on that) */
#define FOLD_COLUMN(K)                                                                                                 \
    do {                                                                                                               \
        size_t k0 = (K) & ~(size_t)15;                                                                                 \
        int c = (int)(((K) >> 1) & 7);                                                                                 \
        if (k0 + 16 <= depth && c < columns) {                                                                         \
            float *fs = fold_sums;                                                                                     \
            __asm__("" : "+r"(fs));                                                                                    \
            __m512 w = _mm512_loadu_ps(weight + (size_t)c * column_stride + k0);                                       \
            __m512 s0 = _mm512_fmadd_ps(w, _mm512_load_ps(folded + 2 * k0), _mm512_load_ps(fs + 16 * c));            \
            _mm512_store_ps(fs + 16 * c, s0);                                                                          \
            float *second = fs + 16 * MICRO_COLUMNS + 16 * c;                                                          \
            __m512 s1 = _mm512_fmadd_ps(w, _mm512_load_ps(folded + 2 * k0 + 16), _mm512_load_ps(second));              \
            _mm512_store_ps(second, s1);                                                                               \
        }                                                                                                              \
    } while (0)
    /* line K/2 of the next's 8 · depth/16, column by column within each line */
#define PREFETCH_SPREAD(K)                                                                                             \
    do {                                                                                                               \
        size_t line = (K) >> 1;                                                                                        \
        _mm_prefetch((const char *)(next_weight + (line & 7) * column_stride + (line >> 3) * 16), _MM_HINT_T0);       \
    } while (0)
    /* every 16 features, the weights' 8 streams a few lines ahead */
#define PREFETCH_STREAMS(K)                                                                                            \
    do {                                                                                                               \
        if (((K) & 15) == 0) {                                                                                         \
            size_t ahead = (K) + WEIGHT_PREFETCH;                                                                      \
            const float *from = ahead < depth ? weight + ahead * depth_stride                                          \
                                : next_weight ? next_weight + (ahead - depth) * depth_stride                           \
                                              : NULL;                                                                  \
            int streams = ahead < depth ? columns : MICRO_COLUMNS;                                                     \
            if (from)                                                                                                  \
                for (int c = 0; c < streams; c++)                                                                      \
                    _mm_prefetch((const char *)(from + (size_t)c * column_stride), _MM_HINT_T0);                       \
        }                                                                                                              \
    } while (0)
    if (folded) { /* (depth_stride 1) the loops below, with the fold */
        size_t k = 0;
        if (next_weight && depth <= SPREAD_MAX_DEPTH) {
            for (; k + 2 <= depth; k += 2) {
                PREFETCH_SPREAD(k);
                MICRO_STEP(k);
                MICRO_STEP(k + 1);
                FOLD_COLUMN(k);
            }
        } else {
            for (; k + 2 <= depth; k += 2) {
                PREFETCH_STREAMS(k);
                MICRO_STEP(k);
                MICRO_STEP(k + 1);
                FOLD_COLUMN(k);
            }
        }
        if (k < depth) MICRO_STEP(k);
        if (depth & 15) fold_tail(fold_sums, folded, weight, column_stride, depth, columns);
        return;
    }
    if (next_weight && depth_stride == 1 && depth <= SPREAD_MAX_DEPTH) {
        size_t k = 0;
        for (; k + 2 <= depth; k += 2) {
            PREFETCH_SPREAD(k);
            MICRO_STEP(k);
            MICRO_STEP(k + 1);
        }
        if (k < depth) MICRO_STEP(k);
        return;
    }
    for (size_t k = 0; k < depth; k++) {
        PREFETCH_STREAMS(k);
        MICRO_STEP(k);
    }
#undef MICRO_STEP
#undef FOLD_COLUMN
#undef PREFETCH_SPREAD
#undef PREFETCH_STREAMS
}

/* The same from sums of zero. */
static inline __attribute__((always_inline)) void micro_sums(__m512 sum[MICRO_COLUMNS][PANEL_VECTORS],
                                                              const float *panel, size_t depth, const float *weight,
                                                              size_t column_stride, size_t depth_stride,
                                                              const float *next_weight, const int vectors,
                                                              const int columns, const float *folded,
                                                              float *fold_sums) {
    for (int c = 0; c < columns; c++)
        for (int v = 0; v < vectors; v++) sum[c][v] = _mm512_setzero_ps();
    micro_sums_on(sum, panel, depth, weight, column_stride, depth_stride, next_weight, vectors, columns, folded,
                  fold_sums);
}

/* The 8 totals of 8 vectors' lanes, in order (total c = Σ of v[c]'s 16 lanes). */
static inline __attribute__((always_inline)) __m256 sums8(const __m512 v[MICRO_COLUMNS]) {
    __m256 h[MICRO_COLUMNS];
    for (int c = 0; c < MICRO_COLUMNS; c++)
        h[c] = _mm256_add_ps(_mm512_castps512_ps256(v[c]),
                             _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v[c]), 1)));
    __m256 t0 = _mm256_hadd_ps(h[0], h[1]), t1 = _mm256_hadd_ps(h[2], h[3]);
    __m256 t2 = _mm256_hadd_ps(h[4], h[5]), t3 = _mm256_hadd_ps(h[6], h[7]);
    __m256 u0 = _mm256_hadd_ps(t0, t1), u1 = _mm256_hadd_ps(t2, t3); /* lanes 0-3 and 4-7: halves of 0-3, 4-7 */
    return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}

/* out[r][c] (+)= scale · total[r][c] (+ bias[c] when first) for r < rows (1 or 2), c < columns (at most 8). */
static inline __attribute__((always_inline)) void store_rows8(float *out, size_t out_stride, const __m256 total[2],
                                                               int rows, int columns, const float *bias, float scale,
                                                               int accumulate, int first) {
    __mmask16 lanes = (__mmask16)((1u << columns) - 1); /* (masked 256-bit vectors would need AVX-512 VL) */
    __m512 b = first && bias ? _mm512_maskz_loadu_ps(lanes, bias) : _mm512_setzero_ps();
    for (int r = 0; r < rows; r++) {
        float *row = out + (size_t)r * out_stride;
        __m512 value = _mm512_add_ps(_mm512_mul_ps(_mm512_zextps256_ps512(total[r]), _mm512_set1_ps(scale)), b);
        if (accumulate) value = _mm512_add_ps(_mm512_maskz_loadu_ps(lanes, row), value);
        _mm512_mask_storeu_ps(row, lanes, value);
    }
}

/* The fold's rows (1 or 2) from its sums (fold_sums[v][c][16], v < FOLD_VECTORS, c < MICRO_COLUMNS, zero past
 * columns) as store_rows8 writes them: row a is lanes 0-7 of the first sums and 8-15 of the second, row b the other
 * halves. */
static inline __attribute__((always_inline)) void fold_store(float *out, size_t out_stride, const float *fold_sums,
                                                              int rows, int columns, const float *bias, float scale,
                                                              int accumulate, int first) {
    __m512 rows_a[MICRO_COLUMNS], rows_b[MICRO_COLUMNS];
    for (int c = 0; c < MICRO_COLUMNS; c++) {
        __m512 first_sums = _mm512_load_ps(fold_sums + 16 * c);
        __m512 second = _mm512_load_ps(fold_sums + 16 * MICRO_COLUMNS + 16 * c);
        rows_a[c] = _mm512_mask_blend_ps((__mmask16)0xFF00, first_sums, second);
        rows_b[c] = _mm512_mask_blend_ps((__mmask16)0xFF00, second, first_sums);
    }
    __m256 total[2] = {sums8(rows_a), sums8(rows_b)};
    store_rows8(out, out_stride, total, rows, columns, bias, scale, accumulate, first);
}

static inline __attribute__((always_inline)) void micro(float *out, size_t out_stride, const float *panel,
                                                         size_t depth, const float *weight, size_t column_stride,
                                                         size_t depth_stride, const float *next_weight,
                                                         const float *bias, float scale, int accumulate, int first,
                                                         size_t rows, const int vectors, const int columns,
                                                         const float *folded, float *fold_out, int fold_rows) {
    __m512 sum[MICRO_COLUMNS][PANEL_VECTORS];
    float fold_sums[FOLD_VECTORS * MICRO_COLUMNS * 16] __attribute__((aligned(64)));
    if (folded) memset(fold_sums, 0, sizeof fold_sums);
    /* the cells this call writes, asked for now to own (prefetchw), so that they arrive during the sums: the layer
     * after read them on every core, and the stores at the end waited for the other core to give each line up
     * (ViT-B/32 float32 at batch 8, 2 threads on an AMD EPYC: 2-5% a picture, alternating in one process) */
    for (size_t r = 0; r < rows; r++) {
        kernel_prefetch_to_write(out + r * out_stride);
        kernel_prefetch_to_write(out + r * out_stride + columns - 1);
    }
    micro_sums(sum, panel, depth, weight, column_stride, depth_stride, next_weight, vectors, columns, folded,
               fold_sums);
    if (folded) fold_store(fold_out, out_stride, fold_sums, fold_rows, columns, bias, scale, accumulate, first);
    if (scale != 1.0f)
        for (int c = 0; c < columns; c++)
            for (int v = 0; v < vectors; v++) sum[c][v] = _mm512_mul_ps(sum[c][v], _mm512_set1_ps(scale));
    if (first && bias)
        for (int c = 0; c < columns; c++) {
            __m512 b = _mm512_set1_ps(bias[c]);
            for (int v = 0; v < vectors; v++) sum[c][v] = _mm512_add_ps(sum[c][v], b);
        }
    for (int v = 0; v < vectors; v++) {
        size_t first = (size_t)v * 16, count = rows - first < 16 ? rows - first : 16;
        __m512 s[MICRO_COLUMNS];
        for (int c = 0; c < columns; c++) s[c] = sum[c][v];
        store_tile(out + first * out_stride, out_stride, s, columns, count, accumulate);
    }
}

#define MICRO_CASE(V, C)                                                                                               \
    case (V)*16 + (C):                                                                                                 \
        micro(out, out_stride, panel, depth, weight, column_stride, depth_stride, next_weight, bias, scale,           \
              accumulate, first, rows, V, C, folded, fold_out, fold_rows);                                             \
        break;
#define MICRO_CASES(V)                                                                                                 \
    MICRO_CASE(V, 1)                                                                                                   \
    MICRO_CASE(V, 2)                                                                                                   \
    MICRO_CASE(V, 3)                                                                                                   \
    MICRO_CASE(V, 4) MICRO_CASE(V, 5) MICRO_CASE(V, 6) MICRO_CASE(V, 7) MICRO_CASE(V, 8)

static void micro_any(float *out, size_t out_stride, const float *panel, size_t depth, const float *weight,
                      size_t column_stride, size_t depth_stride, const float *next_weight, const float *bias,
                      float scale, int accumulate, int first, size_t rows, int vectors, int columns,
                      const float *folded, float *fold_out, int fold_rows) {
    switch (vectors * 16 + columns) {
        MICRO_CASES(1)
        MICRO_CASES(2)
        MICRO_CASES(3)
    default: break;
    }
}

/* The remainder rows below keep one micro-kernel's columns of sums in dot_sums' rows. */
_Static_assert(DOT_SUM_COLUMNS == MICRO_COLUMNS, "dot_sums' rows must hold a micro-kernel's columns");

/* The remainder rows (1–4, depth_stride 1: 3 or 4 of the panels', which fold 1 or 2, and all of chained_product's)
 * against one micro-kernel's columns (up to 8, column_stride apart) right after the panels took them, while those
 * weights are in cache: dot products along the depth, two rows at a time (16 sums), each row's 8 totals reduced
 * together and written as one masked vector. At ViT-B/32's 50 rows, the 2 left over had taken 12–20% of a
 * product's time for 4% of its work through the dot-product kernel, run once per 24 columns (their weights read
 * again from farther out, each weight vector loaded once per row). 16-bit weights are widened as they are
 * loaded: the same sums as their float32 copy's. */
static inline __attribute__((always_inline)) void remainder_rows_pair(const float *in, size_t in_stride,
                                                                      const void *weight, size_t column_stride,
                                                                      size_t depth, const int rows,
                                                                      const int columns, const weight_type type,
                                                                      __m256 total[2]) {
    __m512 sum[DOT_ROWS][DOT_SUM_COLUMNS];
    dot_sums(sum, in, in_stride, weight, column_stride, depth, 0, rows, columns, type);
    for (int c = columns; c < MICRO_COLUMNS; c++) sum[0][c] = sum[1][c] = _mm512_setzero_ps();
    for (int r = 0; r < rows; r++) total[r] = sums8(sum[r]);
}

#define REMAINDER_CASE(R, C)                                                                                           \
    case (R)*16 + (C):                                                                                                 \
        remainder_rows_pair(in, in_stride, weight, column_stride, depth, R, C, TYPE, total);                          \
        break;
#define REMAINDER_CASES(R)                                                                                             \
    REMAINDER_CASE(R, 1)                                                                                               \
    REMAINDER_CASE(R, 2)                                                                                               \
    REMAINDER_CASE(R, 3)                                                                                               \
    REMAINDER_CASE(R, 4) REMAINDER_CASE(R, 5) REMAINDER_CASE(R, 6) REMAINDER_CASE(R, 7) REMAINDER_CASE(R, 8)

/* out[r][c] (+)= scale · Σ_k in[r][k] · weight[c·column_stride + k] (+ bias[c] when first) for r < rows
 * (at most REMAINDER_ROWS), c < columns (at most MICRO_COLUMNS); one copy per weight type. */
#define REMAINDER_MICRO(NAME, WEIGHT_TYPE)                                                                             \
    static void NAME(float *out, size_t out_stride, const float *in, size_t in_stride, const void *weight,             \
                     size_t column_stride, size_t depth, const float *bias, float scale, int accumulate, int first,    \
                     size_t rows, int columns) {                                                                       \
        const weight_type TYPE = WEIGHT_TYPE;                                                                          \
        for (size_t r0 = 0; r0 < rows; r0 += 2, in += 2 * in_stride) {                                                 \
            int pair = rows - r0 < 2 ? 1 : 2;                                                                          \
            __m256 total[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};                                              \
            switch (pair * 16 + columns) {                                                                             \
                REMAINDER_CASES(1)                                                                                     \
                REMAINDER_CASES(2)                                                                                     \
            default: return;                                                                                           \
            }                                                                                                          \
            store_rows8(out + r0 * out_stride, out_stride, total, pair, columns, bias, scale, accumulate, first);      \
        }                                                                                                              \
    }
REMAINDER_MICRO(remainder_micro_f32, WEIGHT_TYPE_F32)
REMAINDER_MICRO(remainder_micro_f16, WEIGHT_TYPE_F16)
REMAINDER_MICRO(remainder_micro_bf16, WEIGHT_TYPE_BF16)

static void remainder_micro(float *out, size_t out_stride, const float *in, size_t in_stride, const void *weight,
                            weight_type type, size_t column_stride, size_t depth, const float *bias, float scale,
                            int accumulate, int first, size_t rows, int columns) {
    void (*kernel)(float *, size_t, const float *, size_t, const void *, size_t, size_t, const float *, float, int,
                   int, size_t, int) = type == WEIGHT_TYPE_F16    ? remainder_micro_f16
                                       : type == WEIGHT_TYPE_BF16 ? remainder_micro_bf16
                                                                  : remainder_micro_f32;
    kernel(out, out_stride, in, in_stride, weight, column_stride, depth, bias, scale, accumulate, first, rows, columns);
}

/* widened[c][k] = weight[c][k] for c < columns, k < depth (16-bit weights,
 * column_stride apart, for the micro-kernel's broadcasts). With next (or NULL: none), the same columns of the
 * next micro-kernel are asked for line by line while these are widened: its rows are short streams the
 * hardware's prefetcher has not learned by the time they are read (43 rows of BLIP-2's prompt through OPT's
 * 2560 -> 10240 read the weights at 5-6 GB/s without it, 7% slower). */
static void widen_columns(float *widened, const void *weight, weight_type type, size_t column_stride, size_t columns,
                          size_t depth, const void *next) {
    const size_t row_bytes = column_stride * weight_type_bytes(type); /* (2 bytes a value: 16-bit types only) */
    for (size_t c = 0; c < columns; c++) {
        const char *row = (const char *)weight + c * row_bytes;
        float *to = widened + c * depth;
        size_t k = 0;
        if (next) { /* 32 values (one 64-byte line) a step, asking for the next micro-kernel's line */
            const char *ahead = (const char *)next + c * row_bytes;
            for (; k + 32 <= depth; k += 32) {
                _mm_prefetch(ahead + 2 * k, _MM_HINT_T0);
                _mm512_storeu_ps(to + k, load_weights(row, k, type));
                _mm512_storeu_ps(to + k + 16, load_weights(row, k + 16, type));
            }
        }
        kernel_widen_avx512(to + k, row + 2 * k, type, depth - k);
    }
}

/* ------------------------------------------------ 16-bit weights, many rows */

/* Rows from which 16-bit weights take the chained kernel: two panels or more. */
#define CHAIN_MIN_ROWS (2 * PANEL_ROWS)
/* The depth of a block: with the pool's scratch, 5 panels (240 rows) a pass. Measured on llava-1.5-7b's shapes
 * (608 rows, 4096 -> 11008 and 11008 -> 4096, AMD EPYC, 2 threads) against blocks of 256 and 400 with up to 21
 * and 13 panels, and 512, 768, 1536 and 2048 with fewer: the fastest, 5-15% above one panel of the whole depth. */
#define CHAIN_DEPTH 1024

/* s[c] (row i in lane i) = tile[i][c] for c < columns, i < count (zero beyond): store_tile's inverse. */
static inline __attribute__((always_inline)) void load_tile(__m512 s[MICRO_COLUMNS], const float *tile,
                                                             size_t stride, int columns, size_t count) {
    if (columns == MICRO_COLUMNS && count == 16) {
        load_8x16(s, tile, stride);
        return;
    }
    float spill[MICRO_COLUMNS][16] __attribute__((aligned(64))) = {{0}};
    for (size_t i = 0; i < count; i++)
        for (int c = 0; c < columns; c++) spill[c][i] = tile[i * stride + c];
    for (int c = 0; c < columns; c++) s[c] = _mm512_load_ps(spill[c]);
}

/* micro's sums over one block of the depth, carried on from the sums the block before left in out (unless
 * `start`): after the last block (`finish`) they are scaled and get the bias, exactly as one block of the whole depth
 * gives them. */
static inline __attribute__((always_inline)) void micro_chain(float *out, size_t out_stride, const float *panel,
                                                               size_t depth, const float *weight, int start,
                                                               int finish, float scale, const float *bias,
                                                               size_t rows, const int vectors, const int columns) {
    __m512 sum[MICRO_COLUMNS][PANEL_VECTORS], s[MICRO_COLUMNS];
    for (int v = 0; v < vectors; v++) {
        size_t first = (size_t)v * 16, count = rows - first < 16 ? rows - first : 16;
        if (start) load_tile(s, out + first * out_stride, out_stride, columns, count);
        for (int c = 0; c < columns; c++) sum[c][v] = start ? s[c] : _mm512_setzero_ps();
    }
    micro_sums_on(sum, panel, depth, weight, (size_t)depth, 1, NULL, vectors, columns, NULL, NULL);
    for (int v = 0; v < vectors; v++) {
        size_t first = (size_t)v * 16, count = rows - first < 16 ? rows - first : 16;
        for (int c = 0; c < columns; c++) {
            s[c] = sum[c][v];
            if (finish && scale != 1.0f) s[c] = _mm512_mul_ps(s[c], _mm512_set1_ps(scale));
            if (finish && bias) s[c] = _mm512_add_ps(s[c], _mm512_set1_ps(bias[c]));
        }
        store_tile(out + first * out_stride, out_stride, s, columns, count, 0);
    }
}

#define CHAIN_CASE(V, C)                                                                                               \
    case (V)*16 + (C):                                                                                                 \
        micro_chain(out, out_stride, panel, depth, weight, start, finish, scale, bias, rows, V, C);                    \
        break;
#define CHAIN_CASES(V)                                                                                                 \
    CHAIN_CASE(V, 1)                                                                                                   \
    CHAIN_CASE(V, 2)                                                                                                   \
    CHAIN_CASE(V, 3)                                                                                                   \
    CHAIN_CASE(V, 4) CHAIN_CASE(V, 5) CHAIN_CASE(V, 6) CHAIN_CASE(V, 7) CHAIN_CASE(V, 8)

static void chain_any(float *out, size_t out_stride, const float *panel, size_t depth, const float *weight, int start,
                      int finish, float scale, const float *bias, size_t rows, int vectors, int columns) {
    switch (vectors * 16 + columns) {
        CHAIN_CASES(1)
        CHAIN_CASES(2)
        CHAIN_CASES(3)
    default: break;
    }
}

/* The product of 16-bit weights (depth_stride 1) over panel_rows rows into out (not added to it), as many rows a
 * pass as the scratch holds in panels of a block of the depth: each micro-kernel's columns are widened once a block
 * and a pass for all those panels, where one panel of the whole depth a pass widened, and read from memory, every
 * weight once per 48 rows (15% of llava-1.5-7b's prompt under perf). The sums run on from block to block through
 * out, so every value is bit for bit the one-block kernel's. False (nothing done) where the scratch cannot hold
 * two panels of a block. */
static bool chained_product(const kernel_product *p, const char *w, const float *in, float *out, const float *b,
                            size_t columns, size_t panel_rows, float *scratch, size_t scratch_floats) {
    size_t depth_total = p->depth, cs = p->column_stride, in_stride = p->in_stride, out_stride = p->out_stride;
    size_t element = weight_type_bytes(p->weight_type);
    size_t block = depth_total < CHAIN_DEPTH ? depth_total : CHAIN_DEPTH;
    if (scratch_floats < (2 * PANEL_ROWS + MICRO_COLUMNS) * block) return false; /* (two panels a pass at least) */
    size_t panels = (scratch_floats - MICRO_COLUMNS * block) / (PANEL_ROWS * block);
    if (panels > (panel_rows + PANEL_ROWS - 1) / PANEL_ROWS) panels = (panel_rows + PANEL_ROWS - 1) / PANEL_ROWS;
    float *panel = scratch, *widened = scratch + panels * PANEL_ROWS * block;
    for (size_t r0 = 0; r0 < panel_rows; r0 += panels * PANEL_ROWS) {
        size_t pass = panel_rows - r0 < panels * PANEL_ROWS ? panel_rows - r0 : panels * PANEL_ROWS;
        for (size_t k0 = 0; k0 < depth_total; k0 += block) {
            size_t depth = depth_total - k0 < block ? depth_total - k0 : block;
            int start = k0 > 0, finish = k0 + depth == depth_total;
            for (size_t t = 0, group; t < pass; t += group) {
                group = panel_group(pass - t);
                pack_panel(panel + t * block, in + (r0 + t) * in_stride + k0, in_stride, group, depth,
                           (int)((group + 15) / 16));
            }
            for (size_t c = 0; c < columns; c += MICRO_COLUMNS) {
                int count = (int)(columns - c < MICRO_COLUMNS ? columns - c : MICRO_COLUMNS);
                widen_columns(widened, w + (c * cs + k0) * element, p->weight_type, cs, (size_t)count, depth,
                              c + MICRO_COLUMNS < columns ? w + ((c + MICRO_COLUMNS) * cs + k0) * element : NULL);
                for (size_t t = 0, group; t < pass; t += group) {
                    group = panel_group(pass - t);
                    chain_any(out + (r0 + t) * out_stride + c, out_stride, panel + t * block, depth, widened, start,
                              finish, p->scale, b && finish ? b + c : NULL, group, (int)((group + 15) / 16), count);
                }
            }
        }
    }
    return true;
}

/* The float32 panels' depth: the stack's, or as deep as the scratch holds 48 rows (and the folded rows) of. */
static size_t f32_panel_depth(size_t scratch_floats, size_t fold_width, size_t fold_spare) {
    size_t fits = scratch_floats > fold_spare ? (scratch_floats - fold_spare) / (PANEL_ROWS + fold_width) : 0;
    return fits > STACK_PANEL_DEPTH ? fits : STACK_PANEL_DEPTH;
}

/* The product's rows left to dot products (a few past the panels), and whether they fold into the micro-kernel. */
static size_t remainder_rows(const kernel_product *p, int *fold) {
    size_t remainder = p->rows % 16 <= REMAINDER_ROWS && p->depth_stride == 1 ? p->rows % 16 : 0;
    *fold = remainder && remainder <= FOLD_ROWS;
    return remainder;
}

size_t kernel_product_column_passes(const kernel_product *p, size_t scratch_floats) {
    if (p->rows < 16 || p->rowwise || p->weight_type != WEIGHT_TYPE_F32) return 0;
    int fold;
    size_t panel_rows = p->rows - remainder_rows(p, &fold);
    if (f32_panel_depth(scratch_floats, fold ? FOLD_VECTORS : 0, fold ? 48 : 0) < p->depth) return 0;
    size_t passes = 0; /* (float32: a panel a pass) */
    for (size_t left = panel_rows; left; left -= pass_rows(left, 1)) passes++;
    return passes;
}

/* One pass over (up to) `pass` rows from r0 and one block of the depth (k0, depth), its panels packed. */
typedef struct panel_pass {
    const kernel_product *p;
    const char *w; /* the weights (column 0) */
    size_t element, r0, pass, k0, depth, panel_depth, panel_rows, remainder;
    float *panel, *widened, *folded;
    int first, accumulate, last, fold;
} panel_pass;

/* Columns c .. end of the pass, a micro-kernel's at a time, each asking for the next one's weights (after the
 * last: column `next`'s, where it is not KERNEL_NO_COLUMN). */
#define KERNEL_NO_COLUMN ((size_t)-1)
static void pass_columns(const panel_pass *s, size_t c, size_t end, size_t next) {
    const kernel_product *p = s->p;
    size_t cs = p->column_stride, ds = p->depth_stride, in_stride = p->in_stride, out_stride = p->out_stride;
    size_t depth = s->depth, pass = s->pass, r0 = s->r0, k0 = s->k0, panel_rows = s->panel_rows;
    weight_type type = p->weight_type;
    for (; c < end; c += MICRO_COLUMNS) {
        int count = (int)(end - c < MICRO_COLUMNS ? end - c : MICRO_COLUMNS);
        size_t after = c + MICRO_COLUMNS < end ? c + MICRO_COLUMNS : next; /* (the next micro-kernel's column) */
        const float *weights = (const float *)(s->w + (c * cs + k0 * ds) * s->element), *ahead = NULL;
        const char *following = after == KERNEL_NO_COLUMN ? NULL : s->w + (after * cs + k0 * ds) * s->element;
        size_t column_stride = cs, depth_stride = ds;
        if (type != WEIGHT_TYPE_F32) { /* (16-bit weights: depth_stride 1) */
            widen_columns(s->widened, weights, type, cs, (size_t)count, depth, following);
            weights = s->widened, column_stride = depth, depth_stride = 1;
        } else {
            ahead = (const float *)following;
        }
        const float *b = p->bias ? p->bias + c : NULL;
        for (size_t t = 0, group; t < pass; t += group) {
            group = panel_group(pass - t);
            int folds = s->fold && s->last && t + group == pass; /* (the remainder with the last panel) */
            micro_any(p->out + (r0 + t) * out_stride + c, out_stride, s->panel + t * s->panel_depth, depth, weights,
                      column_stride, depth_stride, ahead, b, p->scale, s->accumulate, s->first, group,
                      (int)((group + 15) / 16), count, folds ? s->folded : NULL,
                      p->out + panel_rows * out_stride + c, (int)s->remainder);
        }
        if (s->remainder && s->last && !s->fold) /* the last rows, while these columns' weights are in cache */
            remainder_micro(p->out + panel_rows * out_stride + c, out_stride, p->in + panel_rows * in_stride + k0,
                            in_stride, weights, WEIGHT_TYPE_F32, column_stride, depth, b, p->scale, s->accumulate,
                            s->first, s->remainder, count);
    }
}

void kernel_product_avx512(const kernel_product *p, size_t first_column, size_t columns, float *scratch,
                           size_t scratch_floats) {
    size_t rows = p->rows, depth_total = p->depth, cs = p->column_stride;
    size_t in_stride = p->in_stride, out_stride = p->out_stride;
    weight_type type = p->weight_type;
    size_t element = weight_type_bytes(type);
    const char *w = (const char *)p->weight + first_column * cs * element;
    const float *in = p->in, *b = p->bias ? p->bias + first_column : NULL;
    float *out = p->out + first_column;
    if (rows < 16 || p->rowwise) { /* (kernel_product: only with depth_stride 1) */
        dot_block(out, out_stride, in, in_stride, w, type, cs, depth_total, b, p->scale, p->accumulate, 1, rows,
                  columns);
        return;
    }
    int fold;
    size_t remainder = remainder_rows(p, &fold), panel_rows = rows - remainder;
    if (type != WEIGHT_TYPE_F32 && !p->accumulate && scratch && panel_rows >= CHAIN_MIN_ROWS &&
        chained_product(p, w, in, out, b, columns, panel_rows, scratch, scratch_floats)) {
        /* the last rows, as the one-block kernel gives them */
        for (size_t c = 0; remainder && c < columns; c += MICRO_COLUMNS)
            remainder_micro(out + panel_rows * out_stride + c, out_stride, in + panel_rows * in_stride, in_stride,
                            w + c * cs * element, type, cs, depth_total, b ? b + c : NULL, p->scale, p->accumulate, 1,
                            remainder, (int)(columns - c < MICRO_COLUMNS ? columns - c : MICRO_COLUMNS));
        return;
    }
    /* the whole depth in one panel where the scratch has room, so every sum is
     * written once; 16-bit weights also need room for one micro-kernel's
     * columns widened to float32, and a remainder that folds into the micro-kernel for its folded inputs (pack_fold:
     * 2 floats a feature, and fold_spare's 48 more: up to 30 for the depth rounded up to 16 features, up to 15 to
     * align them behind the widened columns) */
    float stack_panel[STACK_PANEL_DEPTH * PANEL_ROWS] __attribute__((aligned(64)));
    float stack_widened[STACK_PANEL_DEPTH * MICRO_COLUMNS] __attribute__((aligned(64)));
    float stack_folded[STACK_PANEL_DEPTH * FOLD_VECTORS] __attribute__((aligned(64)));
    float *panel = stack_panel, *widened = stack_widened, *folded = stack_folded;
    size_t fold_width = fold ? FOLD_VECTORS : 0, fold_spare = fold ? 48 : 0;
    size_t panel_depth = STACK_PANEL_DEPTH, panels = 1; /* panels per pass over the columns */
    if (scratch && scratch_floats <= fold_spare) scratch = NULL;
    if (type == WEIGHT_TYPE_F32) {
        size_t deepest = f32_panel_depth(scratch_floats, fold_width, fold_spare);
        if (scratch && deepest > panel_depth) {
            panel_depth = deepest;
            panel = scratch;
            folded = scratch + PANEL_ROWS * panel_depth;
        }
    } else if (scratch && (scratch_floats - fold_spare) / (PANEL_ROWS + MICRO_COLUMNS + fold_width) > panel_depth) {
        /* 16-bit weights: each micro-kernel's columns are widened once per
         * pass, so a pass takes as many panels as the scratch holds beside them */
        panel_depth = (scratch_floats - fold_spare) / (PANEL_ROWS + MICRO_COLUMNS + fold_width);
        if (panel_depth >= depth_total) {
            panel_depth = depth_total;
            panels = (scratch_floats - fold_spare - (MICRO_COLUMNS + fold_width) * depth_total) /
                     (PANEL_ROWS * depth_total);
        }
        panel = scratch;
        widened = scratch + panels * PANEL_ROWS * panel_depth;
        folded = (float *)(((uintptr_t)(widened + MICRO_COLUMNS * panel_depth) + 63) & ~(uintptr_t)63);
    }
    kernel_columns *source = p->columns; /* (only where kernel_product_column_passes: one block of the depth) */
    panel_pass s = {.p = p, .w = (const char *)p->weight, .element = element, .panel_depth = panel_depth,
                    .panel_rows = panel_rows, .remainder = remainder, .panel = panel, .widened = widened,
                    .folded = folded, .fold = fold};
    for (size_t r0 = 0, pass_index = 0; r0 < panel_rows; r0 += s.pass, pass_index++) {
        s.r0 = r0, s.pass = pass_rows(panel_rows - r0, panels);
        s.last = r0 + s.pass == panel_rows;
        for (size_t k0 = 0; k0 < depth_total; k0 += panel_depth) {
            s.k0 = k0, s.depth = depth_total - k0 < panel_depth ? depth_total - k0 : panel_depth;
            s.first = k0 == 0, s.accumulate = p->accumulate || !s.first;
            for (size_t t = 0, group; t < s.pass; t += group) {
                group = panel_group(s.pass - t);
                pack_panel(panel + t * panel_depth, in + (r0 + t) * in_stride + k0, in_stride, group, s.depth,
                           (int)((group + 15) / 16));
            }
            if (fold && s.last) pack_fold(folded, in + panel_rows * in_stride + k0, in_stride, remainder, s.depth);
            if (!source) {
                pass_columns(&s, first_column, first_column + columns, KERNEL_NO_COLUMN);
                continue;
            }
            size_t pass = pass_index, c, count, next, next_count;
            bool more = source->take(source, pass, &c, &count);
            while (more) { /* (the next columns taken first, so that the last micro-kernel asks for their weights) */
                more = source->take(source, pass, &next, &next_count);
                pass_columns(&s, c, c + count, more ? next : KERNEL_NO_COLUMN);
                c = next, count = next_count;
            }
        }
    }
}

/* ---------------------------------------------------------------- attention */

/* st[j][t] = scale · Σ_d panel[d][t] · k[j][d] for the columns (keys) j < columns of one micro-kernel: the
 * scores of up to 48 queries (panel: the queries transposed) left as they come out of the registers, one
 * line of the queries per key, which is how the softmax and the values' product want them. */
static inline __attribute__((always_inline)) void scores_micro(float *st, const float *panel, size_t depth,
                                                                const float *k, size_t k_stride,
                                                                const float *next_k, float scale, const int vectors,
                                                                const int columns) {
    const size_t width = (size_t)vectors * 16;
    __m512 sum[MICRO_COLUMNS][PANEL_VECTORS];
    micro_sums(sum, panel, depth, k, k_stride, 1, next_k, vectors, columns, NULL, NULL);
    for (int c = 0; c < columns; c++)
        for (int v = 0; v < vectors; v++)
            _mm512_store_ps(st + (size_t)c * width + 16 * (size_t)v,
                            scale != 1.0f ? _mm512_mul_ps(sum[c][v], _mm512_set1_ps(scale)) : sum[c][v]);
}

#define SCORES_CASE(V, C)                                                                                              \
    case (V)*16 + (C): scores_micro(st, panel, depth, k, k_stride, next_k, scale, V, C); break;
#define SCORES_CASES(V)                                                                                                \
    SCORES_CASE(V, 1)                                                                                                  \
    SCORES_CASE(V, 2)                                                                                                  \
    SCORES_CASE(V, 3)                                                                                                  \
    SCORES_CASE(V, 4) SCORES_CASE(V, 5) SCORES_CASE(V, 6) SCORES_CASE(V, 7) SCORES_CASE(V, 8)

static void scores_any(float *st, const float *panel, size_t depth, const float *k, size_t k_stride,
                       const float *next_k, float scale, int vectors, int columns) {
    switch (vectors * 16 + columns) {
        SCORES_CASES(1)
        SCORES_CASES(2)
        SCORES_CASES(3)
    default: break;
    }
}

size_t kernel_attention_packed_floats(size_t keys, size_t head_dim) {
    return (head_dim + MICRO_COLUMNS - 1) / MICRO_COLUMNS * keys * MICRO_COLUMNS;
}

void kernel_attention_pack_values_avx512(float *packed, const float *v, size_t kv_stride, size_t keys,
                                         size_t head_dim) {
    for (size_t c = 0; c < head_dim; c += MICRO_COLUMNS) {
        size_t columns = head_dim - c < MICRO_COLUMNS ? head_dim - c : MICRO_COLUMNS;
        __mmask16 lanes = (__mmask16)((1u << columns) - 1);
        float *group = packed + c * keys; /* (c / 8 groups of keys × 8 before it) */
        for (size_t j = 0; j < keys; j++)
            _mm256_storeu_ps(group + j * MICRO_COLUMNS,
                             _mm512_castps512_ps256(_mm512_maskz_loadu_ps(lanes, v + j * kv_stride + c)));
    }
}

bool kernel_attention_block_avx512(const kernel_attention_block *a, float *scratch, size_t scratch_floats) {
    size_t count = a->count, keys = a->keys, depth = a->head_dim;
    /* only where the product kernel would take every query into its panel: the same sums then */
    if (count < 16 || count > PANEL_ROWS || (count % 16 && count % 16 <= REMAINDER_ROWS) || !keys || !depth)
        return false;
    const int vectors = (int)((count + 15) / 16);
    const size_t width = (size_t)vectors * 16;
    if (!scratch || (depth + keys) > scratch_floats / width) return false;
    float *panel = scratch, *st = scratch + depth * width; /* st[j][t]: key j's scores, then probabilities */
    /* keys past `seen` are hidden from every query: left out (packed_v's groups stay `keys` long) */
    const size_t seen = a->causal && a->seen && a->seen < keys ? a->seen : keys;
    pack_panel(panel, a->q, a->q_stride, count, depth, vectors);
    for (size_t j = 0; j < seen; j += MICRO_COLUMNS) {
        int columns = (int)(seen - j < MICRO_COLUMNS ? seen - j : MICRO_COLUMNS);
        const float *k = a->k + j * a->kv_stride;
        scores_any(st + j * width, panel, depth, k, a->kv_stride,
                   j + MICRO_COLUMNS < seen ? k + MICRO_COLUMNS * a->kv_stride : NULL, a->scale, vectors, columns);
    }
    if (a->causal) hide_later_keys(st, seen, vectors, a->visible);
    softmax_columns(st, seen, vectors);
    if (a->probabilities) /* the recording wants rows of keys */
        for (size_t t = 0; t < count; t++)
            for (size_t j = 0; j < keys; j++)
                a->probabilities[t * a->probability_stride + j] = j < seen ? st[j * width + t] : 0.0f;
    for (size_t c = 0; c < depth; c += MICRO_COLUMNS) {
        int columns = (int)(depth - c < MICRO_COLUMNS ? depth - c : MICRO_COLUMNS);
        bool more = c + MICRO_COLUMNS < depth;
        if (a->packed_v) /* group c / 8: key j's 8 values at j · 8 */
            micro_any(a->out + c, a->out_stride, st, seen, a->packed_v + c * keys, 1, MICRO_COLUMNS,
                      more ? a->packed_v + (c + MICRO_COLUMNS) * keys : NULL, NULL, 1.0f, 0, 1, count, vectors,
                      columns, NULL, NULL, 0);
        else
            micro_any(a->out + c, a->out_stride, st, seen, a->v + c, 1, a->kv_stride,
                      more ? a->v + c + MICRO_COLUMNS : NULL, NULL, 1.0f, 0, 1, count, vectors, columns, NULL, NULL, 0);
    }
    return true;
}

/* ------------------------------------------------------- weighted row sums */

void kernel_weighted_rows_avx512(float *out, size_t out_stride, const float *weights, size_t weight_stride,
                                 const float *rows, size_t row_stride, size_t count, size_t n, size_t width) {
    for (size_t q = 0; q < count; q++) {
        const float *p = weights + q * weight_stride;
        for (size_t d = 0; d < width; d += 64) { /* 4 vectors of sums at a time, even and odd rows apart */
            __mmask16 lanes[4];
            __m512 even[4], odd[4];
            for (int v = 0; v < 4; v++) {
                size_t first = d + 16 * (size_t)v;
                lanes[v] = (__mmask16)(first >= width ? 0 : width - first >= 16 ? 0xFFFF : (1u << (width - first)) - 1);
                even[v] = odd[v] = _mm512_setzero_ps();
            }
            /* Wide rows (a head's 64 transposed key rows of 577) are read 64 columns a pass, 64 rows at once:
             * more streams than the hardware prefetcher follows, so each row's next 64 columns are asked for
             * while this pass reads the current ones. */
            int ahead = d + 64 < width;
            size_t j = 0;
            for (; j + 1 < n; j += 2) {
                const float *row = rows + j * row_stride + d, *next = row + row_stride;
                if (ahead)
                    for (int line = 0; line < 4; line++) {
                        _mm_prefetch((const char *)(row + 64 + 16 * line), _MM_HINT_T0);
                        _mm_prefetch((const char *)(next + 64 + 16 * line), _MM_HINT_T0);
                    }
                __m512 a = _mm512_set1_ps(p[j]), b = _mm512_set1_ps(p[j + 1]);
                for (int v = 0; v < 4; v++) {
                    even[v] = _mm512_fmadd_ps(a, _mm512_maskz_loadu_ps(lanes[v], row + 16 * v), even[v]);
                    odd[v] = _mm512_fmadd_ps(b, _mm512_maskz_loadu_ps(lanes[v], next + 16 * v), odd[v]);
                }
            }
            if (j < n) {
                const float *row = rows + j * row_stride + d;
                __m512 a = _mm512_set1_ps(p[j]);
                for (int v = 0; v < 4; v++)
                    even[v] = _mm512_fmadd_ps(a, _mm512_maskz_loadu_ps(lanes[v], row + 16 * v), even[v]);
            }
            for (int v = 0; v < 4; v++)
                _mm512_mask_storeu_ps(out + q * out_stride + d + 16 * v, lanes[v], _mm512_add_ps(even[v], odd[v]));
        }
    }
}

/* Several queries' weighted sums of the same rows, SLICES 16-lane slices of each row read once for up to 8 of
 * them: the rows in blocks of `block`, each block's sum made from zero in order, the blocks' sums added in order
 * into out (the first block's stored). */
static inline __attribute__((always_inline)) void blocked_rows_slices(float *out, size_t out_stride,
                                                                      const float *weights, size_t weight_stride,
                                                                      const float *rows, size_t row_stride, size_t n,
                                                                      size_t block, __mmask16 last_lanes,
                                                                      const int slices, const int queries) {
    for (size_t first = 0; first < n; first += block) {
        size_t end = n - first < block ? n : first + block;
        __m512 sum[8][2];
        for (int q = 0; q < queries; q++)
            for (int s = 0; s < slices; s++) sum[q][s] = _mm512_setzero_ps();
        for (size_t j = first; j < end; j++) {
            __m512 row[2];
            for (int s = 0; s < slices; s++)
                row[s] = _mm512_maskz_loadu_ps(s + 1 < slices ? 0xFFFF : last_lanes, rows + j * row_stride + 16 * s);
            for (int q = 0; q < queries; q++) {
                __m512 p = _mm512_set1_ps(weights[(size_t)q * weight_stride + j]);
                for (int s = 0; s < slices; s++) sum[q][s] = _mm512_fmadd_ps(p, row[s], sum[q][s]);
            }
        }
        for (int q = 0; q < queries; q++)
            for (int s = 0; s < slices; s++) {
                float *o = out + (size_t)q * out_stride + 16 * s;
                __mmask16 lanes = s + 1 < slices ? 0xFFFF : last_lanes;
                _mm512_mask_storeu_ps(o, lanes, first ? _mm512_add_ps(_mm512_maskz_loadu_ps(lanes, o), sum[q][s])
                                                      : sum[q][s]);
            }
    }
}

void kernel_weighted_rows_blocked_avx512(float *out, size_t out_stride, const float *weights, size_t weight_stride,
                                         const float *rows, size_t row_stride, size_t count, size_t n, size_t width,
                                         size_t block) {
    if (!n) return;
    for (size_t q = 0; q < count; q += 8) {
        int queries = (int)(count - q < 8 ? count - q : 8);
        for (size_t d = 0; d < width; d += 32) { /* two slices at a time: 16 sums to add into, one row load each */
            int slices = width - d > 16 ? 2 : 1;
            size_t rest = width - d - 16 * (size_t)(slices - 1);
            __mmask16 last = (__mmask16)(rest >= 16 ? 0xFFFF : (1u << rest) - 1);
            float *o = out + q * out_stride + d;
            const float *w = weights + q * weight_stride, *r = rows + d;
            switch (queries * 2 + slices - 1) {
#define BLOCKED_CASE(Q)                                                                                                \
    case 2 * Q: blocked_rows_slices(o, out_stride, w, weight_stride, r, row_stride, n, block, last, 1, Q); break;     \
    case 2 * Q + 1: blocked_rows_slices(o, out_stride, w, weight_stride, r, row_stride, n, block, last, 2, Q); break;
                BLOCKED_CASE(1) BLOCKED_CASE(2) BLOCKED_CASE(3) BLOCKED_CASE(4)
                BLOCKED_CASE(5) BLOCKED_CASE(6) BLOCKED_CASE(7) BLOCKED_CASE(8)
#undef BLOCKED_CASE
            default: break;
            }
        }
    }
}

/* ------------------------------------------------------- a decoder step's attention */

/* The 16-lane vectors of a head's head_dim values, the last masked. */
static inline __mmask16 step_lanes(size_t head_dim, size_t c) {
    size_t first = 16 * c;
    return (__mmask16)(head_dim - first >= 16 ? 0xFFFF : (1u << (head_dim - first)) - 1);
}

void kernel_step_scores_avx512(float *scores, size_t score_stride, const float *q, const float *k, size_t kv_stride,
                               size_t first, size_t count, size_t kv_heads, size_t group, size_t head_dim,
                               float scale) {
    size_t vectors = (head_dim + 15) / 16;
    __mmask16 tail = step_lanes(head_dim, vectors - 1); /* (every other vector whole) */
    for (size_t j = first; j < first + count; j++) {
        const float *row = k + j * kv_stride;
        for (size_t g = 0; g < kv_heads; g++) {
            const float *key = row + g * head_dim;
            for (size_t h = g * group; h < (g + 1) * group; h++) {
                const float *query = q + h * head_dim;
                __m512 sum = _mm512_setzero_ps();
                for (size_t c = 0; c < vectors; c++) {
                    __mmask16 lanes = c + 1 < vectors ? 0xFFFF : tail;
                    sum = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(lanes, query + 16 * c),
                                          _mm512_maskz_loadu_ps(lanes, key + 16 * c), sum);
                }
                scores[h * score_stride + j] = scale * _mm512_reduce_add_ps(sum) + 0.0f; /* (as dot_tile) */
            }
        }
    }
}

void kernel_step_values_avx512(float *sums, const float *probabilities, size_t probability_stride, const float *v,
                               size_t kv_stride, size_t first, size_t count, size_t kv_heads, size_t group,
                               size_t head_dim) {
    size_t vectors = (head_dim + 15) / 16, width = 16 * vectors, heads = kv_heads * group;
    __mmask16 tail = step_lanes(head_dim, vectors - 1);
    for (size_t i = 0; i < heads * width; i++) sums[i] = 0.0f;
    for (size_t j = first; j < first + count; j++) {
        const float *row = v + j * kv_stride;
        for (size_t g = 0; g < kv_heads; g++)
            for (size_t c = 0; c < vectors; c++) {
                __m512 value = _mm512_maskz_loadu_ps(c + 1 < vectors ? 0xFFFF : tail, row + g * head_dim + 16 * c);
                for (size_t h = g * group; h < (g + 1) * group; h++) {
                    float *sum = sums + h * width + 16 * c;
                    __m512 p = _mm512_set1_ps(probabilities[h * probability_stride + j]);
                    _mm512_store_ps(sum, _mm512_fmadd_ps(p, value, _mm512_load_ps(sum)));
                }
            }
    }
}
