/* fuzz_safetensors.c — libFuzzer target: arbitrary bytes as a safetensors
 * file. Parsing must succeed or fail cleanly, and every tensor it accepts
 * must lie inside the bytes (touched here so the sanitizer would see it). */
#include <stddef.h>
#include <stdint.h>

#include "safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    safetensors *file;
    if (safetensors_parse(data, size, "fuzz", &file) != GLIMPSE_OK) return 0;
    volatile uint8_t sink = 0;
    for (size_t i = 0; i < file->count; i++) {
        const tensor_entry *entry = &file->entries[i];
        if (entry->bytes) sink ^= entry->data[0] ^ entry->data[entry->bytes - 1];
        (void)safetensors_find(file, entry->name);
    }
    (void)sink;
    safetensors_close(file);
    return 0;
}
