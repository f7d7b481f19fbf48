/* index.c — glimpse_index: the SQLite search index of a photo collection.
 *
 * Schema: meta(key, value) holds the model's identity and folder once;
 * images(path UNIQUE, size, mtime_ns, hash, embedding BLOB of float32).
 * WAL journaling: each committed batch survives a crash or kill -9, and a
 * batch in flight is rolled back whole. Embeddings are kept as float32 both
 * on disk and in memory: exact, and a 100,000 × 512 table is 200 MB, which
 * one sgemv reads in about 10 ms. */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "core/error.h"
#include "core/file.h"
#include "vision/image.h"
#include "search/index.h"
#include "core/kernels.h"
#include "api/model.h"
#include "core/strmap.h"

struct glimpse_index {
    sqlite3 *db;
    char *path;
    char identity[128];
    char *model_path;
    size_t dim;
    float logit_scale;
    /* search cache: every stored embedding, loaded on first search */
    int loaded;
    size_t count;
    char **paths;
    float *matrix; /* [count, dim] */
    float *scores; /* [count] */
};

static glimpse_status db_error(glimpse_index *index, const char *what) {
    return error_set(GLIMPSE_STATUS_IO, "%s: %s: %s", index->path, what, sqlite3_errmsg(index->db));
}

static glimpse_status exec(glimpse_index *index, const char *sql) {
    char *message = NULL;
    if (sqlite3_exec(index->db, sql, NULL, NULL, &message) != SQLITE_OK) {
        glimpse_status status = error_set(GLIMPSE_STATUS_IO, "%s: %s", index->path, message ? message : "SQL error");
        sqlite3_free(message);
        return status;
    }
    return GLIMPSE_STATUS_OK;
}

static char *meta_get(glimpse_index *index, const char *key) {
    sqlite3_stmt *statement;
    char *value = NULL;
    if (sqlite3_prepare_v2(index->db, "SELECT value FROM meta WHERE key = ?", -1, &statement, NULL) != SQLITE_OK)
        return NULL;
    sqlite3_bind_text(statement, 1, key, -1, SQLITE_STATIC);
    if (sqlite3_step(statement) == SQLITE_ROW && sqlite3_column_text(statement, 0))
        value = strdup((const char *)sqlite3_column_text(statement, 0));
    sqlite3_finalize(statement);
    return value;
}

static glimpse_status meta_set(glimpse_index *index, const char *key, const char *value) {
    sqlite3_stmt *statement;
    if (sqlite3_prepare_v2(index->db, "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", -1, &statement,
                           NULL) != SQLITE_OK)
        return db_error(index, "writing the model's identity");
    sqlite3_bind_text(statement, 1, key, -1, SQLITE_STATIC);
    sqlite3_bind_text(statement, 2, value, -1, SQLITE_STATIC);
    int done = sqlite3_step(statement) == SQLITE_DONE;
    sqlite3_finalize(statement);
    return done ? GLIMPSE_STATUS_OK : db_error(index, "writing the model's identity");
}

static void drop_cache(glimpse_index *index) {
    for (size_t i = 0; i < index->count; i++) free(index->paths[i]);
    free(index->paths);
    free(index->matrix);
    free(index->scores);
    index->paths = NULL;
    index->matrix = index->scores = NULL;
    index->count = 0;
    index->loaded = 0;
}

