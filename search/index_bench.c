/* index_bench.c — the search benchmarks' made-up rows (index_bench.h):
 * clustered random unit vectors, generated from a seed alone, and an index
 * filled with them through index_bench_store.c's hooks. Not used by any
 * search or update. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "search/index_bench.h"
#include "search/walk.h"

/* A uniform number in [-0.5, 0.5) from a 64-bit state (xorshift64). */
static float next_uniform(uint64_t *state) {
    *state ^= *state << 13, *state ^= *state >> 7, *state ^= *state << 17;
    return (float)((*state >> 11) / 0x1p53 - 0.5);
}

/* A state from two numbers (never 0, which xorshift keeps at 0). */
static uint64_t state_of(uint64_t a, uint64_t b) {
    uint64_t pair[2] = {a, b};
    return content_hash((const uint8_t *)pair, sizeof pair) | 1;
}

void index_bench_random_row(float *row, size_t dim, size_t clusters, uint64_t seed, uint64_t number) {
    uint64_t noise = state_of(seed, number);
    uint64_t centre = state_of(seed ^ 0x5bd1e995u, clusters ? state_of(seed, ~number) % clusters : number);
    double norm = 0;
    for (size_t d = 0; d < dim; d++) {
        float value = clusters ? next_uniform(&centre) + 0.7f * next_uniform(&noise) : next_uniform(&noise);
        row[d] = value;
        norm += (double)value * value;
    }
    for (size_t d = 0; d < dim; d++) row[d] = (float)(row[d] / sqrt(norm));
}

/* Rows stored per transaction. */
#define BENCH_BATCH 10000

glimpse_status index_bench_fill(glimpse_index *index, size_t count, size_t clusters, uint64_t seed) {
    glimpse_index_stats stats;
    glimpse_status status = glimpse_index_get_stats(index, &stats);
    if (status) return status;
    float *rows = malloc(BENCH_BATCH * stats.dim * sizeof *rows);
    char *names = malloc(BENCH_BATCH * 32);
    const char **paths = malloc(BENCH_BATCH * sizeof *paths);
    if (!rows || !names || !paths) status = ERROR_OOM();
    for (size_t first = 0; !status && first < count; first += BENCH_BATCH) {
        size_t n = count - first < BENCH_BATCH ? count - first : BENCH_BATCH;
        for (size_t r = 0; r < n; r++) {
            index_bench_random_row(rows + r * stats.dim, stats.dim, clusters, seed, first + r);
            snprintf(names + r * 32, 32, "/photos/%09zu.jpg", first + r);
            paths[r] = names + r * 32;
        }
        status = index_bench_insert(index, paths, rows, n);
    }
    free(rows), free(names), free(paths);
    return status ? status : index_bench_write_vectors(index);
}
