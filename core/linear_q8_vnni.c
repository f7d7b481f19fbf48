/* linear_q8_vnni.c — the int8 linear layer on AVX-512 VNNI (quantize.h;
 * linear.c's kernel_linear calls it where cpu_has_avx512_vnni()), with
 * vpdpbusd (16 lanes × 4 unsigned-by-signed byte products added into 32-bit
 * sums), so one instruction does 64 multiply-adds. The rows are quantized
 * once per product, in parts (the column tasks prepare them between them:
 * vnni_prepare_rows, kernel_types.h's q8_path), and stay rows:
 *
 * - Weights in strips (kernel_q8's Q8_LAYOUT_STRIPS, made at load where this
 *   path runs the many-rows products: q8_layout_best), any number of rows: a
 *   line per 4 features holds those features of 48 columns (3 vectors). The
 *   micro-kernel broadcasts 4 bytes of each of 8 rows against 3 vectors of
 *   a line (24 dot products for 3 loads and 8 broadcasts), so its sums come
 *   out as rows of 16 columns and are finished and stored as they are; the
 *   first 8 rows of each 48 columns ask for the weights ahead, the rest find
 *   them in cache. (Packing each product's weights into strips in the task's
 *   scratch, as this kernel did before the layout was made at load, took 20%
 *   of ViT-B/32's int8 products at batch 1. Broadcasting the weights against
 *   rows transposed into panels, as the float kernels do, costs transposing
 *   the rows in and the sums out: ViT-B/32's int8 vision tower at batch 8
 *   took 6% longer, its text tower 13%.)
 * - Weights in rows (where AMX runs the many rows, so this path only the
 *   decoder's steps of 1–15 rows): tiles of up to 4 rows × 6 columns, 64
 *   features at a time, on the weights as they are.
 *
 * Integer sums are exact; each is finished by q8_finish, so the results equal
 * the plain loops' bit for bit. Compiled with -mavx512f -mavx512bw -mavx512vnni. */
#include <immintrin.h>
#include <string.h>

#include "core/avx512_tiles.h"
#include "core/kernels_avx512.h"
#include "core/quantize.h"

/* acc + Σ (4 u8 of unsigned_bytes) · (4 s8 of signed_bytes) per 32-bit lane. In
 * assembly because GCC 12 spills and copies every accumulator of
 * _mm512_dpbusd_epi32 arrays around each instruction (a third of the speed). */
static inline __m512i dot_bytes(__m512i acc, __m512i unsigned_bytes, __m512i signed_bytes) {
    __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(unsigned_bytes), "v"(signed_bytes));
    return acc;
}

#define Q8_DOT_ROWS 4
#define Q8_DOT_COLUMNS 6
#define Q8_STRIP_VECTORS 3                /* 16-column vectors of a strip */
#define Q8_STRIP_WIDTH Q8_STRIP_COLUMNS /* its columns (kernel_types.h) */
_Static_assert(Q8_STRIP_WIDTH == 16 * Q8_STRIP_VECTORS, "a strip is 3 vectors of 16 columns");
#define Q8_ROWS_MICRO 8                         /* rows of q8_rows_micro */

/* 16 values quantized in 32-bit lanes: value · inverse rounded to nearest (even), within ±127 (a weight's). */
static inline __m512i q8_round_16(__m512 values, __m512 inverse) {
    __m512i q = _mm512_cvtps_epi32(_mm512_mul_ps(values, inverse));
    return _mm512_min_epi32(_mm512_max_epi32(q, _mm512_set1_epi32(-127)), _mm512_set1_epi32(127));
}

/* The same offset by 128: an input's bytes, for vpdpbusd's unsigned side. */
static inline __m512i q8_quantize_16(__m512 values, __m512 inverse) {
    return _mm512_add_epi32(q8_round_16(values, inverse), _mm512_set1_epi32(128));
}

/* A row quantized (quantize.h): 64 values a step packed into one store of 64 bytes (the values, in 1 .. 255 once
 * offset, pass the saturating packs unchanged; the packs interleave 128-bit lanes, which one permutation puts back
 * in order). Storing 16 bytes at a time through vpmovdb took a quarter longer: 768 features 0.128 -> 0.103 ns a
 * value (AMD EPYC Zen 5). */
