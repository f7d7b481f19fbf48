/* faiss_folder.c — faiss_folder.h: the folder's files read and checked, the
 * candidates of faiss_engine re-scored with the exact vectors, and the rows
 * named through the path table. The FAISS calls are faiss_engine.cpp's. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/error.h"
#include "core/file.h"
#include "core/kernels.h"
#include "core/pool.h"
#include "search/faiss_engine.h"
#include "search/faiss_folder.h"
#include "search/npy.h"

#define FAISS_PARAMS_MAX_BYTES ((size_t)1 << 20)
/* Candidates asked of FAISS at most, whatever k x rescore_factor says. */
#define FAISS_MAX_CANDIDATES ((size_t)1 << 20)

/* A mapped file. */
typedef struct mapped {
    const uint8_t *bytes;
    size_t size;
    bool present; /* the file exists (an empty one maps to no bytes) */
} mapped;

struct faiss_folder {
    char *path;
    faiss_folder_info info;
    cJSON *params;
    faiss_engine *engine;
    mapped paths, offsets, vectors, times;
    const uint64_t *offset; /* [count + 1], inside offsets */
    const double *time;     /* [count], inside times: a video frame's time, negative for a still; NULL: all stills */
    const float *vector;    /* [count, dim], inside vectors; NULL without vectors.npy */
    pool *threads;          /* the re-scoring's, created with the first search that re-scores */
    int thread_count;       /* its threads (0: every core) */
    /* one search's scratch */
    int64_t *rows;
    float *scores;
    char **result_paths; /* [k] owned copies of the paths returned */
    size_t result_capacity;
};

static glimpse_status damaged(const faiss_folder *f, const char *file, const char *what) {
    return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s/%s: %s; build the index again with python -m glimpse.faiss build",
                     f->path, file, what);
}

/* The whole number at name in object (at most limit), or fails. */
static bool whole(const cJSON *object, const char *name, double limit, size_t *out) {
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(object, name);
    if (!cJSON_IsNumber(item) || item->valuedouble < 0 || item->valuedouble > limit ||
        floor(item->valuedouble) != item->valuedouble)
        return false;
    *out = (size_t)item->valuedouble;
    return true;
}

static const char *text(const cJSON *object, const char *name) {
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(object, name);
    return cJSON_IsString(item) ? item->valuestring : NULL;
}

static glimpse_status read_params(faiss_folder *f) {
    char *path = file_join(f->path, "params.json");
    uint8_t *bytes = NULL;
    size_t size;
    glimpse_status status = path ? file_read_all(path, FAISS_PARAMS_MAX_BYTES, &bytes, &size) : ERROR_OOM();
    free(path);
    if (status) return status;
    f->params = cJSON_ParseWithLength((const char *)bytes, size);
    free(bytes);
    if (!f->params) return damaged(f, "params.json", "not valid JSON");
    faiss_folder_info *info = &f->info;
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(f->params, "model");
    const cJSON *scale = cJSON_GetObjectItemCaseSensitive(model, "logit_scale");
    const cJSON *bias = cJSON_GetObjectItemCaseSensitive(model, "logit_bias");
    info->kind = text(f->params, "kind");
    info->model_path = text(model, "path");
    info->precision = text(model, "precision");
    info->identity = text(model, "identity");
    info->rescore_factor = 50;
    if (!info->kind || !whole(f->params, "count", 1e12, &info->count) || !whole(f->params, "dim", 65536, &info->dim) ||
        info->dim == 0 || !info->model_path || !info->precision || !cJSON_IsNumber(scale) || !cJSON_IsNumber(bias) ||
        (cJSON_GetObjectItemCaseSensitive(f->params, "rescore_factor") &&
         !whole(f->params, "rescore_factor", 1e6, &info->rescore_factor)) ||
        (strcmp(info->kind, "ivfpq") == 0 && !whole(f->params, "nprobe", 1e9, &info->nprobe)))
        return damaged(f, "params.json", "its kind, count, dim, nprobe or model record is missing or wrong");
    info->logit_scale = (float)scale->valuedouble, info->logit_bias = (float)bias->valuedouble;
    if (!info->rescore_factor) info->rescore_factor = 1;
    return GLIMPSE_STATUS_OK;
}

/* Maps name of the folder into m; a missing file is NOT_FOUND unless optional (then m stays empty). */
static glimpse_status map_file(faiss_folder *f, const char *name, bool optional, mapped *m) {
    char *path = file_join(f->path, name);
    if (!path) return ERROR_OOM();
    glimpse_status status = GLIMPSE_STATUS_OK;
    if (!file_is_regular(path)) {
        if (!optional) status = error_set(GLIMPSE_STATUS_NOT_FOUND, "%s: missing from the FAISS index folder", path);
    } else {
        status = file_map(path, &m->bytes, &m->size);
        m->present = !status;
    }
    free(path);
    return status;
}

