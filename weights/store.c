/* store.c — the tensors of a snapshot folder, single-file or sharded,
 * safetensors or PyTorch .bin (the same tensor table either way). */
#include "weights/store.h"

#include <cjson/cJSON.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cpu.h"
#include "core/error.h"
#include "core/file.h"
#include "core/kernels.h"
#include "core/memory.h"
#include "core/openblas.h"
#include "core/pool.h"
#include "weights/torch_bin.h"

typedef struct owned_buffer {
    struct owned_buffer *next;
    void *data;                 /* memory_large */
    const tensor_entry *source; /* the tensor a small copy holds (as_f32), else NULL */
} owned_buffer;

/* Float32 tensors of at most this many bytes (norms, biases) are read from a copy: on a kernel that maps a
 * file's page cache in large folios, reading one mapped whole folios around it, and so the neighbouring
 * weights whose pages an int8 twin had given back (BLIP-base's int8 caption: 390 MB of them, its peak
 * resident 1088 MB for an 854 MB file, 749 MB with the copies; ViT-B/32 int8 `rank` 424 → 263 MB; Linux 6.18,
 * ext4). A model's small tensors come to a few MB. */
#define STORE_SMALL_COPY_BYTES (64u * 1024u)

struct weight_store {
    safetensors **files;
    size_t file_count;
    owned_buffer *buffers; /* widened or realigned copies */
    size_t parameters, bytes, copied_bytes;
    unsigned dtypes_seen; /* bit per tensor_dtype */
    const char *format;   /* what weight_store_open read: "safetensors", "PyTorch .bin" */
    pool *threads;        /* what turns transposed matrices at load (weight_store_set_threads), or NULL */
};

/* Maps and parses one weights file (safetensors_open, torch_bin_open). */
typedef glimpse_status (*file_opener)(const char *path, safetensors **out);

#define INDEX_MAX_BYTES (64u * 1024u * 1024u)

static glimpse_status add_file(weight_store *store, safetensors *file) {
    safetensors **grown = realloc(store->files, (store->file_count + 1) * sizeof *grown);
    if (!grown) return ERROR_OOM();
    store->files = grown;
    store->files[store->file_count++] = file;
    return GLIMPSE_STATUS_OK;
}

glimpse_status weight_store_from_file(safetensors *file, weight_store **out) {
    *out = NULL;
    weight_store *store = calloc(1, sizeof *store);
    if (!store) {
        safetensors_close(file);
        return ERROR_OOM();
    }
    glimpse_status status = add_file(store, file);
    if (status) {
        safetensors_close(file);
        weight_store_free(store);
        return status;
    }
    *out = store;
    return GLIMPSE_STATUS_OK;
}

/* A shard name from the index must be a plain file name inside the folder. */
static int safe_shard_name(const char *name) {
    return name[0] != '\0' && strchr(name, '/') == NULL && strcmp(name, ".") != 0 && strcmp(name, "..") != 0;
}

