/* index_update.c — glimpse_index_update: walks the paths given, finds what is
 * new, changed, moved or gone against what the index holds, decodes the new
 * and changed pictures on threads ahead of the towers, embeds them in batches
 * and stores each batch in its own transaction, then rewrites the vector
 * file. Searching and management are other files'. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <time.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/identity.h"
#include "api/prepare.h"
#include "core/error.h"
#include "core/file.h"
#include "core/prefetch.h"
#include "core/strmap.h"
#include "search/walk.h"
#include "search/index_internal.h"
#include "vision/image.h"

/* Images embedded and committed together. */
#define INDEX_BATCH 8

/* A walked file that is new, or changed since it was stored. */
typedef struct pending {
    size_t file;       /* into the file list */
    int64_t stored_id; /* 0 = new */
} pending;

void index_stored_images_free(stored_images *stored) {
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
glimpse_status index_read_stored(glimpse_index *index, stored_images *stored) {
    glimpse_status status = strmap_create(1024, &stored->by_path);
    sqlite3_stmt *statement = NULL;
    int code = status ? SQLITE_OK
                      : sqlite3_prepare_v2(index->db, "SELECT MIN(id), path, size, mtime_ns, hash, MAX(failed IS NOT NULL) FROM images GROUP BY path", -1,
                                           &statement, NULL);
    if (code != SQLITE_OK) status = index_prepare_error(index, code, "reading the index");
    code = SQLITE_DONE;
    while (!status && (code = sqlite3_step(statement)) == SQLITE_ROW) {
        if (stored->count == stored->capacity && (status = stored_images_grow(stored))) break;
        const char *path = (const char *)sqlite3_column_text(statement, 1);
        if (!path) {
            status = index_damaged(index, "a row has no path");
            break;
        }
        size_t r = stored->count++;
        stored->rows[r] = (stored_row){.id = sqlite3_column_int64(statement, 0),
                                   .size = sqlite3_column_int64(statement, 2),
                                   .mtime_ns = sqlite3_column_int64(statement, 3),
                                   .hash = sqlite3_column_int64(statement, 4),
                                   .seen = false,
                                   .failed = sqlite3_column_int(statement, 5) != 0};
        stored->paths[r] = strdup(path);
        if (!stored->paths[r]) status = ERROR_OOM();
        else status = strmap_put(stored->by_path, stored->paths[r], strlen(stored->paths[r]), (int32_t)r);
    }
    if (!status && code != SQLITE_DONE) status = index_step_error(index, code, "reading the index");
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

/* Counts the walked files stored with their size and time unchanged, and
 * still readable, that did not fail last time; the others go to work
 * (*work_count of them). */
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
        const stored_row *row = &stored->rows[r];
        if (row->size == f->size && row->mtime_ns == f->mtime_ns && !row->failed && access(f->path, R_OK) == 0)
            summary->unchanged++;
        else
            work[(*work_count)++] = (pending){.file = i, .stored_id = stored->rows[r].id};
    }
}

bool index_file_exists(const char *path) {
    struct stat info;
    return stat(path, &info) == 0;
}


/* Runs the prepared "UPDATE images SET path, mtime_ns (the checksum, failed
 * cleared) WHERE path" for the file f, stored at path (every frame of a video). */
static glimpse_status set_path_and_time(glimpse_index *index, sqlite3_stmt *update, const found_file *f,
                                        const char *path, const char *what) {
    sqlite3_bind_text(update, 1, f->path, -1, SQLITE_STATIC);
    sqlite3_bind_int64(update, 2, f->mtime_ns);
    sqlite3_bind_text(update, 3, path, -1, SQLITE_STATIC);
    glimpse_status status = sqlite3_step(update) == SQLITE_DONE ? GLIMPSE_STATUS_OK : index_db_error(index, what);
    sqlite3_reset(update);
    return status;
}

/* A stored file touched or rewritten with the same bytes keeps its
 * embedding: its new time is recorded and *handled set. */