/* The .npy at m, parsed whole: of descr, one or two dimensions as given, rows x columns, aligned. */
static glimpse_status check_array(faiss_folder *f, const mapped *m, const char *name, const char *descr, size_t rows,
                                  size_t columns, size_t dims, const void **data) {
    char *label = file_join(f->path, name);
    if (!label) return ERROR_OOM();
    npy_array array;
    glimpse_status status = npy_parse(m->bytes, m->size, 1, label, &array);
    free(label);
    if (status) return status;
    if (strcmp(array.descr, descr) != 0 || array.dims != dims || array.shape[0] != rows || array.shape[1] != columns ||
        array.data_offset % array.element_bytes) {
        char what[160];
        snprintf(what, sizeof what, "holds %zu x %zu %s where %zu x %zu %s were expected", array.shape[0],
                 array.shape[1], array.descr, rows, columns, descr);
        return damaged(f, name, what);
    }
    *data = m->bytes + array.data_offset;
    return GLIMPSE_STATUS_OK;
}

static glimpse_status open_files(faiss_folder *f) {
    glimpse_status status = read_params(f);
    if (status) return status;
    char *index_path = file_join(f->path, "index.faiss");
    if (!index_path) return ERROR_OOM();
    char reason[512] = "";
    if (!file_is_regular(index_path))
        status = error_set(GLIMPSE_STATUS_NOT_FOUND, "%s: missing from the FAISS index folder", index_path);
    else if (faiss_engine_open(index_path, &f->engine, reason, sizeof reason) != 0)
        status = error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: not a FAISS index glimpse reads (%s)", index_path, reason);
    free(index_path);
    if (status) return status;
    const faiss_folder_info *info = &f->info;
    if (faiss_engine_count(f->engine) != info->count || faiss_engine_dim(f->engine) != info->dim) {
        char what[160];
        snprintf(what, sizeof what, "holds %zu vectors of %zu where params.json says %zu of %zu",
                 faiss_engine_count(f->engine), faiss_engine_dim(f->engine), info->count, info->dim);
        return damaged(f, "index.faiss", what);
    }
    const void *data;
    if ((status = map_file(f, "paths.bin", false, &f->paths)) || (status = map_file(f, "offsets.npy", false, &f->offsets)) ||
        (status = check_array(f, &f->offsets, "offsets.npy", "<u8", info->count + 1, 1, 1, &data)))
        return status;
    f->offset = data;
    if (f->offset[0] != 0 || f->offset[info->count] != f->paths.size)
        return damaged(f, "offsets.npy", "its offsets do not span paths.bin");
    if ((status = map_file(f, "times.npy", true, &f->times))) return status;
    if (f->times.present) {
        if ((status = check_array(f, &f->times, "times.npy", "<f8", info->count, 1, 1, &data))) return status;
        f->time = data;
    }
    if ((status = map_file(f, "vectors.npy", true, &f->vectors))) return status;
    if (f->vectors.present) {
        if ((status = check_array(f, &f->vectors, "vectors.npy", "<f4", info->count, info->dim, 2, &data)))
            return status;
        f->vector = data;
    }
    f->info.rescore = f->vector != NULL && faiss_engine_is_ivf(f->engine);
    return GLIMPSE_STATUS_OK;
}

glimpse_status faiss_folder_open(const char *folder, faiss_folder **out) { return faiss_folder_open_with(folder, 0, out); }

glimpse_status faiss_folder_open_with(const char *folder, int threads, faiss_folder **out) {
    if (!folder || !out) return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "faiss_folder_open: NULL argument");
    *out = NULL;
    if (!file_is_directory(folder))
        return error_set(GLIMPSE_STATUS_NOT_FOUND,
                         "%s: no such FAISS index folder (build it with python -m glimpse.faiss build)", folder);
    faiss_folder *f = calloc(1, sizeof *f);
    if (!f) return ERROR_OOM();
    f->thread_count = threads > 0 ? threads : 0;
    f->path = strdup(folder);
    glimpse_status status = f->path ? open_files(f) : ERROR_OOM();
    if (status)
        faiss_folder_free(f);
    else
        *out = f;
    return status;
}

static void unmap(mapped *m) {
    if (m->bytes) file_unmap(m->bytes, m->size);
}

static void free_result_paths(faiss_folder *f) {
    for (size_t i = 0; i < f->result_capacity; i++) free(f->result_paths[i]), f->result_paths[i] = NULL;
}

void faiss_folder_free(faiss_folder *f) {
    if (!f) return;
    if (f->engine) faiss_engine_free(f->engine);
    pool_free(f->threads);
    unmap(&f->paths), unmap(&f->offsets), unmap(&f->vectors), unmap(&f->times);
    free_result_paths(f);
    free(f->result_paths), free(f->rows), free(f->scores);
    cJSON_Delete(f->params);
    free(f->path);
    free(f);
}

