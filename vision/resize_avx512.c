/* resize_avx512.c — resize.c's two passes on AVX-512 (where cpu_has_avx512()),
 * with Pillow's integer arithmetic unchanged: 8-bit samples times 22-bit
 * fixed-point weights, summed in 32 bits from the same rounding constant,
 * shifted and clipped to 8 bits. The sums are exact integers that cannot
 * overflow (|Σ w| ≤ a few times 2^22, samples ≤ 255), so adding them in
 * another order gives the same bits as the plain loops and as Pillow.
 *
 * Horizontal pass (the expensive one: a 4032-pixel row shrunk to 298 takes
 * 54 taps per output sample): 16 rows at a time, one per 32-bit lane. The
 * block is transposed into columns (sample j of the 16 rows in one vector),
 * so that every tap is one load and one multiply-add for 16 rows, whatever
 * the window's position; the results are transposed back into rows.
 * Vertical pass: 16 samples of a row at a time, the window's rows summed. */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "core/avx512_tiles.h"
#include "vision/resize_kernels.h"

#define BITS RESIZE_PRECISION_BITS

static inline __m512i clip8_lanes(__m512i sum) {
    __m512i value = _mm512_srai_epi32(sum, BITS); /* (arithmetic: rounds toward -inf, as >> on int32_t) */
    return _mm512_min_epi32(_mm512_max_epi32(value, _mm512_setzero_si512()), _mm512_set1_epi32(255));
}

/* columns[j][r] = rows[r][j] for r < 16 (rows past `count` repeat the last), j < n. */
static void block_to_columns(int32_t (*columns)[16], const uint8_t *source, size_t stride, int count, size_t n) {
    const uint8_t *row[16];
    for (int r = 0; r < 16; r++) row[r] = source + (size_t)(r < count ? r : count - 1) * stride;
    size_t j = 0;
    for (; j + 16 <= n; j += 16) {
        __m512 v[16];
        for (int r = 0; r < 16; r++)
            v[r] = _mm512_castsi512_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(row[r] + j))));
        transpose16(v);
        for (int k = 0; k < 16; k++) _mm512_store_si512(columns[j + (size_t)k], _mm512_castps_si512(v[k]));
    }
    for (; j < n; j++)
        for (int r = 0; r < 16; r++) columns[j][r] = row[r][j];
}

/* rows[r][j] = columns[j][r] for r < count, j < n (values already 0..255). */
static void columns_to_block(uint8_t *target, size_t stride, int count, const int32_t (*columns)[16], size_t n) {
    size_t j = 0;
    for (; j + 16 <= n; j += 16) {
        __m512 v[16];
        for (int k = 0; k < 16; k++) v[k] = _mm512_castsi512_ps(_mm512_load_si512(columns[j + (size_t)k]));
        transpose16(v);
        for (int r = 0; r < count; r++)
            _mm_storeu_si128((__m128i *)(target + (size_t)r * stride + j),
                             _mm512_cvtepi32_epi8(_mm512_castps_si512(v[r])));
    }
    for (; j < n; j++)
        for (int r = 0; r < count; r++) target[(size_t)r * stride + j] = (uint8_t)columns[j][r];
}

void resize_horizontal_avx512(uint8_t *out, int out_width, const uint8_t *in, int in_width, int height,
                              const int *first, const int *count, const int32_t *weights, int window,
                              int32_t (*columns)[16], int32_t (*results)[16]) {
    const size_t in_row = (size_t)in_width * 3, out_row = (size_t)out_width * 3;
    const __m512i half = _mm512_set1_epi32(1 << (BITS - 1));
    for (int y = 0; y < height; y += 16) {
        int rows = height - y < 16 ? height - y : 16;
        block_to_columns(columns, in + (size_t)y * in_row, in_row, rows, in_row);
        for (int x = 0; x < out_width; x++) {
            const int32_t *w = weights + (size_t)x * window;
            const int32_t(*p)[16] = columns + (size_t)first[x] * 3;
            __m512i r = half, g = half, b = half;
            for (int i = 0; i < count[x]; i++) {
                __m512i weight = _mm512_set1_epi32(w[i]);
                r = _mm512_add_epi32(r, _mm512_mullo_epi32(_mm512_load_si512(p[3 * i]), weight));
                g = _mm512_add_epi32(g, _mm512_mullo_epi32(_mm512_load_si512(p[3 * i + 1]), weight));
                b = _mm512_add_epi32(b, _mm512_mullo_epi32(_mm512_load_si512(p[3 * i + 2]), weight));
            }
            _mm512_store_si512(results[3 * (size_t)x], clip8_lanes(r));
            _mm512_store_si512(results[3 * (size_t)x + 1], clip8_lanes(g));
            _mm512_store_si512(results[3 * (size_t)x + 2], clip8_lanes(b));
        }
        columns_to_block(out + (size_t)y * out_row, out_row, rows, (const int32_t(*)[16])results, out_row);
    }
}

void resize_vertical_avx512(uint8_t *out, int out_height, const uint8_t *in, int width, const int *first,
                            const int *count, const int32_t *weights, int window) {
    const size_t row = (size_t)width * 3;
    const __m512i half = _mm512_set1_epi32(1 << (BITS - 1));
    for (int y = 0; y < out_height; y++) {
        const int32_t *w = weights + (size_t)y * window;
        const uint8_t *source = in + (size_t)first[y] * row;
        uint8_t *target = out + (size_t)y * row;
        for (size_t x = 0; x < row; x += 16) {
            __mmask16 lanes = (__mmask16)(row - x >= 16 ? 0xFFFF : (1u << (row - x)) - 1);
            __m512i sum = half;
            for (int i = 0; i < count[y]; i++)
                sum = _mm512_add_epi32(sum, _mm512_mullo_epi32(
                                                _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(lanes, source + i * row + x)),
                                                _mm512_set1_epi32(w[i])));
            _mm_mask_storeu_epi8(target + x, lanes, _mm512_cvtepi32_epi8(clip8_lanes(sum)));
        }
    }
}
