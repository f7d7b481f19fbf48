/* activations_avx512.c — LayerNorm, softmax, the GELU activations and the
 * element-wise sums on CPUs with AVX-512 (kernels.c calls these where
 * cpu_has_avx512(); their plain twins, the *_reference functions, are there
 * too). The linear layer's kernels are in linear_avx512.c. */
#include <immintrin.h>
#include <math.h>
#include <stddef.h>

#include "core/avx512_math.h"
#include "core/kernels.h"
#include "core/kernels_avx512.h"

void kernel_add_avx512(float *x, const float *y, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(x + i, _mm512_add_ps(_mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i)));
    if (i < n) {
        __mmask16 tail = (__mmask16)((1u << (n - i)) - 1);
        __m512 sum = _mm512_add_ps(_mm512_maskz_loadu_ps(tail, x + i), _mm512_maskz_loadu_ps(tail, y + i));
        _mm512_mask_storeu_ps(x + i, tail, sum);
    }
}

void kernel_multiply_add_avx512(float *x, const float *a, const float *b, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 product = _mm512_mul_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i));
        __asm__("" : "+v"(product)); /* (rounded: not fused into the add) */
        _mm512_storeu_ps(x + i, _mm512_add_ps(_mm512_loadu_ps(x + i), product));
    }
    if (i < n) {
        __mmask16 tail = (__mmask16)((1u << (n - i)) - 1);
        __m512 product = _mm512_mul_ps(_mm512_maskz_loadu_ps(tail, a + i), _mm512_maskz_loadu_ps(tail, b + i));
        __asm__("" : "+v"(product));
        _mm512_mask_storeu_ps(x + i, tail, _mm512_add_ps(_mm512_maskz_loadu_ps(tail, x + i), product));
    }
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
        __m512 inverse = _mm512_set1_ps(1.0f / sum16(sum));
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
    kernel_gelu_reference(x + i, n - i); /* the last 0..15 */
}

void kernel_quick_gelu_avx512(float *x, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 v = _mm512_loadu_ps(x + i);
        __m512 e = exp16(_mm512_mul_ps(v, _mm512_set1_ps(-1.702f)));
        _mm512_storeu_ps(x + i, _mm512_div_ps(v, _mm512_add_ps(e, _mm512_set1_ps(1.0f))));
    }
    kernel_quick_gelu_reference(x + i, n - i); /* the last 0..15 */
}

/* The low and high 8 floats of x, widened exactly to doubles. */
static inline __m512d widen_low(__m512 x) { return _mm512_cvtps_pd(_mm512_castps512_ps256(x)); }
static inline __m512d widen_high(__m512 x) {
    return _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1)));
}

/* The lanes of 16 floats from i on that lie before dim. */
static inline __mmask16 lanes_before(size_t i, size_t dim) {
    return (__mmask16)(i >= dim ? 0 : dim - i >= 16 ? 0xFFFF : (1u << (dim - i)) - 1);
}

/* Features up to which a row's values are kept widened to double on the stack (16 KiB) between LayerNorm's
 * passes, rather than widened again in each. */
#define LAYERNORM_WIDE_DIM 2048

/* kernel_layernorm with the statistics accumulated in double as the plain kernel does (in 4 × 8 lanes rather
 * than one running sum) and the same float rounding of the normalised value before weight and bias. Each row's
 * values are widened once where they fit on the stack: widening in every pass and one chain of dependent
 * additions left a row of 768 at ~940 cycles. The last pass asks for the next row, a line per 16 values: the
 * rows come from products whose columns the other threads wrote, and the first pass waited for them. The first
 * pass asks to own the next row's output lines (prefetchw): the products of the layer before read them on every
 * core, and writing lines another core holds waited for it to give them up at each store (200 rows of 768 on an
 * AMD EPYC whose two cores are 228 ns apart: 157 → 91 µs where the other core had read the output, 40 → 38 µs
 * where it had not). */
