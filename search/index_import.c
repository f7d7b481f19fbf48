/* index_import.c — glimpse_index_import: merges the embedding folder
 * glimpse.dask writes (python/glimpse/shards.py: manifest.json,
 * part-NNNNN.npy float32 [n, dim] + part-NNNNN.json; docs/formats.md) into a
 * search index without embedding again: reads and checks the files, then
 * stores each shard's pictures in one transaction. Embeds nothing. */
#include <cjson/cJSON.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/error.h"
#include "core/file.h"
#include "search/walk.h"
#include "search/index_internal.h"
#include "search/npy.h"

/* Bounds on what the folder's JSON files may claim before they are believed. */
#define IMPORT_MANIFEST_MAX_BYTES ((size_t)16 << 20)
#define IMPORT_SHARD_JSON_MAX_BYTES ((size_t)512 << 20)
#define IMPORT_MAX_SHARDS 100000000.0
/* An embedding's length may be off 1 by this much (float32 rounding); more is damage. */
#define IMPORT_NORM_TOLERANCE 1e-3
/* JSON numbers are doubles: integers above 2^53 (a nanosecond time) are rounded; sizes must be exact. */
#define IMPORT_EXACT_INTEGER 9007199254740992.0

/* One picture to store: its file as it is now, and its embedding ([dim],
 * borrowed); a video's frames are consecutive entries of the same path. */
typedef struct imported_picture {
    const char *path; /* absolute */
    int64_t size, mtime_ns, hash;
    const float *embedding;
    int64_t frame; /* a video's frame number (0, 1, ...); 0 for a still */
    double time;   /* a video frame's time in seconds; negative for a still */
} imported_picture;

/* The value of the 4 hex digits at text (which has them), or -1. */
static long hex4(const uint8_t *text) {
    long value = 0;
    for (int i = 0; i < 4; i++) {
        int c = text[i], digit = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (digit < 0) return -1;
        value = value * 16 + digit;
    }
    return value;
}

/* Python writes a file name that is not UTF-8 with each undecodable byte B as the lone surrogate U+DC00+B
 * (its surrogateescape), which json.dumps escapes as \udcXX: valid for Python, refused by cJSON. Each such
 * escape inside a string, not the second half of a pair, becomes the byte it stands for again (in place:
 * never longer), so that the name is the file's own bytes, as glimpse index stores it. */
static void restore_escaped_bytes(uint8_t *text, size_t *size) {
    size_t from = 0, to = 0, n = *size;
    bool in_string = false;
    long previous = -1; /* the \u escape just before, if the last thing copied was one */
    while (from < n) {
        uint8_t c = text[from];
        if (in_string && c == '\\' && from + 1 < n) {
            long value = text[from + 1] == 'u' && from + 6 <= n ? hex4(text + from + 2) : -1;
            bool pair = previous >= 0xD800 && previous <= 0xDBFF;
            if (value >= 0xDC80 && value <= 0xDCFF && !pair) {
                text[to++] = (uint8_t)(value - 0xDC00), from += 6, previous = -1;
                continue;
            }
            size_t length = value >= 0 ? 6 : 2;
            for (size_t i = 0; i < length && from < n; i++) text[to++] = text[from++];
            previous = value;
            continue;
        }
        if (c == '"') in_string = !in_string;
        text[to++] = text[from++], previous = -1;
    }
    *size = to;
}

/* Reads and parses the JSON file at path (at most max_bytes); BAD_FORMAT naming it if it is not JSON. */
static glimpse_status read_json(const char *path, size_t max_bytes, cJSON **out) {
    uint8_t *bytes;
    size_t size;
    glimpse_status status = file_read_all(path, max_bytes, &bytes, &size);
    if (status) return status;
    restore_escaped_bytes(bytes, &size);
    *out = cJSON_ParseWithLength((const char *)bytes, size);
    free(bytes);
    return *out ? GLIMPSE_STATUS_OK : error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: not valid JSON", path);
}

/* The string member name of object, or NULL. */
static const char *string_member(const cJSON *object, const char *name) {
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(object, name);
    return cJSON_IsString(item) ? item->valuestring : NULL;
}

