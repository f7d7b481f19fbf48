/* linear_q8_avx2.c — the int8 product on x86-64 processors with AVX2 but
 * without AVX-512 VNNI (AMD Zen 1–3, Intel before Ice Lake), where the plain
 * loops made --int8 some 25 times slower than float32. Each input row is
 * quantized as q8_quantize_row does, kept as signed values x = u8 - 128 in
 * [-127, 127] with their magnitudes beside them; vpmaddubsw multiplies |x|
 * with the weights given x's sign (each pair at most 2·127·127, so no 16-bit
 * saturation) and vpmaddwd widens the pairs into 32-bit sums: Σ x·w exactly,
 * and Σ u8·w = that + 128·Σ w. Every output equals the VNNI kernel's and the
 * plain loops' bit for bit. Compiled with -mavx2 and called only where
 * cpu_has_avx2() says so; quantize.h's q8_path in two steps (rows quantized
 * once, then any columns). */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "core/quantize.h"

/* Rows and columns of one register block: 4 × 2 sums of 8 lanes. */
#define BLOCK_ROWS 4
#define BLOCK_COLUMNS 2
/* Columns whose int8 weights are walked by every row block before the next
 * ones: 32 × depth bytes stay in the L2 cache (96 KiB at depth 3072). */
#define COLUMN_PANEL 32

static inline int32_t sum_lanes(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

/* max |x[k]| over n values (a maximum: the order does not change it). */
static float largest_magnitude(const float *x, size_t n) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 largest8 = _mm256_setzero_ps();
    size_t k = 0;
    for (; k + 8 <= n; k += 8) largest8 = _mm256_max_ps(largest8, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + k)));
    float lanes[8], largest = 0.0f;
    _mm256_storeu_ps(lanes, largest8);
    for (int i = 0; i < 8; i++) largest = fmaxf(largest, lanes[i]);
    for (; k < n; k++) largest = fmaxf(largest, fabsf(x[k]));
    return largest;
}

/* Eight values rounded to the nearest integer (ties to even, as nearbyintf)
 * and clamped to [-127, 127], as 32-bit integers. */
