/* avx512.c — the kernels for CPUs with AVX-512: the linear layer (used by
 * kernel_linear in place of OpenBLAS) and the element-wise maths of
 * softmax and the GELU activations. Compiled with -mavx512f; only called
 * when the CPU has it (kernel_avx512_available).
 *
 * The linear layer is our own It reads the weights as the
 * checkpoint stores them ([out_features, in_features], rows contiguous), so
 * nothing is packed or converted at load: a tile of 4 input rows × 6 weight
 * rows keeps 24 vectors of partial dot products in registers while both run
 * along in_features, 16 at a time, and each sum is reduced once at the end.
 */
#include <immintrin.h>
#include <math.h>
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

/* ------------------------------------------------------- element-wise maths */

/* e^x for 16 floats: Cephes' expf (x = n·ln2 + r, a degree-5 polynomial for
 * e^r, scaled by 2^n), within 2 ulp over the float range; underflows to 0. */
static inline __m512 exp16(__m512 x) {
    const __m512 high = _mm512_set1_ps(88.3762626647949f), low = _mm512_set1_ps(-103.972084045410f);
    x = _mm512_min_ps(_mm512_max_ps(x, low), high);
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    x = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    x = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), x);
    __m512 p = _mm512_set1_ps(1.9875691500E-4f);
    p = _mm512_fmadd_ps(p, x, _mm512_set1_ps(1.3981999507E-3f));
    p = _mm512_fmadd_ps(p, x, _mm512_set1_ps(8.3334519073E-3f));
    p = _mm512_fmadd_ps(p, x, _mm512_set1_ps(4.1665795894E-2f));
    p = _mm512_fmadd_ps(p, x, _mm512_set1_ps(1.6666665459E-1f));
    p = _mm512_fmadd_ps(p, x, _mm512_set1_ps(5.0000001201E-1f));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(x, x), _mm512_add_ps(x, _mm512_set1_ps(1.0f)));
    return _mm512_scalef_ps(p, n);
}

void kernel_softmax_avx512(float *x, size_t rows, size_t n) {
    for (size_t r = 0; r < rows; r++) {
        float *row = x + r * n;
        __m512 largest = _mm512_set1_ps(-INFINITY);
        size_t i = 0;
        for (; i + 16 <= n; i += 16) largest = _mm512_max_ps(largest, _mm512_loadu_ps(row + i));
        __mmask16 tail = (__mmask16)((1u << (n - i)) - 1);
        if (i < n) largest = _mm512_mask_max_ps(largest, tail, largest, _mm512_maskz_loadu_ps(tail, row + i));
        float top = _mm512_reduce_max_ps(largest);
        if (top == -INFINITY) { /* every entry masked, as the plain kernel defines it */
            for (size_t j = 0; j < n; j++) row[j] = 0.0f;
            continue;
        }
        __m512 shift = _mm512_set1_ps(top), sum = _mm512_setzero_ps();
        for (i = 0; i + 16 <= n; i += 16) {
            __m512 e = exp16(_mm512_sub_ps(_mm512_loadu_ps(row + i), shift));
            _mm512_storeu_ps(row + i, e);
            sum = _mm512_add_ps(sum, e);
        }
        if (i < n) {
            __m512 e = exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(tail, row + i), shift));
            _mm512_mask_storeu_ps(row + i, tail, e);
            sum = _mm512_mask_add_ps(sum, tail, sum, e);
        }
        __m512 inverse = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(sum));
        for (i = 0; i + 16 <= n; i += 16) _mm512_storeu_ps(row + i, _mm512_mul_ps(_mm512_loadu_ps(row + i), inverse));
        if (i < n) _mm512_mask_storeu_ps(row + i, tail, _mm512_mul_ps(_mm512_maskz_loadu_ps(tail, row + i), inverse));
    }
}

/* erf(x) by Abramowitz and Stegun 7.1.26 (absolute error below 1.5e-7). */
static inline __m512 erf16(__m512 x) {
    /* (bit operations through the integer view: _mm512_and_ps needs AVX512DQ) */
    __m512i sign = _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32((int)0x80000000u));
    __m512 a = _mm512_abs_ps(x);
    __m512 t = _mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_fmadd_ps(a, _mm512_set1_ps(0.3275911f), _mm512_set1_ps(1.0f)));
    __m512 p = _mm512_set1_ps(1.061405429f);
    p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(-1.453152027f));
    p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(1.421413741f));
    p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(-0.284496736f));
    p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(0.254829592f));
    p = _mm512_mul_ps(p, t);
    __m512 y = _mm512_fnmadd_ps(p, exp16(_mm512_mul_ps(_mm512_sub_ps(_mm512_setzero_ps(), a), a)), _mm512_set1_ps(1.0f));
    return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(y), sign));
}

void kernel_gelu_avx512(float *x, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 v = _mm512_loadu_ps(x + i);
        __m512 e = erf16(_mm512_mul_ps(v, _mm512_set1_ps(0.70710678118654752440f)));
        _mm512_storeu_ps(x + i, _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(0.5f), v), _mm512_add_ps(e, _mm512_set1_ps(1.0f))));
    }
    for (; i < n; i++) x[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678118654752440f));
}

void kernel_quick_gelu_avx512(float *x, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 v = _mm512_loadu_ps(x + i);
        __m512 e = exp16(_mm512_mul_ps(v, _mm512_set1_ps(-1.702f)));
        _mm512_storeu_ps(x + i, _mm512_div_ps(v, _mm512_add_ps(e, _mm512_set1_ps(1.0f))));
    }
    for (; i < n; i++) x[i] = x[i] / (1.0f + expf(-1.702f * x[i]));
}