const faiss_folder_info *faiss_folder_get_info(const faiss_folder *f) { return f ? &f->info : NULL; }

/* ------------------------------------------------------------ populate */

#define MADVISE_POPULATE_READ 22 /* Linux 5.14's MADV_POPULATE_READ, which older headers lack */

/* Reads the folder's file name once, so that the page cache holds it (errors ignored: a hint). */
static void read_through(const faiss_folder *f, const char *name) {
    char *path = file_join(f->path, name);
    int fd = path ? open(path, O_RDONLY | O_CLOEXEC) : -1;
    free(path);
    char *buffer = malloc(1 << 20); /* (not static: two folders may be populated by two threads at once) */
    while (fd >= 0 && buffer && read(fd, buffer, 1 << 20) > 0) {
    }
    free(buffer);
    if (fd >= 0) close(fd);
}

/* The fraction of [start, start + size) this process maps with huge pages (FilePmdMapped in /proc/self/smaps for
 * the mapping that begins there), 0 where that cannot be read. */
static double huge_mapped_fraction(const void *start, size_t size) {
    FILE *smaps = fopen("/proc/self/smaps", "re");
    if (!smaps || !size) {
        if (smaps) fclose(smaps);
        return 0;
    }
    char line[512];
    bool inside = false;
    double fraction = 0;
    while (fgets(line, sizeof line, smaps)) {
        unsigned long first, end;
        size_t kib;
        if (sscanf(line, "%lx-%lx ", &first, &end) == 2) /* a mapping's first line: its address range */
            inside = first == (unsigned long)(uintptr_t)start;
        else if (inside && sscanf(line, "FilePmdMapped: %zu kB", &kib) == 1) {
            fraction = (double)kib * 1024.0 / (double)size;
            break;
        }
    }
    fclose(smaps);
    return fraction < 1 ? fraction : 1;
}

glimpse_status faiss_folder_populate(faiss_folder *f, double *huge_fraction) {
    if (!f) return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "faiss_folder_populate: NULL folder");
    if (huge_fraction) *huge_fraction = 0;
    read_through(f, "index.faiss");
    if (!f->vectors.bytes || !f->vectors.size) return GLIMPSE_STATUS_OK;
    void *start = (void *)f->vectors.bytes;
    size_t size = f->vectors.size;
#ifdef MADV_HUGEPAGE
    madvise(start, size, MADV_HUGEPAGE); /* a kernel without transparent huge pages: small ones all the same */
#endif
    if (madvise(start, size, MADVISE_POPULATE_READ) != 0) { /* Linux before 5.14: read ahead at least */
        madvise(start, size, MADV_WILLNEED);
        return GLIMPSE_STATUS_OK;
    }
    double fraction = huge_mapped_fraction(start, size);
    if (fraction < 0.5 && size >= ((size_t)64 << 20)) {
        /* cached in small pages (a file just written or copied): dropped from the cache (only pages no process
         * maps leave) and read again through this mapping, which caches it in huge pages for later processes */
        madvise(start, size, MADV_DONTNEED);
        char *path = file_join(f->path, "vectors.npy");
        int fd = path ? open(path, O_RDONLY | O_CLOEXEC) : -1;
        free(path);
        if (fd >= 0) posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), close(fd);
        madvise(start, size, MADVISE_POPULATE_READ);
        fraction = huge_mapped_fraction(start, size);
    }
    if (huge_fraction) *huge_fraction = fraction;
    return GLIMPSE_STATUS_OK;
}

/* A candidate re-scored: its row and exact cosine. */
typedef struct candidate {
    int64_t row;
    float cosine;
} candidate;

/* Ascending row numbers. */
static int by_row(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Best first; equal cosines by row, as glimpse.faiss orders them. */
static int by_cosine(const void *a, const void *b) {
    const candidate *x = a, *y = b;
    if (x->cosine != y->cosine) return x->cosine > y->cosine ? -1 : 1;
    return (x->row > y->row) - (x->row < y->row);
}

glimpse_status faiss_folder_row_path(const faiss_folder *f, int64_t row, char **out) {
    *out = NULL;
    if (row < 0 || (uint64_t)row >= f->info.count)
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "%s: no row %lld in an index of %zu", f->path, (long long)row,
                         f->info.count);
    uint64_t start = f->offset[row], end = f->offset[row + 1];
    if (start > end || end > f->paths.size) return damaged(f, "offsets.npy", "an offset lies outside paths.bin");
    *out = malloc((size_t)(end - start) + 1);
    if (!*out) return ERROR_OOM();
    memcpy(*out, f->paths.bytes + start, (size_t)(end - start));
    (*out)[end - start] = 0;
    return GLIMPSE_STATUS_OK;
}

