/* fuzz_store.h — for the weight-file fuzz targets: a parsed file's tensors
 * handed out by the weight store as float32 (widened or realigned) and as
 * matrices kept in their stored type, each touched at its last byte so the
 * sanitizer sees any read outside. Header-only: each target is one file. */
#ifndef GLIMPSE_FUZZ_STORE_H
#define GLIMPSE_FUZZ_STORE_H

#include <stdint.h>

#include "weights/safetensors.h"
#include "weights/store.h"

/* Takes over file (freed here); returns a byte of what was read. */
static inline uint8_t fuzz_store_touch(safetensors *file) {
    uint8_t sink = 0;
    for (size_t i = 0; i < file->count; i++) {
        const tensor_entry *entry = &file->entries[i];
        if (entry->bytes) sink ^= entry->data[0] ^ entry->data[entry->bytes - 1];
        (void)safetensors_find(file, entry->name);
    }
    weight_store *store;
    if (weight_store_from_file(file, &store) != GLIMPSE_STATUS_OK) return sink; /* (frees the file on failure) */
    for (size_t i = 0; i < file->count; i++) {
        const tensor_entry *entry = &file->entries[i];
        const float *values;
        if (weight_store_get(store, &values, entry->rank, entry->shape, entry->name) == GLIMPSE_STATUS_OK &&
            entry->elements)
            sink ^= ((const uint8_t *)values)[entry->elements * sizeof(float) - 1];
        kernel_weight matrix;
        if (entry->rank == 2 &&
            weight_store_get_matrix(store, &matrix, entry->shape[0], entry->shape[1], entry->name) ==
                GLIMPSE_STATUS_OK &&
            entry->elements)
            sink ^= ((const uint8_t *)matrix.data)[entry->elements * weight_type_bytes(matrix.type) - 1];
    }
    weight_store_free(store);
    return sink;
}

#endif