float q8_quantize_row_avx512(uint8_t *u8, const float *x, size_t in_features, size_t depth) {
    __m512 largest = _mm512_setzero_ps();
    for (size_t k = 0; k < in_features; k += 16) {
        __mmask16 lanes = (__mmask16)(in_features - k >= 16 ? 0xFFFF : (1u << (in_features - k)) - 1);
        largest = _mm512_max_ps(largest, _mm512_abs_ps(_mm512_maskz_loadu_ps(lanes, x + k)));
    }
    float top = _mm512_reduce_max_ps(largest);
    float scale = top > 0.0f ? top / 127.0f : 1.0f, inverse = 127.0f / (top > 0.0f ? top : 127.0f);
    const __m512 step = _mm512_set1_ps(inverse);
    const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    size_t k = 0;
    for (; k + 64 <= in_features; k += 64) {
        __m512i q[4];
        for (int v = 0; v < 4; v++) q[v] = q8_quantize_16(_mm512_loadu_ps(x + k + 16 * v), step);
        __m512i bytes = _mm512_packus_epi16(_mm512_packs_epi32(q[0], q[1]), _mm512_packs_epi32(q[2], q[3]));
        _mm512_storeu_si512(u8 + k, _mm512_permutexvar_epi32(order, bytes));
    }
    for (; k < in_features; k += 16) {
        __mmask16 lanes = (__mmask16)(in_features - k >= 16 ? 0xFFFF : (1u << (in_features - k)) - 1);
        _mm512_mask_cvtepi32_storeu_epi8(u8 + k, lanes, q8_quantize_16(_mm512_maskz_loadu_ps(lanes, x + k), step));
    }
    for (k = in_features; k < depth; k++) u8[k] = 128;
    return scale;
}

int32_t q8_quantize_weight_row_avx512(int8_t *q, const float *w, size_t n, float *scale_out) {
    __m512 largest = _mm512_setzero_ps();
    size_t k = 0;
    for (; k + 16 <= n; k += 16) largest = _mm512_max_ps(largest, _mm512_abs_ps(_mm512_loadu_ps(w + k)));
    __mmask16 tail = (__mmask16)((1u << (n - k)) - 1);
    if (k < n) largest = _mm512_max_ps(largest, _mm512_abs_ps(_mm512_maskz_loadu_ps(tail, w + k)));
    float top = _mm512_reduce_max_ps(largest);
    float scale = top > 0.0f ? top / 127.0f : 1.0f, inverse = 1.0f / scale;
    const __m512 step = _mm512_set1_ps(inverse);
    __m512i sum = _mm512_setzero_si512();
    for (k = 0; k < n; k += 16) {
        __mmask16 lanes = (__mmask16)(n - k >= 16 ? 0xFFFF : (1u << (n - k)) - 1);
        __m512i v = q8_round_16(_mm512_maskz_loadu_ps(lanes, w + k), step);
        sum = _mm512_add_epi32(sum, v); /* (masked lanes are 0) */
        _mm512_mask_cvtepi32_storeu_epi8(q + k, lanes, v);
    }
    *scale_out = scale;
    return _mm512_reduce_add_epi32(sum);
}

/* ------------------------------------------------------------- few rows */