static glimpse_status open_sharded(weight_store *store, const char *folder, const char *index_path,
                                   file_opener open_file) {
    uint8_t *text;
    size_t size;
    glimpse_status status = file_read_all(index_path, INDEX_MAX_BYTES, &text, &size);
    if (status) return status;
    cJSON *index = cJSON_ParseWithLength((const char *)text, size);
    free(text);
    const cJSON *map = cJSON_GetObjectItemCaseSensitive(index, "weight_map");
    if (!cJSON_IsObject(map)) {
        cJSON_Delete(index);
        return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: no \"weight_map\" object", index_path);
    }
    /* Open each distinct shard once, in order of first mention. */
    const cJSON *item;
    cJSON_ArrayForEach(item, map) {
        if (!cJSON_IsString(item) || !safe_shard_name(item->valuestring)) {
            status = error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: tensor '%s' maps to an invalid shard name", index_path,
                               item->string);
            break;
        }
        int seen = 0;
        for (const cJSON *before = map->child; before != item; before = before->next)
            if (strcmp(before->valuestring, item->valuestring) == 0) {
                seen = 1;
                break;
            }
        if (seen) continue;
        char *path = file_join(folder, item->valuestring);
        if (!path) {
            status = ERROR_OOM();
            break;
        }
        if (!file_is_regular(path)) {
            status = error_set(GLIMPSE_STATUS_NOT_FOUND, "%s names shard %s (tensor '%s'), which is not in the "
                               "folder: the download is incomplete", index_path, item->valuestring, item->string);
            free(path);
            break;
        }
        safetensors *file;
        status = open_file(path, &file);
        free(path);
        if (status) break;
        status = add_file(store, file);
        if (status) {
            safetensors_close(file);
            break;
        }
    }
    /* Every tensor the index names must be in the shard it names. */
    if (!status) cJSON_ArrayForEach(item, map) {
            if (!weight_store_find(store, item->string)) {
                status = error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: tensor '%s' is not in shard %s", index_path,
                                   item->string, item->valuestring);
                break;
            }
        }
    cJSON_Delete(index);
    return status;
}

/* What a snapshot folder may hold, in the order of preference: safetensors (no pickle at all) before .bin. */
static const struct weights_layout {
    const char *name;
    int sharded; /* name is the index naming the shards */
    file_opener open_file;
    const char *format;
} layouts[] = {
    {"model.safetensors", 0, safetensors_open, "safetensors"},
    {"model.safetensors.index.json", 1, safetensors_open, "safetensors"},
    {"pytorch_model.bin", 0, torch_bin_open, "PyTorch .bin"},
    {"pytorch_model.bin.index.json", 1, torch_bin_open, "PyTorch .bin"},
};

glimpse_status weight_store_open(const char *folder, weight_store **out) {
    *out = NULL;
    const char *why;
    if (!cpu_has_avx512() && !openblas_load(&why)) /* (its products run there: said now, not slow later) */
        return error_set(GLIMPSE_STATUS_UNSUPPORTED, "%s: %s", folder, why);
    weight_store *store = calloc(1, sizeof *store);
    if (!store) return ERROR_OOM();
    glimpse_status status = GLIMPSE_STATUS_OK;
    int found = 0;
    for (size_t i = 0; !found && !status && i < sizeof layouts / sizeof layouts[0]; i++) {
        char *path = file_join(folder, layouts[i].name);
        if (!path) {
            status = ERROR_OOM();
        } else if (file_is_regular(path)) {
            found = 1;
            store->format = layouts[i].format;
            if (layouts[i].sharded) {
                status = open_sharded(store, folder, path, layouts[i].open_file);
            } else {
                safetensors *file;
                status = layouts[i].open_file(path, &file);
                if (!status && (status = add_file(store, file))) safetensors_close(file);
            }
        }
        free(path);
    }
    if (!status && !found)
        status = error_set(GLIMPSE_STATUS_NOT_FOUND, "%s: no model.safetensors, pytorch_model.bin or their sharded "
                           "index (.index.json)", folder);
    if (status) {
        weight_store_free(store);
        return status;
    }
    *out = store;
    return GLIMPSE_STATUS_OK;
}

void weight_store_free(weight_store *store) {
    if (!store) return;
    for (size_t i = 0; i < store->file_count; i++) safetensors_close(store->files[i]);
    free(store->files);
    for (owned_buffer *buffer = store->buffers; buffer;) {
        owned_buffer *next = buffer->next;
        free(buffer->data);
        free(buffer);
        buffer = next;
    }
    free(store);
}

static const tensor_entry *find_with_file(const weight_store *store, const char *name, const safetensors **file) {
    for (size_t i = 0; i < store->file_count; i++) {
        const tensor_entry *entry = safetensors_find(store->files[i], name);
        if (entry) {
            if (file) *file = store->files[i];
            return entry;
        }
    }
    return NULL;
}

