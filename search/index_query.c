/* index_query.c — glimpse_index_search and glimpse_index_verify: the search
 * on the vector file (an int8 scan of every row, its best candidates scored
 * exactly in float32) or, without a current vector file, over the rows loaded
 * from SQLite into the cache, every row checked against its checksum. The
 * query's embedding is made by the caller (search/query.c for combined ones). */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "core/error.h"
#include "core/kernels.h"
#include "core/pool.h"
#include "core/quantize.h"
#include "search/index_internal.h"
#include "search/vectors.h"

/* Room for the rows: MAX(rowid) is read from the b-tree's edge without a
 * scan and bounds the count from above (rowids are positive and distinct),
 * as does the database's size (each row holds its embedding); a damaged file
 * can record any rowid, so the smaller bound sizes the allocation. */
static glimpse_status row_capacity(glimpse_index *index, size_t *capacity) {
    sqlite3_stmt *statement;
    int code = sqlite3_prepare_v2(index->db, "SELECT MAX(rowid) FROM images", -1, &statement, NULL);
    if (code != SQLITE_OK) return index_prepare_error(index, code, "reading the index");
    code = sqlite3_step(statement);
    int64_t max_rowid = code == SQLITE_ROW ? sqlite3_column_int64(statement, 0) : 0;
    sqlite3_finalize(statement);
    if (code != SQLITE_ROW) return index_step_error(index, code, "reading the index");
    int64_t bytes = index_database_bytes(index);
    if (max_rowid < 0 || bytes < 0) return index_damaged(index, "its row numbers or size are impossible");
    uint64_t fit = (uint64_t)bytes / (index->dim * sizeof(float));
    uint64_t rows = (uint64_t)max_rowid < fit ? (uint64_t)max_rowid : fit;
    if (rows >= SIZE_MAX / (index->dim * sizeof(float)) - 1) return index_damaged(index, "its row count is impossible");
    *capacity = (size_t)rows + 1;
    return GLIMPSE_STATUS_OK;
}

/* The statement reading rows as check_row and row_time take them: path,
 * embedding, checksum (NULL in an index without), time (NULL in an index
 * before videos), WHERE condition. Written into sql (ROW_SELECT_CAPACITY). */
const char *index_row_select(const glimpse_index *index, const char *condition, char *sql) {
    snprintf(sql, ROW_SELECT_CAPACITY, "SELECT path, embedding, %s, %s FROM images WHERE %s",
             index->checksummed ? "checksum" : "NULL", index->frames_column ? "time" : "NULL", condition);
    return sql;
}

/* A row's time (column 3 of row_select): negative for a still; damage unless
 * NULL or a number of seconds a video can have. */
static glimpse_status row_time(glimpse_index *index, sqlite3_stmt *row, double *time) {
    *time = -1;
    int type = sqlite3_column_type(row, 3);
    if (type == SQLITE_NULL) return GLIMPSE_STATUS_OK;
    double seconds = sqlite3_column_double(row, 3);
    if ((type != SQLITE_FLOAT && type != SQLITE_INTEGER) || !(seconds >= 0 && seconds < 1e9))
        return index_damaged(index, "a row's time is not a time in a video");
    *time = seconds;
    return GLIMPSE_STATUS_OK;
}

/* Damage unless the row (path, embedding, checksum if the index has them)
 * has the index's shape and matches its checksum. */
glimpse_status index_check_row(glimpse_index *index, sqlite3_stmt *row) {
    const void *blob = sqlite3_column_blob(row, 1);
    size_t row_bytes = (size_t)sqlite3_column_bytes(row, 1);
    const char *path = (const char *)sqlite3_column_text(row, 0);
    if (sqlite3_column_type(row, 1) != SQLITE_BLOB || !blob || row_bytes != index->dim * sizeof(float) || !path) {
        char what[96];
        snprintf(what, sizeof what, "a row's embedding has %zu bytes, not %zu", row_bytes, index->dim * sizeof(float));
        if (sqlite3_column_type(row, 1) != SQLITE_BLOB) snprintf(what, sizeof what, "a row's embedding is not binary");
        return index_damaged(index, path ? what : "a row has no path");
    }
    if (index->checksummed && (sqlite3_column_type(row, 2) != SQLITE_INTEGER ||
                               sqlite3_column_int64(row, 2) !=
                                   index_row_checksum(path, (size_t)sqlite3_column_bytes(row, 0), blob, row_bytes)))
        return index_damaged(index, "a row's path or embedding does not match its checksum");
    return GLIMPSE_STATUS_OK;
}