glimpse_status glimpse_index_open(const char *db_path, const glimpse_model *model, glimpse_index **out) {
    if (!out) return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_index_open: out is NULL");
    *out = NULL;
    if (!db_path) return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_index_open: no database path");
    if (model && glimpse_model_get_kind(model) != GLIMPSE_MODEL_KIND_CLIP)
        return error_set(GLIMPSE_STATUS_WRONG_MODEL, "a search index needs a CLIP model (embeddings); this is %s",
                         model->architecture);
    if (!model && !file_is_regular(db_path))
        return error_set(GLIMPSE_STATUS_NOT_FOUND, "%s: no such index (build it with glimpse index)", db_path);
    glimpse_index *index = calloc(1, sizeof *index);
    if (!index) return ERROR_OOM();
    index->path = strdup(db_path);
    glimpse_status status = index->path ? GLIMPSE_STATUS_OK : ERROR_OOM();
    int flags = model ? SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE : SQLITE_OPEN_READWRITE;
    if (!status && sqlite3_open_v2(db_path, &index->db, flags | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK)
        status = db_error(index, "cannot open");
    if (!status) sqlite3_busy_timeout(index->db, 10000);
    if (!status)
        status = exec(index, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA mmap_size=4294967296;"
                             "CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);"
                             "CREATE TABLE IF NOT EXISTS images(id INTEGER PRIMARY KEY, path TEXT NOT NULL UNIQUE,"
                             " size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL, hash INTEGER NOT NULL,"
                             " embedding BLOB NOT NULL);"
                             "CREATE INDEX IF NOT EXISTS images_hash ON images(hash);");
    char *identity = status ? NULL : meta_get(index, "model_identity");
    char *dim = status ? NULL : meta_get(index, "dim");
    char *scale = status ? NULL : meta_get(index, "logit_scale");
    index->model_path = status ? NULL : meta_get(index, "model_path");
    if (!status && model) {
        char mine[128];
        status = model_identity(model, mine, sizeof mine);
        if (!status && identity && strcmp(identity, mine) != 0)
            status = error_set(GLIMPSE_STATUS_WRONG_MODEL,
                               "%s was built with another model (%s, from %s); give that model, or a new --db",
                               db_path, identity, index->model_path ? index->model_path : "?");
        if (!status && !identity) {
            char number[64];
            char *absolute = realpath(model->folder, NULL);
            status = exec(index, "BEGIN");
            if (!status) status = meta_set(index, "model_identity", mine);
            if (!status) status = meta_set(index, "model_path", absolute ? absolute : model->folder);
            snprintf(number, sizeof number, "%zu", glimpse_model_embedding_dim(model));
            if (!status) status = meta_set(index, "dim", number);
            snprintf(number, sizeof number, "%.9g", model->logit_scale);
            if (!status) status = meta_set(index, "logit_scale", number);
            if (!status) status = exec(index, "COMMIT");
            free(index->model_path);
            index->model_path = strdup(absolute ? absolute : model->folder);
            free(absolute);
        }
        if (!status) {
            snprintf(index->identity, sizeof index->identity, "%s", mine);
            index->dim = glimpse_model_embedding_dim(model);
            index->logit_scale = model->logit_scale;
        }
    } else if (!status) {
        if (!identity || !dim || !scale)
            status = error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s is not a glimpse index (no model recorded)", db_path);
        else {
            snprintf(index->identity, sizeof index->identity, "%s", identity);
            index->dim = (size_t)strtoul(dim, NULL, 10);
            index->logit_scale = strtof(scale, NULL);
            if (index->dim == 0 || index->dim > 65536)
                status = error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: damaged index (embedding size %s)", db_path, dim);
        }
    }
    free(identity), free(dim), free(scale);
    if (status) {
        glimpse_index_free(index);
        return status;
    }
    *out = index;
    return GLIMPSE_STATUS_OK;
}

void glimpse_index_free(glimpse_index *index) {
    if (!index) return;
    drop_cache(index);
    sqlite3_close(index->db);
    free(index->model_path);
    free(index->path);
    free(index);
}

const char *glimpse_index_model_path(const glimpse_index *index) { return index ? index->model_path : NULL; }

size_t glimpse_index_count(const glimpse_index *index) {
    if (!index) return 0;
    sqlite3_stmt *statement;
    size_t count = 0;
    if (sqlite3_prepare_v2(index->db, "SELECT COUNT(*) FROM images", -1, &statement, NULL) == SQLITE_OK) {
        if (sqlite3_step(statement) == SQLITE_ROW) count = (size_t)sqlite3_column_int64(statement, 0);
        sqlite3_finalize(statement);
    }
    return count;
}

/* ---------------------------------------------------------------- update */

typedef struct stored {
    int64_t id, size, mtime_ns, hash;
    int seen;
} stored;

#define INDEX_BATCH 8

typedef struct pending {
    size_t file;       /* into the file list */
    int64_t stored_id; /* 0 = new */
    int64_t hash;
} pending;

static glimpse_status embed_batch(glimpse_index *index, glimpse_context *ctx, const file_list *files,
                                  const pending *batch, size_t count, const glimpse_index_params *params,
                                  glimpse_index_summary *summary) {
    glimpse_image *images[INDEX_BATCH];
    size_t which[INDEX_BATCH], loaded = 0;
    glimpse_image_params image_params = glimpse_image_default_params();
    if (params && params->max_pixels) image_params.max_pixels = params->max_pixels;
    int64_t hashes[INDEX_BATCH];
    for (size_t i = 0; i < count; i++) {
        const found_file *f = &files->items[batch[i].file];
        uint8_t *bytes;
        size_t size;
        glimpse_status status = file_read_all(f->path, (size_t)1 << 32, &bytes, &size);
        if (!status) {
            hashes[loaded] = (int64_t)content_hash(bytes, size);
            status = image_decode(bytes, size, f->path, image_params.max_pixels, &images[loaded]);
            free(bytes);
        }
        if (status) {
            summary->failed++;
            if (params && params->on_failure) params->on_failure(params->user, f->path, glimpse_last_error());
            continue;
        }
        which[loaded++] = i;
    }
    if (!loaded) return GLIMPSE_STATUS_OK;
    float *embeddings = malloc(loaded * index->dim * sizeof(float));
    if (!embeddings) return ERROR_OOM();
    glimpse_status status = glimpse_embed_images(ctx, images, loaded, embeddings);
    for (size_t j = 0; j < loaded; j++) glimpse_image_free(images[j]);
    if (status) {
        free(embeddings);
        return status;
    }
    /* one transaction per batch: all of it or none of it survives a crash */
    status = exec(index, "BEGIN IMMEDIATE");
    sqlite3_stmt *statement = NULL;
    if (!status && sqlite3_prepare_v2(index->db,
                                      "INSERT INTO images(path, size, mtime_ns, hash, embedding) VALUES (?, ?, ?, ?, ?)"
                                      " ON CONFLICT(path) DO UPDATE SET size = excluded.size,"
                                      " mtime_ns = excluded.mtime_ns, hash = excluded.hash,"
                                      " embedding = excluded.embedding",
                                      -1, &statement, NULL) != SQLITE_OK)
        status = db_error(index, "preparing an insert");
    for (size_t j = 0; j < loaded && !status; j++) {
        const pending *p = &batch[which[j]];
        const found_file *f = &files->items[p->file];
        sqlite3_bind_text(statement, 1, f->path, -1, SQLITE_STATIC);
        sqlite3_bind_int64(statement, 2, f->size);
        sqlite3_bind_int64(statement, 3, f->mtime_ns);
        sqlite3_bind_int64(statement, 4, hashes[j]);
        sqlite3_bind_blob(statement, 5, embeddings + j * index->dim, (int)(index->dim * sizeof(float)), SQLITE_STATIC);
        if (sqlite3_step(statement) != SQLITE_DONE) status = db_error(index, "storing an embedding");
        sqlite3_reset(statement);
        if (p->stored_id)
            summary->updated++;
        else
            summary->added++;
    }
    sqlite3_finalize(statement);
    if (!status) status = exec(index, "COMMIT");
    else sqlite3_exec(index->db, "ROLLBACK", NULL, NULL, NULL);
    free(embeddings);
    return status;
}

static int file_exists(const char *path) {
    struct stat info;
    return stat(path, &info) == 0;
}

glimpse_status glimpse_index_update(glimpse_index *index, glimpse_context *ctx, const char *const *paths,
                                    size_t count, const glimpse_index_params *params,
                                    glimpse_index_summary *summary) {
    if (!index || !ctx || (count && !paths) || !summary)
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_index_update: NULL argument");
    memset(summary, 0, sizeof *summary);
    char identity[128];
    glimpse_status status = model_identity(ctx->model, identity, sizeof identity);
    if (status) return status;
    if (strcmp(identity, index->identity) != 0)
        return error_set(GLIMPSE_STATUS_WRONG_MODEL, "%s was built with another model (%s)", index->path,
                         index->identity);
    drop_cache(index);
    file_list files;
    if ((status = walk_paths(paths, count, &files))) return status;
    /* what the index holds now */
    strmap *by_path = NULL;
    stored *rows = NULL;
    char **row_paths = NULL;
    size_t row_count = 0, row_capacity = 0;
    pending *work = calloc(files.count + 1, sizeof *work);
    size_t work_count = 0;
    sqlite3_stmt *statement = NULL;
    if (!work) status = ERROR_OOM();
    if (!status) status = strmap_create(1024, &by_path);
    if (!status && sqlite3_prepare_v2(index->db, "SELECT id, path, size, mtime_ns, hash FROM images", -1, &statement,
                                      NULL) != SQLITE_OK)
        status = db_error(index, "reading the index");
    while (!status && sqlite3_step(statement) == SQLITE_ROW) {
        if (row_count == row_capacity) {
            row_capacity = row_capacity ? row_capacity * 2 : 1024;
            stored *grown = realloc(rows, row_capacity * sizeof *rows);
            char **grown_paths = realloc(row_paths, row_capacity * sizeof *row_paths);
            if (grown) rows = grown;
            if (grown_paths) row_paths = grown_paths;
            if (!grown || !grown_paths) {
                status = ERROR_OOM();
                break;
            }
        }
        const char *path = (const char *)sqlite3_column_text(statement, 1);
        rows[row_count] = (stored){sqlite3_column_int64(statement, 0), sqlite3_column_int64(statement, 2),
                                   sqlite3_column_int64(statement, 3), sqlite3_column_int64(statement, 4), 0};
        row_paths[row_count] = strdup(path ? path : "");
        if (!row_paths[row_count]) status = ERROR_OOM();
        else status = strmap_put(by_path, row_paths[row_count], strlen(row_paths[row_count]), (int32_t)row_count);
        row_count++;
    }
    sqlite3_finalize(statement);
    statement = NULL;
    /* unchanged files, and what needs looking at */
    for (size_t i = 0; !status && i < files.count; i++) {
        const found_file *f = &files.items[i];
        int32_t r;
        if (strmap_get(by_path, f->path, strlen(f->path), &r)) {
            rows[r].seen = 1;
            if (rows[r].size == f->size && rows[r].mtime_ns == f->mtime_ns) {
                summary->unchanged++;
                continue;
            }
            work[work_count++] = (pending){i, rows[r].id, 0};
        } else {
            work[work_count++] = (pending){i, 0, 0};
        }
    }
    /* stored rows by content (hash and size), to find moves without a scan */
    strmap *by_content = NULL;
    if (!status) status = strmap_create(row_count + 1, &by_content);
    for (size_t r = 0; !status && r < row_count; r++) {
        int64_t key[2] = {rows[r].hash, rows[r].size};
        status = strmap_put(by_content, (const char *)key, sizeof key, (int32_t)r);
    }
    /* new paths whose content is a stored file that is gone: moved or renamed */
    if (!status && work_count) {
        if (sqlite3_prepare_v2(index->db, "UPDATE images SET path = ?, mtime_ns = ? WHERE id = ?", -1, &statement,
                               NULL) != SQLITE_OK)
            status = db_error(index, "preparing a move");
        if (!status) status = exec(index, "BEGIN IMMEDIATE");
        size_t kept = 0;
        for (size_t w = 0; !status && w < work_count; w++) {
            pending *p = &work[w];
            const found_file *f = &files.items[p->file];
            int moved = 0;
            if (p->stored_id) { /* touched or rewritten: the same bytes keep their embedding */
                int32_t r;
                uint8_t *bytes;
                size_t size;
                if (strmap_get(by_path, f->path, strlen(f->path), &r) &&
                    file_read_all(f->path, (size_t)1 << 32, &bytes, &size) == GLIMPSE_STATUS_OK) {
                    int same = (int64_t)content_hash(bytes, size) == rows[r].hash && rows[r].size == f->size;
                    free(bytes);
                    if (same) {
                        sqlite3_bind_text(statement, 1, f->path, -1, SQLITE_STATIC);
                        sqlite3_bind_int64(statement, 2, f->mtime_ns);
                        sqlite3_bind_int64(statement, 3, rows[r].id);
                        if (sqlite3_step(statement) != SQLITE_DONE) status = db_error(index, "recording a new time");
                        sqlite3_reset(statement);
                        summary->unchanged++;
                        continue;
                    }
                }
            } else {
                uint8_t *bytes;
                size_t size;
                if (file_read_all(f->path, (size_t)1 << 32, &bytes, &size) == GLIMPSE_STATUS_OK) {
                    p->hash = (int64_t)content_hash(bytes, size);
                    free(bytes);
                    int64_t key[2] = {p->hash, f->size};
                    int32_t candidate;
                    int known = strmap_get(by_content, (const char *)key, sizeof key, &candidate);
                    /* the map holds one row per content; duplicates fall back to a scan */
                    size_t from = known ? (size_t)candidate : row_count;
                    if (known && (rows[from].seen || file_exists(row_paths[from]))) from = 0;
                    for (size_t r = from; known && r < row_count && !moved; r++) {
                        if (rows[r].seen || rows[r].hash != p->hash || rows[r].size != f->size) continue;
                        if (file_exists(row_paths[r])) continue; /* a copy, not a move */
                        sqlite3_bind_text(statement, 1, f->path, -1, SQLITE_STATIC);
                        sqlite3_bind_int64(statement, 2, f->mtime_ns);
                        sqlite3_bind_int64(statement, 3, rows[r].id);
                        if (sqlite3_step(statement) != SQLITE_DONE) status = db_error(index, "recording a move");
                        sqlite3_reset(statement);
                        rows[r].seen = 1;
                        moved = 1;
                        summary->moved++;
                    }
                }
            }
            if (!moved) work[kept++] = *p;
        }
        work_count = kept;
        if (!status) status = exec(index, "COMMIT");
        else sqlite3_exec(index->db, "ROLLBACK", NULL, NULL, NULL);
        sqlite3_finalize(statement);
        statement = NULL;
    }
    /* forget files that no longer exist */
    if (!status) {
        if (sqlite3_prepare_v2(index->db, "DELETE FROM images WHERE id = ?", -1, &statement, NULL) != SQLITE_OK)
            status = db_error(index, "preparing a removal");
        if (!status) status = exec(index, "BEGIN IMMEDIATE");
        for (size_t r = 0; !status && r < row_count; r++) {
            if (rows[r].seen || file_exists(row_paths[r])) continue;
            sqlite3_bind_int64(statement, 1, rows[r].id);
            if (sqlite3_step(statement) != SQLITE_DONE) status = db_error(index, "removing a deleted file");
            sqlite3_reset(statement);
            summary->removed++;
        }
        if (!status) status = exec(index, "COMMIT");
        else sqlite3_exec(index->db, "ROLLBACK", NULL, NULL, NULL);
        sqlite3_finalize(statement);
    }
    /* embed the rest in batches, each committed on its own */
    for (size_t first = 0; !status && first < work_count; first += INDEX_BATCH) {
        size_t n = work_count - first < INDEX_BATCH ? work_count - first : INDEX_BATCH;
        status = embed_batch(index, ctx, &files, work + first, n, params, summary);
        if (!status && params && params->on_progress && params->on_progress(params->user, first + n, work_count))
            status = error_set(GLIMPSE_STATUS_CANCELLED, "indexing was stopped");
    }
    /* fold the write-ahead log into the database: later reads come straight from it */
    if (!status) sqlite3_exec(index->db, "PRAGMA wal_checkpoint(TRUNCATE)", NULL, NULL, NULL);
    for (size_t r = 0; r < row_count; r++) free(row_paths[r]);
    free(row_paths), free(rows), free(work);
    strmap_free(by_path);
    strmap_free(by_content);
    file_list_free(&files);
    return status;
}

/* ---------------------------------------------------------------- search */

/* Room for the rows: MAX(rowid) is read from the b-tree's edge without a
 * scan and bounds the count from above. */
static size_t row_capacity(glimpse_index *index) {
    sqlite3_stmt *statement;
    size_t capacity = 0;
    if (sqlite3_prepare_v2(index->db, "SELECT MAX(rowid) FROM images", -1, &statement, NULL) == SQLITE_OK) {
        if (sqlite3_step(statement) == SQLITE_ROW) capacity = (size_t)sqlite3_column_int64(statement, 0);
        sqlite3_finalize(statement);
    }
    return capacity + 1;
}

static glimpse_status load_cache(glimpse_index *index) {
    if (index->loaded) return GLIMPSE_STATUS_OK;
    size_t capacity = row_capacity(index);
    /* one allocation, in huge pages: faulting in 200 MB by 4 KiB pages, and
     * growing by copies, cost more than reading the rows */
    const size_t huge = (size_t)2 << 20;
    size_t bytes = capacity * index->dim * sizeof(float);
    size_t rounded = (bytes + huge - 1) / huge * huge;
    index->matrix = aligned_alloc(huge, rounded);
    index->paths = calloc(capacity, sizeof *index->paths);
    index->scores = malloc(capacity * sizeof(float));
    if (!index->matrix || !index->paths || !index->scores) {
        drop_cache(index);
        return ERROR_OOM();
    }
    madvise(index->matrix, rounded, MADV_HUGEPAGE);
    sqlite3_stmt *statement;
    if (sqlite3_prepare_v2(index->db, "SELECT path, embedding FROM images", -1, &statement, NULL) != SQLITE_OK) {
        drop_cache(index);
        return db_error(index, "reading the index");
    }
    glimpse_status status = GLIMPSE_STATUS_OK;
    while (!status && sqlite3_step(statement) == SQLITE_ROW) {
        if (index->count == capacity) { /* cannot happen: rowids bound the count */
            status = error_set(GLIMPSE_STATUS_INTERNAL, "%s: more rows than rowids", index->path);
            break;
        }
        const void *blob = sqlite3_column_blob(statement, 1);
        size_t row_bytes = (size_t)sqlite3_column_bytes(statement, 1);
        const char *path = (const char *)sqlite3_column_text(statement, 0);
        if (!blob || row_bytes != index->dim * sizeof(float) || !path) {
            status = error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: damaged row (embedding of %zu bytes)", index->path,
                               row_bytes);
            break;
        }
        index->paths[index->count] = strdup(path);
        if (!index->paths[index->count]) {
            status = ERROR_OOM();
            break;
        }
        memcpy(index->matrix + index->count * index->dim, blob, row_bytes);
        index->count++;
    }
    sqlite3_finalize(statement);
    if (status) {
        drop_cache(index);
        return status;
    }
    index->loaded = 1;
    return GLIMPSE_STATUS_OK;
}

glimpse_status glimpse_index_search(glimpse_index *index, const float *query, size_t k,
                                    glimpse_search_result *results, size_t *found) {
    if (!index || !query || !found || (k && !results))
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_index_search: NULL argument");
    *found = 0;
    glimpse_status status = load_cache(index);
    if (status) return status;
    /* all scores in one matrix-vector product */
    const kernel_weight matrix = kernel_weight_f32(index->matrix);
    kernel_linear(index->scores, index->count, query, index->dim, &matrix, NULL, 1, index->dim, index->count, false,
                  NULL);
    /* top k by insertion into a sorted list: k is small */
    size_t n = 0;
    for (size_t i = 0; i < index->count && k; i++) {
        float score = index->scores[i] * index->logit_scale;
        if (n == k && !(score > results[n - 1].score)) continue;
        size_t at = n < k ? n++ : k - 1;
        while (at > 0 && score > results[at - 1].score) {
            results[at] = results[at - 1];
            at--;
        }
        results[at] = (glimpse_search_result){index->paths[i], score};
    }
    *found = n;
    return GLIMPSE_STATUS_OK;
}