/* Whether object's member name is a number that is a whole value in [0, limit]; *value set. */
static bool whole_member(const cJSON *object, const char *name, double limit, double *value) {
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(object, name);
    if (!cJSON_IsNumber(item)) return false;
    *value = item->valuedouble;
    return *value >= 0 && *value <= limit && floor(*value) == *value;
}

/* What the manifest says that the import needs. */
typedef struct manifest {
    cJSON *json;
    const char *identity, *precision;
    const char *sampling; /* how the videos' frames were sampled ("every 2 s"); NULL: no videos taken */
    size_t dim, shards;
} manifest;

static glimpse_status read_manifest(const char *path, manifest *out) {
    glimpse_status status = read_json(path, IMPORT_MANIFEST_MAX_BYTES, &out->json);
    if (status) return status;
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(out->json, "model");
    const char *format = string_member(out->json, "format");
    double dim, shards;
    if (!format || strcmp(format, "glimpse-embeddings-1") != 0 || !cJSON_IsObject(model))
        return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: not the manifest of a glimpse.dask embedding folder", path);
    out->identity = string_member(model, "identity");
    out->precision = string_member(model, "precision");
    out->sampling = string_member(out->json, "video_sampling");
    if (!out->identity)
        return error_set(GLIMPSE_STATUS_WRONG_MODEL,
                         "%s records no glimpse model identity (written by an older glimpse.dask): run the same "
                         "glimpse.dask embed command again, which records it without embedding anything again",
                         path);
    if (!out->precision || !whole_member(model, "embedding_dim", 65536, &dim) || dim < 1 ||
        !whole_member(out->json, "shards", IMPORT_MAX_SHARDS, &shards))
        return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: its model's precision or embedding size, or its shard "
                                                    "count, is missing or not a number", path);
    out->dim = (size_t)dim, out->shards = (size_t)shards;
    return GLIMPSE_STATUS_OK;
}

/* One shard read and checked whole: its vectors mapped, its pictures' records. */
typedef struct shard {
    char *npy_path, *json_path;
    const uint8_t *map;
    size_t map_size;
    const float *vectors; /* [count, dim], inside map */
    cJSON *json;
    const cJSON *pictures, *broken;
    size_t count;
} shard;

static void shard_free(shard *s) {
    if (s->map) file_unmap(s->map, s->map_size);
    cJSON_Delete(s->json);
    free(s->npy_path), free(s->json_path);
    memset(s, 0, sizeof *s);
}

/* Checks one picture record of a shard: an object with an absolute path, a whole size and a time; a video's
 * frame has its number ("frame") and its time in the video ("time", seconds) as well. */
static bool picture_record_valid(const cJSON *picture) {
    double size, frame;
    const char *path = string_member(picture, "path");
    const cJSON *mtime = cJSON_GetObjectItemCaseSensitive(picture, "mtime_ns");
    const cJSON *time = cJSON_GetObjectItemCaseSensitive(picture, "time");
    bool has_frame = cJSON_GetObjectItemCaseSensitive(picture, "frame") != NULL;
    if (time || has_frame) {
        if (!cJSON_IsNumber(time) || !(time->valuedouble >= 0 && time->valuedouble < 1e12) ||
            !whole_member(picture, "frame", IMPORT_EXACT_INTEGER, &frame))
            return false;
    }
    return cJSON_IsObject(picture) && path && path[0] == '/' &&
           whole_member(picture, "size", IMPORT_EXACT_INTEGER, &size) && cJSON_IsNumber(mtime) &&
           mtime->valuedouble >= 0;
}

/* A video frame's number, or -1 for a still picture's record (checked by picture_record_valid). */
static double frame_number(const cJSON *picture) {
    const cJSON *frame = cJSON_GetObjectItemCaseSensitive(picture, "frame");
    return frame ? frame->valuedouble : -1;
}

/* A record's frame number and time into out: a video frame's, or frame 0 and a negative time for a still. */
static void take_frame(imported_picture *out, const cJSON *picture) {
    double frame = frame_number(picture);
    out->frame = frame < 0 ? 0 : (int64_t)frame;
    out->time = frame < 0 ? -1 : cJSON_GetObjectItemCaseSensitive(picture, "time")->valuedouble;
}

