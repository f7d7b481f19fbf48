/* index.c — glimpse_index: the SQLite search index of a photo collection.
 *
 * Schema: meta(key, value) holds the model's identity and folder once;
 * images(path UNIQUE, size, mtime_ns, hash, embedding BLOB of float32).
 * WAL journaling: each committed batch survives a crash or kill -9, and a
 * batch in flight is rolled back whole. Embeddings are kept as float32 both
 * on disk and in memory: exact, and a 100,000 × 512 table is 200 MB, which
 * one sgemv reads in about 10 ms. */
#include <sqlite3.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "api/identity.h"
#include "core/error.h"
#include "core/file.h"
#include "core/kernels.h"
#include "core/strmap.h"
#include "search/index.h"
#include "vision/image.h"

/* Milliseconds a write waits for another process's to finish before failing. */
#define INDEX_BUSY_TIMEOUT_MS 10000
/* config.json's bound on projection_dim: a larger recorded size means a damaged index. */
#define INDEX_MAX_EMBEDDING_DIM 65536

struct glimpse_index {
    sqlite3 *db;
    char *path;
    char *identity;   /* model_identity of the model the index was built with */
    char *model_path; /* that model's folder */
    size_t dim;
    float logit_scale;
    /* search cache: every stored embedding, loaded on first search */
    bool loaded;
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
    bool done = sqlite3_step(statement) == SQLITE_DONE;
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
    index->loaded = false;
}