const tensor_entry *weight_store_find(const weight_store *store, const char *name) {
    return find_with_file(store, name, NULL);
}

/* bytes of memory the store frees with itself; `conversion`: counted in copied_bytes (a tensor widened or
 * realigned, not a small float32 tensor copied as it is). */
static void *owned(weight_store *store, size_t bytes, bool conversion) {
    owned_buffer *buffer = malloc(sizeof *buffer);
    if (!buffer) return NULL;
    buffer->data = memory_large(bytes); /* (on huge pages: written once, at load) */
    if (!buffer->data) {
        free(buffer);
        return NULL;
    }
    buffer->source = NULL;
    buffer->next = store->buffers;
    store->buffers = buffer;
    if (conversion) store->copied_bytes += bytes;
    return buffer->data;
}

/* The entry of that name, its shape checked; *found NULL when it is
 * missing and optional. */
static glimpse_status find_checked(weight_store *store, const tensor_entry **found, int rank, const size_t *shape,
                                   int optional, const char *name) {
    *found = NULL;
    const safetensors *file = NULL;
    const tensor_entry *entry = find_with_file(store, name, &file);
    if (!entry) {
        if (optional) return GLIMPSE_STATUS_OK;
        return error_set(GLIMPSE_STATUS_NOT_FOUND, "the checkpoint has no tensor '%s'%s%s", name,
                         store->file_count == 1 ? " in " : "", store->file_count == 1 ? store->files[0]->label : "");
    }
    int same = entry->rank == rank;
    for (int i = 0; same && i < rank; i++) same = entry->shape[i] == shape[i];
    if (!same) {
        char found_shape[TENSOR_SHAPE_TEXT_CAPACITY], wanted[TENSOR_SHAPE_TEXT_CAPACITY];
        return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: tensor '%s' has shape %s, the config implies %s", file->label,
                         name, tensor_shape_string(found_shape, sizeof found_shape, entry->shape, entry->rank),
                         tensor_shape_string(wanted, sizeof wanted, shape, rank));
    }
    if (entry->dtype == TENSOR_DTYPE_OTHER)
        return error_set(GLIMPSE_STATUS_UNSUPPORTED, "%s: tensor '%s' has dtype %s; weights must be F32, F16 or BF16",
                         file->label, name, entry->dtype_name);
    store->parameters += entry->elements;
    store->bytes += entry->bytes;
    store->dtypes_seen |= 1u << entry->dtype;
    *found = entry;
    return GLIMPSE_STATUS_OK;
}

static weight_type type_of(const tensor_entry *entry) {
    return entry->dtype == TENSOR_DTYPE_F16 ? WEIGHT_TYPE_F16 : entry->dtype == TENSOR_DTYPE_BF16 ? WEIGHT_TYPE_BF16 : WEIGHT_TYPE_F32;
}

/* The entry's values as float32: in place when they are aligned float32 and large, else widened, realigned or
 * copied once (a tensor asked for again gets its first copy: tied weights stay one). */
static glimpse_status as_f32(weight_store *store, const tensor_entry *entry, const float **out) {
    int small = entry->bytes <= STORE_SMALL_COPY_BYTES;
    for (const owned_buffer *b = store->buffers; small && b; b = b->next)
        if (b->source == entry) {
            *out = b->data;
            return GLIMPSE_STATUS_OK;
        }
    int as_stored = entry->dtype == TENSOR_DTYPE_F32 && ((uintptr_t)entry->data % sizeof(float)) == 0;
    if (as_stored && !small) {
        *out = (const float *)entry->data;
        return GLIMPSE_STATUS_OK;
    }
    if (entry->elements > SIZE_MAX / sizeof(float)) return ERROR_OOM();
    float *copy = owned(store, entry->elements * sizeof(float), !as_stored);
    if (!copy) return ERROR_OOM();
    if (as_stored) memcpy(copy, entry->data, entry->bytes);
    else kernel_widen(copy, entry->data, type_of(entry), entry->elements);
    if (small) store->buffers->source = entry;
    *out = copy;
    return GLIMPSE_STATUS_OK;
}

