/* fuzz_safetensors.c — libFuzzer target: arbitrary bytes as a safetensors
 * file. Parsing must succeed or fail cleanly, and every tensor it accepts
 * must lie inside the bytes (touched here so the sanitizer would see it),
 * also when the weight store hands it out as float32 (widened or realigned)
 * or as a matrix kept in its stored type. */
#include <stddef.h>
#include <stdint.h>

#include "weights/safetensors.h"
#include "weights/store.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    safetensors *file;
    if (safetensors_parse(data, size, "fuzz", &file) != GLIMPSE_STATUS_OK) return 0;
    volatile uint8_t sink = 0;
    for (size_t i = 0; i < file->count; i++) {
        const tensor_entry *entry = &file->entries[i];
        if (entry->bytes) sink ^= entry->data[0] ^ entry->data[entry->bytes - 1];
        (void)safetensors_find(file, entry->name);
    }
    weight_store *store;
    if (weight_store_from_file(file, &store) != GLIMPSE_STATUS_OK) return 0; /* (frees the file on failure) */
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
    (void)sink;
    weight_store_free(store);
    return 0;
}
