/* index_manage.c — the management calls of a glimpse_index: statistics, the
 * roots and entries it holds, removing a path (and what lies below it), and
 * pruning files that no longer exist. No embedding and no search here. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "core/file.h"
#include "search/walk.h"
#include "search/index_internal.h"

/* SQL: whether the row's path (column path) is ?1 or lies below the folder ?2 (?1 with a slash), byte for byte. */
#define PATH_IS_OR_UNDER "(path = ?1 OR substr(CAST(path AS BLOB), 1, length(CAST(?2 AS BLOB))) = CAST(?2 AS BLOB))"

/* Runs a statement of the form "... WHERE PATH_IS_OR_UNDER" for path (and
 * path/), stepping it once; SQLite's result code in *code. */
static glimpse_status step_under(glimpse_index *index, sqlite3_stmt *statement, const char *path, int *code) {
    size_t length = strlen(path);
    char *folder = malloc(length + 2);
    if (!folder) return ERROR_OOM();
    memcpy(folder, path, length);
    strcpy(folder + length, length && path[length - 1] == '/' ? "" : "/");
    sqlite3_bind_text(statement, 1, path, -1, SQLITE_STATIC);
    sqlite3_bind_text(statement, 2, folder, -1, SQLITE_TRANSIENT);
    free(folder);
    *code = sqlite3_step(statement);
    return *code == SQLITE_ROW || *code == SQLITE_DONE ? GLIMPSE_STATUS_OK : index_step_error(index, *code, "reading the index");
}

/* The number "SELECT what FROM images WHERE condition" gives (0 when a column is missing). */
static size_t count_select(glimpse_index *index, const char *what, const char *condition) {
    char sql[200];
    snprintf(sql, sizeof sql, "SELECT %s FROM images WHERE %s", what, condition);
    sqlite3_stmt *statement;
    size_t count = 0;
    if (sqlite3_prepare_v2(index->db, sql, -1, &statement, NULL) == SQLITE_OK) {
        if (sqlite3_step(statement) == SQLITE_ROW) count = (size_t)sqlite3_column_int64(statement, 0);
        sqlite3_finalize(statement);
    }
    return count;
}

/* The rows where condition holds. */
size_t index_count_where(glimpse_index *index, const char *condition) {
    return count_select(index, "COUNT(*)", condition);
}

/* The files (distinct paths, a video once) with a row where condition holds. */
static size_t count_files(glimpse_index *index, const char *condition) {
    return count_select(index, "COUNT(DISTINCT path)", condition);
}

glimpse_status glimpse_index_get_stats(glimpse_index *index, glimpse_index_stats *out) {
    if (!index || !out) return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_index_get_stats: NULL argument");
    memset(out, 0, sizeof *out);
    int64_t bytes = index_database_bytes(index);
    if (bytes < 0) return index_db_error(index, "reading its size");
    out->images = count_files(index, "1");
    out->failed = index->failed_column ? count_files(index, "failed IS NOT NULL") : 0;
    out->videos = index->frames_column ? count_files(index, "time IS NOT NULL") : 0;
    out->frames = index->frames_column ? index_count_where(index, "time IS NOT NULL") : 0;
    out->video_sampling = index->video_sampling;
    out->fast_decode = index->fast_decode;
    out->dim = index->dim;
    out->precision = index->precision;
    out->model_path = index->model_path;
    out->model_identity = index->identity;
    out->file_bytes = (uint64_t)bytes;
    return GLIMPSE_STATUS_OK;
}

glimpse_status glimpse_index_list_roots(glimpse_index *index, glimpse_index_root_callback on_root, void *user) {
    if (!index || !on_root) return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_index_list_roots: NULL argument");
    sqlite3_stmt *roots, *count;
    int code = sqlite3_prepare_v2(index->db, "SELECT path FROM roots ORDER BY path", -1, &roots, NULL);
    if (code == SQLITE_ERROR && strcmp(sqlite3_errmsg(index->db), "no such table: roots") == 0)
        return GLIMPSE_STATUS_OK; /* an index from before roots were recorded */
    if (code != SQLITE_OK) return index_prepare_error(index, code, "reading the paths indexed");
    code = sqlite3_prepare_v2(index->db, "SELECT COUNT(DISTINCT path) FROM images WHERE " PATH_IS_OR_UNDER, -1, &count,
                              NULL);
    glimpse_status status = code == SQLITE_OK ? GLIMPSE_STATUS_OK : index_prepare_error(index, code, "counting images");
    while (!status && (code = sqlite3_step(roots)) == SQLITE_ROW) {
        const char *path = (const char *)sqlite3_column_text(roots, 0);
        if (!path) continue;
        int counted;
        status = step_under(index, count, path, &counted);
        if (!status) on_root(user, path, (size_t)sqlite3_column_int64(count, 0), index_file_exists(path));
        sqlite3_reset(count);
    }
    if (!status && code != SQLITE_DONE) status = index_step_error(index, code, "reading the paths indexed");
    sqlite3_finalize(count);
    sqlite3_finalize(roots);
    return status;
}

