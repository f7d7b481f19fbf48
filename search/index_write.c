/* index_write.c — what every change to a glimpse_index goes through: write
 * transactions, the one-writer lock (the writer table), the recorded video
 * sampling, and the vector file rewritten from the rows after a change.
 * Decides nothing about which rows change. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "search/index_internal.h"
#include "search/vectors.h"
#include "search/walk.h"

/* Begins a write transaction with the one statement its rows need. */
glimpse_status index_transaction_begin(glimpse_index *index, const char *sql, const char *what,
                                       sqlite3_stmt **statement) {
    *statement = NULL;
    if (sqlite3_prepare_v2(index->db, sql, -1, statement, NULL) != SQLITE_OK) return index_db_error(index, what);
    return index_exec(index, "BEGIN IMMEDIATE");
}

/* Commits the transaction, or after a failure rolls all of it back; returns the failure. */
glimpse_status index_transaction_end(glimpse_index *index, sqlite3_stmt *statement, glimpse_status status) {
    sqlite3_finalize(statement);
    if (!status) return index_exec(index, "COMMIT");
    sqlite3_exec(index->db, "ROLLBACK", NULL, NULL, NULL);
    return status;
}


/* A writer row older than this, left by a process on another machine (whose
 * life cannot be checked from here), is taken to be stale. */
#define INDEX_FOREIGN_WRITER_STALE_SECONDS (24 * 3600)

/* Whether the process pid of this machine is alive. */
static bool process_alive(int64_t pid) {
    if (pid <= 0 || pid > INT32_MAX) return false;
    return kill((pid_t)pid, 0) == 0 || errno == EPERM;
}

/* Whether the recorded writer still holds the index: a live process of this
 * machine other than this one, or a recent one of another machine. */
static bool writer_holds(sqlite3_stmt *row, const char *host) {
    int64_t pid = sqlite3_column_int64(row, 0);
    const char *writer_host = (const char *)sqlite3_column_text(row, 1);
    if (writer_host && strcmp(writer_host, host) == 0) return pid != (int64_t)getpid() && process_alive(pid);
    return (int64_t)time(NULL) - sqlite3_column_int64(row, 2) < INDEX_FOREIGN_WRITER_STALE_SECONDS;
}

/* Records this process as the index's one writer, unless another holds it
 * (GLIMPSE_STATUS_BUSY); a writer row left by a process that died is taken over. */
glimpse_status index_writer_lock(glimpse_index *index) {
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    sqlite3_stmt *statement;
    glimpse_status status = index_transaction_begin(index, "SELECT pid, host, started FROM writer WHERE id = 1",
                                                    "reading the index's writer", &statement);
    if (!status && sqlite3_step(statement) == SQLITE_ROW && writer_holds(statement, host))
        status = error_set(GLIMPSE_STATUS_BUSY,
                           "%s is being updated by another glimpse index (process %lld on %s); wait for it to finish",
                           index->path, (long long)sqlite3_column_int64(statement, 0),
                           sqlite3_column_text(statement, 1) ? (const char *)sqlite3_column_text(statement, 1) : "?");
    sqlite3_finalize(statement);
    statement = NULL;
    if (!status && sqlite3_prepare_v2(index->db, "INSERT OR REPLACE INTO writer VALUES (1, ?, ?, ?)", -1, &statement,
                                      NULL) != SQLITE_OK)
        status = index_db_error(index, "recording the index's writer");
    else if (!status) {
        sqlite3_bind_int64(statement, 1, (int64_t)getpid());
        sqlite3_bind_text(statement, 2, host, -1, SQLITE_STATIC);
        sqlite3_bind_int64(statement, 3, (int64_t)time(NULL));
        if (sqlite3_step(statement) != SQLITE_DONE) status = index_db_error(index, "recording the index's writer");
    }
    /* from now on the vector file is not the index's: rewritten when the change is done */
    if (!status) status = index_exec(index, "DELETE FROM meta WHERE key = 'vectors'");
    return index_transaction_end(index, statement, status);
}


/* Rows copied to the vector file at a time. */
#define VECTOR_CHUNK_ROWS 4096