/* Copies one row (path, embedding) into the cache as its index->count-th; a row of the wrong shape is damage. */
static glimpse_status load_row(glimpse_index *index, sqlite3_stmt *row, size_t capacity) {
    if (index->count == capacity) return index_damaged(index, "it holds more rows than its row numbers allow");
    glimpse_status status = index_check_row(index, row);
    if (status) return status;
    const char *path = (const char *)sqlite3_column_text(row, 0);
    const void *blob = sqlite3_column_blob(row, 1);
    size_t row_bytes = (size_t)sqlite3_column_bytes(row, 1);
    index->paths[index->count] = strdup(path);
    if (!index->paths[index->count]) return ERROR_OOM();
    if ((status = row_time(index, row, &index->times[index->count]))) return status;
    memcpy(index->matrix + index->count * index->dim, blob, row_bytes);
    index->count++;
    return GLIMPSE_STATUS_OK;
}

/* Reads every row into the cache within one read transaction: the bounds
 * and the rows come from the same state of the file. */
static glimpse_status read_rows(glimpse_index *index) {
    size_t capacity = 0;
    glimpse_status status = row_capacity(index, &capacity);
    if (status) return status;
    /* one allocation, in huge pages: faulting in 200 MB by 4 KiB pages, and
     * growing by copies, cost more than reading the rows */
    const size_t huge = (size_t)2 << 20;
    size_t bytes = capacity * index->dim * sizeof(float);
    size_t rounded = (bytes + huge - 1) / huge * huge;
    index->matrix = aligned_alloc(huge, rounded);
    index->paths = calloc(capacity, sizeof *index->paths);
    index->times = malloc(capacity * sizeof *index->times);
    index->scores = malloc(capacity * sizeof(float));
    if (!index->matrix || !index->paths || !index->times || !index->scores) return ERROR_OOM();
    madvise(index->matrix, rounded, MADV_HUGEPAGE);
    sqlite3_stmt *statement;
    /* failed entries (stale embeddings of files that no longer read) are left out */
    char sql[ROW_SELECT_CAPACITY];
    int code = sqlite3_prepare_v2(index->db,
                                  index_row_select(index, index->failed_column ? "failed IS NULL ORDER BY id" : "1 ORDER BY id",
                                                   sql),
                                  -1, &statement, NULL);
    if (code != SQLITE_OK) return index_prepare_error(index, code, "reading the index");
    while (!status && (code = sqlite3_step(statement)) == SQLITE_ROW) status = load_row(index, statement, capacity);
    if (!status && code != SQLITE_DONE) status = index_step_error(index, code, "reading the index");
    sqlite3_finalize(statement);
    return status;
}

glimpse_status index_load_cache(glimpse_index *index) {
    if (index->loaded) return GLIMPSE_STATUS_OK;
    bool began;
    glimpse_status status = index_read_begin(index, &began);
    if (status) return status;
    status = read_rows(index);
    index_read_end(index, began);
    if (status) {
        index_drop_cache(index);
        return status;
    }
    index->loaded = true;
    return GLIMPSE_STATUS_OK;
}

/* Maps the vector file if it is the index's current one (its stamp is the
 * one meta records), within a read transaction so that both come from the
 * same state; *usable false when there is none. */
static glimpse_status open_vectors(glimpse_index *index, bool *usable) {
    *usable = false;
    char *path = vector_file_path(index->path), *stamp = NULL;
    if (!path) return ERROR_OOM();
    bool began;
    glimpse_status status = index_read_begin(index, &began);
    if (!status) status = index_meta_get(index, "vectors", &stamp);
    if (!status && stamp) status = vector_file_open(&index->vectors, path, strtoull(stamp, NULL, 16), index->dim, usable);
    index_read_end(index, began);
    size_t count = index->vectors.count;
    if (!status && *usable) {
        index->fetched = calloc(count + 1, sizeof *index->fetched);
        index->fetched_times = malloc((count + 1) * sizeof *index->fetched_times);
        index->scan = malloc((2 * count + 1) * sizeof *index->scan);
        if (!index->fetched || !index->fetched_times || !index->scan) status = ERROR_OOM();
        index->vectors_open = true;
    }
    if (!status && !index->threads) status = pool_create(0, &index->threads);
    free(path), free(stamp);
    return status;
}

