/* torch_pickle.h — reads the pickle torch.save writes for a state dict
 * (data.pkl inside a PyTorch .bin) without running anything: an interpreter
 * for exactly the opcodes and the few globals such a pickle uses (ordered
 * dicts, tensors rebuilt from storages, the storage types). Any other opcode
 * or global, and any misuse of an allowed one, is refused with its name and
 * offset. Knows nothing of the ZIP around it (torch_bin.h). */
#ifndef GLIMPSE_WEIGHTS_TORCH_PICKLE_H
#define GLIMPSE_WEIGHTS_TORCH_PICKLE_H

#include <stddef.h>
#include <stdint.h>

#include "weights/safetensors.h"

/* One entry of the state dict: the tensor `name` views `storage key`
 * (ARCHIVE/data/KEY in the archive) from element `offset` with `shape` and
 * `stride` (in elements). Strings point into the pickle's bytes. */
typedef struct torch_pickle_tensor {
    const char *name;
    size_t name_length;
    tensor_dtype dtype;
    const char *dtype_name; /* safetensors' names: "F32", "F16", "BF16", "I64", ... */
    size_t element_size;
    const char *key;
    size_t key_length;
    uint64_t storage_elements; /* as the persistent id declares it */
    uint64_t offset;
    int rank;
    uint64_t shape[TENSOR_MAX_RANK];
    uint64_t stride[TENSOR_MAX_RANK];
} torch_pickle_tensor;

/* Interprets pickle[0, size) (borrowed: the names point into it); the result
 * must be a dict or OrderedDict of names to tensors. label names the file in
 * errors. Sets *tensors (caller frees) and *count in the pickle's order.
 * Fails with GLIMPSE_STATUS_BAD_FORMAT naming the opcode or global and its
 * offset; nothing in the pickle is ever executed. */
glimpse_status torch_pickle_read(const uint8_t *pickle, size_t size, const char *label, torch_pickle_tensor **tensors,
                                 size_t *count);

#endif
