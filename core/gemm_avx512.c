/* gemm_avx512.c — our own linear-layer kernel for CPUs with AVX-512, used
 * by kernel_linear in place of OpenBLAS. It reads the weights as the
 * checkpoint stores them ([out_features, in_features], rows contiguous), so
 * nothing is packed or converted at load: a tile of 4 input rows × 6 weight
 * rows keeps 24 vectors of partial dot products in registers while both run
 * along in_features, 16 at a time, and each sum is reduced once at the end.
 * Compiled with -mavx512f; only called when the CPU has it. */
#include <immintrin.h>
#include <stddef.h>

#include "kernels.h"

#define TILE_ROWS 4
#define TILE_COLUMNS 6

static inline __attribute__((always_inline)) void tile(float *out, size_t out_stride, const float *in,
                                                        size_t in_stride, const float *weight, size_t in_features,
                                                        const float *bias, const int rows, const int columns) {
    __m512 sum[TILE_ROWS][TILE_COLUMNS];
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < columns; c++) sum[r][c] = _mm512_setzero_ps();
    size_t k = 0;
    for (; k + 16 <= in_features; k += 16) {
        __m512 x[TILE_ROWS];
        for (int r = 0; r < rows; r++) x[r] = _mm512_loadu_ps(in + (size_t)r * in_stride + k);
        for (int c = 0; c < columns; c++) {
            __m512 w = _mm512_loadu_ps(weight + (size_t)c * in_features + k);
            for (int r = 0; r < rows; r++) sum[r][c] = _mm512_fmadd_ps(x[r], w, sum[r][c]);
        }
    }
    if (k < in_features) { /* the last 1..15 features, masked */
        __mmask16 mask = (__mmask16)((1u << (in_features - k)) - 1);
        __m512 x[TILE_ROWS];
        for (int r = 0; r < rows; r++) x[r] = _mm512_maskz_loadu_ps(mask, in + (size_t)r * in_stride + k);
        for (int c = 0; c < columns; c++) {
            __m512 w = _mm512_maskz_loadu_ps(mask, weight + (size_t)c * in_features + k);
            for (int r = 0; r < rows; r++) sum[r][c] = _mm512_fmadd_ps(x[r], w, sum[r][c]);
        }
    }
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < columns; c++)
            out[(size_t)r * out_stride + c] = _mm512_reduce_add_ps(sum[r][c]) + (bias ? bias[c] : 0.0f);
}

/* Each (rows, columns) shape of a tile gets its own fully unrolled copy. */
#define TILE_CASE(R, C)                                                                                                \
    case (R)*8 + (C): tile(out, out_stride, in, in_stride, weight, in_features, bias, R, C); break;
#define TILE_CASES(R) TILE_CASE(R, 1) TILE_CASE(R, 2) TILE_CASE(R, 3) TILE_CASE(R, 4) TILE_CASE(R, 5) TILE_CASE(R, 6)

static void any_tile(float *out, size_t out_stride, const float *in, size_t in_stride, const float *weight,
                     size_t in_features, const float *bias, int rows, int columns) {
    switch (rows * 8 + columns) {
        TILE_CASES(1)
        TILE_CASES(2)
        TILE_CASES(3)
        TILE_CASES(4)
    default: break;
    }
}

/* Rows per block: their inputs stay in L2 while the block's weight rows stream past. */
#define ROW_BLOCK 64

void kernel_linear_avx512(float *out, size_t out_stride, const float *in, size_t in_stride, const float *weight,
                          const float *bias, size_t rows, size_t in_features, size_t first_column, size_t columns) {
    for (size_t r0 = 0; r0 < rows; r0 += ROW_BLOCK) {
        size_t row_end = r0 + ROW_BLOCK < rows ? r0 + ROW_BLOCK : rows;
        for (size_t c = first_column; c < first_column + columns; c += TILE_COLUMNS) {
            int tile_columns = (int)(first_column + columns - c < TILE_COLUMNS ? first_column + columns - c : TILE_COLUMNS);
            const float *w = weight + c * in_features;
            const float *b = bias ? bias + c : NULL;
            for (size_t r = r0; r < row_end; r += TILE_ROWS) {
                int tile_rows = (int)(row_end - r < TILE_ROWS ? row_end - r : TILE_ROWS);
                any_tile(out + r * out_stride + c, out_stride, in + r * in_stride, in_stride, w, in_features, b,
                         tile_rows, tile_columns);
            }
        }
    }
}