static glimpse_status keep_same_bytes(glimpse_index *index, sqlite3_stmt *update, const found_file *f,
                                      const stored_images *stored, bool *handled, glimpse_index_summary *summary) {
    int32_t r;
    int64_t hash;
    if (!strmap_get(stored->by_path, f->path, strlen(f->path), &r) || !index_hash_file(f->path, &hash))
        return GLIMPSE_STATUS_OK;
    if (hash != stored->rows[r].hash || stored->rows[r].size != f->size) return GLIMPSE_STATUS_OK;
    *handled = true;
    summary->unchanged++;
    return set_path_and_time(index, update, f, stored->paths[r], "recording a new time");
}

/* Whether a stored file that does not exist is really gone: under a root
 * walked, or its folder is there without it (not on a drive unplugged). */
static bool really_gone(const walk_result *walk, const char *path) {
    if (index_file_exists(path)) return false;
    if (walk_judges(walk, path)) return true;
    const char *slash = strrchr(path, '/');
    if (!slash || slash == path) return false;
    char *folder = strndup(path, (size_t)(slash - path));
    bool there = folder && index_file_exists(folder);
    free(folder);
    return there;
}

/* A new path whose content is that of a stored file that is gone: the file
 * moved or was renamed, and its row takes the new path (*handled set). */
static glimpse_status claim_moved(glimpse_index *index, sqlite3_stmt *update, const found_file *f,
                                  stored_images *stored, const walk_result *walk, bool *handled,
                                  glimpse_index_summary *summary) {
    int64_t hash;
    if (!index_hash_file(f->path, &hash)) return GLIMPSE_STATUS_OK;
    int64_t key[2] = {hash, f->size};
    int32_t candidate;
    if (!strmap_get(stored->by_content, (const char *)key, sizeof key, &candidate)) return GLIMPSE_STATUS_OK;
    /* the map holds one row per content; duplicates fall back to a scan */
    size_t from = (size_t)candidate;
    if (stored->rows[from].seen || !really_gone(walk, stored->paths[from])) from = 0;
    for (size_t r = from; r < stored->count; r++) {
        stored_row *row = &stored->rows[r];
        if (row->seen || row->hash != hash || row->size != f->size) continue;
        if (!really_gone(walk, stored->paths[r])) continue; /* a copy, not a move */
        row->seen = true;
        *handled = true;
        summary->moved++;
        return set_path_and_time(index, update, f, stored->paths[r], "recording a move");
    }
    return GLIMPSE_STATUS_OK;
}

/* Takes out of the work the files that need no embedding: the same bytes
 * as stored, or a stored file moved. One transaction. */
static glimpse_status record_moves(glimpse_index *index, const walk_result *walk, stored_images *stored,
                                   pending *work, size_t *work_count, glimpse_index_summary *summary) {
    const file_list *files = &walk->files;
    sqlite3_stmt *update;
    glimpse_status status = index_transaction_begin(index, "UPDATE images SET path = ?1, mtime_ns = ?2,"
                                                    " checksum = glimpse_row_checksum(?1, embedding), failed = NULL"
                                                    " WHERE path = ?3",
                                                    "preparing a move", &update);
    size_t kept = 0;
    for (size_t w = 0; !status && w < *work_count; w++) {
        const found_file *f = &files->items[work[w].file];
        bool handled = false;
        if (work[w].stored_id)
            status = keep_same_bytes(index, update, f, stored, &handled, summary);
        else
            status = claim_moved(index, update, f, stored, walk, &handled, summary);
        if (!handled) work[kept++] = work[w];
    }
    *work_count = kept;
    return index_transaction_end(index, update, status);
}

/* Forgets the stored files under the roots walked that no longer exist, or
 * that an exclude pattern now takes; entries under other roots, or under
 * folders that could not be read, are not judged by this run and stay. One
 * transaction. */
static glimpse_status forget_deleted(glimpse_index *index, const stored_images *stored, const walk_result *walk,
                                     glimpse_index_summary *summary) {
    sqlite3_stmt *remove;
    glimpse_status status =
        index_transaction_begin(index, "DELETE FROM images WHERE path = ?", "preparing a removal", &remove);
    for (size_t r = 0; !status && r < stored->count; r++) {
        const char *path = stored->paths[r];
        if (stored->rows[r].seen || !walk_judges(walk, path) || (index_file_exists(path) && !walk_excludes(walk, path)))
            continue;
        sqlite3_bind_text(remove, 1, path, -1, SQLITE_STATIC);
        if (sqlite3_step(remove) != SQLITE_DONE) status = index_db_error(index, "removing a deleted file");
        sqlite3_reset(remove);
        summary->removed++;
    }
    return index_transaction_end(index, remove, status);
}

