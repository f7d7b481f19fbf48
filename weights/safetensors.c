/* safetensors.c — parse and validate a safetensors file. The JSON header is
 * read with cJSON; every number in it is checked (non-negative integers,
 * products without overflow, ranges inside the data section) before any
 * tensor is handed out. */
#include "weights/safetensors.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/file.h"

/* Headers of real checkpoints are well under a megabyte; a header claiming
 * more than this is treated as damage. */
#define SAFETENSORS_MAX_HEADER (100u * 1024u * 1024u)

static int dtype_from_name(const char *name, tensor_dtype *dtype, size_t *element_size) {
    static const struct {
        const char *name;
        tensor_dtype dtype;
        size_t size;
    } table[] = {
        {"F32", TENSOR_DTYPE_F32, 4},   {"F16", TENSOR_DTYPE_F16, 2},     {"BF16", TENSOR_DTYPE_BF16, 2},
        {"F64", TENSOR_DTYPE_OTHER, 8}, {"I64", TENSOR_DTYPE_OTHER, 8},   {"U64", TENSOR_DTYPE_OTHER, 8},
        {"I32", TENSOR_DTYPE_OTHER, 4}, {"U32", TENSOR_DTYPE_OTHER, 4},   {"I16", TENSOR_DTYPE_OTHER, 2},
        {"U16", TENSOR_DTYPE_OTHER, 2}, {"I8", TENSOR_DTYPE_OTHER, 1},    {"U8", TENSOR_DTYPE_OTHER, 1},
        {"BOOL", TENSOR_DTYPE_OTHER, 1}, {"F8_E4M3", TENSOR_DTYPE_OTHER, 1}, {"F8_E5M2", TENSOR_DTYPE_OTHER, 1},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strcmp(name, table[i].name) == 0) {
            *dtype = table[i].dtype;
            *element_size = table[i].size;
            return 1;
        }
    return 0;
}

/* 2^53: above it a JSON number (a double) no longer holds every whole value exactly. */
#define JSON_MAX_EXACT_INTEGER 9007199254740992.0

/* A JSON number that is a whole, non-negative value representable as size_t. */
static int json_size(const cJSON *item, size_t *out) {
    if (!cJSON_IsNumber(item)) return 0;
    double value = item->valuedouble;
    if (!(value >= 0.0) || value != floor(value) || value > JSON_MAX_EXACT_INTEGER) return 0;
    *out = (size_t)value;
    return 1;
}

static int compare_entries(const void *a, const void *b) {
    return strcmp(((const tensor_entry *)a)->name, ((const tensor_entry *)b)->name);
}

char *tensor_shape_string(char *buffer, size_t capacity, const size_t *shape, int rank) {
    size_t used = 0;
    used += (size_t)snprintf(buffer + used, capacity - used, "[");
    for (int i = 0; i < rank && used < capacity; i++)
        used += (size_t)snprintf(buffer + used, capacity - used, i ? ", %zu" : "%zu", shape[i]);
    if (used < capacity) snprintf(buffer + used, capacity - used, "]");
    return buffer;
}

static glimpse_status parse_entry(safetensors *file, const cJSON *item, const uint8_t *data, size_t data_size,
                                  tensor_entry *entry) {
    const char *label = file->label;
    const char *name = item->string;
    const cJSON *dtype = cJSON_GetObjectItemCaseSensitive(item, "dtype");
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(item, "shape");
    const cJSON *offsets = cJSON_GetObjectItemCaseSensitive(item, "data_offsets");
    if (!cJSON_IsObject(item) || !cJSON_IsString(dtype) || !cJSON_IsArray(shape) || !cJSON_IsArray(offsets))
        return error_set(GLIMPSE_STATUS_BAD_FORMAT,
                         "%s: header entry '%s' lacks a dtype, shape or data_offsets", label, name);
    size_t element_size;
    if (!dtype_from_name(dtype->valuestring, &entry->dtype, &element_size))
        return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: tensor '%s' has unknown dtype '%.16s'", label, name,
                         dtype->valuestring);
    snprintf(entry->dtype_name, sizeof entry->dtype_name, "%s", dtype->valuestring);
    int rank = cJSON_GetArraySize(shape);
    if (rank > TENSOR_MAX_RANK)
        return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: tensor '%s' has rank %d, over %d", label, name, rank,
                         TENSOR_MAX_RANK);
    entry->rank = rank;
    size_t elements = 1;
    for (int i = 0; i < rank; i++) {
        size_t dimension;
        if (!json_size(cJSON_GetArrayItem(shape, i), &dimension))
            return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: tensor '%s' has a shape entry that is not a size",
                             label, name);
        entry->shape[i] = dimension;
        if (dimension != 0 && elements > SIZE_MAX / dimension)
            return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: tensor '%s' has a shape too large to address", label,
                             name);
        elements *= dimension;
    }
    if (elements > SIZE_MAX / element_size)
        return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: tensor '%s' has a shape too large to address", label, name);
    size_t begin, end;
    if (cJSON_GetArraySize(offsets) != 2 || !json_size(cJSON_GetArrayItem(offsets, 0), &begin) ||
        !json_size(cJSON_GetArrayItem(offsets, 1), &end))
        return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: tensor '%s' has malformed data_offsets", label, name);
    if (begin > end || end > data_size)
        return error_set(GLIMPSE_STATUS_BAD_FORMAT,
                         "%s: tensor '%s' claims bytes %zu..%zu but the data section holds %zu bytes", label, name,
                         begin, end, data_size);
    if (end - begin != elements * element_size)
        return error_set(GLIMPSE_STATUS_BAD_FORMAT,
                         "%s: tensor '%s' has %zu bytes of data but its shape and dtype need %zu", label, name,
                         end - begin, elements * element_size);
    entry->elements = elements;
    entry->data = data + begin;
    entry->bytes = end - begin;
    entry->name = strdup(name);
    if (!entry->name) return ERROR_OOM();
    return GLIMPSE_STATUS_OK;
}