/* Whether the records keep each video's frames together, numbered 0, 1, ... in order, and name every still
 * picture once in a row: what the importer groups by. */
static bool frames_in_order(const cJSON *pictures, size_t *bad) {
    const cJSON *previous = NULL;
    size_t r = 0;
    for (const cJSON *picture = pictures->child; picture; previous = picture, picture = picture->next, r++) {
        double frame = frame_number(picture);
        bool continues = previous && strcmp(string_member(previous, "path"), string_member(picture, "path")) == 0;
        if (continues ? !(frame >= 1 && frame_number(previous) == frame - 1) : frame > 0) {
            *bad = r;
            return false;
        }
    }
    return true;
}

/* Reads shard number n of folder into s, checked whole: BAD_FORMAT or NOT_FOUND with the reason when it is
 * absent, partial or damaged (nothing of it may be imported), other failures as they come. */
static glimpse_status read_shard(const char *folder, size_t n, size_t dim, shard *s) {
    char name[40];
    snprintf(name, sizeof name, "part-%05zu.npy", n);
    s->npy_path = file_join(folder, name);
    snprintf(name, sizeof name, "part-%05zu.json", n);
    s->json_path = file_join(folder, name);
    if (!s->npy_path || !s->json_path) return ERROR_OOM();
    bool has_npy = file_is_regular(s->npy_path), has_json = file_is_regular(s->json_path);
    if (!has_json)
        return error_set(GLIMPSE_STATUS_NOT_FOUND, "%s: %s", s->npy_path,
                         has_npy ? "partial: its .json (written last) is missing, so the shard is not complete"
                                 : "absent: the embedding run has not done it yet (run glimpse.dask embed again)");
    if (!has_npy) return error_set(GLIMPSE_STATUS_NOT_FOUND, "%s: missing beside its .json", s->npy_path);
    glimpse_status status = read_json(s->json_path, IMPORT_SHARD_JSON_MAX_BYTES, &s->json);
    if (status) return status;
    const char *format = string_member(s->json, "format");
    double number, shard_dim;
    s->pictures = cJSON_GetObjectItemCaseSensitive(s->json, "pictures");
    s->broken = cJSON_GetObjectItemCaseSensitive(s->json, "broken");
    if (!format || strcmp(format, "glimpse-shard-1") != 0 || !whole_member(s->json, "shard", IMPORT_MAX_SHARDS, &number) ||
        (size_t)number != n || !cJSON_IsArray(s->pictures) || (s->broken && !cJSON_IsArray(s->broken)))
        return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: not the record of shard %zu", s->json_path, n);
    if (!whole_member(s->json, "dim", 65536, &shard_dim) || (size_t)shard_dim != dim)
        return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: its embeddings are not of %zu numbers", s->json_path, dim);
    s->count = (size_t)cJSON_GetArraySize(s->pictures);
    size_t r = 0;
    for (const cJSON *picture = s->pictures->child; picture; picture = picture->next, r++)
        if (!picture_record_valid(picture))
            return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: picture %zu's record lacks an absolute path, a size or "
                                                        "a time (or has a video frame's number or time wrong)",
                             s->json_path, r);
    if (!frames_in_order(s->pictures, &r))
        return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: picture %zu repeats the path before it without being its "
                                                    "video's next frame", s->json_path, r);
    if ((status = file_map(s->npy_path, &s->map, &s->map_size))) return status;
    npy_array array;
    if ((status = npy_parse(s->map, s->map_size, 1, s->npy_path, &array))) return status;
    if (strcmp(array.descr, "<f4") != 0 || array.dims != 2 || array.shape[1] != dim || array.shape[0] != s->count)
        return error_set(GLIMPSE_STATUS_BAD_FORMAT,
                         "%s: holds %zu x %zu %s where its .json needs %zu float32 embeddings of %zu", s->npy_path,
                         array.shape[0], array.shape[1], array.descr, s->count, dim);
    if (array.data_offset % sizeof(float))
        return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: its data is not aligned to floats", s->npy_path);
    s->vectors = (const float *)(const void *)(s->map + array.data_offset);
    for (size_t row = 0; row < s->count; row++) {
        double norm = 0;
        for (size_t i = 0; i < dim; i++) norm += (double)s->vectors[row * dim + i] * s->vectors[row * dim + i];
        if (!(fabs(sqrt(norm) - 1.0) <= IMPORT_NORM_TOLERANCE))
            return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: row %zu is not a normalised embedding (length %g)",
                             s->npy_path, row, sqrt(norm));
    }
    return GLIMPSE_STATUS_OK;
}

