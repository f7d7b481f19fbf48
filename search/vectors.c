/* vectors.c — writing and mapping the vector file beside an index (see
 * vectors.h). Layout, every offset a multiple of 64 and checked against the
 * file's size before use:
 *   header (64 bytes): magic "GLIMVEC1", stamp, count, dim, depth,
 *                      hash of the sections below up to the codes, hash of the header
 *   ids int64[count] | scales float[count] | sums int32[count] |
 *   codes int8[count, depth] | rows float[count, dim]
 * The int8 codes are kernel_q8's (quantize.h); a search scans them with kernel_dot_codes. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/error.h"
#include "core/file.h"
#include "core/kernels.h"
#include "core/quantize.h"
#include "search/walk.h"
#include "search/vectors.h"

#define VECTOR_MAGIC "GLIMVEC1"
#define VECTOR_HEADER_BYTES 64

typedef struct vector_layout {
    size_t ids, scales, sums, codes, rows, total; /* byte offsets; total = the file's size */
    size_t depth;
} vector_layout;

static size_t round_up_64(size_t bytes) { return (bytes + 63) / 64 * 64; }

/* The layout of count rows of dim; false if the sizes overflow. */
static bool layout_of(size_t count, size_t dim, vector_layout *l) {
    l->depth = (dim + 3) / 4 * 4;
    if (dim == 0 || count > SIZE_MAX / 64 / (l->depth + 64)) return false;
    l->ids = VECTOR_HEADER_BYTES;
    l->scales = round_up_64(l->ids + count * sizeof(int64_t));
    l->sums = round_up_64(l->scales + count * sizeof(float));
    l->codes = round_up_64(l->sums + count * sizeof(int32_t));
    l->rows = round_up_64(l->codes + count * l->depth);
    l->total = l->rows + count * dim * sizeof(float);
    return true;
}

char *vector_file_path(const char *db_path) {
    size_t length = strlen(db_path);
    char *path = malloc(length + sizeof ".vectors");
    if (path) memcpy(path, db_path, length), memcpy(path + length, ".vectors", sizeof ".vectors");
    return path;
}

typedef struct vector_header {
    char magic[8];
    uint64_t stamp, count, dim, depth, sections_hash, header_hash;
} vector_header;

static uint64_t header_hash(const vector_header *h) {
    return content_hash((const uint8_t *)h, offsetof(vector_header, header_hash));
}

static glimpse_status write_at(vector_writer *w, const void *bytes, size_t size, size_t offset) {
    const uint8_t *at = bytes;
    while (size) {
        ssize_t done = pwrite(w->fd, at, size, (off_t)offset);
        if (done < 0 && errno == EINTR) continue;
        if (done <= 0) return error_set(GLIMPSE_STATUS_IO, "%s: cannot write: %s", w->temporary, strerror(errno));
        at += done, size -= (size_t)done, offset += (size_t)done;
    }
    return GLIMPSE_STATUS_OK;
}

static glimpse_status writer_open(vector_writer *w, const char *path, uint64_t stamp, size_t count, size_t dim);

glimpse_status vector_writer_start(vector_writer *w, const char *path, uint64_t stamp, size_t count, size_t dim) {
    glimpse_status status = writer_open(w, path, stamp, count, dim);
    if (status) { /* nothing left behind */
        if (w->fd >= 0) close(w->fd), unlink(w->temporary);
        free(w->path), free(w->temporary);
        memset(w, 0, sizeof *w);
        w->fd = -1;
    }
    return status;
}

