/* index_duplicates.c — glimpse_index_embedding and glimpse_index_duplicates:
 * a stored picture's embedding by path, and groups of pictures whose
 * embeddings are near (union-find over every pair of cached rows). */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/kernels.h"
#include "search/index_internal.h"

glimpse_status glimpse_index_embedding(glimpse_index *index, const char *path, float *out) {
    if (!index || !path || !out) return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_index_embedding: NULL argument");
    char *stored = index_stored_form(path);
    if (!stored) return ERROR_OOM();
    char sql[ROW_SELECT_CAPACITY]; /* a video's first frame */
    index_row_select(index, index->failed_column ? "path = ? AND failed IS NULL ORDER BY id LIMIT 1" : "path = ? ORDER BY id LIMIT 1",
                     sql);
    sqlite3_stmt *statement;
    int code = sqlite3_prepare_v2(index->db, sql, -1, &statement, NULL);
    glimpse_status status = code == SQLITE_OK ? GLIMPSE_STATUS_OK : index_prepare_error(index, code, "reading the index");
    if (!status) {
        sqlite3_bind_text(statement, 1, stored, -1, SQLITE_STATIC);
        code = sqlite3_step(statement);
        if (code == SQLITE_ROW && !(status = index_check_row(index, statement)))
            memcpy(out, sqlite3_column_blob(statement, 1), index->dim * sizeof(float));
        else if (code == SQLITE_DONE)
            status = error_set(GLIMPSE_STATUS_NOT_FOUND, "%s is not in %s", stored, index->path);
        else if (code != SQLITE_ROW)
            status = index_step_error(index, code, "reading the index");
    }
    sqlite3_finalize(statement);
    free(stored);
    return status;
}

/* Union-find over the cached rows: the root of row r, paths halved on the way. */
static size_t group_root(size_t *parent, size_t r) {
    while (parent[r] != r) r = parent[r] = parent[parent[r]];
    return r;
}

/* Joins every pair of cached rows whose cosine is at least min_cosine
 * (parent: one group per row to start with). The pairs are scored a block
 * of rows at a time against the rows after the block's first, one product each. */
static glimpse_status join_similar(glimpse_index *index, float min_cosine, size_t *parent) {
    const size_t n = index->count, dim = index->dim;
    size_t block = n ? ((size_t)16 << 20) / n : 1; /* about 64 MB of scores at a time */
    block = block < 1 ? 1 : block > 256 ? 256 : block;
    float *scores = malloc(block * (n ? n : 1) * sizeof(float));
    if (!scores) return ERROR_OOM();
    for (size_t first = 0; first < n; first += block) {
        size_t rows = n - first < block ? n - first : block, columns = n - first;
        const kernel_weight after = kernel_weight_f32(index->matrix + first * dim);
        kernel_linear(scores, columns, index->matrix + first * dim, dim, &after, NULL, rows, dim, columns, false,
                      NULL);
        for (size_t i = 0; i < rows; i++)
            for (size_t j = i + 1; j < columns; j++)
                if (scores[i * columns + j] >= min_cosine &&
                    !(index->times[first + i] >= 0 && strcmp(index->paths[first + i], index->paths[first + j]) == 0))
                    parent[group_root(parent, first + i)] = group_root(parent, first + j);
    }
    free(scores);
    return GLIMPSE_STATUS_OK;
}

glimpse_status glimpse_index_duplicates(glimpse_index *index, float min_cosine, glimpse_index_group_callback on_group,
                                        void *user, size_t *groups) {
    if (!index || !on_group || !groups)
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_index_duplicates: NULL argument");
    *groups = 0;
    bool began; /* the rows as now committed: a handle kept open sees another process's re-index */
    glimpse_status status = index_read_begin(index, &began);
    if (!status) status = index_forget_if_changed(index);
    if (!status) status = index_load_cache(index);
    index_read_end(index, began);
    if (status) return status;
    const size_t n = index->count, dim = index->dim;
    size_t *parent = malloc((n + 1) * sizeof *parent), *members = malloc((n + 1) * sizeof *members);
    const char **paths = malloc((n + 1) * sizeof *paths);
    float *similarity = malloc((n + 1) * sizeof *similarity);
    if (!parent || !members || !paths || !similarity) status = ERROR_OOM();
    for (size_t r = 0; !status && r < n; r++) parent[r] = r;
    if (!status) status = join_similar(index, min_cosine, parent);
    /* each group's rows in order, gathered by a counting sort on their roots */
    size_t *start = status ? NULL : calloc(n + 1, sizeof *start);
    if (!status && !start) status = ERROR_OOM();
    for (size_t r = 0; !status && r < n; r++) start[group_root(parent, r) + 1]++;
    for (size_t r = 0; !status && r < n; r++) start[r + 1] += start[r];
    for (size_t r = 0; !status && r < n; r++) members[start[group_root(parent, r)]++] = r;
    for (size_t root = 0, from = 0; !status && root < n; root++) {
        size_t to = start[root], count = to - from; /* start[root] moved to the group's end */
        /* a video once, by its frame nearest the group's first */
        const float *first = index->matrix + members[from] * dim;
        size_t files = 0;
        for (size_t m = 0; count >= 2 && m < count; m++) {
            const float *row = index->matrix + members[from + m] * dim;
            double dot = 0;
            for (size_t d = 0; d < dim; d++) dot += (double)first[d] * row[d];
            const char *path = index->paths[members[from + m]];
            size_t seen = 0;
            while (seen < files && strcmp(paths[seen], path) != 0) seen++;
            float cosine = dot > 1 ? 1.0f : (float)dot; /* two unit rows' rounding may reach 1.00000012 */
            if (seen == files) paths[files] = path, similarity[files++] = cosine;
            else if (cosine > similarity[seen] && seen > 0) similarity[seen] = cosine;
        }
        if (files >= 2) {
            on_group(user, paths, similarity, files);
            (*groups)++;
        }
        from = to;
    }
    free(start), free(parent), free(members), free(paths), free(similarity);
    return status;
}