static void report(const glimpse_index_params *params, const char *path, const char *reason) {
    if (params && params->on_failure) params->on_failure(params->user, path, reason);
}

/* The file of a picture record as it is here now: *ok false (and the reason reported) unless it is there,
 * readable, and of the size and time it had when it was embedded. A video's frame also gets its number and
 * time in the video. */
static void check_picture_file(const cJSON *picture, imported_picture *out, bool *ok,
                               const glimpse_index_params *params) {
    const char *path = string_member(picture, "path");
    double size = cJSON_GetObjectItemCaseSensitive(picture, "size")->valuedouble;
    double mtime = cJSON_GetObjectItemCaseSensitive(picture, "mtime_ns")->valuedouble;
    char reason[1024];
    struct stat info;
    *ok = false;
    if (stat(path, &info) != 0 || !S_ISREG(info.st_mode)) {
        snprintf(reason, sizeof reason, "%s: not found here, so not imported (the embedding run saw it)", path);
    } else {
        int64_t mtime_ns = (int64_t)info.st_mtim.tv_sec * 1000000000 + info.st_mtim.tv_nsec;
        /* the JSON time is a double: compared as one (within its 2^-52 rounding), stored exact from stat */
        if ((double)info.st_size != size || (double)mtime_ns != mtime) {
            snprintf(reason, sizeof reason, "%s: changed since it was embedded (size or time differ), so not "
                                            "imported; index it with glimpse index", path);
        } else if (!index_hash_file(path, &out->hash)) {
            snprintf(reason, sizeof reason, "%s: cannot be read, so not imported", path);
        } else {
            out->path = path, out->size = (int64_t)info.st_size, out->mtime_ns = mtime_ns;
            take_frame(out, picture);
            *ok = true;
            return;
        }
    }
    report(params, path, reason);
}

/* WRONG_MODEL unless embeddings of the model identity at precision
 * ("float32" or "int8") and of dim are the index's own (label names where
 * they come from in the message); INVALID_ARGUMENT for a read-only handle,
 * or when sampling (how the folder's videos were sampled, NULL: none) is
 * not the one the index records (it is recorded if the index has none).
 * Then takes the writer's turn (BUSY as for an update). */
static glimpse_status index_import_begin(glimpse_index *index, const char *label, const char *identity,
                                         const char *precision, size_t dim, const char *sampling) {
    if (index->read_only)
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT,
                         "%s was opened for searching (read-only); open it with a model to import into it", index->path);
    if (strcmp(identity, index->identity) != 0)
        return error_set(GLIMPSE_STATUS_WRONG_MODEL, "%s holds embeddings of another model (%s) than %s (%s)", label,
                         identity, index->path, index->identity);
    if (strcmp(precision, index_precision_name(index->precision)) != 0)
        return error_set(GLIMPSE_STATUS_WRONG_MODEL, "%s holds %s embeddings and %s holds %s ones", label, precision,
                         index->path, index_precision_name(index->precision));
    if (dim != index->dim)
        return error_set(GLIMPSE_STATUS_WRONG_MODEL, "%s holds embeddings of %zu numbers and %s of %zu", label, dim,
                         index->path, index->dim);
    index_drop_cache(index);
    glimpse_status status = index_writer_lock(index);
    if (!status && sampling && (status = index_record_sampling(index, sampling))) index_writer_unlock(index);
    return status;
}

/* The rows pictures[first..] of one path (a still, or a video's frames): how many. */
static size_t same_path_run(const imported_picture *pictures, size_t first, size_t count) {
    size_t end = first + 1;
    while (end < count && strcmp(pictures[end].path, pictures[first].path) == 0) end++;
    return end - first;
}