static inline __m256i round_clamped(__m256 values) {
    const __m256 top = _mm256_set1_ps(127.0f), bottom = _mm256_set1_ps(-127.0f);
    __m256 rounded = _mm256_round_ps(values, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    return _mm256_cvtps_epi32(_mm256_max_ps(bottom, _mm256_min_ps(top, rounded)));
}

/* Eight rows' worth of 32 int32 values in four vectors, packed to 32 int8 in order. */
static inline __m256i pack_bytes(const __m256i quarter[4]) {
    /* the packs interleave 128-bit lanes: 0 1 4 5 2 3 6 7 in 4-value groups, which the permute undoes */
    __m256i packed = _mm256_packs_epi16(_mm256_packs_epi32(quarter[0], quarter[1]),
                                        _mm256_packs_epi32(quarter[2], quarter[3]));
    return _mm256_permutevar8x32_epi32(packed, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/* A weight row as kernel_q8_quantize's plain loop makes it (scale = max |w| / 127,
 * or 1; each value round(w / scale) by multiplying with 1 / scale); returns the
 * row's sum and writes its scale. */
int32_t q8_quantize_weight_row_avx2(int8_t *out, const float *row, size_t n, float *scale_out) {
    float largest = largest_magnitude(row, n);
    float scale = largest > 0.0f ? largest / 127.0f : 1.0f, inverse = 1.0f / scale;
    const __m256 inverse8 = _mm256_set1_ps(inverse);
    __m256i sums = _mm256_setzero_si256();
    size_t k = 0;
    for (; k + 32 <= n; k += 32) {
        __m256i quarter[4];
        for (int i = 0; i < 4; i++) {
            quarter[i] = round_clamped(_mm256_mul_ps(_mm256_loadu_ps(row + k + 8 * i), inverse8));
            sums = _mm256_add_epi32(sums, quarter[i]);
        }
        _mm256_storeu_si256((__m256i *)(out + k), pack_bytes(quarter));
    }
    int32_t sum = sum_lanes(sums);
    for (; k < n; k++) {
        float v = nearbyintf(row[k] * inverse);
        int8_t value = (int8_t)(v > 127.0f ? 127 : v < -127.0f ? -127 : (int)v);
        out[k] = value;
        sum += value;
    }
    *scale_out = scale;
    return sum;
}

/* One row as q8_quantize_row makes it, stored as x = u8 - 128 (int8) in
 * signs and |x| in magnitudes, padded with zeros up to depth; returns the
 * row's scale. */
static float quantize_row_signed(int8_t *signs, uint8_t *magnitudes, const float *x, size_t in_features,
                                 size_t depth) {
    float largest = largest_magnitude(x, in_features);
    size_t k;
    float scale = largest > 0.0f ? largest / 127.0f : 1.0f, inverse = 127.0f / (largest > 0.0f ? largest : 127.0f);
    const __m256 inverse8 = _mm256_set1_ps(inverse);
    for (k = 0; k + 32 <= in_features; k += 32) {
        __m256i quarter[4];
        for (int i = 0; i < 4; i++) quarter[i] = round_clamped(_mm256_mul_ps(_mm256_loadu_ps(x + k + 8 * i), inverse8));
        __m256i packed = pack_bytes(quarter);
        _mm256_storeu_si256((__m256i *)(signs + k), packed);
        _mm256_storeu_si256((__m256i *)(magnitudes + k), _mm256_abs_epi8(packed));
    }
    for (; k < in_features; k++) {
        float v = nearbyintf(x[k] * inverse);
        int value = v > 127.0f ? 127 : v < -127.0f ? -127 : (int)v;
        signs[k] = (int8_t)value;
        magnitudes[k] = (uint8_t)(value < 0 ? -value : value);
    }
    for (; k < depth; k++) signs[k] = 0, magnitudes[k] = 0;
    return scale;
}


/* totals[r][c] = Σ_k x[r][k] · w[c][k] for rows × columns (each at most the
 * block's): x given by its signs and magnitudes (rows `depth` bytes apart),
 * w rows `depth` bytes apart. Inlined with constant rows and columns, so the
 * accumulators live in registers. */
static inline __attribute__((always_inline)) void dot_block(int32_t totals[BLOCK_ROWS][BLOCK_COLUMNS],
                                                            const int8_t *signs, const uint8_t *magnitudes,
                                                            const int8_t *w, size_t depth, int rows, int columns) {
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i sums[BLOCK_ROWS][BLOCK_COLUMNS];
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < columns; c++) sums[r][c] = _mm256_setzero_si256();
    size_t k = 0;
    for (; k + 32 <= depth; k += 32) {
        __m256i weights[BLOCK_COLUMNS];
        for (int c = 0; c < columns; c++) weights[c] = _mm256_loadu_si256((const __m256i *)(w + c * depth + k));
        for (int r = 0; r < rows; r++) {
            __m256i sign = _mm256_loadu_si256((const __m256i *)(signs + r * depth + k));
            __m256i magnitude = _mm256_loadu_si256((const __m256i *)(magnitudes + r * depth + k));
            for (int c = 0; c < columns; c++) {
                __m256i pairs = _mm256_maddubs_epi16(magnitude, _mm256_sign_epi8(weights[c], sign));
                sums[r][c] = _mm256_add_epi32(sums[r][c], _mm256_madd_epi16(pairs, ones));
            }
        }
    }
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < columns; c++) {
            int32_t total = sum_lanes(sums[r][c]);
            for (size_t t = k; t < depth; t++) total += (int32_t)signs[r * depth + t] * w[c * depth + t];
            totals[r][c] = total;
        }
}

/* Any block: the full one in registers, smaller ones (the edges) a row at a time. */
static void dot_any(int32_t totals[BLOCK_ROWS][BLOCK_COLUMNS], const int8_t *signs, const uint8_t *magnitudes,
                    const int8_t *w, size_t depth, int rows, int columns) {
    if (rows == BLOCK_ROWS && columns == BLOCK_COLUMNS) {
        dot_block(totals, signs, magnitudes, w, depth, BLOCK_ROWS, BLOCK_COLUMNS);
        return;
    }
    for (int r = 0; r < rows; r++) {
        const int8_t *row_signs = signs + r * depth;
        const uint8_t *row_magnitudes = magnitudes + r * depth;
        if (columns == BLOCK_COLUMNS) dot_block(totals + r, row_signs, row_magnitudes, w, depth, 1, BLOCK_COLUMNS);
        else dot_block(totals + r, row_signs, row_magnitudes, w, depth, 1, 1);
    }
}

/* ------------------------------------------------ the AVX2 path (q8_path) */

/* Prepared rows: their scales, then their signs and magnitudes (quantize.h's planes, two of them). */
static size_t avx2_input_bytes(const kernel_q8 *q, size_t rows) { return q8_planes_bytes(q, rows, 2); }

static void avx2_prepare(void *prepared, const float *in, size_t in_stride, const kernel_q8 *q, size_t rows,
                         size_t part, void *temp) {
    (void)temp;
    size_t depth = q->depth, end = (part + 1) * Q8_PART_ROWS < rows ? (part + 1) * Q8_PART_ROWS : rows;
    float *row_scales = prepared;
    int8_t *signs = (int8_t *)prepared + q8_planes_offset(rows);
    uint8_t *magnitudes = (uint8_t *)(signs + rows * depth);
    for (size_t r = part * Q8_PART_ROWS; r < end; r++)
        row_scales[r] = quantize_row_signed(signs + r * depth, magnitudes + r * depth, in + r * in_stride,
                                            q->in_features, depth);
}

/* Columns first .. first+count, COLUMN_PANEL columns at a time over every row block. */
static void avx2_product(float *out, size_t out_stride, const void *prepared, const kernel_q8 *q, const float *bias,
                         size_t rows, bool accumulate, size_t first, size_t count, size_t next, void *scratch,
                         size_t scratch_bytes) {
    (void)next, (void)scratch, (void)scratch_bytes;
    size_t depth = q->depth;
    const float *row_scales = prepared;
    const int8_t *signs = (const int8_t *)prepared + q8_planes_offset(rows);
    const uint8_t *magnitudes = (const uint8_t *)(signs + rows * depth);
    for (size_t c0 = first; c0 < first + count; c0 += COLUMN_PANEL) {
        size_t c_end = c0 + COLUMN_PANEL < first + count ? c0 + COLUMN_PANEL : first + count;
        for (size_t r = 0; r < rows; r += BLOCK_ROWS) {
            int block_rows = rows - r < BLOCK_ROWS ? (int)(rows - r) : BLOCK_ROWS;
            for (size_t c = c0; c < c_end; c += BLOCK_COLUMNS) {
                int block_columns = c_end - c < BLOCK_COLUMNS ? (int)(c_end - c) : BLOCK_COLUMNS;
                int32_t totals[BLOCK_ROWS][BLOCK_COLUMNS];
                dot_any(totals, signs + r * depth, magnitudes + r * depth, q->weight + c * depth, depth, block_rows,
                        block_columns);
                for (int i = 0; i < block_rows; i++)
                    for (int j = 0; j < block_columns; j++) {
                        float value = q8_finish(totals[i][j] + 128 * q->sum[c + j], q->sum[c + j], row_scales[r + i],
                                                q->scale[c + j], bias ? bias + c + j : NULL);
                        float *cell = out + (r + i) * out_stride + c + j;
                        *cell = accumulate ? *cell + value : value;
                    }
            }
        }
    }
}

static size_t avx2_chunk_rows(const kernel_q8 *q, size_t rows_left, size_t scratch_bytes) {
    return q8_planes_chunk_rows(q, rows_left, scratch_bytes, 2);
}

const q8_path q8_path_avx2 = {avx2_input_bytes, q8_planes_temp_bytes, q8_planes_parts, avx2_prepare, avx2_product,
                              avx2_chunk_rows, NULL};
