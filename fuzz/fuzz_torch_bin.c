/* fuzz_torch_bin.c — libFuzzer target: arbitrary bytes as a PyTorch .bin
 * (ZIP + pickle) and, the same bytes, as a bare data.pkl for the pickle
 * interpreter alone (so mutations need not keep a ZIP valid to reach it).
 * Both must succeed or fail cleanly; every tensor accepted must lie inside
 * the bytes (touched here so the sanitizer would see it), also when the
 * weight store widens it to float32 or hands it out as a matrix. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "fuzz_store.h"
#include "weights/torch_bin.h"
#include "weights/torch_pickle.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    volatile uint8_t sink = 0;
    torch_pickle_tensor *tensors;
    size_t count;
    if (torch_pickle_read(data, size, "fuzz", &tensors, &count) == GLIMPSE_STATUS_OK) {
        for (size_t i = 0; i < count; i++)
            sink ^= (uint8_t)(tensors[i].name[0] ^ tensors[i].name[tensors[i].name_length - 1]);
        free(tensors);
    }
    safetensors *file;
    if (torch_bin_parse(data, size, "fuzz", &file) == GLIMPSE_STATUS_OK) sink ^= fuzz_store_touch(file);
    (void)sink;
    return 0;
}
