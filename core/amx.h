/* amx.h — what the two AMX product kernels share (linear_q8_amx.c, linear_bf16x3_amx.c): the tile
 * configuration both use (8 tiles of 16 rows × 64 bytes) and the store of a micro-kernel's 2 × 2 sum tiles
 * (tiles 0-3). Include only from files built with -mamx-tile. */
#ifndef GLIMPSE_CORE_AMX_H
#define GLIMPSE_CORE_AMX_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

/* ldtilecfg's 64-byte layout, palette 1. */
typedef struct amx_config {
    uint8_t palette, start_row, reserved[14];
    uint16_t bytes_per_row[16];
    uint8_t rows[16];
} amx_config;

/* Every tile 16 rows of 64 bytes; the caller releases them (_tile_release) when its product is done. */
static inline void amx_configure(void) {
    amx_config config;
    memset(&config, 0, sizeof config);
    config.palette = 1;
    for (int t = 0; t < 8; t++) config.rows[t] = 16, config.bytes_per_row[t] = 64;
    _tile_loadconfig(&config);
}

/* sums[t] = tile t's 16 × 16 four-byte sums for the tiles in use: 0, 1 (two_blocks), 2 (two_columns), 3 (both). */
static inline __attribute__((always_inline)) void amx_store_sums(void *sums, int two_columns, int two_blocks) {
    char *tiles = sums;
    _tile_stored(0, tiles, 64);
    if (two_blocks) _tile_stored(1, tiles + 1024, 64);
    if (two_columns) _tile_stored(2, tiles + 2048, 64);
    if (two_columns && two_blocks) _tile_stored(3, tiles + 3072, 64);
}

#endif
