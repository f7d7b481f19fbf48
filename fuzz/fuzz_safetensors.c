/* fuzz_safetensors.c — libFuzzer target: arbitrary bytes as a safetensors
 * file. Parsing must succeed or fail cleanly, and every tensor it accepts
 * must lie inside the bytes (touched here so the sanitizer would see it),
 * also when the weight store hands it out as float32 (widened or realigned)
 * or as a matrix kept in its stored type. */
#include <stddef.h>
#include <stdint.h>

#include "fuzz_store.h"
#include "weights/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    safetensors *file;
    if (safetensors_parse(data, size, "fuzz", &file) != GLIMPSE_STATUS_OK) return 0;
    volatile uint8_t sink = fuzz_store_touch(file);
    (void)sink;
    return 0;
}
