/* attention_bf16_avx512.c — a block of queries' attention with its two
 * products on bfloat16 (AVX512_BF16's vdpbf16ps: 16 lanes × 2 products of
 * bfloat16 pairs added into float32 sums), for the int8 models' encoder
 * layers, whose products are already 8-bit. The queries, keys, values and
 * probabilities are rounded to bfloat16 (to nearest, even); the scores, the
 * softmax and every sum stay float32. The same shape as linear_avx512.c's
 * float32 block (kernel_attention_block_avx512): the queries transposed into
 * a panel (lanes = queries), a line of the queries' scores per key, the
 * softmax down the keys, then the values' product. A lane of the panel holds
 * two neighbouring features (or keys) of one query, so that one vdpbf16ps
 * does 32 multiply-adds where an FMA does 16. Compiled with -mavx512f
 * -mavx512bw -mavx512vl -mavx512bf16. */
#include <immintrin.h>
#include <string.h>

#include "core/avx512_math.h"
#include "core/avx512_tiles.h"
#include "core/kernels_avx512.h"

#define BF16_PANEL_VECTORS 3 /* queries of a block, in vectors of 16 */
#define BF16_COLUMNS 8       /* keys (scores) or features (values) per micro-kernel */

/* sum += a · b over 16 lanes of bfloat16 pairs. In assembly, as linear_q8_vnni.c's vpdpbusd, whose intrinsic
 * GCC 12 compiled with a copy of every sum around each instruction (test_kernel_loops guards the loops). */
static inline __m512 dot_pairs(__m512 sum, __m512i a, __m512i b) {
    __asm__("vdpbf16ps %2, %1, %0" : "+v"(sum) : "v"(a), "v"(b));
    return sum;
}

/* 16 lanes of pairs: the low half of lane i from low[i], the high half from high[i], each rounded to bfloat16. */
static inline __m512i pairs_of(__m512 low, __m512 high) {
    __m512i l = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(low));
    __m512i h = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(high));
    return _mm512_or_si512(l, _mm512_slli_epi32(h, 16));
}

/* 32 floats from row (n of them real, the rest 0) as 16 pairs. */
static inline __m512i row_pairs(const float *row, size_t n) {
    __mmask16 low = (__mmask16)(n >= 16 ? 0xFFFF : (1u << n) - 1);
    __mmask16 high = (__mmask16)(n >= 32 ? 0xFFFF : n > 16 ? (1u << (n - 16)) - 1 : 0);
    return (__m512i)_mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(high, row + 16), _mm512_maskz_loadu_ps(low, row));
}

/* panel[p][t] (pairs × width words) = features 2p, 2p+1 of query t, for t < count (zero up to width), pairs a
 * multiple of 16. */
static void pack_query_pairs(uint32_t *panel, const float *q, size_t q_stride, size_t count, size_t depth,
                             size_t pairs, size_t width) {
    for (size_t first = 0; first < width; first += 16)
        for (size_t p = 0; p < pairs; p += 16) {
            __m512 r[16];
            for (size_t i = 0; i < 16; i++)
                r[i] = first + i < count ? (__m512)row_pairs(q + (first + i) * q_stride + 2 * p, depth - 2 * p)
                                         : _mm512_setzero_ps();
            transpose16(r);
            for (size_t i = 0; i < 16; i++) _mm512_store_ps((float *)(panel + (p + i) * width + first), r[i]);
        }
}

/* sum[c][v] (lane i: query 16v + i) = Σ_p dot of panel[p][16v + i] and words[c·column_stride + p·pair_stride],
 * c < columns, p < pairs. */
static inline __attribute__((always_inline)) void pair_sums(__m512 sum[BF16_COLUMNS][BF16_PANEL_VECTORS],
                                                             const uint32_t *panel, size_t pairs,
                                                             const uint32_t *words, size_t column_stride,
                                                             size_t pair_stride, const int vectors,
                                                             const int columns) {
    const size_t width = (size_t)vectors * 16;
    for (int c = 0; c < columns; c++)
        for (int v = 0; v < vectors; v++) sum[c][v] = _mm512_setzero_ps();
    for (size_t p = 0; p < pairs; p++) {
        __m512i x[BF16_PANEL_VECTORS];
        for (int v = 0; v < vectors; v++) x[v] = _mm512_load_si512(panel + p * width + 16 * (size_t)v);
        for (int c = 0; c < columns; c++) {
            __m512i w = _mm512_set1_epi32((int)words[(size_t)c * column_stride + p * pair_stride]);
            for (int v = 0; v < vectors; v++) sum[c][v] = dot_pairs(sum[c][v], x[v], w);
        }
    }
}