static inline __attribute__((always_inline)) void q8_dot_tile(float *out, size_t out_stride, const uint8_t *x,
                                                               const float *row_scale, const kernel_q8 *q, size_t c0,
                                                               const float *bias, int accumulate, const int rows,
                                                               const int columns) {
    __m512i sum[Q8_DOT_ROWS][Q8_DOT_COLUMNS];
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < columns; c++) sum[r][c] = _mm512_setzero_si512();
    size_t depth = q->depth;
    const int8_t *w = q->weight + c0 * depth;
    /* each column's row asked for a tile ahead, as the float dot products do (BLIP-base int8 greedy steps 7.7 ->
     * 6.3 ms, 3 beams 10.2 -> 7.8; llava-interleave-qwen-0.5b int8 after 16 positions 19.9 -> 18.7; two or four
     * tiles ahead did less than one) */
    const size_t ahead = kernel_dot_prefetch_distance(Q8_DOT_COLUMNS * depth);
    size_t k = 0;
    for (; k + 64 <= depth; k += 64) { /* (a mask in this loop made GCC spill every sum) */
        __m512i xv[Q8_DOT_ROWS];
        for (int r = 0; r < rows; r++) xv[r] = _mm512_loadu_si512(x + (size_t)r * depth + k);
        for (int c = 0; c < columns; c++) {
            _mm_prefetch((const char *)(w + (size_t)c * depth + k + ahead), _MM_HINT_T0);
            __m512i wv = _mm512_loadu_si512(w + (size_t)c * depth + k);
            for (int r = 0; r < rows; r++) sum[r][c] = dot_bytes(sum[r][c], xv[r], wv);
        }
    }
    if (k < depth) {
        __mmask64 lanes = ((__mmask64)1 << (depth - k)) - 1;
        __m512i xv[Q8_DOT_ROWS];
        for (int r = 0; r < rows; r++) xv[r] = _mm512_maskz_loadu_epi8(lanes, x + (size_t)r * depth + k);
        for (int c = 0; c < columns; c++) {
            __m512i wv = _mm512_maskz_loadu_epi8(lanes, w + (size_t)c * depth + k);
            for (int r = 0; r < rows; r++) sum[r][c] = dot_bytes(sum[r][c], xv[r], wv);
        }
    }
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < columns; c++) {
            size_t column = c0 + (size_t)c;
            float value = q8_finish(_mm512_reduce_add_epi32(sum[r][c]), q->sum[column], row_scale[r],
                                    q->scale[column], bias ? bias + column : NULL);
            float *cell = out + (size_t)r * out_stride + column;
            *cell = accumulate ? *cell + value : value;
        }
}

#define Q8_DOT_CASE(R, C)                                                                                              \
    case (R)*8 + (C): q8_dot_tile(tile_out, out_stride, tile_x, tile_scale, q, c, bias, accumulate, R, C); break;
#define Q8_DOT_CASES(R)                                                                                                \
    Q8_DOT_CASE(R, 1) Q8_DOT_CASE(R, 2) Q8_DOT_CASE(R, 3) Q8_DOT_CASE(R, 4) Q8_DOT_CASE(R, 5) Q8_DOT_CASE(R, 6)

/* Quantized rows x[rows][depth] (scales row_scale) times columns c0 .. c0+count. */
static void q8_dot_block(float *out, size_t out_stride, const uint8_t *x, const float *row_scale, size_t rows,
                         const kernel_q8 *q, size_t c0, size_t count, const float *bias, int accumulate) {
    for (size_t r = 0; r < rows; r += Q8_DOT_ROWS) {
        int tile_rows = (int)(rows - r < Q8_DOT_ROWS ? rows - r : Q8_DOT_ROWS);
        for (size_t c = c0; c < c0 + count; c += Q8_DOT_COLUMNS) {
            int tile_columns = (int)(c0 + count - c < Q8_DOT_COLUMNS ? c0 + count - c : Q8_DOT_COLUMNS);
            float *tile_out = out + r * out_stride;
            const uint8_t *tile_x = x + r * q->depth;
            const float *tile_scale = row_scale + r;
            switch (tile_rows * 8 + tile_columns) {
                Q8_DOT_CASES(1)
                Q8_DOT_CASES(2)
                Q8_DOT_CASES(3)
                Q8_DOT_CASES(4)
            default: break;
            }
        }
    }
}

/* ------------------------------------------------------ many rows, weights in strips */

void q8_strip_from_rows_avx512(int8_t *strip, const int8_t *rows, size_t depth, size_t count) {
    size_t groups = depth / 4;
    for (size_t j0 = 0; j0 < count; j0 += 16) {
        size_t g = 0;
        if (j0 + 16 <= count)
            for (; g + 16 <= groups; g += 16) { /* 16 columns × 16 groups of 4 bytes, as 32-bit lanes */
                __m512 r[16];
                for (size_t i = 0; i < 16; i++)
                    r[i] = _mm512_loadu_ps((const float *)(rows + (j0 + i) * depth + 4 * g));
                transpose16(r);
                for (size_t i = 0; i < 16; i++)
                    _mm512_store_ps((float *)(strip + ((g + i) * Q8_STRIP_WIDTH + j0) * 4), r[i]);
            }
        for (; g < groups; g++)
            for (size_t j = j0; j < j0 + 16 && j < count; j++)
                memcpy(strip + (g * Q8_STRIP_WIDTH + j) * 4, rows + j * depth + 4 * g, 4);
    }
}