/* Copies the rows that searches see (not failed), each checked, into w (a chunk at a time). */
static glimpse_status copy_rows(glimpse_index *index, vector_writer *w, size_t count) {
    const char *sql = index->failed_column
                          ? "SELECT path, embedding, checksum, id FROM images WHERE failed IS NULL ORDER BY id"
                          : "SELECT path, embedding, checksum, id FROM images ORDER BY id";
    sqlite3_stmt *statement;
    int code = sqlite3_prepare_v2(index->db, sql, -1, &statement, NULL);
    if (code != SQLITE_OK) return index_prepare_error(index, code, "reading the index");
    int64_t *ids = malloc(VECTOR_CHUNK_ROWS * sizeof *ids);
    float *rows = malloc(VECTOR_CHUNK_ROWS * index->dim * sizeof *rows);
    glimpse_status status = ids && rows ? GLIMPSE_STATUS_OK : ERROR_OOM();
    size_t n = 0, copied = 0;
    while (!status && (code = sqlite3_step(statement)) == SQLITE_ROW) {
        if (++copied > count) status = index_damaged(index, "its row count changed while it was read");
        if (!status) status = index_check_row(index, statement);
        if (status) break;
        ids[n] = sqlite3_column_int64(statement, 3);
        memcpy(rows + n * index->dim, sqlite3_column_blob(statement, 1), index->dim * sizeof(float));
        if (++n == VECTOR_CHUNK_ROWS) status = vector_writer_add(w, ids, rows, n), n = 0;
    }
    if (!status && code != SQLITE_DONE) status = index_step_error(index, code, "reading the index");
    if (!status && n) status = vector_writer_add(w, ids, rows, n);
    sqlite3_finalize(statement);
    free(ids), free(rows);
    return status;
}

/* Writes the vector file of the index as it now is, and records its stamp.
 * A file that cannot be written (a read-only folder, a full disk) leaves
 * the index without one: searches then read the rows from SQLite. Damage
 * met on the way is returned. */
glimpse_status index_write_vectors(glimpse_index *index) {
    char *path = vector_file_path(index->path);
    if (!path) return ERROR_OOM();
    static uint64_t calls;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    uint64_t seed[4] = {(uint64_t)now.tv_sec, (uint64_t)now.tv_nsec, (uint64_t)getpid(), ++calls};
    uint64_t stamp = content_hash((const uint8_t *)seed, sizeof seed);
    vector_writer w;
    glimpse_status status = index_exec(index, "BEGIN"), written = GLIMPSE_STATUS_OK;
    size_t count = status ? 0 : index_count_where(index, index->failed_column ? "failed IS NULL" : "1");
    if (!status) written = vector_writer_start(&w, path, stamp, count, index->dim);
    if (!status && !written) {
        status = copy_rows(index, &w, count);
        written = status;
    }
    sqlite3_exec(index->db, "COMMIT", NULL, NULL, NULL);
    if (!status) written = vector_writer_finish(&w, written);
    char text[24];
    snprintf(text, sizeof text, "%016llx", (unsigned long long)stamp);
    if (!status && !written) status = index_meta_set(index, "vectors", text);
    free(path);
    return status;
}

/* Leaves the index to other writers. */
void index_writer_unlock(glimpse_index *index) {
    sqlite3_stmt *statement;
    if (sqlite3_prepare_v2(index->db, "DELETE FROM writer WHERE id = 1 AND pid = ?", -1, &statement, NULL) != SQLITE_OK)
        return;
    sqlite3_bind_int64(statement, 1, (int64_t)getpid());
    sqlite3_step(statement);
    sqlite3_finalize(statement);
}

/* How videos' frames are sampled, against what the index records: the first
 * to bring videos records it, another is refused. */
glimpse_status index_record_sampling(glimpse_index *index, const char *sampling) {
    glimpse_status status = GLIMPSE_STATUS_OK;
    if (!index->video_sampling) {
        status = index_meta_set(index, "video_sampling", sampling);
        if (!status && !(index->video_sampling = strdup(sampling))) status = ERROR_OOM();
    } else if (strcmp(index->video_sampling, sampling) != 0) {
        status = error_set(GLIMPSE_STATUS_INVALID_ARGUMENT,
                           "%s samples its videos' frames %s, not %s; give the same, or use a new --db", index->path,
                           index->video_sampling, sampling);
    }
    return status;
}
