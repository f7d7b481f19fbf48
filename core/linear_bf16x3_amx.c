/* linear_bf16x3_amx.c — bf16x3.h's products on AMX-BF16 tiles: the weight's
 * split at load, the input's split into tiles, and the 2 × 2-tile
 * micro-kernel. Compiled with -mamx-tile -mamx-bf16 -mavx512f -mavx512bw
 * -mavx512bf16 and -ffp-contract=off; called only where cpu_has_amx_bf16().
 *
 * A tdpbf16ps multiplies a 16 × 32 tile of bfloat16 (A: 16 weight rows, 32
 * features each, stored as whole tiles at load) by a 32 × 16 tile (B: line g
 * holds features 2g and 2g+1 of each of 16 input rows) into 16 × 16 float32
 * sums. The input's layout, made by prepare():
 *
 *   blocks of 16 rows; in each, chunks of 32 features; in each chunk the
 *   three parts' B tiles (hi, mid, lo), 1 KiB each.
 *
 * Features past in_features are zero on both sides, and rows past the last
 * are zero in B and never written out. The sums (tile row = output column)
 * are stored, transposed in registers, and written with the bias. */
#include <immintrin.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "core/amx.h"
#include "core/avx512_tiles.h"
#include "core/bf16x3.h"
#include "core/error.h"

#define TILE_ROWS 16     /* input rows per block (a B tile's 16 lanes), weight rows per A tile */
#define TILE_FEATURES 32 /* features per tile step (a tile line's 64 bytes of bfloat16) */
#define TILE_BYTES 1024
#define PARTS 3
#define HUGE_PAGE ((size_t)2 << 20)
/* bf16x3_product's blocking, chosen among 512 / 768 / 1280 KiB and 16 / 24 / 48 chunks on ViT-B/32's shapes (2
 * MiB of L2 a core): the split input a group of row blocks keeps in L2, and the chunks a span of the depth. */
#define GROUP_BYTES (768 * 1024)
#define SPAN_CHUNKS 24


static size_t chunks_of(const kernel_bf16x3 *s) { return s->depth / TILE_FEATURES; }
static size_t blocks_of(size_t rows) { return (rows + TILE_ROWS - 1) / TILE_ROWS; }
static size_t block_bytes(const kernel_bf16x3 *s) { return chunks_of(s) * PARTS * TILE_BYTES; }

static inline __m512 widen_bf16(__m256bh v) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32((__m256i)v), 16));
}

/* x where |x| < 2^127; elsewhere (huge, infinite, NaN) x cut to its top 16 bits, NaNs kept NaN, in *big the
 * lanes cut: rounding those to bfloat16 is then exact (it cannot overflow to infinity) and leaves nothing. */
static inline __m512 cut_big(__m512 x, __mmask16 *big) {
    const __m512 magnitude = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(0x7FFFFFFF)));
    *big = _mm512_cmp_ps_mask(magnitude, _mm512_set1_ps(0x1p127f), _CMP_NLT_UQ);
    __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
    __m512i cut = _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32((int)0xFFFF0000u));
    cut = _mm512_mask_or_epi32(cut, nan, cut, _mm512_set1_epi32(0x00400000)); /* a quiet NaN's top bit */
    return _mm512_mask_blend_ps(*big, x, _mm512_castsi512_ps(cut));
}

/* The three parts of 32 consecutive values x0 (the first 16) and x1, each part as 32 bfloat16 in order (so a
 * 32-bit lane g holds values 2g and 2g+1). Rounding to nearest even each time: what is left after hi is exact
 * in float32, and so is what is left after mid, which then has at most 8 significant bits. */
static inline void split32(__m512 x0, __m512 x1, __m512i part[PARTS]) {
    __mmask16 big0, big1;
    __m512 r0 = cut_big(x0, &big0), r1 = cut_big(x1, &big1);
    for (int p = 0; p < PARTS; p++) {
        part[p] = (__m512i)_mm512_cvtne2ps_pbh(r1, r0);
        if (p + 1 < PARTS) {
            r0 = _mm512_maskz_sub_ps((__mmask16)~big0, r0, widen_bf16(_mm512_cvtneps_pbh(r0)));
            r1 = _mm512_maskz_sub_ps((__mmask16)~big1, r1, widen_bf16(_mm512_cvtneps_pbh(r1)));
        }
    }
}