/* Bytes from one line of a strip to the next, and how far ahead along its lines the first block of rows asks
 * for a vector's weights (past a strip's end: the next strip's, which the next columns read). */
#define Q8_LINE_BYTES (Q8_STRIP_WIDTH * 4)
#define Q8_AHEAD_BYTES (64 * Q8_LINE_BYTES)

/* The first of the lines holding column c's weights (c a multiple of 16), Q8_LINE_BYTES apart. */
static inline const int8_t *q8_column_lines(const kernel_q8 *q, size_t c) {
    return q->weight + q8_weight_offset(q, c, 0);
}

/* `rows` (≤ 8) quantized rows from x (depth bytes apart) times `vectors` × 16 columns from c0 (count of them
 * real), vector v's weights on the lines from lines[v]: each feature group broadcasts 4 bytes of each row
 * against the lines, so the sums come out one row of 16 columns per register, finished and stored as they are.
 * `ask` (the first block of rows of these columns): each vector's weights asked for Q8_AHEAD_BYTES ahead.
 * fetch .. fetch_end: (part of) the next piece's weights, asked for into L2 a line per feature group. Without
 * it the first block of rows waited on memory: it reads a piece's weights at 8 rows × 48 columns of products a
 * line, 30 GB/s a thread, against 34 GB/s for both; asked for during the other blocks, ViT-B/32's products at
 * 50 rows on 2 threads went from 736 to 790 GOP/s, on 1 thread from 382 to 407 (Zen 4). */
static inline __attribute__((always_inline)) void q8_rows_micro(float *out, size_t out_stride, const uint8_t *x,
                                                                 const float *row_scale, const int8_t *const *lines,
                                                                 const kernel_q8 *q, size_t c0, size_t count,
                                                                 const float *bias, int accumulate, const int rows,
                                                                 const int vectors, const int ask,
                                                                 const int8_t *fetch, const int8_t *fetch_end) {
    const size_t depth = q->depth, groups = depth / 4;
    const int8_t *line[Q8_STRIP_VECTORS];
    __m512i sum[Q8_ROWS_MICRO][Q8_STRIP_VECTORS];
    for (int v = 0; v < vectors; v++) line[v] = lines[v];
    /* the cells this call finishes asked for now, for writing, so that they arrive during the sums: written (or
     * added to: a residual) only at the end, their misses stalled every call's finish (8 rows × 3 lines) */
    for (int r = 0; r < rows; r++)
        for (int v = 0; v < vectors; v++) {
            sum[r][v] = _mm512_setzero_si512();
            kernel_prefetch_to_write(out + (size_t)r * out_stride + c0 + 16 * (size_t)v);
        }
    for (size_t g = 0; g < groups; g++) {
        __m512i w[Q8_STRIP_VECTORS];
        for (int v = 0; v < vectors; v++) {
            if (ask) _mm_prefetch((const char *)(line[v] + g * Q8_LINE_BYTES + Q8_AHEAD_BYTES), _MM_HINT_T0);
            w[v] = _mm512_load_si512(line[v] + g * Q8_LINE_BYTES);
        }
        if (fetch < fetch_end) {
            _mm_prefetch((const char *)fetch, _MM_HINT_T1);
            fetch += 64;
        }
        for (int r = 0; r < rows; r++) {
            int32_t four;
            memcpy(&four, x + (size_t)r * depth + 4 * g, 4);
            __m512i xv = _mm512_set1_epi32(four);
            for (int v = 0; v < vectors; v++) sum[r][v] = dot_bytes(sum[r][v], xv, w[v]);
        }
    }
    for (int v = 0; v < vectors; v++) { /* q8_finish, 16 columns at a time */
        size_t first = c0 + 16 * (size_t)v, left = count - 16 * (size_t)v;
        __mmask16 lanes = (__mmask16)(left >= 16 ? 0xFFFF : (1u << left) - 1);
        __m512i weight_sum = _mm512_slli_epi32(_mm512_maskz_loadu_epi32(lanes, q->sum + first), 7);
        __m512 weight_scale = _mm512_maskz_loadu_ps(lanes, q->scale + first);
        __m512 b = bias ? _mm512_maskz_loadu_ps(lanes, bias + first) : _mm512_setzero_ps();
        for (int r = 0; r < rows; r++) {
            __m512 value = _mm512_cvtepi32_ps(_mm512_sub_epi32(sum[r][v], weight_sum));
            value = _mm512_mul_ps(value, _mm512_mul_ps(_mm512_set1_ps(row_scale[r]), weight_scale));
            if (bias) value = _mm512_add_ps(value, b);
            float *cell = out + (size_t)r * out_stride + first;
            if (accumulate) value = _mm512_add_ps(_mm512_maskz_loadu_ps(lanes, cell), value);
            _mm512_mask_storeu_ps(cell, lanes, value);
        }
    }
}