glimpse_status glimpse_index_list(glimpse_index *index, glimpse_index_entry_callback on_entry, void *user) {
    if (!index || !on_entry) return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_index_list: NULL argument");
    sqlite3_stmt *statement;
    /* a video once, failed if its frames are */
    const char *sql = index->failed_column ? "SELECT path, MAX(failed) FROM images GROUP BY path ORDER BY path"
                                           : "SELECT path, NULL FROM images GROUP BY path ORDER BY path";
    int code = sqlite3_prepare_v2(index->db, sql, -1, &statement, NULL);
    if (code != SQLITE_OK) return index_prepare_error(index, code, "reading the index");
    while ((code = sqlite3_step(statement)) == SQLITE_ROW)
        if (sqlite3_column_text(statement, 0))
            on_entry(user, (const char *)sqlite3_column_text(statement, 0),
                     (const char *)sqlite3_column_text(statement, 1));
    glimpse_status status = code == SQLITE_DONE ? GLIMPSE_STATUS_OK : index_step_error(index, code, "reading the index");
    sqlite3_finalize(statement);
    return status;
}

/* A writing operation on a handle that may be read-only: refused, else the writer's lock taken. */
static glimpse_status begin_change(glimpse_index *index, const char *what) {
    if (index->read_only)
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "%s: %s needs the index opened with its model", index->path,
                         what);
    index_drop_cache(index);
    return index_writer_lock(index);
}

/* Deletes the rows of table whose path is path or lies below it; *removed counts them. */
static glimpse_status delete_under(glimpse_index *index, const char *table, const char *path, size_t *removed) {
    char sql[160];
    snprintf(sql, sizeof sql, "DELETE FROM %s WHERE " PATH_IS_OR_UNDER, table);
    sqlite3_stmt *remove;
    int code;
    glimpse_status status = index_transaction_begin(index, sql, "removing entries", &remove);
    sqlite3_stmt *files = NULL;
    if (!status && removed && sqlite3_prepare_v2(index->db, "SELECT COUNT(DISTINCT path) FROM images WHERE " PATH_IS_OR_UNDER,
                                                 -1, &files, NULL) != SQLITE_OK)
        status = index_db_error(index, "removing entries");
    if (!status && files && !(status = step_under(index, files, path, &code)))
        *removed = (size_t)sqlite3_column_int64(files, 0); /* files: a video's frames count once */
    sqlite3_finalize(files);
    if (!status) status = step_under(index, remove, path, &code);
    return index_transaction_end(index, remove, status);
}

/* A path given by a caller in the form the index stores: absolute, links
 * resolved when it exists, no trailing slash. NULL when out of memory; caller frees. */
char *index_stored_form(const char *path) {
    char *absolute = realpath(path, NULL);
    if (!absolute && path[0] != '/') {
        char *here = getcwd(NULL, 0);
        absolute = here ? file_join(here, path) : NULL;
        free(here);
    } else if (!absolute) {
        absolute = strdup(path);
    }
    size_t length = absolute ? strlen(absolute) : 0;
    while (length > 1 && absolute[length - 1] == '/') absolute[--length] = '\0';
    return absolute;
}

glimpse_status glimpse_index_remove(glimpse_index *index, const char *path, size_t *removed) {
    if (!index || !path || !removed) return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_index_remove: NULL argument");
    *removed = 0;
    char *absolute = index_stored_form(path);
    if (!absolute) return ERROR_OOM();
    glimpse_status status = begin_change(index, "removing entries");
    if (status) {
        free(absolute);
        return status;
    }
    status = delete_under(index, "images", absolute, removed);
    if (!status) status = delete_under(index, "roots", absolute, NULL);
    if (!status) status = index_write_vectors(index);
    index_writer_unlock(index);
    free(absolute);
    return status;
}

glimpse_status glimpse_index_prune(glimpse_index *index, size_t *removed) {
    if (!index || !removed) return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_index_prune: NULL argument");
    *removed = 0;
    glimpse_status status = begin_change(index, "pruning");
    if (status) return status;
    stored_images stored = {0};
    status = index_read_stored(index, &stored);
    sqlite3_stmt *remove = NULL;
    if (!status) status = index_transaction_begin(index, "DELETE FROM images WHERE path = ?", "pruning", &remove);
    for (size_t r = 0; !status && r < stored.count; r++) {
        if (index_file_exists(stored.paths[r])) continue;
        sqlite3_bind_text(remove, 1, stored.paths[r], -1, SQLITE_STATIC);
        if (sqlite3_step(remove) != SQLITE_DONE) status = index_db_error(index, "pruning");
        sqlite3_reset(remove);
        (*removed)++;
    }
    if (remove) status = index_transaction_end(index, remove, status);
    if (status) *removed = 0; /* rolled back */
    /* the roots that are gone go too */
    if (!status) status = index_exec(index, "DELETE FROM roots WHERE NOT glimpse_file_exists(path)");
    if (!status) status = index_write_vectors(index);
    index_writer_unlock(index);
    index_stored_images_free(&stored);
    return status;
}