/* Stores the pictures in one transaction (all or none survive a crash): a
 * path stored with the same size, time and hash (and not failed; for a
 * video, as many frames) is counted unchanged and left alone, another
 * stored path is updated (all its rows replaced), a new one added. */
static glimpse_status index_import_store(glimpse_index *index, const imported_picture *pictures, size_t count,
                                         glimpse_index_summary *summary) {
    sqlite3_stmt *insert, *find = NULL, *remove = NULL;
    /* a picture is one row, frame 0, time NULL; a video one row per frame (rows that were at the path, or a
     * failure, are replaced) */
    glimpse_status status = index_transaction_begin(index,
                                              "INSERT INTO images(path, frame, time, size, mtime_ns, hash, embedding,"
                                              " checksum) VALUES (?1, ?6, ?7, ?2, ?3, ?4, ?5,"
                                              " glimpse_row_checksum(?1, ?5))",
                                              "preparing an insert", &insert);
    if (!status &&
        sqlite3_prepare_v2(index->db, "SELECT size, mtime_ns, hash, failed IS NOT NULL, time IS NULL,"
                                      " (SELECT COUNT(*) FROM images AS f WHERE f.path = images.path)"
                                      " FROM images WHERE path = ? AND frame = 0", -1, &find, NULL) != SQLITE_OK)
        status = index_db_error(index, "reading the index");
    if (!status && sqlite3_prepare_v2(index->db, "DELETE FROM images WHERE path = ?", -1, &remove, NULL) != SQLITE_OK)
        status = index_db_error(index, "preparing an insert");
    for (size_t i = 0; i < count && !status;) {
        const imported_picture *p = &pictures[i];
        size_t rows = same_path_run(pictures, i, count);
        bool still = rows == 1 && p->time < 0;
        sqlite3_bind_text(find, 1, p->path, -1, SQLITE_STATIC);
        int code = sqlite3_step(find);
        bool stored = code == SQLITE_ROW;
        bool same = stored && sqlite3_column_int64(find, 0) == p->size && sqlite3_column_int64(find, 1) == p->mtime_ns &&
                    sqlite3_column_int64(find, 2) == p->hash && sqlite3_column_int(find, 3) == 0 &&
                    (sqlite3_column_int(find, 4) != 0) == still && (size_t)sqlite3_column_int64(find, 5) == rows;
        sqlite3_reset(find);
        if (code != SQLITE_ROW && code != SQLITE_DONE) {
            status = index_step_error(index, code, "reading the index");
            break;
        }
        if (same) {
            summary->unchanged++;
            i += rows;
            continue;
        }
        sqlite3_bind_text(remove, 1, p->path, -1, SQLITE_STATIC);
        if (sqlite3_step(remove) != SQLITE_DONE) status = index_db_error(index, "replacing an entry");
        sqlite3_reset(remove);
        for (size_t r = i; r < i + rows && !status; r++) {
            const imported_picture *row = &pictures[r];
            sqlite3_bind_text(insert, 1, row->path, -1, SQLITE_STATIC);
            sqlite3_bind_int64(insert, 2, row->size);
            sqlite3_bind_int64(insert, 3, row->mtime_ns);
            sqlite3_bind_int64(insert, 4, row->hash);
            sqlite3_bind_blob(insert, 5, row->embedding, (int)(index->dim * sizeof(float)), SQLITE_STATIC);
            sqlite3_bind_int64(insert, 6, row->frame);
            if (row->time < 0)
                sqlite3_bind_null(insert, 7);
            else
                sqlite3_bind_double(insert, 7, row->time);
            if (sqlite3_step(insert) != SQLITE_DONE) status = index_db_error(index, "storing an embedding");
            sqlite3_reset(insert);
        }
        if (stored)
            summary->updated++;
        else
            summary->added++;
        i += rows;
    }
    sqlite3_finalize(find);
    sqlite3_finalize(remove);
    return index_transaction_end(index, insert, status);
}