/* vector_writer_start's work; on failure the caller cleans up. */
static glimpse_status writer_open(vector_writer *w, const char *path, uint64_t stamp, size_t count, size_t dim) {
    memset(w, 0, sizeof *w);
    w->fd = -1;
    vector_layout l;
    if (!layout_of(count, dim, &l)) return error_set(GLIMPSE_STATUS_TOO_LARGE, "%s: too many rows", path);
    w->path = strdup(path);
    w->temporary = malloc(strlen(path) + sizeof ".tmp");
    if (!w->path || !w->temporary) return ERROR_OOM();
    strcpy(w->temporary, path), strcat(w->temporary, ".tmp");
    w->stamp = stamp, w->count = count, w->dim = dim;
    w->fd = open(w->temporary, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (w->fd < 0) return error_set(GLIMPSE_STATUS_IO, "%s: cannot create: %s", w->temporary, strerror(errno));
    if (ftruncate(w->fd, (off_t)l.total) != 0)
        return error_set(GLIMPSE_STATUS_IO, "%s: cannot size: %s", w->temporary, strerror(errno));
    return GLIMPSE_STATUS_OK;
}

glimpse_status vector_writer_add(vector_writer *w, const int64_t *ids, const float *rows, size_t n) {
    if (w->written + n > w->count) return error_set(GLIMPSE_STATUS_INTERNAL, "%s: more rows than announced", w->path);
    vector_layout l;
    layout_of(w->count, w->dim, &l);
    kernel_q8 q = {0};
    const kernel_weight weight = kernel_weight_f32(rows);
    glimpse_status status = kernel_q8_quantize(&q, &weight, n, w->dim, Q8_LAYOUT_ROWS, NULL);
    size_t at = w->written;
    if (!status) status = write_at(w, ids, n * sizeof *ids, l.ids + at * sizeof *ids);
    if (!status) status = write_at(w, q.scale, n * sizeof *q.scale, l.scales + at * sizeof *q.scale);
    if (!status) status = write_at(w, q.sum, n * sizeof *q.sum, l.sums + at * sizeof *q.sum);
    if (!status) status = write_at(w, q.weight, n * l.depth, l.codes + at * l.depth);
    if (!status) status = write_at(w, rows, n * w->dim * sizeof(float), l.rows + at * w->dim * sizeof(float));
    kernel_q8_free(&q);
    if (!status) w->written += n;
    return status;
}

/* The hash of the file's bytes from the ids up to the codes (small: 16 bytes a row). */
static uint64_t sections_hash(const uint8_t *map, const vector_layout *l) {
    return content_hash(map + l->ids, l->codes - l->ids);
}

glimpse_status vector_writer_finish(vector_writer *w, glimpse_status status) {
    vector_layout l;
    layout_of(w->count, w->dim, &l);
    if (!status && w->written != w->count) status = error_set(GLIMPSE_STATUS_INTERNAL, "%s: rows missing", w->path);
    /* the sections' hash, read back through a mapping of what was written */
    const uint8_t *map = NULL;
    if (!status && fsync(w->fd) != 0) status = error_set(GLIMPSE_STATUS_IO, "%s: %s", w->temporary, strerror(errno));
    size_t size = 0;
    if (!status) status = file_map(w->temporary, &map, &size);
    if (!status && size != l.total) status = error_set(GLIMPSE_STATUS_IO, "%s: short file", w->temporary);
    vector_header h = {.magic = VECTOR_MAGIC, .stamp = w->stamp, .count = w->count, .dim = w->dim, .depth = l.depth};
    if (!status) h.sections_hash = sections_hash(map, &l);
    file_unmap(map, size);
    h.header_hash = header_hash(&h);
    if (!status) status = write_at(w, &h, sizeof h, 0);
    if (!status && fsync(w->fd) != 0) status = error_set(GLIMPSE_STATUS_IO, "%s: %s", w->temporary, strerror(errno));
    if (w->fd >= 0) close(w->fd);
    if (!status && rename(w->temporary, w->path) != 0)
        status = error_set(GLIMPSE_STATUS_IO, "%s: cannot rename: %s", w->temporary, strerror(errno));
    if (status && w->temporary) unlink(w->temporary);
    free(w->path), free(w->temporary);
    memset(w, 0, sizeof *w);
    w->fd = -1;
    return status;
}

static glimpse_status vector_damage(const char *path, const char *what) {
    return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s is damaged: %s; rebuild it with glimpse index", path, what);
}

glimpse_status vector_file_open(vector_file *file, const char *path, uint64_t stamp, size_t dim, bool *usable) {
    memset(file, 0, sizeof *file);
    *usable = false;
    if (!file_is_regular(path)) return GLIMPSE_STATUS_OK;
    const uint8_t *map;
    size_t size;
    glimpse_status status = file_map(path, &map, &size);
    if (status) return status;
    vector_header h;
    if (size < sizeof h) {
        file_unmap(map, size);
        return GLIMPSE_STATUS_OK; /* a file cut short before its header: never put in place, stale */
    }
    memcpy(&h, map, sizeof h);
    if (memcmp(h.magic, VECTOR_MAGIC, 8) != 0 || h.stamp != stamp) {
        file_unmap(map, size);
        return GLIMPSE_STATUS_OK; /* another index's state */
    }
    vector_layout l;
    if (h.header_hash != header_hash(&h)) status = vector_damage(path, "its header does not match its checksum");
    else if (h.dim != dim || !layout_of((size_t)h.count, dim, &l) || h.depth != l.depth || h.count > SIZE_MAX)
        status = vector_damage(path, "its sizes are not the index's");
    else if (l.total != size)
        status = vector_damage(path, "its size is not what its header says");
    else if (sections_hash(map, &l) != h.sections_hash)
        status = vector_damage(path, "its tables do not match their checksum");
    if (status) {
        file_unmap(map, size);
        return status;
    }
#ifdef MADV_POPULATE_READ
    /* the codes are read whole by every search: their page tables made in
     * one call rather than by a fault every 4 KiB (a hint: failure is harmless) */
    size_t page = (size_t)sysconf(_SC_PAGESIZE), from = l.codes / page * page;
    madvise((void *)(map + from), l.rows - from, MADV_POPULATE_READ);
#endif
    file->map = map, file->map_bytes = size, file->stamp = stamp, file->count = (size_t)h.count, file->dim = dim;
    file->ids = (const int64_t *)(map + l.ids);
    file->rows = (const float *)(map + l.rows);
    file->q8 = (kernel_q8){.weight = (int8_t *)(map + l.codes), .scale = (float *)(map + l.scales),
                           .sum = (int32_t *)(map + l.sums), .out_features = file->count, .in_features = dim,
                           .depth = l.depth};
    *usable = true;
    return GLIMPSE_STATUS_OK;
}

void vector_file_close(vector_file *file) {
    file_unmap(file->map, file->map_bytes);
    memset(file, 0, sizeof *file);
}