/* Opens (with create, creates) the database and its tables. */
static glimpse_status open_database(glimpse_index *index, bool create) {
    int flags = create ? SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE : SQLITE_OPEN_READWRITE;
    if (sqlite3_open_v2(index->path, &index->db, flags | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK)
        return db_error(index, "cannot open");
    sqlite3_busy_timeout(index->db, INDEX_BUSY_TIMEOUT_MS);
    return exec(index, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA mmap_size=4294967296;"
                       "CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);"
                       "CREATE TABLE IF NOT EXISTS images(id INTEGER PRIMARY KEY, path TEXT NOT NULL UNIQUE,"
                       " size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL, hash INTEGER NOT NULL,"
                       " embedding BLOB NOT NULL);"
                       "CREATE INDEX IF NOT EXISTS images_hash ON images(hash);");
}

/* Records a new index's model: identity, folder, embedding size, logit scale. */
static glimpse_status record_model(glimpse_index *index, const glimpse_model_info *info, const char *identity) {
    char number[64];
    char *absolute = realpath(info->path, NULL);
    const char *folder = absolute ? absolute : info->path;
    glimpse_status status = exec(index, "BEGIN");
    if (!status) status = meta_set(index, "model_identity", identity);
    if (!status) status = meta_set(index, "model_path", folder);
    snprintf(number, sizeof number, "%d", info->embedding_dim);
    if (!status) status = meta_set(index, "dim", number);
    snprintf(number, sizeof number, "%.9g", info->logit_scale);
    if (!status) status = meta_set(index, "logit_scale", number);
    if (!status) status = exec(index, "COMMIT");
    free(index->model_path);
    index->model_path = strdup(folder);
    if (!status && !index->model_path) status = ERROR_OOM();
    free(absolute);
    return status;
}

/* Opened with a model: an index built with another is refused, a new one records this one. */
static glimpse_status adopt_model(glimpse_index *index, const glimpse_model *model, const char *recorded) {
    char mine[MODEL_IDENTITY_CAPACITY];
    glimpse_model_info info;
    glimpse_status status = model_identity(model, mine, sizeof mine);
    if (!status) status = glimpse_model_get_info(model, &info);
    if (status) return status;
    if (recorded && strcmp(recorded, mine) != 0)
        return error_set(GLIMPSE_STATUS_WRONG_MODEL,
                         "%s was built with another model (%s, from %s); give that model, or a new --db", index->path,
                         recorded, index->model_path ? index->model_path : "?");
    if (!recorded && (status = record_model(index, &info, mine))) return status;
    index->identity = strdup(mine);
    if (!index->identity) return ERROR_OOM();
    index->dim = (size_t)info.embedding_dim;
    index->logit_scale = info.logit_scale;
    return GLIMPSE_STATUS_OK;
}

/* Opened without a model: the one recorded, as the meta table gives it. */
static glimpse_status read_recorded_model(glimpse_index *index, const char *identity, const char *dim,
                                          const char *scale) {
    if (!identity || !dim || !scale)
        return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s is not a glimpse index (no model recorded)", index->path);
    index->identity = strdup(identity);
    if (!index->identity) return ERROR_OOM();
    index->dim = (size_t)strtoul(dim, NULL, 10);
    index->logit_scale = strtof(scale, NULL);
    if (index->dim == 0 || index->dim > INDEX_MAX_EMBEDDING_DIM)
        return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: damaged index (embedding size %s)", index->path, dim);
    return GLIMPSE_STATUS_OK;
}

glimpse_status glimpse_index_open(const char *db_path, const glimpse_model *model, glimpse_index **out) {
    if (!out) return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_index_open: out is NULL");
    *out = NULL;
    if (!db_path) return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_index_open: no database path");
    glimpse_model_info info;
    if (model && glimpse_model_get_info(model, &info) == GLIMPSE_STATUS_OK && info.kind != GLIMPSE_MODEL_KIND_CLIP)
        return error_set(GLIMPSE_STATUS_WRONG_MODEL, "a search index needs a CLIP model (embeddings); this is %s",
                         info.architecture);
    if (!model && !file_is_regular(db_path))
        return error_set(GLIMPSE_STATUS_NOT_FOUND, "%s: no such index (build it with glimpse index)", db_path);
    glimpse_index *index = calloc(1, sizeof *index);
    if (!index) return ERROR_OOM();
    index->path = strdup(db_path);
    glimpse_status status = index->path ? open_database(index, model != NULL) : ERROR_OOM();
    char *identity = status ? NULL : meta_get(index, "model_identity");
    char *dim = status ? NULL : meta_get(index, "dim");
    char *scale = status ? NULL : meta_get(index, "logit_scale");
    index->model_path = status ? NULL : meta_get(index, "model_path");
    if (!status && model) status = adopt_model(index, model, identity);
    else if (!status) status = read_recorded_model(index, identity, dim, scale);
    free(identity), free(dim), free(scale);
    if (status)
        glimpse_index_free(index);
    else
        *out = index;
    return status;
}

void glimpse_index_free(glimpse_index *index) {
    if (!index) return;
    drop_cache(index);
    sqlite3_close(index->db);
    free(index->model_path);
    free(index->identity);
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

/* Images embedded and committed together. */
#define INDEX_BATCH 8

/* One image the index holds. */
typedef struct stored_row {
    int64_t id, size, mtime_ns, hash;
    bool seen; /* among the files walked, or claimed by one of them as moved */
} stored_row;

/* What the index holds when an update starts. */
typedef struct stored_images {
    stored_row *rows;
    char **paths; /* paths[r] is rows[r]'s */
    size_t count, capacity;
    strmap *by_path;    /* path -> r */
    strmap *by_content; /* (hash, size) -> the last r with that content */
} stored_images;

/* A walked file that is new, or changed since it was stored. */
typedef struct pending {
    size_t file;       /* into the file list */
    int64_t stored_id; /* 0 = new */
} pending;

static void stored_images_free(stored_images *stored) {
    for (size_t r = 0; r < stored->count; r++) free(stored->paths[r]);
    free(stored->paths), free(stored->rows);
    strmap_free(stored->by_path);
    strmap_free(stored->by_content);
}

static glimpse_status stored_images_grow(stored_images *stored) {
    size_t capacity = stored->capacity ? stored->capacity * 2 : 1024;
    stored_row *grown = realloc(stored->rows, capacity * sizeof *grown);
    if (grown) stored->rows = grown;
    char **grown_paths = realloc(stored->paths, capacity * sizeof *grown_paths);
    if (grown_paths) stored->paths = grown_paths;
    if (!grown || !grown_paths) return ERROR_OOM();
    stored->capacity = capacity;
    return GLIMPSE_STATUS_OK;
}

/* Reads every stored image's row, mapped by path. */
static glimpse_status read_stored(glimpse_index *index, stored_images *stored) {
    glimpse_status status = strmap_create(1024, &stored->by_path);
    sqlite3_stmt *statement = NULL;
    if (!status && sqlite3_prepare_v2(index->db, "SELECT id, path, size, mtime_ns, hash FROM images", -1, &statement,
                                      NULL) != SQLITE_OK)
        status = db_error(index, "reading the index");
    while (!status && sqlite3_step(statement) == SQLITE_ROW) {
        if (stored->count == stored->capacity && (status = stored_images_grow(stored))) break;
        const char *path = (const char *)sqlite3_column_text(statement, 1);
        size_t r = stored->count++;
        stored->rows[r] = (stored_row){.id = sqlite3_column_int64(statement, 0),
                                   .size = sqlite3_column_int64(statement, 2),
                                   .mtime_ns = sqlite3_column_int64(statement, 3),
                                   .hash = sqlite3_column_int64(statement, 4),
                                   .seen = false};
        stored->paths[r] = strdup(path ? path : "");
        if (!stored->paths[r]) status = ERROR_OOM();
        else status = strmap_put(stored->by_path, stored->paths[r], strlen(stored->paths[r]), (int32_t)r);
    }
    sqlite3_finalize(statement);
    return status;
}

/* Maps the stored images by content (hash and size), to find moves without a scan. */
static glimpse_status map_stored_content(stored_images *stored) {
    glimpse_status status = strmap_create(stored->count + 1, &stored->by_content);
    for (size_t r = 0; !status && r < stored->count; r++) {
        int64_t key[2] = {stored->rows[r].hash, stored->rows[r].size};
        status = strmap_put(stored->by_content, (const char *)key, sizeof key, (int32_t)r);
    }
    return status;
}

/* Counts the walked files stored with their size and time unchanged; the
 * others go to work (*work_count of them). */
static void find_changed(const file_list *files, stored_images *stored, pending *work, size_t *work_count,
                         glimpse_index_summary *summary) {
    for (size_t i = 0; i < files->count; i++) {
        const found_file *f = &files->items[i];
        int32_t r;
        if (!strmap_get(stored->by_path, f->path, strlen(f->path), &r)) {
            work[(*work_count)++] = (pending){.file = i, .stored_id = 0};
            continue;
        }
        stored->rows[r].seen = true;
        if (stored->rows[r].size == f->size && stored->rows[r].mtime_ns == f->mtime_ns)
            summary->unchanged++;
        else
            work[(*work_count)++] = (pending){.file = i, .stored_id = stored->rows[r].id};
    }
}

/* The content hash of a file; false if it cannot be read. */
static bool hash_file(const char *path, int64_t *hash) {
    uint8_t *bytes;
    size_t size;
    if (file_read_all(path, IMAGE_FILE_MAX_BYTES, &bytes, &size) != GLIMPSE_STATUS_OK) return false;
    *hash = (int64_t)content_hash(bytes, size);
    free(bytes);
    return true;
}

static bool file_exists(const char *path) {
    struct stat info;
    return stat(path, &info) == 0;
}

/* Begins a write transaction with the one statement its rows need. */
static glimpse_status transaction_begin(glimpse_index *index, const char *sql, const char *what,
                                        sqlite3_stmt **statement) {
    *statement = NULL;
    if (sqlite3_prepare_v2(index->db, sql, -1, statement, NULL) != SQLITE_OK) return db_error(index, what);
    return exec(index, "BEGIN IMMEDIATE");
}

/* Commits the transaction, or after a failure rolls all of it back; returns the failure. */
static glimpse_status transaction_end(glimpse_index *index, sqlite3_stmt *statement, glimpse_status status) {
    sqlite3_finalize(statement);
    if (!status) return exec(index, "COMMIT");
    sqlite3_exec(index->db, "ROLLBACK", NULL, NULL, NULL);
    return status;
}

/* Runs the prepared "UPDATE images SET path = ?, mtime_ns = ? WHERE id = ?" for the file f. */
static glimpse_status set_path_and_time(glimpse_index *index, sqlite3_stmt *update, const found_file *f, int64_t id,
                                        const char *what) {
    sqlite3_bind_text(update, 1, f->path, -1, SQLITE_STATIC);
    sqlite3_bind_int64(update, 2, f->mtime_ns);
    sqlite3_bind_int64(update, 3, id);
    glimpse_status status = sqlite3_step(update) == SQLITE_DONE ? GLIMPSE_STATUS_OK : db_error(index, what);
    sqlite3_reset(update);
    return status;
}

/* A stored file touched or rewritten with the same bytes keeps its
 * embedding: its new time is recorded and *handled set. */
static glimpse_status keep_same_bytes(glimpse_index *index, sqlite3_stmt *update, const found_file *f,
                                      const stored_images *stored, bool *handled, glimpse_index_summary *summary) {
    int32_t r;
    int64_t hash;
    if (!strmap_get(stored->by_path, f->path, strlen(f->path), &r) || !hash_file(f->path, &hash))
        return GLIMPSE_STATUS_OK;
    if (hash != stored->rows[r].hash || stored->rows[r].size != f->size) return GLIMPSE_STATUS_OK;
    *handled = true;
    summary->unchanged++;
    return set_path_and_time(index, update, f, stored->rows[r].id, "recording a new time");
}

/* A new path whose content is that of a stored file that is gone: the file
 * moved or was renamed, and its row takes the new path (*handled set). */
static glimpse_status claim_moved(glimpse_index *index, sqlite3_stmt *update, const found_file *f,
                                  stored_images *stored, bool *handled, glimpse_index_summary *summary) {
    int64_t hash;
    if (!hash_file(f->path, &hash)) return GLIMPSE_STATUS_OK;
    int64_t key[2] = {hash, f->size};
    int32_t candidate;
    if (!strmap_get(stored->by_content, (const char *)key, sizeof key, &candidate)) return GLIMPSE_STATUS_OK;
    /* the map holds one row per content; duplicates fall back to a scan */
    size_t from = (size_t)candidate;
    if (stored->rows[from].seen || file_exists(stored->paths[from])) from = 0;
    for (size_t r = from; r < stored->count; r++) {
        stored_row *row = &stored->rows[r];
        if (row->seen || row->hash != hash || row->size != f->size) continue;
        if (file_exists(stored->paths[r])) continue; /* a copy, not a move */
        row->seen = true;
        *handled = true;
        summary->moved++;
        return set_path_and_time(index, update, f, row->id, "recording a move");
    }
    return GLIMPSE_STATUS_OK;
}

/* Takes out of the work the files that need no embedding: the same bytes
 * as stored, or a stored file moved. One transaction. */
static glimpse_status record_moves(glimpse_index *index, const file_list *files, stored_images *stored,
                                   pending *work, size_t *work_count, glimpse_index_summary *summary) {
    sqlite3_stmt *update;
    glimpse_status status = transaction_begin(index, "UPDATE images SET path = ?, mtime_ns = ? WHERE id = ?",
                                              "preparing a move", &update);
    size_t kept = 0;
    for (size_t w = 0; !status && w < *work_count; w++) {
        const found_file *f = &files->items[work[w].file];
        bool handled = false;
        if (work[w].stored_id)
            status = keep_same_bytes(index, update, f, stored, &handled, summary);
        else
            status = claim_moved(index, update, f, stored, &handled, summary);
        if (!handled) work[kept++] = work[w];
    }
    *work_count = kept;
    return transaction_end(index, update, status);
}

/* Forgets the stored files that no longer exist. One transaction. */
static glimpse_status forget_deleted(glimpse_index *index, const stored_images *stored,
                                     glimpse_index_summary *summary) {
    sqlite3_stmt *remove;
    glimpse_status status =
        transaction_begin(index, "DELETE FROM images WHERE id = ?", "preparing a removal", &remove);
    for (size_t r = 0; !status && r < stored->count; r++) {
        if (stored->rows[r].seen || file_exists(stored->paths[r])) continue;
        sqlite3_bind_int64(remove, 1, stored->rows[r].id);
        if (sqlite3_step(remove) != SQLITE_DONE) status = db_error(index, "removing a deleted file");
        sqlite3_reset(remove);
        summary->removed++;
    }
    return transaction_end(index, remove, status);
}

/* Reads, hashes and decodes batch[0..count); the files that fail are
 * counted and reported. Returns how many loaded: images[j] and hashes[j]
 * are batch[which[j]]'s. */
static size_t load_batch(const file_list *files, const pending *batch, size_t count,
                         const glimpse_index_params *params, glimpse_image **images, int64_t *hashes, size_t *which,
                         glimpse_index_summary *summary) {
    uint64_t max_pixels = params && params->max_pixels ? params->max_pixels : glimpse_image_default_params().max_pixels;
    size_t loaded = 0;
    for (size_t i = 0; i < count; i++) {
        const found_file *f = &files->items[batch[i].file];
        uint8_t *bytes;
        size_t size;
        glimpse_status status = file_read_all(f->path, IMAGE_FILE_MAX_BYTES, &bytes, &size);
        if (!status) {
            hashes[loaded] = (int64_t)content_hash(bytes, size);
            status = image_decode(bytes, size, f->path, max_pixels, &images[loaded]);
            free(bytes);
        }
        if (status) {
            summary->failed++;
            if (params && params->on_failure) params->on_failure(params->user, f->path, glimpse_last_error());
            continue;
        }
        which[loaded++] = i;
    }
    return loaded;
}

/* Stores the embeddings of the loaded files of a batch. One transaction:
 * all of it or none of it survives a crash. */
static glimpse_status store_batch(glimpse_index *index, const file_list *files, const pending *batch,
                                  const size_t *which, const int64_t *hashes, const float *embeddings, size_t loaded,
                                  glimpse_index_summary *summary) {
    sqlite3_stmt *insert;
    glimpse_status status =
        transaction_begin(index,
                          "INSERT INTO images(path, size, mtime_ns, hash, embedding) VALUES (?, ?, ?, ?, ?)"
                          " ON CONFLICT(path) DO UPDATE SET size = excluded.size, mtime_ns = excluded.mtime_ns,"
                          " hash = excluded.hash, embedding = excluded.embedding",
                          "preparing an insert", &insert);
    for (size_t j = 0; j < loaded && !status; j++) {
        const pending *p = &batch[which[j]];
        const found_file *f = &files->items[p->file];
        sqlite3_bind_text(insert, 1, f->path, -1, SQLITE_STATIC);
        sqlite3_bind_int64(insert, 2, f->size);
        sqlite3_bind_int64(insert, 3, f->mtime_ns);
        sqlite3_bind_int64(insert, 4, hashes[j]);
        sqlite3_bind_blob(insert, 5, embeddings + j * index->dim, (int)(index->dim * sizeof(float)), SQLITE_STATIC);
        if (sqlite3_step(insert) != SQLITE_DONE) status = db_error(index, "storing an embedding");
        sqlite3_reset(insert);
        if (p->stored_id)
            summary->updated++;
        else
            summary->added++;
    }
    return transaction_end(index, insert, status);
}

/* Embeds and stores the files of a batch that decode. */
static glimpse_status embed_batch(glimpse_index *index, glimpse_context *ctx, const file_list *files,
                                  const pending *batch, size_t count, const glimpse_index_params *params,
                                  glimpse_index_summary *summary) {
    glimpse_image *images[INDEX_BATCH];
    int64_t hashes[INDEX_BATCH];
    size_t which[INDEX_BATCH];
    size_t loaded = load_batch(files, batch, count, params, images, hashes, which, summary);
    if (!loaded) return GLIMPSE_STATUS_OK;
    float *embeddings = malloc(loaded * index->dim * sizeof(float));
    if (!embeddings) {
        for (size_t j = 0; j < loaded; j++) glimpse_image_free(images[j]);
        return ERROR_OOM();
    }
    glimpse_status status = glimpse_embed_images(ctx, images, loaded, embeddings);
    for (size_t j = 0; j < loaded; j++) glimpse_image_free(images[j]);
    if (!status) status = store_batch(index, files, batch, which, hashes, embeddings, loaded, summary);
    free(embeddings);
    return status;
}

/* Embeds the work in batches, each committed on its own, with progress. */
static glimpse_status embed_work(glimpse_index *index, glimpse_context *ctx, const file_list *files,
                                 const pending *work, size_t work_count, const glimpse_index_params *params,
                                 glimpse_index_summary *summary) {
    glimpse_status status = GLIMPSE_STATUS_OK;
    for (size_t first = 0; !status && first < work_count; first += INDEX_BATCH) {
        size_t n = work_count - first < INDEX_BATCH ? work_count - first : INDEX_BATCH;
        status = embed_batch(index, ctx, files, work + first, n, params, summary);
        if (!status && params && params->on_progress && params->on_progress(params->user, first + n, work_count))
            status = error_set(GLIMPSE_STATUS_CANCELLED, "indexing was stopped");
    }
    return status;
}

glimpse_status glimpse_index_update(glimpse_index *index, glimpse_context *ctx, const char *const *paths,
                                    size_t count, const glimpse_index_params *params,
                                    glimpse_index_summary *summary) {
    if (!index || !ctx || (count && !paths) || !summary)
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_index_update: NULL argument");
    memset(summary, 0, sizeof *summary);
    char identity[MODEL_IDENTITY_CAPACITY];
    glimpse_status status = model_identity(context_model(ctx), identity, sizeof identity);
    if (status) return status;
    if (strcmp(identity, index->identity) != 0)
        return error_set(GLIMPSE_STATUS_WRONG_MODEL, "%s was built with another model (%s)", index->path,
                         index->identity);
    drop_cache(index);
    file_list files;
    if ((status = walk_paths(paths, count, &files))) return status;
    stored_images stored = {0};
    size_t work_count = 0;
    pending *work = calloc(files.count + 1, sizeof *work);
    if (!work) status = ERROR_OOM();
    if (!status) status = read_stored(index, &stored);
    if (!status) find_changed(&files, &stored, work, &work_count, summary);
    if (!status) status = map_stored_content(&stored);
    if (!status && work_count) status = record_moves(index, &files, &stored, work, &work_count, summary);
    if (!status) status = forget_deleted(index, &stored, summary);
    if (!status) status = embed_work(index, ctx, &files, work, work_count, params, summary);
    /* fold the write-ahead log into the database: later reads come straight from it */
    if (!status) sqlite3_exec(index->db, "PRAGMA wal_checkpoint(TRUNCATE)", NULL, NULL, NULL);
    stored_images_free(&stored);
    free(work);
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
    index->loaded = true;
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
