/* linear_q8_amx.c — the int8 linear layer on AMX (Intel's tile matrix unit:
 * Sapphire Rapids and later; quantize.h's q8_path, chosen by q8_path_choose()
 * for products of 16 rows or more where cpu_has_amx_int8()).
 *
 * One tdpbsud multiplies a 16 × 64 tile of signed bytes by a 64 × 16 tile of
 * unsigned bytes into 16 × 16 32-bit sums: 16,384 multiply-adds, where the
 * VNNI kernel's vpdpbusd does 64. The weights are the A tiles, read in place
 * (16 weight rows, 64 features each, kernel_q8's rows are `depth` bytes
 * apart: quantize.c leaves room past the last row for a tile's overhang);
 * the input rows are the B tiles, prepared once per product:
 *
 *   blocks of 16 rows; in each, chunks of 64 features; a chunk is one 1 KiB
 *   B tile whose line g holds features 4g..4g+3 of each of the 16 rows (the
 *   layout tdpbsud wants: four bytes of a row in one 32-bit lane).
 *
 * Features from depth up to the chunk's end are zero in B, so whatever the A
 * tile reads there (the next weight row's start, the slack) adds nothing.
 * Rows past the end of the last block are never written out.
 *
 * The micro-kernel keeps 2 × 2 sum tiles (32 columns × 32 rows), loading two
 * A and two B tiles per chunk for four tdpbsud. The sums (column-major: tile
 * row = output column) are stored, transposed in registers, and finished by
 * q8_finish's operations in q8_finish's order, so the results equal the plain
 * loops' (and the VNNI kernel's) bit for bit. Compiled with -mamx-tile
 * -mamx-int8 -mavx512f -mavx512bw and -ffp-contract=off. */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "core/amx.h"
#include "core/avx512_tiles.h"
#include "core/kernels_avx512.h"

#define AMX_ROWS 16   /* rows of the input per block (a B tile's 16 lanes) */
#define AMX_CHUNK 64  /* features per tile step (a tile line's 64 bytes) */
#define AMX_TILE 1024 /* bytes of one B tile */


static size_t amx_chunks(const kernel_q8 *q) { return (q->depth + AMX_CHUNK - 1) / AMX_CHUNK; }
static size_t amx_blocks(size_t rows) { return (rows + AMX_ROWS - 1) / AMX_ROWS; }
static size_t amx_block_bytes(const kernel_q8 *q) { return amx_chunks(q) * AMX_TILE; }

/* Prepared rows: the blocks, then one scale per row (16 per block). */
static size_t amx_scales_offset(const kernel_q8 *q, size_t rows) { return amx_blocks(rows) * amx_block_bytes(q); }

static size_t amx_input_bytes(const kernel_q8 *q, size_t rows) {
    return (amx_scales_offset(q, rows) + amx_blocks(rows) * AMX_ROWS * sizeof(float) + 63) / 64 * 64;
}

/* The 16 quantized rows (each padded to whole chunks) a block is transposed through. */
static size_t amx_temp_bytes(const kernel_q8 *q) { return AMX_ROWS * amx_chunks(q) * AMX_CHUNK; }

static size_t amx_parts(const kernel_q8 *q, size_t rows) { return (void)q, amx_blocks(rows); }

static void amx_prepare(void *prepared, const float *in, size_t in_stride, const kernel_q8 *q, size_t rows,
                        size_t part, void *temp) {
    const size_t chunks = amx_chunks(q), padded = chunks * AMX_CHUNK, first = part * AMX_ROWS;
    uint8_t *bytes = prepared, *block = bytes + part * amx_block_bytes(q), *quantized = temp;
    float *scales = (float *)(bytes + amx_scales_offset(q, rows)) + first;
    for (size_t i = 0; i < AMX_ROWS; i++) {
        uint8_t *row = quantized + i * padded;
        if (first + i < rows)
            scales[i] = q8_quantize_row_avx512(row, in + (first + i) * in_stride, q->in_features, q->depth);
        else
            memset(row, 128, q->depth), scales[i] = 0.0f;
        memset(row + q->depth, 0, padded - q->depth); /* past depth: zero, so the A tiles' overhang adds nothing */
    }
    for (size_t chunk = 0; chunk < chunks; chunk++) { /* 16 rows × 16 lanes of 4 bytes, transposed */
        __m512 r[16];
        for (int i = 0; i < 16; i++) r[i] = _mm512_loadu_ps((const float *)(quantized + i * padded + chunk * AMX_CHUNK));
        transpose16(r);
        for (int g = 0; g < 16; g++) _mm512_store_ps((float *)(block + chunk * AMX_TILE + (size_t)g * 64), r[g]);
    }
}

/* Finishes the 16 columns × 16 rows of sums in sums[column][row] into out[row][column], for `columns` columns
 * from c0 and `count` rows. */
static void amx_finish(float *out, size_t out_stride, int32_t sums[16][16], const float *row_scale,
                       const kernel_q8 *q, size_t c0, int columns, size_t count, const float *bias, int accumulate) {
    __m512 r[16];
    for (int c = 0; c < 16; c++) r[c] = _mm512_castsi512_ps(_mm512_load_si512(sums[c]));
    transpose16(r); /* r[row], lane = column */
    __mmask16 lanes = (__mmask16)(columns >= 16 ? 0xFFFF : (1u << columns) - 1);
    __m512i offset = _mm512_mullo_epi32(_mm512_maskz_loadu_epi32(lanes, q->sum + c0), _mm512_set1_epi32(128));
    __m512 weight_scale = _mm512_maskz_loadu_ps(lanes, q->scale + c0);
    __m512 b = bias ? _mm512_maskz_loadu_ps(lanes, bias + c0) : _mm512_setzero_ps();
    for (size_t i = 0; i < count; i++) {
        __m512 value = _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_castps_si512(r[i]), offset));
        value = _mm512_mul_ps(value, _mm512_mul_ps(_mm512_set1_ps(row_scale[i]), weight_scale));
        if (bias) value = _mm512_add_ps(value, b);
        float *cell = out + i * out_stride + c0;
        if (accumulate) value = _mm512_add_ps(_mm512_maskz_loadu_ps(lanes, cell), value);
        _mm512_mask_storeu_ps(cell, lanes, value);
    }
}