void kernel_layernorm_avx512(float *out, const float *in, const float *weight, const float *bias, size_t rows,
                             size_t dim, float epsilon) {
    double wide[LAYERNORM_WIDE_DIM + 32] __attribute__((aligned(64)));
    const int keep = dim <= LAYERNORM_WIDE_DIM;
    for (size_t r = 0; r < rows; r++) {
        const float *x = in + r * dim;
        float *y = out + r * dim, *y_next = r + 1 < rows ? y + dim : NULL;
        __m512d s0 = _mm512_setzero_pd(), s1 = s0, s2 = s0, s3 = s0;
        for (size_t i = 0; i < dim; i += 32) { /* (lanes past dim load as zeros) */
            if (y_next) {
                kernel_prefetch_to_write(y_next + i);
                if (i + 16 < dim) kernel_prefetch_to_write(y_next + i + 16);
            }
            __m512 v = _mm512_maskz_loadu_ps(lanes_before(i, dim), x + i);
            __m512 u = _mm512_maskz_loadu_ps(lanes_before(i + 16, dim), x + i + 16);
            __m512d a = widen_low(v), b = widen_high(v), c = widen_low(u), d = widen_high(u);
            if (keep) {
                _mm512_store_pd(wide + i, a), _mm512_store_pd(wide + i + 8, b);
                _mm512_store_pd(wide + i + 16, c), _mm512_store_pd(wide + i + 24, d);
            }
            s0 = _mm512_add_pd(s0, a), s1 = _mm512_add_pd(s1, b), s2 = _mm512_add_pd(s2, c), s3 = _mm512_add_pd(s3, d);
        }
        __m512d total = _mm512_add_pd(_mm512_add_pd(s0, s1), _mm512_add_pd(s2, s3));
        __m512d centre = _mm512_set1_pd(_mm512_reduce_add_pd(total) / (double)dim);
        s0 = _mm512_setzero_pd(), s1 = s0, s2 = s0, s3 = s0;
        for (size_t i = 0; i < dim; i += 32) {
            __mmask16 first = lanes_before(i, dim), second = lanes_before(i + 16, dim);
            __m512d a, b, c, d;
            if (keep) {
                a = _mm512_load_pd(wide + i), b = _mm512_load_pd(wide + i + 8);
                c = _mm512_load_pd(wide + i + 16), d = _mm512_load_pd(wide + i + 24);
            } else {
                __m512 v = _mm512_maskz_loadu_ps(first, x + i), u = _mm512_maskz_loadu_ps(second, x + i + 16);
                a = widen_low(v), b = widen_high(v), c = widen_low(u), d = widen_high(u);
            }
            a = _mm512_sub_pd(a, centre), b = _mm512_sub_pd(b, centre);
            c = _mm512_sub_pd(c, centre), d = _mm512_sub_pd(d, centre);
            s0 = _mm512_mask3_fmadd_pd(a, a, s0, (__mmask8)first);
            s1 = _mm512_mask3_fmadd_pd(b, b, s1, (__mmask8)(first >> 8));
            s2 = _mm512_mask3_fmadd_pd(c, c, s2, (__mmask8)second);
            s3 = _mm512_mask3_fmadd_pd(d, d, s3, (__mmask8)(second >> 8));
        }
        total = _mm512_add_pd(_mm512_add_pd(s0, s1), _mm512_add_pd(s2, s3));
        __m512d inverse = _mm512_set1_pd(1.0 / sqrt(_mm512_reduce_add_pd(total) / (double)dim + (double)epsilon));
        const float *next = r + 1 < rows ? x + dim : NULL;
        for (size_t i = 0; i < dim; i += 16) {
            __mmask16 lanes = lanes_before(i, dim);
            __m512d a, b;
            if (next) _mm_prefetch((const char *)(next + i), _MM_HINT_T0);
            if (keep) {
                a = _mm512_load_pd(wide + i), b = _mm512_load_pd(wide + i + 8);
            } else {
                __m512 v = _mm512_maskz_loadu_ps(lanes, x + i);
                a = widen_low(v), b = widen_high(v);
            }
            __m256 low = _mm512_cvtpd_ps(_mm512_mul_pd(_mm512_sub_pd(a, centre), inverse));
            __m256 high = _mm512_cvtpd_ps(_mm512_mul_pd(_mm512_sub_pd(b, centre), inverse));
            __m512 normalised = _mm512_castpd_ps(
                _mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(low)), _mm256_castps_pd(high), 1));
            __m512 scaled = _mm512_mul_ps(normalised, _mm512_maskz_loadu_ps(lanes, weight + i));
            _mm512_mask_storeu_ps(y + i, lanes, _mm512_add_ps(scaled, _mm512_maskz_loadu_ps(lanes, bias + i)));
        }
    }
}
