/* avx512_math.h — arithmetic shared by the AVX-512 kernels (activations_avx512.c's
 * softmax, the attention blocks of linear_avx512.c and attention_bf16_avx512.c):
 * e^x over 16 lanes, the sum of 16 lanes in one fixed order, and a block's
 * causal mask and softmax down its lines of scores. The kernels give bit for
 * bit the same probabilities because they share these. Include only from
 * files built with -mavx512f. */
#ifndef GLIMPSE_CORE_AVX512_MATH_H
#define GLIMPSE_CORE_AVX512_MATH_H

#include <immintrin.h>
#include <math.h>
#include <stddef.h>

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

/* The sum of the 16 lanes of a, in this order (a tree: lanes i + 8 and i,
 * then i + 4 and i, then 0 + 2 and 1 + 3, then those two). The attention
 * kernel adds 16 vectors lane by lane in the same order (sum_lanes_of). */
static inline float sum16(__m512 a) {
    __m256 half = _mm256_add_ps(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1)),
                                _mm512_castps512_ps256(a));
    __m128 quarter = _mm_add_ps(_mm256_extractf128_ps(half, 1), _mm256_castps256_ps128(half));
    __m128 pairs = _mm_add_ps(quarter, _mm_movehl_ps(quarter, quarter)); /* lanes 0 + 2, 1 + 3 */
    return _mm_cvtss_f32(_mm_add_ss(pairs, _mm_shuffle_ps(pairs, pairs, 1)));
}

/* Lane l of the result is sum16 of (part[0][l], ..., part[15][l]): sixteen
 * sums at once, each in sum16's order. */
static inline __m512 sum_lanes_of(const __m512 part[16]) {
    __m512 half[8], quarter[4];
    for (int i = 0; i < 8; i++) half[i] = _mm512_add_ps(part[8 + i], part[i]);
    for (int i = 0; i < 4; i++) quarter[i] = _mm512_add_ps(half[4 + i], half[i]);
    return _mm512_add_ps(_mm512_add_ps(quarter[0], quarter[2]), _mm512_add_ps(quarter[1], quarter[3]));
}

/* Scores st[j][t] (a line of width = vectors · 16 queries per key, keys j < seen) of a causal block: query t
 * sees keys j <= t + visible, so key j hides from the queries before j - visible (-infinity). */
static inline void hide_later_keys(float *st, size_t seen, int vectors, long long visible) {
    const size_t width = (size_t)vectors * 16;
    const __m512i lanes = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    for (size_t j = 0; j < seen; j++) {
        long long hidden_queries = (long long)j - visible;
        if (hidden_queries <= 0) continue;
        if (hidden_queries > (long long)width) hidden_queries = (long long)width;
        for (int v = 0; v < vectors; v++) {
            __mmask16 hidden = _mm512_cmplt_epi32_mask(_mm512_add_epi32(lanes, _mm512_set1_epi32(16 * v)),
                                                       _mm512_set1_epi32((int)hidden_queries));
            float *line = st + j * width + 16 * (size_t)v;
            _mm512_store_ps(line, _mm512_mask_blend_ps(hidden, _mm512_load_ps(line), _mm512_set1_ps(-INFINITY)));
        }
    }
}

/* Softmax over the keys (the lines of st) for each query (lane), in place: the max, e^(x - max) and the sum,
 * then the product by the sum's inverse, as kernel_softmax_avx512 does for a row of scores, with the sum
 * taken in its order (16 partial sums, key j in partial j mod 16, added as sum16 adds lanes), so that every
 * probability is bit for bit the one it gives. A query that sees no key gets zeros, as there. */
static inline void softmax_columns(float *st, size_t keys, int vectors) {
    const size_t width = (size_t)vectors * 16;
    for (int v = 0; v < vectors; v++) {
        float *line = st + 16 * (size_t)v;
        __m512 top = _mm512_set1_ps(-INFINITY);
        for (size_t j = 0; j < keys; j++) top = _mm512_max_ps(top, _mm512_load_ps(line + j * width));
        __m512 part[16];
        for (int i = 0; i < 16; i++) part[i] = _mm512_setzero_ps();
        for (size_t j = 0; j < keys; j++) {
            __m512 e = exp16(_mm512_sub_ps(_mm512_load_ps(line + j * width), top));
            _mm512_store_ps(line + j * width, e);
            part[j % 16] = _mm512_add_ps(part[j % 16], e);
        }
        __mmask16 seen = _mm512_cmp_ps_mask(top, _mm512_set1_ps(-INFINITY), _CMP_NEQ_OQ);
        __m512 inverse = _mm512_maskz_div_ps(seen, _mm512_set1_ps(1.0f), sum_lanes_of(part));
        for (size_t j = 0; j < keys; j++)
            _mm512_store_ps(line + j * width, _mm512_mul_ps(_mm512_load_ps(line + j * width), inverse));
    }
}

#endif
