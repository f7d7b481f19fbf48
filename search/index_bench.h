/* index_bench.h — the hooks through which the developer benchmarks (`glimpse
 * bench --search-rows`, glimpse-bench-index) fill an index with made-up
 * rows and compare its searches. White-box, like api/bench_stages.h: nothing but
 * the benchmarks includes this header. */
#ifndef GLIMPSE_SEARCH_INDEX_BENCH_H
#define GLIMPSE_SEARCH_INDEX_BENCH_H

#include <stddef.h>

#include "glimpse.h"

/* Fills the index (opened with its model) with count made-up rows, named
 * /photos/NNNNNNNNN.jpg: points scattered around `clusters` random centres
 * (each row its centre plus noise of 0.7 its size, L2-normalised: two rows
 * of a cluster have a cosine near 0.67, of two clusters near 0), stored in
 * batches; then writes the vector file. Deterministic in seed. */
glimpse_status index_bench_fill(glimpse_index *index, size_t count, size_t clusters, uint64_t seed);
/* Row number `number` of that kind into row[dim]: its cluster is chosen by
 * (seed, number). Queries use numbers beyond the rows'. */
void index_bench_random_row(float *row, size_t dim, size_t clusters, uint64_t seed, uint64_t number);

/* Stores rows[count, dim] (L2-normalised) as the images paths[count] (size
 * 1, time 1, hash their row number), with their checksums, in one
 * transaction, on an index opened with its model. */
glimpse_status index_bench_insert(glimpse_index *index, const char *const *paths, const float *rows, size_t count);
/* Writes the index's vector file, as the end of glimpse_index_update does. */
glimpse_status index_bench_write_vectors(glimpse_index *index);
/* The exact search over every row read from SQLite (float32), whether or
 * not a vector file is there: what the vector file's search must match. */
glimpse_status index_bench_search_exact(glimpse_index *index, const float *query, size_t k,
                                        glimpse_search_result *results, size_t *found);

#endif