/* After the last store: rewrites the vector file (unless status is a
 * failure) and gives the writer's turn back. Returns status, or the failure
 * to write. */
static glimpse_status index_import_end(glimpse_index *index, glimpse_status status) {
    if (!status) status = index_write_vectors(index);
    index_writer_unlock(index);
    if (!status) sqlite3_exec(index->db, "PRAGMA wal_checkpoint(TRUNCATE)", NULL, NULL, NULL);
    return status;
}

/* Imports shard n (read and checked whole first): each picture whose file is here as it was embedded. A shard
 * absent, partial or damaged is reported (*skipped) and nothing of it imported. */
static glimpse_status import_shard(glimpse_index *index, const char *folder, size_t n, size_t dim,
                                   const glimpse_index_params *params, glimpse_index_summary *summary) {
    shard s = {0};
    glimpse_status status = read_shard(folder, n, dim, &s);
    if (status == GLIMPSE_STATUS_OUT_OF_MEMORY || status == GLIMPSE_STATUS_INTERNAL) {
        shard_free(&s);
        return status;
    }
    if (status) {
        char reason[1024];
        snprintf(reason, sizeof reason, "%s; the shard is skipped", glimpse_last_error());
        summary->roots_failed++;
        report(params, s.npy_path ? s.npy_path : folder, reason);
        shard_free(&s);
        return GLIMPSE_STATUS_OK;
    }
    imported_picture *pictures = calloc(s.count + 1, sizeof *pictures);
    if (!pictures) {
        shard_free(&s);
        return ERROR_OOM();
    }
    size_t ready = 0, row = 0;
    bool ok = false; /* (the previous record's file was found as it was) */
    for (const cJSON *picture = s.pictures->child; picture; picture = picture->next, row++) {
        if (frame_number(picture) > 0) { /* a video's next frame: its file was judged with frame 0 */
            if (!ok) continue;
            pictures[ready] = pictures[ready - 1];
            take_frame(&pictures[ready], picture);
        } else {
            check_picture_file(picture, &pictures[ready], &ok, params);
            if (!ok) {
                summary->failed++;
                continue;
            }
        }
        pictures[ready++].embedding = s.vectors + row * dim;
    }
    /* the files the embedding run could not read or decode, reported as glimpse index reports them */
    for (const cJSON *broken = s.broken ? s.broken->child : NULL; broken; broken = broken->next) {
        const char *path = string_member(broken, "path"), *why = string_member(broken, "reason");
        char reason[1024];
        snprintf(reason, sizeof reason, "%s: %s (when it was embedded)", path ? path : "?", why ? why : "broken");
        summary->failed++;
        report(params, path ? path : s.json_path, reason);
    }
    status = index_import_store(index, pictures, ready, summary);
    free(pictures);
    shard_free(&s);
    return status;
}

glimpse_status glimpse_index_import(glimpse_index *index, const char *folder, const glimpse_index_params *params,
                                    glimpse_index_summary *summary) {
    if (!index || !folder || !summary)
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_index_import: NULL argument");
    memset(summary, 0, sizeof *summary);
    if (!file_is_directory(folder))
        return error_set(GLIMPSE_STATUS_NOT_FOUND, "%s: no such folder (the output of glimpse.dask embed)", folder);
    char *path = file_join(folder, "manifest.json");
    if (!path) return ERROR_OOM();
    manifest m = {0};
    glimpse_status status = read_manifest(path, &m);
    if (!status) status = index_import_begin(index, path, m.identity, m.precision, m.dim, m.sampling);
    free(path);
    if (status) {
        cJSON_Delete(m.json);
        return status;
    }
    if (params && params->on_progress && params->on_progress(params->user, 0, m.shards))
        status = error_set(GLIMPSE_STATUS_CANCELLED, "the import was stopped");
    for (size_t n = 0; n < m.shards && !status; n++) {
        status = import_shard(index, folder, n, m.dim, params, summary);
        if (!status && params && params->on_progress && params->on_progress(params->user, n + 1, m.shards))
            status = error_set(GLIMPSE_STATUS_CANCELLED, "the import was stopped");
    }
    cJSON_Delete(m.json);
    return index_import_end(index, status);
}