static glimpse_status get_tensor(weight_store *store, const float **out, int rank, const size_t *shape,
                                 int optional, const char *name) {
    *out = NULL;
    const tensor_entry *entry;
    glimpse_status status = find_checked(store, &entry, rank, shape, optional, name);
    return status || !entry ? status : as_f32(store, entry, out);
}

static glimpse_status get_matrix(weight_store *store, kernel_weight *out, size_t rows, size_t columns, int optional,
                                 const char *name) {
    *out = (kernel_weight){0};
    size_t shape[2] = {rows, columns};
    const tensor_entry *entry;
    glimpse_status status = find_checked(store, &entry, 2, shape, optional, name);
    if (status || !entry) return status;
    weight_type type = type_of(entry);
    if (type == WEIGHT_TYPE_F32 || !cpu_has_avx512()) {
        const float *values;
        if ((status = as_f32(store, entry, &values))) return status;
        *out = kernel_weight_f32(values);
        return GLIMPSE_STATUS_OK;
    }
    const void *data = entry->data; /* 16-bit, kept so: realigned only if the file puts it at an odd address */
    if ((uintptr_t)data % 2) {
        void *copy = owned(store, entry->bytes, true);
        if (!copy) return ERROR_OOM();
        memcpy(copy, data, entry->bytes);
        data = copy;
    }
    *out = (kernel_weight){data, type, NULL, NULL};
    return GLIMPSE_STATUS_OK;
}

glimpse_status weight_store_get(weight_store *store, const float **out, int rank, const size_t *shape,
                                const char *name) {
    return get_tensor(store, out, rank, shape, 0, name);
}

glimpse_status weight_store_get_optional(weight_store *store, const float **out, int rank, const size_t *shape,
                                         const char *name) {
    return get_tensor(store, out, rank, shape, 1, name);
}

glimpse_status weight_store_get_matrix(weight_store *store, kernel_weight *out, size_t rows, size_t columns,
                                       const char *name) {
    return get_matrix(store, out, rows, columns, 0, name);
}

glimpse_status weight_store_get_matrix_optional(weight_store *store, kernel_weight *out, size_t rows, size_t columns,
                                                const char *name) {
    return get_matrix(store, out, rows, columns, 1, name);
}

/* Stored rows turned at a time: each output row then takes this many consecutive values. */
#define TRANSPOSE_BLOCK 16

/* A matrix stored [columns, rows] turned into [rows, columns], one task per block of output rows: each thread
 * writes (and so takes the page faults and the zeroing of) its own part of the copy. */
typedef struct transpose_job {
    char *turned;
    const uint8_t *data;
    weight_type stored, type;
    size_t rows, columns, share; /* (share: output rows per task) */
    atomic_int failed;           /* a task could not allocate its buffer */
} transpose_job;

static void transpose_task(void *argument, size_t index, float *scratch) {
    (void)scratch;
    transpose_job *job = argument;
    size_t r0 = index * job->share, r1 = r0 + job->share < job->rows ? r0 + job->share : job->rows, span = r1 - r0;
    size_t columns = job->columns, stored_row = job->rows * weight_type_bytes(job->stored);
    size_t first = r0 * weight_type_bytes(job->stored); /* (bytes into a stored row) */
    if (r0 >= r1) return;
    float *widened = job->type == WEIGHT_TYPE_F32 ? malloc(TRANSPOSE_BLOCK * span * sizeof(float)) : NULL;
    if (job->type == WEIGHT_TYPE_F32 && !widened) {
        atomic_store(&job->failed, 1);
        return;
    }
    for (size_t c0 = 0; c0 < columns; c0 += TRANSPOSE_BLOCK) {
        size_t block = columns - c0 < TRANSPOSE_BLOCK ? columns - c0 : TRANSPOSE_BLOCK;
        if (job->type == WEIGHT_TYPE_F32) { /* stored rows c0.., their values r0..r1 widened (or copied: the file
                                             * may misalign them) */
            for (size_t c = 0; c < block; c++)
                kernel_widen(widened + c * span, job->data + (c0 + c) * stored_row + first, job->stored, span);
            for (size_t r = r0; r < r1; r++)
                for (size_t c = 0; c < block; c++)
                    ((float *)job->turned)[r * columns + c0 + c] = widened[c * span + r - r0];
        } else { /* 16-bit values moved as they are */
            for (size_t r = r0; r < r1; r++)
                for (size_t c = 0; c < block; c++)
                    memcpy(job->turned + (r * columns + c0 + c) * 2, job->data + (c0 + c) * stored_row + r * 2, 2);
        }
    }
    free(widened);
}