/* 32 values from row + k (count of them, the rest zero). */
static inline void load32(const float *row, size_t count, __m512 *x0, __m512 *x1) {
    if (count >= 32) {
        *x0 = _mm512_loadu_ps(row), *x1 = _mm512_loadu_ps(row + 16);
        return;
    }
    __mmask16 m0 = (__mmask16)(count >= 16 ? 0xFFFF : (1u << count) - 1);
    __mmask16 m1 = (__mmask16)(count <= 16 ? 0 : (1u << (count - 16)) - 1);
    *x0 = _mm512_maskz_loadu_ps(m0, row), *x1 = _mm512_maskz_loadu_ps(m1, row + 16);
}

void bf16x3_split_value(float x, uint16_t parts[3]) {
    __m512i part[PARTS];
    split32(_mm512_set1_ps(x), _mm512_set1_ps(x), part);
    for (int p = 0; p < PARTS; p++) parts[p] = (uint16_t)_mm_extract_epi16(_mm512_castsi512_si128(part[p]), 0);
}

typedef struct split_job {
    const kernel_bf16x3 *s;
    const float *weight;
} split_job;

/* Column tile `index` of the weight into its tiles. */
static void split_column_tile(void *argument, size_t index, float *scratch) {
    (void)scratch;
    const split_job *job = argument;
    const kernel_bf16x3 *s = job->s;
    const size_t chunks = chunks_of(s), tile = TILE_BYTES / sizeof(uint16_t);
    for (size_t c = index * TILE_ROWS; c < (index + 1) * TILE_ROWS; c++)
        for (size_t chunk = 0; chunk < chunks; chunk++) {
            size_t k = chunk * TILE_FEATURES, count = c < s->out_features && k < s->in_features ? s->in_features - k : 0;
            __m512 x0 = _mm512_setzero_ps(), x1 = _mm512_setzero_ps();
            if (count) load32(job->weight + c * s->in_features + k, count, &x0, &x1);
            __m512i part[PARTS];
            split32(x0, x1, part);
            uint16_t *line = s->tiles + ((index * chunks + chunk) * PARTS) * tile + (c % TILE_ROWS) * TILE_FEATURES;
            for (int p = 0; p < PARTS; p++) _mm512_store_si512(line + p * tile, part[p]);
        }
}

glimpse_status kernel_bf16x3_make(kernel_bf16x3 *s, const float *weight, size_t out_features, size_t in_features,
                                  pool *threads) {
    memset(s, 0, sizeof *s);
    if (!bf16x3_available()) return error_set(GLIMPSE_STATUS_UNSUPPORTED, "this CPU has no AMX-BF16 tiles");
    size_t depth = (in_features + TILE_FEATURES - 1) / TILE_FEATURES * TILE_FEATURES, chunks = depth / TILE_FEATURES;
    size_t column_tiles = (out_features + TILE_ROWS - 1) / TILE_ROWS;
    if (chunks && column_tiles > SIZE_MAX / chunks / PARTS / TILE_BYTES) return ERROR_OOM();
    size_t bytes = column_tiles * chunks * PARTS * TILE_BYTES;
    /* megabytes of tiles on huge pages where Linux gives them: far fewer page walks per product */
    size_t alignment = bytes >= HUGE_PAGE ? HUGE_PAGE : 64, rounded = (bytes + alignment - 1) / alignment * alignment;
    uint16_t *tiles = aligned_alloc(alignment, rounded ? rounded : 64);
    if (!tiles) return ERROR_OOM();
#ifdef MADV_HUGEPAGE
    if (alignment == HUGE_PAGE) madvise(tiles, rounded, MADV_HUGEPAGE);
#endif
    *s = (kernel_bf16x3){tiles, out_features, in_features, depth, column_tiles};
    split_job job = {s, weight};
    pool_for(threads, column_tiles, split_column_tile, &job);
    return GLIMPSE_STATUS_OK;
}

void kernel_bf16x3_free(kernel_bf16x3 *s) {
    free(s->tiles);
    memset(s, 0, sizeof *s);
}

size_t bf16x3_input_bytes(const kernel_bf16x3 *s, size_t rows) { return blocks_of(rows) * block_bytes(s); }

size_t bf16x3_input_blocks(size_t rows) { return blocks_of(rows); }