/* Scores of keys j .. j+columns: st[j + c][t] = scale · q[t]·k[j + c] (key rows as pairs, key_pairs apart). */
static inline __attribute__((always_inline)) void pair_scores_micro(float *st, const uint32_t *panel, size_t pairs,
                                                                    const uint32_t *keys, size_t key_pairs, float scale,
                                                                    const int vectors, const int columns) {
    const size_t width = (size_t)vectors * 16;
    __m512 sum[BF16_COLUMNS][BF16_PANEL_VECTORS];
    pair_sums(sum, panel, pairs, keys, key_pairs, 1, vectors, columns);
    for (int c = 0; c < columns; c++)
        for (int v = 0; v < vectors; v++)
            _mm512_store_ps(st + (size_t)c * width + 16 * (size_t)v, _mm512_mul_ps(sum[c][v], _mm512_set1_ps(scale)));
}

/* Features c0 .. c0+columns of the block's output: out[t][c0 + c] = Σ_j P[t][j] · v[j][c0 + c], the values of
 * the 8 features as pairs of keys (8 words a pair). */
static inline __attribute__((always_inline)) void pair_values_micro(float *out, size_t out_stride, size_t count,
                                                                    const uint32_t *panel, size_t pairs,
                                                                    const uint32_t *values, const int vectors,
                                                                    const int columns) {
    __m512 sum[BF16_COLUMNS][BF16_PANEL_VECTORS];
    pair_sums(sum, panel, pairs, values, 1, BF16_COLUMNS, vectors, columns);
    for (int v = 0; v < vectors; v++) {
        size_t first = (size_t)v * 16, rows = count - first < 16 ? count - first : 16;
        __m512 s[BF16_COLUMNS];
        for (int c = 0; c < columns; c++) s[c] = sum[c][v];
        store_tile(out + first * out_stride, out_stride, s, columns, rows, 0);
    }
}

#define BF16_CASE(CALL, V, C)                                                                                          \
    case (V)*16 + (C): CALL(V, C); break;
#define BF16_CASES(CALL, V)                                                                                            \
    BF16_CASE(CALL, V, 1)                                                                                              \
    BF16_CASE(CALL, V, 2)                                                                                              \
    BF16_CASE(CALL, V, 3)                                                                                              \
    BF16_CASE(CALL, V, 4) BF16_CASE(CALL, V, 5) BF16_CASE(CALL, V, 6) BF16_CASE(CALL, V, 7) BF16_CASE(CALL, V, 8)

static void pair_scores_any(float *st, const uint32_t *panel, size_t pairs, const uint32_t *keys, size_t key_pairs,
                            float scale, int vectors, int columns) {
#define SCORES_CALL(V, C) pair_scores_micro(st, panel, pairs, keys, key_pairs, scale, V, C)
    switch (vectors * 16 + columns) {
        BF16_CASES(SCORES_CALL, 1)
        BF16_CASES(SCORES_CALL, 2)
        BF16_CASES(SCORES_CALL, 3)
    default: break;
    }
#undef SCORES_CALL
}

static void pair_values_any(float *out, size_t out_stride, size_t count, const uint32_t *panel, size_t pairs,
                            const uint32_t *values, int vectors, int columns) {
#define VALUES_CALL(V, C) pair_values_micro(out, out_stride, count, panel, pairs, values, V, C)
    switch (vectors * 16 + columns) {
        BF16_CASES(VALUES_CALL, 1)
        BF16_CASES(VALUES_CALL, 2)
        BF16_CASES(VALUES_CALL, 3)
    default: break;
    }
#undef VALUES_CALL
}

size_t kernel_attention_bf16_packed_words(size_t keys, size_t head_dim) {
    size_t key_pairs = (head_dim + 31) / 32 * 16, value_pairs = (keys + 1) / 2;
    size_t groups = (head_dim + BF16_COLUMNS - 1) / BF16_COLUMNS;
    return keys * key_pairs + groups * value_pairs * BF16_COLUMNS;
}

