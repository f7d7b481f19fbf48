/* linear_q8_vnni.c — the int8 linear layer on AVX-512 VNNI (quantize.h;
 * linear.c's kernel_linear calls it where cpu_has_avx512_vnni()).
 * The same two shapes as the float kernels of linear_avx512.c, with
 * vpdpbusd (16 lanes × 4 unsigned-by-signed byte products added into 32-bit
 * sums) in place of the FMA, so one instruction does 64 multiply-adds:
 *
 * - 16 rows or more: rows are quantized and transposed into panels of 48
 *   rows whose lines hold 4 consecutive features of each row (one 32-bit
 *   lane), once per product, 16 rows a part (quantize.h's q8_path: the
 *   column tasks prepare the parts as they reach them and share them); the
 *   micro-kernel broadcasts 4 int8 weights of each of 8 columns (they are
 *   adjacent in the weight row) against 3 panel vectors:
 *   24 dot products for 3 loads and 8 broadcasts. A remainder of 1–4 rows takes the
 *   few-rows kernel, strip by strip while the weights are in cache.
 * - 1–15 rows (the decoder's steps): tiles of up to 4 rows × 6 columns, 64
 *   features at a time.
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

#define Q8_PANEL_VECTORS 3
#define Q8_PANEL_ROWS (16 * Q8_PANEL_VECTORS)
#define Q8_MICRO_COLUMNS 8
#define Q8_STRIP_COLUMNS (3 * Q8_MICRO_COLUMNS)
#define Q8_REMAINDER_ROWS 4
#define Q8_DOT_ROWS 4
#define Q8_DOT_COLUMNS 6

float q8_quantize_row_avx512(uint8_t *u8, const float *x, size_t in_features, size_t depth) {
    __m512 largest = _mm512_setzero_ps();
    for (size_t k = 0; k < in_features; k += 16) {
        __mmask16 lanes = (__mmask16)(in_features - k >= 16 ? 0xFFFF : (1u << (in_features - k)) - 1);
        largest = _mm512_max_ps(largest, _mm512_abs_ps(_mm512_maskz_loadu_ps(lanes, x + k)));
    }
    float top = _mm512_reduce_max_ps(largest);
    float scale = top > 0.0f ? top / 127.0f : 1.0f, inverse = 127.0f / (top > 0.0f ? top : 127.0f);
    const __m512 step = _mm512_set1_ps(inverse);
    const __m512i low = _mm512_set1_epi32(-127), high = _mm512_set1_epi32(127), offset = _mm512_set1_epi32(128);
    for (size_t k = 0; k < in_features; k += 16) {
        __mmask16 lanes = (__mmask16)(in_features - k >= 16 ? 0xFFFF : (1u << (in_features - k)) - 1);
        __m512i q = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_maskz_loadu_ps(lanes, x + k), step)); /* to nearest, even */
        q = _mm512_add_epi32(_mm512_min_epi32(_mm512_max_epi32(q, low), high), offset);
        _mm512_mask_cvtepi32_storeu_epi8(u8 + k, lanes, q);
    }
    for (size_t k = in_features; k < depth; k++) u8[k] = 128;
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
    const __m512i low = _mm512_set1_epi32(-127), high = _mm512_set1_epi32(127);
    __m512i sum = _mm512_setzero_si512();
    for (k = 0; k < n; k += 16) {
        __mmask16 lanes = (__mmask16)(n - k >= 16 ? 0xFFFF : (1u << (n - k)) - 1);
        __m512i v = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_maskz_loadu_ps(lanes, w + k), step));
        v = _mm512_min_epi32(_mm512_max_epi32(v, low), high);
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
    size_t k = 0;
    for (; k + 64 <= depth; k += 64) { /* (a mask in this loop made GCC spill every sum) */
        __m512i xv[Q8_DOT_ROWS];
        for (int r = 0; r < rows; r++) xv[r] = _mm512_loadu_si512(x + (size_t)r * depth + k);
        for (int c = 0; c < columns; c++) {
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

/* ---------------------------------------------------------------- panels */

/* Block `block` (rows 16·block .. 16·block+15, those below `rows`) of a panel of `vectors` blocks, quantized from
 * in (its first row) into panel[g][t] (4 bytes: features 4g..4g+3 of row t) and scales[t], through rows_u8. */
static void q8_pack_block(uint8_t *panel, float *scales, uint8_t *rows_u8, const float *in, size_t in_stride,
                          size_t rows, int vectors, int block, const kernel_q8 *q) {
    size_t depth = q->depth, width = (size_t)vectors * 16, groups = depth / 4, first = (size_t)block * 16;
    for (size_t i = 0; i < 16; i++) {
        if (first + i < rows)
            scales[first + i] =
                q8_quantize_row_avx512(rows_u8 + i * depth, in + (first + i) * in_stride, q->in_features, depth);
        else
            memset(rows_u8 + i * depth, 128, depth), scales[first + i] = 0.0f;
    }
    size_t g = 0;
    for (; g + 16 <= groups; g += 16) { /* 16 rows × 16 groups of 4 bytes, as 32-bit lanes */
        __m512 r[16];
        for (int i = 0; i < 16; i++) r[i] = _mm512_loadu_ps((const float *)(rows_u8 + (size_t)i * depth + 4 * g));
        transpose16(r);
        for (int j = 0; j < 16; j++) _mm512_store_ps((float *)(panel + ((g + (size_t)j) * width + first) * 4), r[j]);
    }
    for (; g < groups; g++)
        for (size_t i = 0; i < 16; i++) memcpy(panel + (g * width + first + i) * 4, rows_u8 + i * depth + 4 * g, 4);
}

static inline __attribute__((always_inline)) void q8_micro(float *out, size_t out_stride, const uint8_t *panel,
                                                            const float *scales, const kernel_q8 *q, size_t c0,
                                                            const float *bias, int accumulate, size_t rows,
                                                            const int vectors, const int columns) {
    const size_t width = (size_t)vectors * 16, depth = q->depth, groups = depth / 4;
    const int8_t *w = q->weight + c0 * depth;
    __m512i sum[Q8_MICRO_COLUMNS][Q8_PANEL_VECTORS];
    for (int c = 0; c < columns; c++)
        for (int v = 0; v < vectors; v++) sum[c][v] = _mm512_setzero_si512();
    for (size_t g = 0; g < groups; g++) {
        if ((g & 15) == 0)
            for (int c = 0; c < columns; c++) _mm_prefetch((const char *)(w + (size_t)c * depth + 4 * g + 256), _MM_HINT_T0);
        __m512i x[Q8_PANEL_VECTORS];
        for (int v = 0; v < vectors; v++) x[v] = _mm512_load_si512(panel + (g * width + 16 * (size_t)v) * 4);
        for (int c = 0; c < columns; c++) {
            int32_t four;
            memcpy(&four, w + (size_t)c * depth + 4 * g, 4);
            __m512i wv = _mm512_set1_epi32(four);
            for (int v = 0; v < vectors; v++) sum[c][v] = dot_bytes(sum[c][v], x[v], wv);
        }
    }
    for (int v = 0; v < vectors; v++) {
        size_t first = (size_t)v * 16, count = rows - first < 16 ? rows - first : 16;
        __m512 row_scale = _mm512_loadu_ps(scales + first);
        __m512 s[Q8_MICRO_COLUMNS];
        for (int c = 0; c < columns; c++) { /* q8_finish, 16 rows at a time */
            size_t column = c0 + (size_t)c;
            __m512 value = _mm512_cvtepi32_ps(_mm512_sub_epi32(sum[c][v], _mm512_set1_epi32(128 * q->sum[column])));
            value = _mm512_mul_ps(value, _mm512_mul_ps(row_scale, _mm512_set1_ps(q->scale[column])));
            s[c] = bias ? _mm512_add_ps(value, _mm512_set1_ps(bias[column])) : value;
        }
        store_tile(out + first * out_stride + c0, out_stride, s, columns, count, accumulate);
    }
}

#define Q8_MICRO_CASE(V, C)                                                                                            \
    case (V)*16 + (C): q8_micro(out, out_stride, panel, scales, q, c0, bias, accumulate, rows, V, C); break;
#define Q8_MICRO_CASES(V)                                                                                              \
    Q8_MICRO_CASE(V, 1)                                                                                                \
    Q8_MICRO_CASE(V, 2)                                                                                                \
    Q8_MICRO_CASE(V, 3)                                                                                                \
    Q8_MICRO_CASE(V, 4) Q8_MICRO_CASE(V, 5) Q8_MICRO_CASE(V, 6) Q8_MICRO_CASE(V, 7) Q8_MICRO_CASE(V, 8)

static void q8_micro_any(float *out, size_t out_stride, const uint8_t *panel, const float *scales, const kernel_q8 *q,
                         size_t c0, const float *bias, int accumulate, size_t rows, int vectors, int columns) {
    switch (vectors * 16 + columns) {
        Q8_MICRO_CASES(1)
        Q8_MICRO_CASES(2)
        Q8_MICRO_CASES(3)
    default: break;
    }
}

/* ------------------------------------------------------- prepared input */

/* Where n prepared rows lie (q8_path_vnni's input): fewer than 16 rows are quantized rows for the few-rows
 * kernel; otherwise panels of 48 rows (a partial last one: 16 × vectors rows, the rest zero), then 0-4
 * remainder rows that the few-rows kernel takes, then a scale per row (panel k's at k × 48, the remainder's
 * after the panels'). */
typedef struct vnni_layout {
    size_t panel_rows, panels, remainder; /* remainder: the few-rows kernel's rows (all of them below 16) */
    size_t remainder_offset, scales_offset, bytes;
} vnni_layout;

static size_t align64(size_t bytes) { return (bytes + 63) / 64 * 64; }

static vnni_layout vnni_layout_of(const kernel_q8 *q, size_t rows) {
    vnni_layout l;
    l.remainder = rows < 16 ? rows : rows % 16 <= Q8_REMAINDER_ROWS ? rows % 16 : 0;
    l.panel_rows = rows - l.remainder;
    l.panels = (l.panel_rows + Q8_PANEL_ROWS - 1) / Q8_PANEL_ROWS;
    l.remainder_offset = l.panels * Q8_PANEL_ROWS * q->depth;
    l.scales_offset = align64(l.remainder_offset + l.remainder * q->depth);
    l.bytes = align64(l.scales_offset + (l.panels * Q8_PANEL_ROWS + l.remainder) * sizeof(float));
    return l;
}

/* The 16 quantized rows a panel is transposed through. */
static size_t vnni_temp_bytes(const kernel_q8 *q) { return 16 * q->depth; }

static size_t vnni_input_bytes(const kernel_q8 *q, size_t rows) { return vnni_layout_of(q, rows).bytes; }

/* One part per block of 16 panel rows (three a full panel), the remainder rows with the last, so that the
 * tasks of a product share even one panel's preparing; below 16 rows, one part of remainder rows. */
static size_t vnni_parts(const kernel_q8 *q, size_t rows) {
    vnni_layout l = vnni_layout_of(q, rows);
    return l.panels ? (l.panel_rows + 15) / 16 : 1;
}

/* Panel `k`'s rows (48, or fewer in the last) and, in *vectors, its blocks of 16. */
static size_t panel_rows_of(const vnni_layout *l, size_t k, int *vectors) {
    size_t r0 = k * Q8_PANEL_ROWS, group = l->panel_rows - r0 < Q8_PANEL_ROWS ? l->panel_rows - r0 : Q8_PANEL_ROWS;
    *vectors = (int)((group + 15) / 16);
    return group;
}

/* Part `part`: its block of 16 panel rows (transposed through temp) and, with the last, the remainder rows. */
static void vnni_prepare(void *prepared, const float *in, size_t in_stride, const kernel_q8 *q, size_t rows,
                         size_t part, void *temp) {
    vnni_layout l = vnni_layout_of(q, rows);
    uint8_t *bytes = prepared;
    float *scales = (float *)(bytes + l.scales_offset);
    size_t parts = vnni_parts(q, rows);
    if (l.panels) {
        size_t k = part / Q8_PANEL_VECTORS, r0 = k * Q8_PANEL_ROWS;
        int vectors;
        size_t group = panel_rows_of(&l, k, &vectors);
        q8_pack_block(bytes + r0 * q->depth, scales + r0, temp, in + r0 * in_stride, in_stride, group, vectors,
                      (int)(part % Q8_PANEL_VECTORS), q);
    }
    if (part + 1 < parts) return;
    for (size_t r = 0; r < l.remainder; r++)
        scales[l.panels * Q8_PANEL_ROWS + r] = q8_quantize_row_avx512(
            bytes + l.remainder_offset + r * q->depth, in + (l.panel_rows + r) * in_stride, q->in_features, q->depth);
}

/* Columns first .. first+count of the rows of the panel whose last block is part `part` (nothing for the
 * panel's other parts: the caller has every part up to `part` ready): the panel strip by strip and, with the
 * last, the remainder rows beside its strips while the strip's weights are in cache. */
static void vnni_product_part(float *out, size_t out_stride, const void *prepared, const kernel_q8 *q,
                              const float *bias, size_t rows, bool accumulate, size_t part, size_t first,
                              size_t count) {
    vnni_layout l = vnni_layout_of(q, rows);
    const uint8_t *bytes = prepared, *rest = bytes + l.remainder_offset;
    const float *scales = (const float *)(bytes + l.scales_offset), *rest_scales = scales + l.panels * Q8_PANEL_ROWS;
    size_t end = first + count;
    if (!l.panels) {
        q8_dot_block(out, out_stride, rest, rest_scales, rows, q, first, count, bias, accumulate);
        return;
    }
    size_t k = part / Q8_PANEL_VECTORS, r0 = k * Q8_PANEL_ROWS;
    int vectors;
    size_t group = panel_rows_of(&l, k, &vectors);
    if (part % Q8_PANEL_VECTORS + 1 < (size_t)vectors) return; /* (not the panel's last block) */
    int last = k + 1 == l.panels;
    const uint8_t *panel = bytes + r0 * q->depth;
    for (size_t c0 = first; c0 < end; c0 += Q8_STRIP_COLUMNS) {
        size_t strip = end - c0 < Q8_STRIP_COLUMNS ? end - c0 : Q8_STRIP_COLUMNS;
        for (size_t c = c0; c < c0 + strip; c += Q8_MICRO_COLUMNS) {
            int n = (int)(c0 + strip - c < Q8_MICRO_COLUMNS ? c0 + strip - c : Q8_MICRO_COLUMNS);
            q8_micro_any(out + r0 * out_stride, out_stride, panel, scales + r0, q, c, bias, accumulate, group, vectors,
                         n);
        }
        if (l.remainder && last)
            q8_dot_block(out + l.panel_rows * out_stride, out_stride, rest, rest_scales, l.remainder, q, c0, strip,
                         bias, accumulate);
    }
}

/* Columns first .. first+count of every prepared row, part by part. */
static void vnni_product(float *out, size_t out_stride, const void *prepared, const kernel_q8 *q, const float *bias,
                         size_t rows, bool accumulate, size_t first, size_t count) {
    for (size_t part = 0, parts = vnni_parts(q, rows); part < parts; part++)
        vnni_product_part(out, out_stride, prepared, q, bias, rows, accumulate, part, first, count);
}

/* A chunk of at most one panel and its remainder (the few-rows kernel's tiles take any count), and the 16
 * rows vnni_prepare transposes through, in scratch. */
static size_t vnni_chunk_rows(const kernel_q8 *q, size_t rows_left, size_t scratch_bytes) {
    size_t rows = rows_left <= Q8_PANEL_ROWS + Q8_REMAINDER_ROWS ? rows_left : Q8_PANEL_ROWS;
    return vnni_input_bytes(q, rows) + vnni_temp_bytes(q) <= scratch_bytes ? rows : 0;
}

const q8_path q8_path_vnni = {vnni_input_bytes, vnni_temp_bytes, vnni_parts, vnni_prepare,
                              vnni_product, vnni_chunk_rows, vnni_product_part};