glimpse_status weight_store_get_matrix_transposed(weight_store *store, kernel_weight *out, size_t rows,
                                                  size_t columns, const char *name) {
    *out = (kernel_weight){0};
    size_t shape[2] = {columns, rows};
    const tensor_entry *entry;
    glimpse_status status = find_checked(store, &entry, 2, shape, 0, name);
    if (status) return status;
    weight_type stored = type_of(entry), type = cpu_has_avx512() ? stored : WEIGHT_TYPE_F32;
    size_t element = weight_type_bytes(type);
    if (rows && columns > SIZE_MAX / element / rows) return ERROR_OOM();
    char *turned = owned(store, rows * columns * element, true);
    if (!turned) return ERROR_OOM();
    size_t tasks = (size_t)pool_threads(store->threads);
    transpose_job job = {.turned = turned, .data = entry->data, .stored = stored, .type = type, .rows = rows,
                         .columns = columns, .share = (rows + tasks - 1) / tasks};
    atomic_init(&job.failed, 0);
    pool_for(store->threads, job.share ? (rows + job.share - 1) / job.share : 0, transpose_task, &job);
    if (atomic_load(&job.failed)) return ERROR_OOM(); /* (the copy stays the store's, freed with it) */
    *out = (kernel_weight){turned, type, NULL, NULL};
    weight_store_release_pages(store, entry->data, entry->bytes); /* only the copy is read now */
    return GLIMPSE_STATUS_OK;
}

void weight_store_set_threads(weight_store *store, pool *threads) { store->threads = threads; }

void weight_store_release_pages(const weight_store *store, const void *data, size_t bytes) {
    const uint8_t *start = data;
    for (size_t i = 0; store && start && i < store->file_count; i++) {
        const safetensors *file = store->files[i];
        if (file->owns_mapping && start >= file->bytes && bytes <= file->size &&
            (size_t)(start - file->bytes) <= file->size - bytes) {
            file_release_pages(start, bytes);
            return;
        }
    }
}

void weight_store_release_prefix(const weight_store *store, const char *prefix) {
    size_t length = prefix ? strlen(prefix) : 0;
    for (size_t i = 0; store && length && i < store->file_count; i++) {
        const safetensors *file = store->files[i];
        for (size_t t = 0; file->owns_mapping && t < file->count; t++)
            if (!strncmp(file->entries[t].name, prefix, length))
                file_release_pages(file->entries[t].data, file->entries[t].bytes);
    }
}

size_t weight_store_parameters(const weight_store *store) { return store->parameters; }
size_t weight_store_copied_bytes(const weight_store *store) { return store->copied_bytes; }
size_t weight_store_bytes(const weight_store *store) { return store->bytes; }
const char *weight_store_format(const weight_store *store) { return store->format ? store->format : "none"; }

const char *weight_store_dtype(const weight_store *store) {
    switch (store->dtypes_seen) {
    case 0: return "none";
    case 1u << TENSOR_DTYPE_F32: return "F32";
    case 1u << TENSOR_DTYPE_F16: return "F16";
    case 1u << TENSOR_DTYPE_BF16: return "BF16";
    default: return "mixed";
    }
}