/* Row r of the vector file checked against its SQLite row (path, embedding
 * and checksum, the same floats); its path kept in index->fetched[r]. */
static glimpse_status check_vector_row(glimpse_index *index, sqlite3_stmt *lookup, size_t r) {
    const vector_file *v = &index->vectors;
    sqlite3_bind_int64(lookup, 1, v->ids[r]);
    int code = sqlite3_step(lookup);
    glimpse_status status = GLIMPSE_STATUS_OK;
    if (code == SQLITE_ROW) status = index_check_row(index, lookup);
    else if (code == SQLITE_DONE) status = index_damaged(index, "its vector file names a row it does not hold");
    else status = index_step_error(index, code, "reading the index");
    if (!status && memcmp(sqlite3_column_blob(lookup, 1), v->rows + r * v->dim, v->dim * sizeof(float)) != 0)
        status = index_damaged(index, "its vector file's embeddings are not its rows'");
    if (!status && !index->fetched[r] && !(index->fetched[r] = strdup((const char *)sqlite3_column_text(lookup, 0))))
        status = ERROR_OOM();
    if (!status) status = row_time(index, lookup, &index->fetched_times[r]);
    sqlite3_reset(lookup);
    return status;
}

/* Inserts (score, row) into the best-first list results[0..*n) of at most k. */
static void keep_best(glimpse_search_result *results, size_t *rows, size_t *n, size_t k, float score, size_t row,
                      const char *path, double time) {
    if (*n == k && !(score > results[*n - 1].score)) return;
    size_t at = *n < k ? (*n)++ : k - 1;
    while (at > 0 && score > results[at - 1].score) {
        results[at] = results[at - 1];
        if (rows) rows[at] = rows[at - 1];
        at--;
    }
    results[at] = (glimpse_search_result){path, score, time};
    if (rows) rows[at] = row;
}

/* Candidates taken from a scan for exact scoring: for the int8 scan, enough
 * for the top k to be the exact search's (docs/search.md gives the measurement). */
static size_t candidate_count(size_t k) { return k * 8 < 256 ? 256 : k * 8; }

/* A candidate's score as both searches give it: its cosine summed in double
 * (the same number whichever scan found it), then the model's scale and bias. */
static float exact_score(const glimpse_index *index, double cosine) {
    return (float)cosine * index->logit_scale + index->logit_bias;
}

/* Whether an int8 score is as far from the float32 cosine as quantization
 * allows at most: q·w − q̂·ŵ = e_q·w + q̂·e_w, each error at most half its
 * row's step; beyond it, the file's float32 row is not its int8 twin's. */
static bool within_quantization(double cosine, float int8_score, double query_l1, double row_l1, float query_step,
                                float row_step, size_t dim) {
    double bound = query_step / 2.0 * row_l1 + row_step / 2.0 * (query_l1 + dim * query_step / 2.0);
    return fabs(cosine - int8_score) <= bound * 1.001 + 1e-5;
}

/* Rows of the vector file per task of the scan. */
#define SCAN_BLOCK_ROWS 8192

typedef struct scan_job {
    const glimpse_index *index;
    const int8_t *query; /* [depth] signed codes */
} scan_job;

static void scan_task(void *argument, size_t task, float *scratch) {
    (void)scratch;
    const scan_job *job = argument;
    const vector_file *v = &job->index->vectors;
    size_t first = task * SCAN_BLOCK_ROWS, count = v->count - first < SCAN_BLOCK_ROWS ? v->count - first : SCAN_BLOCK_ROWS;
    kernel_dot_codes(job->index->scan, job->index->scan + v->count, job->query, v->q8.weight, v->q8.depth, first,
                     count);
}

