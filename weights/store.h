/* store.h — a model's tensors: one model.safetensors or a sharded set named
 * by model.safetensors.index.json, else the same as PyTorch .bin files
 * (pytorch_model.bin, pytorch_model.bin.index.json; read without running
 * their pickle), looked up by name with the shape checked.
 * Float32 tensors are handed out in place from the mapping. Float16 and
 * bfloat16 weight matrices (weight_store_get_matrix) stay 16-bit, in place,
 * where the AVX-512 kernels run; every other 16-bit tensor (embeddings,
 * norms, biases), and all of them elsewhere, is widened to float32 once, at
 * load. */
#ifndef GLIMPSE_WEIGHTS_STORE_H
#define GLIMPSE_WEIGHTS_STORE_H

#include <stddef.h>

#include "core/kernels.h"
#include "core/pool.h"
#include "weights/safetensors.h"

typedef struct weight_store weight_store;

/* Opens the weights of a snapshot folder. Caller frees with weight_store_free. */
glimpse_status weight_store_open(const char *folder, weight_store **out);
/* Wraps one already-parsed file (tests, fuzzing); the store takes ownership. */
glimpse_status weight_store_from_file(safetensors *file, weight_store **out);
void weight_store_free(weight_store *store);

/* The entry of that name in any shard, or NULL. */
const tensor_entry *weight_store_find(const weight_store *store, const char *name);

/* Looks up the tensor `name` (full, as in the checkpoint: "text_model.final_layer_norm.weight"), checks that it has
 * exactly `rank` dimensions equal to shape[], and sets *out to its float32 data. Errors name the tensor, the file
 * and the shapes. Names of layers and modules are composed with layers_name (weights/layers.h). */
glimpse_status weight_store_get(weight_store *store, const float **out, int rank, const size_t *shape,
                                const char *name);

/* Like weight_store_get, but a missing tensor leaves *out NULL and succeeds. */
glimpse_status weight_store_get_optional(weight_store *store, const float **out, int rank, const size_t *shape,
                                         const char *name);

/* A weight matrix [rows, columns] for the products (kernel_weight): float32
 * as weight_store_get; float16 and bfloat16 kept 16-bit where the AVX-512
 * kernels run, widened at load elsewhere. */
glimpse_status weight_store_get_matrix(weight_store *store, kernel_weight *out, size_t rows, size_t columns,
                                       const char *name);
/* Like weight_store_get_matrix, but a missing tensor leaves out->data NULL and succeeds. */
glimpse_status weight_store_get_matrix_optional(weight_store *store, kernel_weight *out, size_t rows, size_t columns,
                                                const char *name);

/* A weight matrix stored transposed, [columns, rows] (GPT-2's Conv1D keeps
 * [in, out]), handed out as weight_store_get_matrix hands out [rows,
 * columns]: turned once, at load, into a copy the store owns (16-bit kept
 * 16-bit where the AVX-512 kernels run, as weight_store_get_matrix keeps it). */
glimpse_status weight_store_get_matrix_transposed(weight_store *store, kernel_weight *out, size_t rows,
                                                  size_t columns, const char *name);

/* The pool that weight_store_get_matrix_transposed turns its copies on (every core while a model loads: ViT-GPT2's
 * GPT-2 is 500 MB of them), or NULL: the calling thread. The store does not own it. */
void weight_store_set_threads(weight_store *store, pool *threads);

/* Counts of what was handed out so far (for `glimpse info`). */
size_t weight_store_parameters(const weight_store *store);
/* Bytes the store allocated for widened or realigned copies (the rest is the mapped files). */
size_t weight_store_copied_bytes(const weight_store *store);
size_t weight_store_bytes(const weight_store *store);
/* Gives the pages of data[0, bytes) back if they lie in one of the store's file mappings (nothing otherwise:
 * copies stay): the process stops holding them, and a later read maps them again from the file. For weights
 * whose int8 twin replaced them, so that an int8 model does not keep both resident. */
void weight_store_release_pages(const weight_store *store, const void *data, size_t bytes);
/* The same for every tensor whose name starts with prefix: a part of the model that has done its work for now
 * (LLaVA's vision tower while the language model answers) stops counting in the process's resident memory; the
 * pages stay in the page cache, and the part's next run maps them again from it. */
void weight_store_release_prefix(const weight_store *store, const char *prefix);
const char *weight_store_dtype(const weight_store *store); /* "F32", "F16", "BF16", "mixed", "none" */
/* The kind of file weight_store_open read: "safetensors", "PyTorch .bin" ("none" for weight_store_from_file). */
const char *weight_store_format(const weight_store *store);

#endif
