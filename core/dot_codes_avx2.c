/* dot_codes_avx2.c — kernel_dot_codes on AVX2 (kernels.h): the int8 scan of
 * a search's stored codes, 32 codes a step. Integer sums, so the results are
 * kernel_dot_codes_reference's exactly. Built with -mavx2 on x86-64 only;
 * kernels.c calls it where cpu_has_avx2(). */
#include <immintrin.h>
#include <stdint.h>

#include "core/kernels.h"

/* |query| · (codes with query's sign) in 16-bit pairs (at most 2 · 127 ·
 * 127, no saturation), then 32-bit sums; the codes' own sum as 1 · codes the
 * same way. */
void kernel_dot_codes_avx2(int32_t *dots, int32_t *sums, const int8_t *query, const int8_t *codes, size_t depth,
                           size_t first, size_t count) {
    const size_t whole = depth / 32 * 32;
    const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
    for (size_t r = first; r < first + count; r++) {
        const int8_t *row = codes + r * depth;
        __m256i dot = _mm256_setzero_si256(), sum = _mm256_setzero_si256();
        for (size_t k = 0; k < whole; k += 32) {
            __m256i q = _mm256_loadu_si256((const __m256i *)(query + k));
            __m256i c = _mm256_loadu_si256((const __m256i *)(row + k));
            __m256i products = _mm256_maddubs_epi16(_mm256_abs_epi8(q), _mm256_sign_epi8(c, q));
            dot = _mm256_add_epi32(dot, _mm256_madd_epi16(products, ones16));
            sum = _mm256_add_epi32(sum, _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, c), ones16));
        }
        int32_t lanes[8], sum_lanes[8], d = 0, s = 0;
        _mm256_storeu_si256((__m256i *)lanes, dot);
        _mm256_storeu_si256((__m256i *)sum_lanes, sum);
        for (int i = 0; i < 8; i++) d += lanes[i], s += sum_lanes[i];
        for (size_t k = whole; k < depth; k++) d += (int32_t)query[k] * row[k], s += row[k];
        dots[r] = d, sums[r] = s;
    }
}