#define Q8_ROWS_CALL(R, V, A)                                                                                          \
    q8_rows_micro(out, out_stride, x, row_scale, lines, q, c0, count, bias, accumulate, R, V, A, fetch, fetch_end)
#define Q8_ROWS_CASE(R, V)                                                                                             \
    case (R)*8 + (V)*2: Q8_ROWS_CALL(R, V, 0); break;                                                                  \
    case (R)*8 + (V)*2 + 1: Q8_ROWS_CALL(R, V, 1); break;
#define Q8_ROWS_CASES(R) Q8_ROWS_CASE(R, 1) Q8_ROWS_CASE(R, 2) Q8_ROWS_CASE(R, 3)

static void q8_rows_micro_any(float *out, size_t out_stride, const uint8_t *x, const float *row_scale,
                              const int8_t *const *lines, const kernel_q8 *q, size_t c0, size_t count,
                              const float *bias, int accumulate, int rows, int vectors, int ask,
                              const int8_t *fetch, const int8_t *fetch_end) {
    switch (rows * 8 + vectors * 2 + ask) {
        Q8_ROWS_CASES(1)
        Q8_ROWS_CASES(2)
        Q8_ROWS_CASES(3)
        Q8_ROWS_CASES(4)
        Q8_ROWS_CASES(5)
        Q8_ROWS_CASES(6)
        Q8_ROWS_CASES(7)
        Q8_ROWS_CASES(8)
    default: break;
    }
}

/* The columns of the next piece of `left` columns: kernel_next_block's, 48 but 49-64 as two pieces of 32 (CLIP
 * text's 256 columns a task ran 8% slower as 5 × 48 + 16). */
static size_t q8_piece_columns(size_t left) { return kernel_next_block(left, Q8_STRIP_WIDTH); }

/* Columns first .. first+count (first a multiple of 16) of the quantized rows x[rows][depth] with weights in
 * strips: piece by piece of (up to) 48 columns, 16-column vectors from wherever they lie in the strips (a task's
 * columns need not start at a strip), run against every row in blocks of at most 8 rows, as even as they come
 * (50 rows: 8 and 6 × 7). A last block of the rows short of 8 kept too few sums in flight for the dot products'
 * latency: ViT-B/32's 12 layers of int8 products at 50 rows, 8 × 6 + 2 against 8 + 6 × 7, AMD EPYC Zen 5 (best of
 * 20, medians of 5 alternating processes), 700 -> 735 GOP/s on one thread, 927 -> 965 on two; 77 rows unchanged. */
static void q8_strips_product(float *out, size_t out_stride, const uint8_t *x, const float *row_scale, size_t rows,
                              const kernel_q8 *q, size_t first, size_t count, size_t next, const float *bias,
                              int accumulate) {
    size_t end = first + count;
    const int8_t *weights_end = q->weight + (q->out_features + Q8_STRIP_COLUMNS - 1) / Q8_STRIP_COLUMNS *
                                                Q8_STRIP_COLUMNS * q->depth;
    const size_t fetch_step = q->depth / 4 * 64; /* (what a block of rows asks for) */
    const size_t blocks = (rows + Q8_ROWS_MICRO - 1) / Q8_ROWS_MICRO;
    for (size_t c0 = first, piece; c0 < end; c0 += piece) {
        piece = q8_piece_columns(end - c0);
        int vectors = (int)((piece + 15) / 16);
        const int8_t *lines[Q8_STRIP_VECTORS];
        for (int v = 0; v < vectors; v++) lines[v] = q8_column_lines(q, c0 + 16 * (size_t)v);
        /* the next piece's weights, asked for into L2 by the blocks of rows after the first, 64 bytes a step */
        const int8_t *fetch = NULL, *fetch_end = NULL;
        size_t after = c0 + piece < end ? c0 + piece : next; /* (the caller's next columns after the last piece) */
        if (after < q->out_features) {
            fetch = q8_column_lines(q, after);
            fetch_end = fetch + q->depth / 4 * Q8_LINE_BYTES;
            if (fetch_end > weights_end) fetch_end = weights_end;
        }
        for (size_t r = 0, block = 0, here; r < rows; r += here, block++) {
            here = (rows - r + blocks - block - 1) / (blocks - block); /* (the rows left over the blocks left) */
            q8_rows_micro_any(out + r * out_stride, out_stride, x + r * q->depth, row_scale + r, lines, q, c0, piece,
                              bias, accumulate, (int)here, vectors, r == 0, r ? fetch : NULL, fetch_end);
            if (r && fetch) fetch = (size_t)(fetch_end - fetch) > fetch_step ? fetch + fetch_step : fetch_end;
        }
    }
}