void bf16x3_prepare(void *prepared, const float *in, size_t in_stride, const kernel_bf16x3 *s, size_t rows,
                    size_t first_block, size_t block_count) {
    const size_t chunks = chunks_of(s), features = s->in_features;
    uint8_t *bytes = prepared;
    for (size_t block = first_block, blocks = blocks_of(rows); block < blocks && block < first_block + block_count;
         block++)
        for (size_t chunk = 0; chunk < chunks; chunk++) {
            size_t k = chunk * TILE_FEATURES, count = k < features ? features - k : 0;
            __m512 tile[PARTS][16];
            for (int i = 0; i < 16; i++) {
                size_t row = block * TILE_ROWS + (size_t)i;
                __m512 x0 = _mm512_setzero_ps(), x1 = _mm512_setzero_ps();
                if (row < rows) load32(in + row * in_stride + k, count, &x0, &x1);
                __m512i part[PARTS];
                split32(x0, x1, part);
                for (int p = 0; p < PARTS; p++) tile[p][i] = _mm512_castsi512_ps(part[p]);
            }
            uint8_t *to = bytes + block * block_bytes(s) + chunk * PARTS * TILE_BYTES;
            for (int p = 0; p < PARTS; p++) { /* row i's pair g → line g, lane i */
                transpose16(tile[p]);
                for (int g = 0; g < 16; g++) _mm512_store_ps((float *)(to + p * TILE_BYTES + (size_t)g * 64), tile[p][g]);
            }
        }
}

/* out[row][c0 + c] (+)= sums[c][row] + bias for c < columns, row < count. */
static void finish(float *out, size_t out_stride, float sums[16][16], size_t c0, int columns, size_t count,
                   const float *bias, int accumulate) {
    __m512 r[16];
    for (int c = 0; c < 16; c++) r[c] = _mm512_load_ps(sums[c]);
    transpose16(r); /* r[row], lane = column */
    __mmask16 lanes = (__mmask16)(columns >= 16 ? 0xFFFF : (1u << columns) - 1);
    __m512 b = bias ? _mm512_maskz_loadu_ps(lanes, bias + c0) : _mm512_setzero_ps();
    for (size_t i = 0; i < count; i++) {
        __m512 value = bias ? _mm512_add_ps(r[i], b) : r[i];
        float *cell = out + i * out_stride + c0;
        if (accumulate) value = _mm512_add_ps(_mm512_maskz_loadu_ps(lanes, cell), value);
        _mm512_mask_storeu_ps(cell, lanes, value);
    }
}

/* One product into a sum tile (0: A 4 · B 6; 1: A 4 · B 7; 2: A 5 · B 6; 3: A 5 · B 7), where it is in use. */
#define D0() _tile_dpbf16ps(0, 4, 6)
#define D1() do { if (two_blocks) _tile_dpbf16ps(1, 4, 7); } while (0)
#define D2() do { if (two_columns) _tile_dpbf16ps(2, 5, 6); } while (0)
#define D3() do { if (two_columns && two_blocks) _tile_dpbf16ps(3, 5, 7); } while (0)
/* A part of the weights into tile 4 (the first 16 columns) or 5; of the input into 6 (first block) or 7. */
#define A4(part) _tile_loadd(4, a + (part) * tile, 64)
#define A5(part) do { if (two_columns) _tile_loadd(5, a + next_tile + (part) * tile, 64); } while (0)
#define B6(part) _tile_loadd(6, b + (part) * TILE_BYTES, 64)
#define B7(part) do { if (two_blocks) _tile_loadd(7, b + block_size + (part) * TILE_BYTES, 64); } while (0)

/* Columns c0 .. c0+columns (≤ 32) × blocks b0 (and b0+1 when two_blocks): per chunk the six part products
 * hi·hi, hi·mid, hi·lo, mid·hi, mid·mid, lo·hi (A part · B part), in that order. */