/* A stored file that no longer reads or decodes: its old embedding is
 * stale, so its entry leaves the search results (images.failed holds the
 * reason) until a later run reads the file again. */
static glimpse_status mark_failed(glimpse_index *index, const char *path, const char *reason) {
    sqlite3_stmt *update;
    if (sqlite3_prepare_v2(index->db, "UPDATE images SET failed = ? WHERE path = ?", -1, &update, NULL) != SQLITE_OK)
        return index_db_error(index, "recording a failed file");
    sqlite3_bind_text(update, 1, reason, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(update, 2, path, -1, SQLITE_STATIC);
    glimpse_status status = sqlite3_step(update) == SQLITE_DONE ? GLIMPSE_STATUS_OK
                                                                 : index_db_error(index, "recording a failed file");
    sqlite3_finalize(update);
    return status;
}

/* Reports a file that failed (and marks its stored entry failed, if it has one). */
static glimpse_status report_failure(glimpse_index *index, const pending *p, const char *path, const char *why,
                                     const glimpse_index_params *params, glimpse_index_summary *summary) {
    summary->failed++;
    char reason[1024];
    snprintf(reason, sizeof reason, "%s%s", why,
             p->stored_id ? "; its entry is left out of search results until the file reads again" : "");
    glimpse_status status = p->stored_id ? mark_failed(index, path, why) : GLIMPSE_STATUS_OK;
    if (params && params->on_failure) params->on_failure(params->user, path, reason);
    return status;
}

/* Pictures decoded ahead of the towers: two batches, shared by the decoding threads. */
#define INDEX_AHEAD (2 * INDEX_BATCH)
/* Decoding threads at most: as many as the context's (a 12-megapixel JPEG
 * costs several times the ViT-B/32 tower's picture, so while the towers wait
 * their cores decode), within this bound. */
#define INDEX_MAX_READERS 16

/* What the decoding thread hands over, in the order of the work: a
 * picture (a still, which ends its file, or a video's frame), the end of a
 * video, or a file that failed. */
typedef struct index_item {
    size_t work;          /* into the work */
    glimpse_image *image; /* resized for the model; NULL for an end or a failure */
    double seconds;       /* a frame's time; negative for a still */
    int64_t hash;         /* the file's content hash (with its last item) */
    bool last;            /* the file's last item */
    char *failure;        /* why the file failed (new string), or NULL */
} index_item;

/* A decoding thread's state: its share of the work (files next, next +
 * stride, ...), read in order. */
typedef struct index_reader {
    glimpse_index *index;
    const glimpse_model *model;
    const file_list *files;
    const pending *work;
    size_t work_count, next, stride;
    const glimpse_index_params *params;
    uint64_t max_pixels;
    /* the video being read */
    void *video;
    file_contents file; /* read into memory, or mapped when large (a video): core/file.h */
    int64_t hash;
} index_reader;

static void reader_close_file(index_reader *r) {
    const glimpse_frame_source *frames = r->params ? r->params->frames : NULL;
    if (r->video) frames->close(frames->user, r->video);
    file_contents_release(&r->file);
    r->video = NULL;
}

/* Ends the current file of the item as failed, with the thread's last error. */
static bool reader_fail(index_reader *r, index_item *item) {
    reader_close_file(r);
    item->last = true;
    item->failure = strdup(glimpse_last_error()[0] ? glimpse_last_error() : "failed");
    r->next += r->stride;
    /* out of memory for the reason too: a failure all the same, the other side sees none */
    if (!item->failure) item->failure = strdup("out of memory");
    return true;
}

static bool index_produce(void *user, void *out, const atomic_bool *stopping) {
    index_reader *r = user;
    index_item *item = out;
    const glimpse_frame_source *frames = r->params ? r->params->frames : NULL;
    if (*stopping || r->next >= r->work_count) return false;
    const found_file *f = &r->files->items[r->work[r->next].file];
    item->work = r->next;
    item->seconds = -1;
    if (r->video) { /* the next frame of the open video */
        glimpse_image *frame = NULL;
        double seconds = 0;
        if (frames->next(frames->user, r->video, &frame, &seconds)) return reader_fail(r, item);
        if (!frame) { /* the end of it */
            reader_close_file(r);
            item->hash = r->hash, item->last = true;
            r->next += r->stride;
            return true;
        }
        if (prepare_resize(r->model, &frame)) {
            glimpse_image_free(frame);
            return reader_fail(r, item);
        }
        item->image = frame, item->seconds = seconds;
        return true;
    }
    if (file_contents_open(f->path, &r->file)) return reader_fail(r, item);
    r->hash = (int64_t)content_hash(r->file.bytes, r->file.size);
    if (frames && frames->is_video(frames->user, r->file.bytes, r->file.size)) {
        if (frames->open(frames->user, f->path, r->file.bytes, r->file.size, &r->video)) {
            r->video = NULL;
            return reader_fail(r, item);
        }
        return index_produce(user, out, stopping); /* its first frame */
    }
    glimpse_status status = prepare_decode(r->model, r->file.bytes, r->file.size, f->path, r->max_pixels, 1,
                                           r->params && r->params->fast_decode, &item->image);
    if (status) return reader_fail(r, item);
    reader_close_file(r);
    item->hash = r->hash, item->last = true;
    r->next += r->stride;
    return true;
}

static void index_dispose(void *user, void *out) {
    (void)user;
    index_item *item = out;
    glimpse_image_free(item->image);
    free(item->failure);
}

/* A file embedded whole, waiting to be stored: its rows' embeddings and times. */
typedef struct embedded_file {
    size_t work;
    int64_t hash;
    size_t rows, capacity;
    float *embeddings; /* [rows, dim] */
    double *times;     /* [rows], negative for a still */
} embedded_file;

static void embedded_file_free(embedded_file *e) {
    free(e->embeddings), free(e->times);
    memset(e, 0, sizeof *e);
}

/* The towers' side of an update: batches of pictures embedded, files completed and stored. */
typedef struct index_writer {
    glimpse_index *index;
    glimpse_context *ctx;
    const file_list *files;
    const pending *work;
    const glimpse_index_params *params;
    glimpse_index_summary *summary;
    index_item batch[INDEX_BATCH];
    size_t batched;
    float *embeddings;   /* [INDEX_BATCH, dim] */
    embedded_file open;  /* the file whose pictures are being embedded (open.rows 0: none) */
    bool open_started;
    embedded_file *done; /* files complete, not yet stored */
    size_t done_count, done_capacity, files_done;
} index_writer;

static glimpse_status writer_add_row(index_writer *w, size_t work, const float *embedding, double seconds) {
    embedded_file *e = &w->open;
    size_t dim = w->index->dim;
    if (!w->open_started) e->work = work, w->open_started = true;
    if (e->rows == e->capacity) {
        size_t capacity = e->capacity ? 2 * e->capacity : 1;
        float *grown = realloc(e->embeddings, capacity * dim * sizeof *grown);
        if (grown) e->embeddings = grown;
        double *grown_times = realloc(e->times, capacity * sizeof *grown_times);
        if (grown_times) e->times = grown_times;
        if (!grown || !grown_times) return ERROR_OOM();
        e->capacity = capacity;
    }
    memcpy(e->embeddings + e->rows * dim, embedding, dim * sizeof(float));
    e->times[e->rows++] = seconds;
    return GLIMPSE_STATUS_OK;
}

/* The open file is complete: it waits to be stored. */
static glimpse_status writer_complete(index_writer *w, size_t work, int64_t hash) {
    if (!w->open_started) return GLIMPSE_STATUS_OK; /* a video without a frame: never, video sources fail those */
    if (w->done_count == w->done_capacity) {
        size_t capacity = w->done_capacity ? 2 * w->done_capacity : INDEX_BATCH;
        embedded_file *grown = realloc(w->done, capacity * sizeof *grown);
        if (!grown) return ERROR_OOM();
        w->done = grown, w->done_capacity = capacity;
    }
    w->open.work = work, w->open.hash = hash;
    w->done[w->done_count++] = w->open;
    memset(&w->open, 0, sizeof w->open);
    w->open_started = false;
    return GLIMPSE_STATUS_OK;
}

/* Stores the files complete, every row of each (a video's old frames
 * replaced). One transaction: all of it or none of it survives a crash. */
static glimpse_status writer_store(index_writer *w) {
    glimpse_index *index = w->index;
    if (!w->done_count) return GLIMPSE_STATUS_OK;
    sqlite3_stmt *insert, *remove = NULL;
    glimpse_status status =
        index_transaction_begin(index,
                                "INSERT INTO images(path, frame, time, size, mtime_ns, hash, embedding, checksum)"
                                " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, glimpse_row_checksum(?1, ?7))",
                                "preparing an insert", &insert);
    if (!status && sqlite3_prepare_v2(index->db, "DELETE FROM images WHERE path = ?", -1, &remove, NULL) != SQLITE_OK)
        status = index_db_error(index, "preparing an insert");
    for (size_t d = 0; d < w->done_count && !status; d++) {
        const embedded_file *e = &w->done[d];
        const pending *p = &w->work[e->work];
        const found_file *f = &w->files->items[p->file];
        sqlite3_bind_text(remove, 1, f->path, -1, SQLITE_STATIC);
        if (sqlite3_step(remove) != SQLITE_DONE) status = index_db_error(index, "replacing an entry");
        sqlite3_reset(remove);
        for (size_t r = 0; r < e->rows && !status; r++) {
            sqlite3_bind_text(insert, 1, f->path, -1, SQLITE_STATIC);
            sqlite3_bind_int64(insert, 2, (int64_t)r);
            if (e->times[r] < 0) sqlite3_bind_null(insert, 3);
            else sqlite3_bind_double(insert, 3, e->times[r]);
            sqlite3_bind_int64(insert, 4, f->size);
            sqlite3_bind_int64(insert, 5, f->mtime_ns);
            sqlite3_bind_int64(insert, 6, e->hash);
            sqlite3_bind_blob(insert, 7, e->embeddings + r * index->dim, (int)(index->dim * sizeof(float)),
                              SQLITE_STATIC);
            if (sqlite3_step(insert) != SQLITE_DONE) status = index_db_error(index, "storing an embedding");
            sqlite3_reset(insert);
        }
        if (p->stored_id)
            w->summary->updated++;
        else
            w->summary->added++;
    }
    sqlite3_finalize(remove);
    status = index_transaction_end(index, insert, status);
    for (size_t d = 0; d < w->done_count; d++) embedded_file_free(&w->done[d]);
    w->done_count = 0;
    return status;
}

/* Embeds the pictures batched, each row joining its file; stills complete theirs. */
static glimpse_status writer_flush(index_writer *w) {
    if (!w->batched) return GLIMPSE_STATUS_OK;
    glimpse_image *images[INDEX_BATCH];
    for (size_t j = 0; j < w->batched; j++) images[j] = w->batch[j].image;
    glimpse_status status = glimpse_embed_images(w->ctx, images, w->batched, w->embeddings);
    for (size_t j = 0; j < w->batched; j++) {
        index_item *item = &w->batch[j];
        if (!status) status = writer_add_row(w, item->work, w->embeddings + j * w->index->dim, item->seconds);
        if (!status && item->last) status = writer_complete(w, item->work, item->hash), w->files_done++;
        glimpse_image_free(item->image);
        item->image = NULL;
    }
    w->batched = 0;
    return status;
}

/* After a batch: the files complete stored, and progress reported. */
static glimpse_status writer_commit(index_writer *w, size_t total) {
    glimpse_status status = writer_store(w);
    const glimpse_index_params *params = w->params;
    if (!status && params && params->on_progress && params->on_progress(params->user, w->files_done, total))
        status = error_set(GLIMPSE_STATUS_CANCELLED, "indexing was stopped");
    return status;
}

/* Takes one item from the decoding thread. */
static glimpse_status writer_take(index_writer *w, index_item *item, size_t total) {
    glimpse_status status = GLIMPSE_STATUS_OK;
    if (item->image) {
        w->batch[w->batched++] = *item;
        if (w->batched == INDEX_BATCH && !(status = writer_flush(w))) status = writer_commit(w, total);
        return status;
    }
    /* an end or a failure: the pictures before it first */
    if ((status = writer_flush(w))) return status;
    if (item->failure) {
        embedded_file_free(&w->open); /* a video's frames embedded so far are dropped */
        w->open_started = false;
        const pending *p = &w->work[item->work];
        status = report_failure(w->index, p, w->files->items[p->file].path, item->failure, w->params, w->summary);
        w->files_done++;
    } else {
        status = writer_complete(w, item->work, item->hash);
        w->files_done++;
    }
    return status ? status : writer_commit(w, total);
}

/* Embeds the work and stores it, a batch at a time, each committed on its
 * own, with progress: the files are read, decoded and resized ahead of the
 * towers (INDEX_AHEAD pictures at most) by as many threads as the context
 * has, reader k taking files k, k + readers, ...; the towers take each
 * file's pictures from its reader's queue in the work's order. */
static glimpse_status embed_work(glimpse_index *index, glimpse_context *ctx, const file_list *files,
                                 const pending *work, size_t work_count, const glimpse_index_params *params,
                                 glimpse_index_summary *summary) {
    glimpse_status status = GLIMPSE_STATUS_OK;
    /* the start, so that a progress display times the first batch from here */
    if (work_count && params && params->on_progress && params->on_progress(params->user, 0, work_count))
        status = error_set(GLIMPSE_STATUS_CANCELLED, "indexing was stopped");
    if (status || !work_count) return status;
    size_t readers = (size_t)context_thread_count(ctx);
    readers = readers < 1 ? 1 : readers > INDEX_MAX_READERS ? INDEX_MAX_READERS : readers;
    if (readers > work_count) readers = work_count;
    index_reader reader[INDEX_MAX_READERS];
    prefetch *ahead[INDEX_MAX_READERS] = {0};
    index_writer w = {.index = index, .ctx = ctx, .files = files, .work = work, .params = params, .summary = summary};
    w.embeddings = malloc(INDEX_BATCH * index->dim * sizeof(float));
    if (!w.embeddings) status = ERROR_OOM();
    for (size_t k = 0; k < readers; k++) {
        reader[k] = (index_reader){.index = index,
                                   .model = context_model(ctx),
                                   .files = files,
                                   .work = work,
                                   .work_count = work_count,
                                   .next = k,
                                   .stride = readers,
                                   .params = params,
                                   .max_pixels = params && params->max_pixels
                                                     ? params->max_pixels
                                                     : glimpse_image_default_params().max_pixels};
        if (!status)
            status = prefetch_start(sizeof(index_item), (INDEX_AHEAD + readers - 1) / readers, true, index_produce,
                                    index_dispose, &reader[k], &ahead[k]);
    }
    index_item item;
    /* file f's items come from reader f % readers, its last one ending the file */
    for (size_t file = 0; !status && file < work_count;) {
        if (!prefetch_next(ahead[file % readers], &item)) {
            status = error_set(GLIMPSE_STATUS_INTERNAL, "a decoding thread ended early");
            break;
        }
        if (item.last) file++;
        status = writer_take(&w, &item, work_count);
        free(item.failure);
    }
    if (!status && !(status = writer_flush(&w))) status = writer_commit(&w, work_count);
    for (size_t k = 0; k < readers; k++) {
        prefetch_stop(ahead[k]); /* after a failure: the thread stopped, what it made freed */
        reader_close_file(&reader[k]);
    }
    for (size_t j = 0; j < w.batched; j++) glimpse_image_free(w.batch[j].image);
    for (size_t d = 0; d < w.done_count; d++) embedded_file_free(&w.done[d]);
    embedded_file_free(&w.open);
    free(w.done), free(w.embeddings);
    return status;
}


/* Records the roots an update judged (for glimpse_index_list_roots). */
static glimpse_status record_roots(glimpse_index *index, const root_list *judged) {
    sqlite3_stmt *insert;
    glimpse_status status = index_transaction_begin(index, "INSERT OR REPLACE INTO roots(path, folder, updated) VALUES (?, ?, ?)",
                                                    "recording the paths indexed", &insert);
    for (size_t i = 0; !status && i < judged->count; i++) {
        sqlite3_bind_text(insert, 1, judged->items[i].path, -1, SQLITE_STATIC);
        sqlite3_bind_int(insert, 2, judged->items[i].folder);
        sqlite3_bind_int64(insert, 3, (int64_t)time(NULL));
        if (sqlite3_step(insert) != SQLITE_DONE) status = index_db_error(index, "recording the paths indexed");
        sqlite3_reset(insert);
    }
    return index_transaction_end(index, insert, status);
}


/* The decoding and video sampling the update asks for, against what the
 * index records: the first update records them (fast decoding when the
 * index is new, the sampling when videos first come), another is refused. */
static glimpse_status record_choices(glimpse_index *index, const glimpse_index_params *params) {
    bool fast = params && params->fast_decode;
    const glimpse_frame_source *frames = params ? params->frames : NULL;
    char *decode = NULL;
    glimpse_status status = index_meta_get(index, "decode", &decode);
    if (!status && !decode) {
        /* an index holding pictures from before the record was decoded exactly */
        status = index_count_where(index, "1") && fast
                     ? error_set(GLIMPSE_STATUS_INVALID_ARGUMENT,
                                 "%s was built decoding exactly; leave out --fast-decode, or use a new --db",
                                 index->path)
                     : index_meta_set(index, "decode", fast ? "fast" : "exact");
        if (!status) index->fast_decode = fast;
    } else if (!status && (strcmp(decode, "fast") == 0) != fast) {
        status = error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "%s was built %s; %s, or use a new --db", index->path,
                           index->fast_decode ? "with --fast-decode" : "decoding exactly",
                           index->fast_decode ? "give --fast-decode" : "leave out --fast-decode");
    }
    free(decode);
    if (status || !frames) return status;
    return index_record_sampling(index, frames->sampling ? frames->sampling : "");
}