/* The int8 scan of the whole vector file for the query's codes (index->scan),
 * and the codes' sums checked: damage if a row's are not the stored sum. */
static glimpse_status scan_codes(glimpse_index *index, const int8_t *query_codes) {
    const vector_file *v = &index->vectors;
    scan_job job = {.index = index, .query = query_codes};
    pool_for(index->threads, (v->count + SCAN_BLOCK_ROWS - 1) / SCAN_BLOCK_ROWS, scan_task, &job);
    const int32_t *sums = index->scan + v->count;
    for (size_t r = 0; r < v->count; r++)
        if (sums[r] != v->q8.sum[r]) return index_damaged(index, "its vector file's int8 rows do not match their sums");
    return GLIMPSE_STATUS_OK;
}

/* The search on the vector file: one int8 scan of every row (each code
 * read once, over the pool's threads), whose code sums must be the stored
 * ones (damaged codes show there), then the best candidates scored exactly
 * in float32, each as near its int8 score as quantization allows, and the
 * results checked against their SQLite rows. */
static glimpse_status search_vectors(glimpse_index *index, const float *query, size_t k, glimpse_search_result *results,
                                     size_t *found) {
    const vector_file *v = &index->vectors;
    const size_t n = v->count, dim = v->dim;
    char sql[ROW_SELECT_CAPACITY];
    uint8_t *query_u8 = malloc(v->q8.depth);
    int8_t *query_codes = malloc(v->q8.depth);
    size_t wanted = candidate_count(k) < n ? candidate_count(k) : n;
    glimpse_search_result *candidates = malloc((wanted + 1) * sizeof *candidates);
    size_t *rows = malloc((wanted + k + 1) * sizeof *rows);
    glimpse_status status = query_u8 && query_codes && candidates && rows ? GLIMPSE_STATUS_OK : ERROR_OOM();
    if (!status) {
        float query_step = q8_quantize_row(query_u8, query, dim, v->q8.depth);
        for (size_t d = 0; d < v->q8.depth; d++) query_codes[d] = (int8_t)(query_u8[d] - 128);
        status = scan_codes(index, query_codes);
        const int32_t *dots = index->scan;
        size_t taken = 0;
        for (size_t r = 0; !status && r < n; r++)
            keep_best(candidates, rows, &taken, wanted, (float)dots[r] * (query_step * v->q8.scale[r]), r, NULL, -1);
        /* the candidates scored exactly; each float32 row as near its int8 twin's score as quantization allows */
        double query_l1 = 0;
        for (size_t d = 0; d < dim; d++) query_l1 += fabs((double)query[d]);
        size_t kept = 0, *best = rows + wanted; /* the k best rows, after the candidates' */
        for (size_t c = 0; !status && c < taken; c++) {
            double row_l1, cosine = kernel_dot_double(query, v->rows + rows[c] * dim, dim, &row_l1);
            if (!within_quantization(cosine, candidates[c].score, query_l1, row_l1, query_step, v->q8.scale[rows[c]],
                                     dim))
                status = index_damaged(index, "its vector file's embeddings are not their int8 twins");
            else
                keep_best(results, best, &kept, k, exact_score(index, cosine), rows[c], NULL, -1);
        }
        /* the results checked against their SQLite rows, which give their paths */
        sqlite3_stmt *lookup = NULL;
        int code = status ? SQLITE_OK
                          : sqlite3_prepare_v2(index->db, index_row_select(index, "id = ?", sql), -1, &lookup, NULL);
        if (code != SQLITE_OK) status = index_prepare_error(index, code, "reading the index");
        for (size_t r = 0; !status && r < kept; r++) {
            status = check_vector_row(index, lookup, best[r]);
            results[r].path = index->fetched[best[r]];
            results[r].time = index->fetched_times[best[r]];
        }
        sqlite3_finalize(lookup);
        *found = status ? 0 : kept;
    }
    free(query_u8), free(query_codes), free(candidates), free(rows);
    return status;
}

/* The exact search over the rows loaded from SQLite: every score in one
 * float32 matrix-vector product, the best candidates scored as exact_score. */