/* Room for k results and wanted candidates. */
static glimpse_status reserve(faiss_folder *f, size_t k, size_t wanted) {
    free_result_paths(f);
    free(f->rows), free(f->scores), free(f->result_paths);
    f->rows = malloc(wanted * sizeof *f->rows);
    f->scores = malloc(wanted * sizeof *f->scores);
    f->result_paths = calloc(k, sizeof *f->result_paths);
    f->result_capacity = f->result_paths ? k : 0;
    return f->rows && f->scores && f->result_paths ? GLIMPSE_STATUS_OK : ERROR_OOM();
}

glimpse_status faiss_folder_search_rows(faiss_folder *f, const float *query, size_t k,
                                        const faiss_folder_search_params *params, int64_t *rows, float *cosines,
                                        size_t *found) {
    if (!f || !query || (k && (!rows || !cosines)) || !found)
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "faiss_folder_search_rows: NULL argument");
    *found = 0;
    const faiss_folder_info *info = &f->info;
    faiss_folder_search_params chosen = params ? *params : faiss_folder_default_search_params();
    bool rescore = info->rescore && chosen.rescore;
    size_t factor = rescore ? (chosen.rescore_factor ? chosen.rescore_factor : info->rescore_factor) : 1;
    size_t wanted = k * factor;
    if (k && wanted / k != factor) wanted = FAISS_MAX_CANDIDATES;
    if (wanted > info->count) wanted = info->count;
    if (wanted > FAISS_MAX_CANDIDATES) wanted = FAISS_MAX_CANDIDATES;
    if (k > wanted) k = wanted;
    if (!k) return GLIMPSE_STATUS_OK;
    glimpse_status status = reserve(f, k, wanted);
    if (status) return status;
    char reason[512] = "";
    if (faiss_engine_search(f->engine, query, wanted, chosen.nprobe ? chosen.nprobe : info->nprobe, f->rows, f->scores,
                            reason, sizeof reason) != 0)
        return error_set(GLIMPSE_STATUS_INTERNAL, "%s: FAISS search failed: %s", f->path, reason);
    size_t n = 0; /* the rows found (FAISS ends short lists with -1), checked, kept in place */
    for (size_t i = 0; i < wanted; i++) {
        int64_t row = f->rows[i];
        if (row < 0) continue;
        if ((uint64_t)row >= info->count) return damaged(f, "index.faiss", "it returned a row past its count");
        f->rows[n] = row, f->scores[n++] = f->scores[i];
    }
    if (rescore) { /* exact cosines, the rows read in file order over the pool's threads */
        qsort(f->rows, n, sizeof *f->rows, by_row);
        if (!f->threads && pool_create(f->thread_count, &f->threads) != GLIMPSE_STATUS_OK)
            f->threads = NULL; /* the caller alone */
        kernel_dot_rows(f->scores, f->vector, info->dim, f->rows, n, query, f->threads);
    }
    candidate *best = malloc((n ? n : 1) * sizeof *best);
    if (!best) return ERROR_OOM();
    for (size_t i = 0; i < n; i++) best[i] = (candidate){f->rows[i], f->scores[i]};
    if (rescore) qsort(best, n, sizeof *best, by_cosine);
    for (size_t i = 0; i < n && i < k; i++) rows[i] = best[i].row, cosines[i] = best[i].cosine;
    *found = n < k ? n : k;
    free(best);
    return GLIMPSE_STATUS_OK;
}

faiss_folder_search_params faiss_folder_default_search_params(void) {
    return (faiss_folder_search_params){.nprobe = 0, .rescore = true, .rescore_factor = 0};
}

glimpse_status faiss_folder_search(faiss_folder *f, const float *query, size_t k, size_t nprobe,
                                   glimpse_search_result *results, size_t *found) {
    if (!f || !query || (k && !results) || !found)
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "faiss_folder_search: NULL argument");
    *found = 0;
    if (k > f->info.count) k = f->info.count;
    if (!k) return GLIMPSE_STATUS_OK;
    int64_t *rows = malloc(k * sizeof *rows);
    float *cosines = malloc(k * sizeof *cosines);
    faiss_folder_search_params params = faiss_folder_default_search_params();
    params.nprobe = nprobe;
    size_t n = 0;
    glimpse_status status = rows && cosines ? faiss_folder_search_rows(f, query, k, &params, rows, cosines, &n)
                                            : ERROR_OOM();
    for (size_t i = 0; i < n && !status; i++) {
        status = faiss_folder_row_path(f, rows[i], &f->result_paths[i]);
        results[i].path = f->result_paths[i];
        results[i].score = f->info.logit_scale * cosines[i] + f->info.logit_bias;
        results[i].time = f->time && f->time[rows[i]] >= 0 ? f->time[rows[i]] : -1;
        if (!status) *found = i + 1;
    }
    free(rows), free(cosines);
    return status;
}
