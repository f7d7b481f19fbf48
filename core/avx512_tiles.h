/* avx512_tiles.h — register-block shuffles shared by the AVX-512 product
 * kernels (linear_avx512.c, linear_q8_vnni.c, linear_q8_amx.c, linear_bf16x3_amx.c): transposing a 16 × 16 block
 * of 32-bit lanes (rows into a panel, weights into packed lines), and writing an 8-column × 16-row block of
 * results (or part of one) to row-major output. Include only from files built with -mavx512f. */
#ifndef GLIMPSE_CORE_AVX512_TILES_H
#define GLIMPSE_CORE_AVX512_TILES_H

#include <immintrin.h>
#include <stddef.h>

/* Transposes the 16 × 16 block rows[i][j] into columns: rows[j] becomes the
 * old column j. Four rounds of shuffles: pairs of floats, quads, 128-bit lanes twice. */
static inline void transpose16(__m512 r[16]) {
    __m512 t[16], u[16];
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    /* u[4i + j], lane L: rows 4i..4i+3 of column 4L + j */
    for (int i = 0; i < 4; i++) {
        u[4 * i + 0] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
        u[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
        u[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
        u[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
    }
    for (int j = 0; j < 4; j++) {
        __m512 even_low = _mm512_shuffle_f32x4(u[j], u[4 + j], 0x88);     /* lanes 0, 2 of rows 0-7 */
        __m512 odd_low = _mm512_shuffle_f32x4(u[j], u[4 + j], 0xDD);      /* lanes 1, 3 of rows 0-7 */
        __m512 even_high = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0x88); /* ... of rows 8-15 */
        __m512 odd_high = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0xDD);
        r[j] = _mm512_shuffle_f32x4(even_low, even_high, 0x88);
        r[8 + j] = _mm512_shuffle_f32x4(even_low, even_high, 0xDD);
        r[4 + j] = _mm512_shuffle_f32x4(odd_low, odd_high, 0x88);
        r[12 + j] = _mm512_shuffle_f32x4(odd_low, odd_high, 0xDD);
    }
}

/* Writes (or adds) the 8 columns × 16 rows of sums in s[c] (row i in lane i)
 * to out[i][c], transposing in registers: the rows 0-3 of 4 consecutive columns
 * come together first, then the two halves of each 8-column row. */
static inline void store_8x16(float *out, size_t out_stride, const __m512 s[8], int accumulate) {
    __m512 t[8], u[8];
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm512_unpacklo_ps(s[2 * i], s[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(s[2 * i], s[2 * i + 1]);
    }
    /* u[j] (columns 0-3) and u[4 + j] (columns 4-7), lane L: row 4L + j */
    for (int h = 0; h < 2; h++) {
        u[4 * h + 0] = _mm512_shuffle_ps(t[4 * h], t[4 * h + 2], 0x44);
        u[4 * h + 1] = _mm512_shuffle_ps(t[4 * h], t[4 * h + 2], 0xEE);
        u[4 * h + 2] = _mm512_shuffle_ps(t[4 * h + 1], t[4 * h + 3], 0x44);
        u[4 * h + 3] = _mm512_shuffle_ps(t[4 * h + 1], t[4 * h + 3], 0xEE);
    }
    for (int j = 0; j < 4; j++) {
        __m512 low = _mm512_shuffle_f32x4(u[j], u[4 + j], 0x44);  /* lanes 0, 1 of u[j], then of u[4+j] */
        __m512 high = _mm512_shuffle_f32x4(u[j], u[4 + j], 0xEE); /* lanes 2, 3 */
        low = _mm512_shuffle_f32x4(low, low, 0xD8);                /* row j | row 4 + j */
        high = _mm512_shuffle_f32x4(high, high, 0xD8);             /* row 8 + j | row 12 + j */
        __m256 part[4] = {_mm512_castps512_ps256(low),
                          _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(low), 1)),
                          _mm512_castps512_ps256(high),
                          _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(high), 1))};
        for (int q = 0; q < 4; q++) {
            float *cell = out + (size_t)(4 * q + j) * out_stride;
            _mm256_storeu_ps(cell, accumulate ? _mm256_add_ps(_mm256_loadu_ps(cell), part[q]) : part[q]);
        }
    }
}

/* The inverse of store_8x16: s[c] (row i in lane i) = out[i][c] for 8 columns × 16 rows, each row's 8 values
 * loaded as the low half of a vector and the 16 × 16 block transposed. */
static inline void load_8x16(__m512 s[8], const float *out, size_t out_stride) {
    __m512 r[16];
    for (int i = 0; i < 16; i++) r[i] = _mm512_zextps256_ps512(_mm256_loadu_ps(out + (size_t)i * out_stride));
    transpose16(r);
    for (int c = 0; c < 8; c++) s[c] = r[c];
}

/* Writes (or adds) columns (≤ 8) × count (≤ 16) rows of results, s[c] holding
 * column c (row i in lane i): a full block through store_8x16, a partial one
 * spilled to the stack and written element by element. */
static inline void store_tile(float *out, size_t out_stride, const __m512 s[8], int columns, size_t count,
                              int accumulate) {
    if (columns == 8 && count == 16) {
        store_8x16(out, out_stride, s, accumulate);
        return;
    }
    float spill[8][16] __attribute__((aligned(64)));
    for (int c = 0; c < columns; c++) _mm512_store_ps(spill[c], s[c]);
    for (size_t i = 0; i < count; i++)
        for (int c = 0; c < columns; c++) {
            float *cell = out + i * out_stride + c;
            *cell = accumulate ? *cell + spill[c][i] : spill[c][i];
        }
}

#endif