glimpse_status index_search_loaded(glimpse_index *index, const float *query, size_t k, glimpse_search_result *results,
                                   size_t *found) {
    glimpse_status status = index_load_cache(index);
    if (status || !k) return status;
    const kernel_weight matrix = kernel_weight_f32(index->matrix);
    kernel_linear(index->scores, index->count, query, index->dim, &matrix, NULL, 1, index->dim, index->count, false,
                  NULL);
    size_t wanted = candidate_count(k), taken = 0, n = 0;
    glimpse_search_result *candidates = malloc(wanted * sizeof *candidates);
    size_t *rows = malloc(wanted * sizeof *rows);
    if (!candidates || !rows) status = ERROR_OOM();
    for (size_t i = 0; !status && i < index->count; i++)
        keep_best(candidates, rows, &taken, wanted, index->scores[i], i, NULL, -1);
    for (size_t c = 0; !status && c < taken; c++)
        keep_best(results, NULL, &n, k,
                  exact_score(index, kernel_dot_double(query, index->matrix + rows[c] * index->dim, index->dim, NULL)),
                  rows[c], index->paths[rows[c]], index->times[rows[c]]);
    free(candidates), free(rows);
    *found = n;
    return status;
}

/* Forgets the cache when the index has changed since it was made: another process (glimpse index) or
 * connection committed. A mapped vector file stays while meta still records its stamp (a writer retires
 * the stamp as it takes the writer's lock, before any row changes); the rows loaded from SQLite stay while
 * PRAGMA data_version is unchanged. Runs inside the search's read transaction, after its first read, so
 * that what it checks is the state the search then reads. */
glimpse_status index_forget_if_changed(glimpse_index *index) {
    char *stamp = NULL;
    glimpse_status status = index_meta_get(index, "vectors", &stamp);
    sqlite3_stmt *statement = NULL;
    int64_t version = index->data_version;
    if (!status && sqlite3_prepare_v2(index->db, "PRAGMA data_version", -1, &statement, NULL) == SQLITE_OK &&
        sqlite3_step(statement) == SQLITE_ROW)
        version = sqlite3_column_int64(statement, 0);
    sqlite3_finalize(statement);
    if (!status) {
        bool changed = index->vectors_open ? !stamp || strtoull(stamp, NULL, 16) != index->vectors.stamp
                                           : index->loaded && version != index->data_version;
        if (changed) index_drop_cache(index);
        index->data_version = version;
    }
    free(stamp);
    return status;
}

glimpse_status glimpse_index_search(glimpse_index *index, const float *query, size_t k,
                                    glimpse_search_result *results, size_t *found) {
    if (!index || !query || !found || (k && !results))
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_index_search: NULL argument");
    *found = 0;
    /* the whole search in one read transaction: the vector file's stamp, its rows and their paths from one
     * committed state, whatever a writer in another process commits meanwhile */
    bool began;
    glimpse_status status = index_read_begin(index, &began);
    if (!status) status = index_forget_if_changed(index);
    bool usable = index->vectors_open;
    if (!status && !index->loaded && !usable) status = open_vectors(index, &usable);
    if (!status && !(usable && !k))
        status = usable ? search_vectors(index, query, k, results, found)
                        : index_search_loaded(index, query, k, results, found);
    index_read_end(index, began);
    return status;
}

glimpse_status glimpse_index_verify(glimpse_index *index, bool *checksummed) {
    if (!index || !checksummed)
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_index_verify: NULL argument");
    *checksummed = index->checksummed;
    glimpse_status status = index_check_structure(index, "PRAGMA integrity_check(1)");
    if (status) return status;
    index_drop_cache(index);
    status = index_load_cache(index);
    /* the vector file, if it is the index's current one: the same rows, and every code's sum */
    bool usable = false;
    if (!status) status = open_vectors(index, &usable);
    if (!status && usable) {
        const vector_file *v = &index->vectors;
        int8_t *zeros = calloc(v->q8.depth + 1, 1);
        if (!zeros) status = ERROR_OOM();
        else if (v->count != index->count || memcmp(v->rows, index->matrix, v->count * v->dim * sizeof(float)) != 0)
            status = index_damaged(index, "its vector file's embeddings are not its rows'");
        else
            status = scan_codes(index, zeros);
        free(zeros);
    }
    return status;
}