glimpse_status safetensors_parse(const uint8_t *bytes, size_t size, const char *label, safetensors **out) {
    *out = NULL;
    safetensors *file = calloc(1, sizeof *file);
    if (!file) return ERROR_OOM();
    file->label = strdup(label ? label : "safetensors");
    file->bytes = bytes;
    file->size = size;
    if (!file->label) {
        safetensors_close(file);
        return ERROR_OOM();
    }
    glimpse_status status = GLIMPSE_STATUS_OK;
    cJSON *header = NULL;
    if (size < 8) {
        status = error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: %zu bytes is too short for a safetensors file", label, size);
        goto done;
    }
    uint64_t header_length = 0;
    for (int i = 7; i >= 0; i--) header_length = (header_length << 8) | bytes[i];
    if (header_length > size - 8 || header_length > SAFETENSORS_MAX_HEADER) {
        status = error_set(GLIMPSE_STATUS_BAD_FORMAT,
                           "%s: header length %llu does not fit in the file of %zu bytes (damaged or not safetensors)",
                           label, (unsigned long long)header_length, size);
        goto done;
    }
    header = cJSON_ParseWithLength((const char *)bytes + 8, (size_t)header_length);
    if (!cJSON_IsObject(header)) {
        status = error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: header is not a JSON object", label);
        goto done;
    }
    size_t capacity = (size_t)cJSON_GetArraySize(header);
    file->entries = calloc(capacity ? capacity : 1, sizeof *file->entries);
    if (!file->entries) {
        status = ERROR_OOM();
        goto done;
    }
    const uint8_t *data = bytes + 8 + header_length;
    size_t data_size = size - 8 - (size_t)header_length;
    const cJSON *item;
    cJSON_ArrayForEach(item, header) {
        if (strcmp(item->string, "__metadata__") == 0) continue;
        status = parse_entry(file, item, data, data_size, &file->entries[file->count]);
        if (status) goto done;
        file->count++;
    }
    qsort(file->entries, file->count, sizeof *file->entries, compare_entries);
    for (size_t i = 1; i < file->count; i++)
        if (strcmp(file->entries[i - 1].name, file->entries[i].name) == 0) {
            status = error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: tensor '%s' is listed twice", label,
                               file->entries[i].name);
            goto done;
        }
done:
    cJSON_Delete(header);
    if (status) {
        safetensors_close(file);
        return status;
    }
    *out = file;
    return GLIMPSE_STATUS_OK;
}

glimpse_status safetensors_open(const char *path, safetensors **out) {
    return tensor_file_open(path, safetensors_parse, out);
}

glimpse_status tensor_file_open(const char *path, tensor_file_parser parse, safetensors **out) {
    *out = NULL;
    const uint8_t *map;
    size_t size;
    glimpse_status status = file_map(path, &map, &size);
    if (status) return status;
    status = parse(map, size, path, out);
    if (status) {
        file_unmap(map, size);
        return status;
    }
    (*out)->owns_mapping = 1;
    return GLIMPSE_STATUS_OK;
}

void safetensors_close(safetensors *file) {
    if (!file) return;
    for (size_t i = 0; i < file->count; i++) free(file->entries[i].name);
    free(file->entries);
    if (file->owns_mapping) file_unmap(file->bytes, file->size);
    free(file->label);
    free(file);
}

const tensor_entry *safetensors_find(const safetensors *file, const char *name) {
    size_t low = 0, high = file->count;
    while (low < high) {
        size_t middle = low + (high - low) / 2;
        int order = strcmp(file->entries[middle].name, name);
        if (order == 0) return &file->entries[middle];
        if (order < 0)
            low = middle + 1;
        else
            high = middle;
    }
    return NULL;
}