/* Columns c0 .. c0+columns (≤ 32) × blocks b0 (and b0+1 when two_blocks) of the product: 2 × 2 sum tiles at most
 * (tiles 0-3), A tiles 4-5, B tiles 6-7. */
static inline __attribute__((always_inline)) void amx_micro(float *out, size_t out_stride, const uint8_t *prepared,
                                                             const float *scales, const kernel_q8 *q, size_t rows,
                                                             size_t b0, size_t c0, int columns, const float *bias,
                                                             int accumulate, const int two_columns,
                                                             const int two_blocks) {
    const size_t chunks = amx_chunks(q), block_bytes = amx_block_bytes(q), depth = q->depth;
    const int8_t *w0 = q->weight + c0 * depth, *w1 = w0 + 16 * depth;
    const uint8_t *x0 = prepared + b0 * block_bytes, *x1 = x0 + block_bytes;
    _tile_zero(0);
    if (two_blocks) _tile_zero(1);
    if (two_columns) _tile_zero(2);
    if (two_columns && two_blocks) _tile_zero(3);
    for (size_t chunk = 0; chunk < chunks; chunk++) {
        _tile_loadd(4, w0 + chunk * AMX_CHUNK, (long)depth);
        _tile_loadd(6, x0 + chunk * AMX_TILE, 64);
        _tile_dpbsud(0, 4, 6);
        if (two_blocks) {
            _tile_loadd(7, x1 + chunk * AMX_TILE, 64);
            _tile_dpbsud(1, 4, 7);
        }
        if (two_columns) {
            _tile_loadd(5, w1 + chunk * AMX_CHUNK, (long)depth);
            _tile_dpbsud(2, 5, 6);
            if (two_blocks) _tile_dpbsud(3, 5, 7);
        }
    }
    int32_t sums[4][16][16] __attribute__((aligned(64)));
    amx_store_sums(sums, two_columns, two_blocks);
    for (int half = 0; half < 1 + two_columns; half++)
        for (int block = 0; block < 1 + two_blocks; block++) {
            size_t first_row = (b0 + (size_t)block) * AMX_ROWS;
            size_t count = rows - first_row < AMX_ROWS ? rows - first_row : AMX_ROWS;
            int n = columns - 16 * half < 16 ? columns - 16 * half : 16;
            amx_finish(out + first_row * out_stride, out_stride, sums[2 * half + block], scales + first_row, q,
                       c0 + 16 * (size_t)half, n, count, bias, accumulate);
        }
}

static void amx_product(float *out, size_t out_stride, const void *prepared, const kernel_q8 *q, const float *bias,
                        size_t rows, bool accumulate, size_t first, size_t count, size_t next, void *scratch,
                        size_t scratch_bytes) {
    (void)next, (void)scratch, (void)scratch_bytes;
    amx_configure();
    const uint8_t *bytes = prepared;
    const float *scales = (const float *)(bytes + amx_scales_offset(q, rows));
    size_t blocks = amx_blocks(rows), end = first + count;
    for (size_t c = first; c < end; c += 32) {
        int columns = (int)(end - c < 32 ? end - c : 32), two_columns = columns > 16;
        for (size_t b = 0; b < blocks; b += 2) {
            int two_blocks = b + 1 < blocks;
            if (two_columns && two_blocks)
                amx_micro(out, out_stride, bytes, scales, q, rows, b, c, columns, bias, accumulate, 1, 1);
            else if (two_columns)
                amx_micro(out, out_stride, bytes, scales, q, rows, b, c, columns, bias, accumulate, 1, 0);
            else if (two_blocks)
                amx_micro(out, out_stride, bytes, scales, q, rows, b, c, columns, bias, accumulate, 0, 1);
            else
                amx_micro(out, out_stride, bytes, scales, q, rows, b, c, columns, bias, accumulate, 0, 0);
        }
    }
    _tile_release();
}

/* Whole blocks of rows that fit scratch beside the temp (all of rows_left if they do). */
static size_t amx_chunk_rows(const kernel_q8 *q, size_t rows_left, size_t scratch_bytes) {
    if (amx_input_bytes(q, rows_left) + amx_temp_bytes(q) <= scratch_bytes) return rows_left;
    size_t per_block = amx_block_bytes(q) + AMX_ROWS * sizeof(float) + 64, temp = amx_temp_bytes(q);
    if (scratch_bytes < temp + 64 + per_block) return 0;
    size_t rows = (scratch_bytes - temp - 64) / per_block * AMX_ROWS;
    while (rows && amx_input_bytes(q, rows) + temp > scratch_bytes) rows -= AMX_ROWS;
    return rows < rows_left ? rows : rows_left;
}

const q8_path q8_path_amx = {amx_input_bytes, amx_temp_bytes, amx_parts, amx_prepare,
                             amx_product, amx_chunk_rows, NULL};