void kernel_attention_bf16_pack_avx512(uint32_t *packed, const float *k, const float *v, size_t kv_stride,
                                       size_t keys, size_t head_dim) {
    size_t key_pairs = (head_dim + 31) / 32 * 16, value_pairs = (keys + 1) / 2;
    for (size_t j = 0; j < keys; j++) /* key rows: pairs of features */
        for (size_t p = 0; p < key_pairs; p += 16)
            _mm512_storeu_si512(packed + j * key_pairs + p, row_pairs(k + j * kv_stride + 2 * p, head_dim - 2 * p));
    uint32_t *values = packed + keys * key_pairs;
    for (size_t c = 0; c < head_dim; c += 2 * BF16_COLUMNS) /* values: 8 features a group, pairs of keys */
        for (size_t p = 0; p < value_pairs; p++) {
            size_t n = head_dim - c < 16 ? head_dim - c : 16;
            __mmask16 lanes = (__mmask16)(n >= 16 ? 0xFFFF : (1u << n) - 1);
            __m512 even = _mm512_maskz_loadu_ps(lanes, v + 2 * p * kv_stride + c);
            __m512 odd = 2 * p + 1 < keys ? _mm512_maskz_loadu_ps(lanes, v + (2 * p + 1) * kv_stride + c)
                                          : _mm512_setzero_ps();
            __m512i both = pairs_of(even, odd); /* words 0-7: group c / 8's pair p, 8-15: the next group's */
            uint32_t *group = values + c / BF16_COLUMNS * value_pairs * BF16_COLUMNS;
            _mm256_storeu_si256((__m256i *)(group + p * BF16_COLUMNS), _mm512_castsi512_si256(both));
            if (n > BF16_COLUMNS)
                _mm256_storeu_si256((__m256i *)(group + (value_pairs + p) * BF16_COLUMNS),
                                    _mm512_extracti64x4_epi64(both, 1));
        }
}

bool kernel_attention_block_bf16_avx512(const kernel_attention_block *a, const uint32_t *packed, float *scratch,
                                        size_t scratch_floats) {
    size_t count = a->count, keys = a->keys, depth = a->head_dim;
    if (!count || count > 16 * BF16_PANEL_VECTORS || !keys || !depth || !packed) return false;
    const int vectors = (int)((count + 15) / 16);
    const size_t width = (size_t)vectors * 16, key_pairs = (depth + 31) / 32 * 16, value_pairs = (keys + 1) / 2;
    /* the panel of queries, the scores (a line per key), the panel of probabilities (a line per pair of keys) */
    if (!scratch || key_pairs + keys + value_pairs > scratch_floats / width) return false;
    uint32_t *panel = (uint32_t *)scratch, *probability_panel = panel + (key_pairs + keys) * width;
    float *st = scratch + key_pairs * width;
    const size_t seen = a->causal && a->seen && a->seen < keys ? a->seen : keys, seen_pairs = (seen + 1) / 2;
    pack_query_pairs(panel, a->q, a->q_stride, count, depth, key_pairs, width);
    for (size_t j = 0; j < seen; j += BF16_COLUMNS) {
        int columns = (int)(seen - j < BF16_COLUMNS ? seen - j : BF16_COLUMNS);
        pair_scores_any(st + j * width, panel, key_pairs, packed + j * key_pairs, key_pairs, a->scale, vectors,
                        columns);
    }
    if (a->causal) hide_later_keys(st, seen, vectors, a->visible);
    softmax_columns(st, seen, vectors);
    if (a->probabilities)
        for (size_t t = 0; t < count; t++)
            for (size_t j = 0; j < keys; j++)
                a->probabilities[t * a->probability_stride + j] = j < seen ? st[j * width + t] : 0.0f;
    for (size_t p = 0; p < seen_pairs; p++)
        for (int v = 0; v < vectors; v++) {
            __m512 even = _mm512_load_ps(st + 2 * p * width + 16 * (size_t)v);
            __m512 odd = 2 * p + 1 < seen ? _mm512_load_ps(st + (2 * p + 1) * width + 16 * (size_t)v)
                                          : _mm512_setzero_ps();
            _mm512_store_si512(probability_panel + p * width + 16 * (size_t)v, pairs_of(even, odd));
        }
    const uint32_t *values = packed + keys * key_pairs;
    for (size_t c = 0; c < depth; c += BF16_COLUMNS) {
        int columns = (int)(depth - c < BF16_COLUMNS ? depth - c : BF16_COLUMNS);
        pair_values_any(a->out + c, a->out_stride, count, probability_panel, seen_pairs,
                   values + c / BF16_COLUMNS * value_pairs * BF16_COLUMNS, vectors, columns);
    }
    return true;
}