glimpse_status glimpse_index_update(glimpse_index *index, glimpse_context *ctx, const char *const *paths,
                                    size_t count, const glimpse_index_params *params,
                                    glimpse_index_summary *summary) {
    if (!index || !ctx || (count && !paths) || !summary)
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_index_update: NULL argument");
    memset(summary, 0, sizeof *summary);
    if (index->read_only)
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT,
                         "%s was opened for searching (read-only); open it with a model to update it", index->path);
    char identity[MODEL_IDENTITY_CAPACITY];
    glimpse_status status = model_identity(context_model(ctx), identity, sizeof identity);
    if (status) return status;
    if (strcmp(identity, index->identity) != 0)
        return error_set(GLIMPSE_STATUS_WRONG_MODEL, "%s was built with another model (%s)", index->path,
                         index->identity);
    index_drop_cache(index);
    if ((status = index_writer_lock(index))) return status;
    if ((status = record_choices(index, params))) {
        index_writer_unlock(index);
        return status;
    }
    walk_result walk;
    if ((status = walk_paths(paths, count, params ? params->exclude : NULL, params ? params->exclude_count : 0,
                             params && params->frames, &walk))) {
        index_writer_unlock(index);
        return status;
    }
    for (size_t i = 0; i < walk.skipped.count; i++) {
        const walked_root *root = &walk.skipped.items[i];
        summary->roots_failed++;
        if (params && params->on_root_failure)
            params->on_root_failure(params->user, root->path, root->status, root->reason);
    }
    const file_list *files = &walk.files;
    stored_images stored = {0};
    size_t work_count = 0;
    pending *work = calloc(files->count + 1, sizeof *work);
    if (!work && !status) status = ERROR_OOM();
    if (!status) status = record_roots(index, &walk.judged);
    if (!status) status = index_read_stored(index, &stored);
    if (!status) find_changed(files, &stored, work, &work_count, summary);
    if (!status) status = map_stored_content(&stored);
    if (!status && work_count) status = record_moves(index, &walk, &stored, work, &work_count, summary);
    if (!status) status = forget_deleted(index, &stored, &walk, summary);
    if (!status) status = embed_work(index, ctx, files, work, work_count, params, summary);
    if (!status) status = index_write_vectors(index);
    if (!status) status = index_read_words(index, params, summary);
    /* fold the write-ahead log into the database: later reads come straight from it */
    index_writer_unlock(index);
    if (!status) sqlite3_exec(index->db, "PRAGMA wal_checkpoint(TRUNCATE)", NULL, NULL, NULL);
    index_stored_images_free(&stored);
    free(work);
    walk_result_free(&walk);
    return status;
}