/* ------------------------------------------------------- prepared input */

/* n prepared rows (q8_path_vnni's input): the rows quantized, depth bytes each, then a scale per row. */
static size_t align64(size_t bytes) { return (bytes + 63) / 64 * 64; }
static size_t vnni_scales_offset(const kernel_q8 *q, size_t rows) { return align64(rows * q->depth); }
static size_t vnni_input_bytes(const kernel_q8 *q, size_t rows) {
    return vnni_scales_offset(q, rows) + align64(rows * sizeof(float));
}
static size_t vnni_temp_bytes(const kernel_q8 *q) { return (void)q, 0; }

/* Parts of 16 rows where one task prepares every row (a product on one thread: linear.c's q8_prepare_rows); the
 * column tasks that share a product choose parts of their own (vnni_prepare_rows). */
#define VNNI_PART_ROWS 16
static size_t vnni_parts(const kernel_q8 *q, size_t rows) {
    return (void)q, (rows + VNNI_PART_ROWS - 1) / VNNI_PART_ROWS;
}

static void vnni_prepare_rows(void *prepared, const float *in, size_t in_stride, const kernel_q8 *q, size_t rows,
                              size_t first, size_t count) {
    uint8_t *bytes = prepared;
    float *scales = (float *)(bytes + vnni_scales_offset(q, rows));
    for (size_t r = first; r < first + count; r++)
        scales[r] = q8_quantize_row_avx512(bytes + r * q->depth, in + r * in_stride, q->in_features, q->depth);
}

static void vnni_prepare(void *prepared, const float *in, size_t in_stride, const kernel_q8 *q, size_t rows,
                         size_t part, void *temp) {
    (void)temp;
    size_t first = VNNI_PART_ROWS * part, left = rows - first;
    vnni_prepare_rows(prepared, in, in_stride, q, rows, first, left < VNNI_PART_ROWS ? left : VNNI_PART_ROWS);
}

/* Columns first .. first+count of every prepared row: on the strips as they lie, or with weights in rows (where
 * AMX runs the many rows) the few-rows kernel. */
static void vnni_product(float *out, size_t out_stride, const void *prepared, const kernel_q8 *q, const float *bias,
                         size_t rows, bool accumulate, size_t first, size_t count, size_t next, void *scratch,
                         size_t scratch_bytes) {
    (void)scratch, (void)scratch_bytes;
    const uint8_t *bytes = prepared;
    const float *scales = (const float *)(bytes + vnni_scales_offset(q, rows));
    if (q->layout == Q8_LAYOUT_STRIPS)
        q8_strips_product(out, out_stride, bytes, scales, rows, q, first, count, next, bias, accumulate);
    else
        q8_dot_block(out, out_stride, bytes, scales, rows, q, first, count, bias, accumulate);
}

/* As many rows as fit in scratch_bytes (depth bytes and a scale each, as one plane of the plain path's). */
static size_t vnni_chunk_rows(const kernel_q8 *q, size_t rows_left, size_t scratch_bytes) {
    return q8_planes_chunk_rows(q, rows_left, scratch_bytes, 1);
}

const q8_path q8_path_vnni = {vnni_input_bytes, vnni_temp_bytes, vnni_parts, vnni_prepare,
                              vnni_product, vnni_chunk_rows, vnni_prepare_rows};