static inline __attribute__((always_inline)) void micro(float *out, size_t out_stride, const uint8_t *prepared,
                                                         const kernel_bf16x3 *s, size_t rows, size_t b0, size_t c0,
                                                         int columns, size_t chunk0, size_t chunk1,
                                                         const float *bias, int accumulate, const int two_columns,
                                                         const int two_blocks) {
    const size_t chunks = chunks_of(s), tile = TILE_BYTES / sizeof(uint16_t), block_size = block_bytes(s);
    const size_t next_tile = chunks * PARTS * tile; /* the next 16 columns' tile of the same chunk and part */
    _tile_zero(0);
    if (two_blocks) _tile_zero(1);
    if (two_columns) _tile_zero(2);
    if (two_columns && two_blocks) _tile_zero(3);
    for (size_t chunk = chunk0; chunk < chunk1; chunk++) {
        const uint16_t *a = s->tiles + (c0 / TILE_ROWS * chunks + chunk) * PARTS * tile;
        const uint8_t *b = prepared + b0 * block_size + chunk * PARTS * TILE_BYTES;
        /* The tiles are not renamed: a load waits for the products still reading its tile. So each load is
         * placed right after the last product that reads the tile it replaces, and each part product's four
         * tile products start with the tiles loaded longest ago. Part products: hi·hi, hi·mid, hi·lo (A hi),
         * mid·hi, mid·mid (A mid), lo·hi (A lo). */
        A4(0); B6(0); A5(0); B7(0);
        D0(); D2(); B6(1); D1(); D3(); B7(1); /* hi · hi */
        D0(); D2(); B6(2); D1(); D3(); B7(2); /* hi · mid */
        D0(); D2(); B6(0); D1(); A4(1); D3(); B7(0); A5(1); /* hi · lo */
        D0(); D1(); D2(); B6(1); D3(); B7(1); /* mid · hi */
        D0(); D1(); A4(2); D2(); B6(0); D3(); B7(0); A5(2); /* mid · mid */
        D0(); D1(); D2(); D3(); /* lo · hi */
    }
    float sums[4][16][16] __attribute__((aligned(64)));
    amx_store_sums(sums, two_columns, two_blocks);
    for (int half = 0; half < 1 + two_columns; half++)
        for (int block = 0; block < 1 + two_blocks; block++) {
            size_t first_row = (b0 + (size_t)block) * TILE_ROWS;
            size_t count = rows - first_row < TILE_ROWS ? rows - first_row : TILE_ROWS;
            int n = columns - 16 * half < 16 ? columns - 16 * half : 16;
            finish(out + first_row * out_stride, out_stride, sums[2 * half + block], c0 + 16 * (size_t)half, n,
                   count, bias, accumulate);
        }
}

void bf16x3_product(float *out, size_t out_stride, const void *prepared, const kernel_bf16x3 *s, const float *bias,
                    size_t rows, bool accumulate, size_t first, size_t count) {
    amx_configure();
    const size_t blocks = blocks_of(rows), end = first + count, chunks = chunks_of(s);
    /* The depth in pieces of SPAN_CHUNKS chunks, each piece's sums added to the last's in out (the first with
     * the bias); in each piece, groups of row blocks whose split input stays in L2 (GROUP_BYTES) while the
     * columns' weights stream past, each weight tile then serving the whole group. */
    for (size_t chunk0 = 0; chunk0 < chunks; chunk0 += SPAN_CHUNKS) {
        size_t chunk1 = chunks - chunk0 < SPAN_CHUNKS ? chunks : chunk0 + SPAN_CHUNKS;
        const float *b = chunk0 == 0 ? bias : NULL;
        int add = accumulate || chunk0 > 0;
        size_t group = GROUP_BYTES / ((chunk1 - chunk0) * PARTS * TILE_BYTES) / 2 * 2;
        if (group < 2) group = 2;
        for (size_t g = 0; g < blocks; g += group)
            for (size_t c = first; c < end; c += 32) {
                int columns = (int)(end - c < 32 ? end - c : 32), two_columns = columns > 16;
                for (size_t block = g; block < blocks && block < g + group; block += 2) {
                    int two_blocks = block + 1 < blocks;
                    if (two_columns && two_blocks)
                        micro(out, out_stride, prepared, s, rows, block, c, columns, chunk0, chunk1, b, add, 1, 1);
                    else if (two_columns)
                        micro(out, out_stride, prepared, s, rows, block, c, columns, chunk0, chunk1, b, add, 1, 0);
                    else if (two_blocks)
                        micro(out, out_stride, prepared, s, rows, block, c, columns, chunk0, chunk1, b, add, 0, 1);
                    else
                        micro(out, out_stride, prepared, s, rows, block, c, columns, chunk0, chunk1, b, add, 0, 0);
                }
            }
    }
    _tile_release();
}
