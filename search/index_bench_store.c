/* index_bench_store.c — the search benchmarks' hooks into the index itself
 * (index_bench.h): made-up rows stored with their checksums, the vector file
 * written, and the exact search to compare with. In a build with the index
 * only (index_unavailable.c refuses them otherwise). */
#include <sqlite3.h>

#include "search/index_bench.h"
#include "search/index_internal.h"

glimpse_status index_bench_search_exact(glimpse_index *index, const float *query, size_t k,
                                        glimpse_search_result *results, size_t *found) {
    *found = 0;
    return index_search_loaded(index, query, k, results, found);
}

glimpse_status index_bench_insert(glimpse_index *index, const char *const *paths, const float *rows, size_t count) {
    sqlite3_stmt *insert;
    glimpse_status status = index_transaction_begin(index,
                                              "INSERT INTO images(path, size, mtime_ns, hash, embedding, checksum)"
                                              " VALUES (?1, 1, 1, ?2, ?3, glimpse_row_checksum(?1, ?3))",
                                              "storing rows", &insert);
    for (size_t r = 0; !status && r < count; r++) {
        sqlite3_bind_text(insert, 1, paths[r], -1, SQLITE_STATIC);
        sqlite3_bind_int64(insert, 2, (int64_t)r);
        sqlite3_bind_blob(insert, 3, rows + r * index->dim, (int)(index->dim * sizeof(float)), SQLITE_STATIC);
        if (sqlite3_step(insert) != SQLITE_DONE) status = index_db_error(index, "storing rows");
        sqlite3_reset(insert);
    }
    index_drop_cache(index);
    return index_transaction_end(index, insert, status);
}

glimpse_status index_bench_write_vectors(glimpse_index *index) {
    glimpse_status status = index_write_vectors(index);
    if (!status) sqlite3_exec(index->db, "PRAGMA wal_checkpoint(TRUNCATE)", NULL, NULL, NULL);
    return status;
}
