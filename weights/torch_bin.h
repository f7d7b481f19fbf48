/* torch_bin.h — PyTorch checkpoints (pytorch_model.bin: torch.save's ZIP
 * of a pickled state dict and one stored entry per storage) read as the
 * same tensor table safetensors files give: each tensor points into its
 * storage's bytes in the mapped file, no copy, aliases sharing one storage.
 * The pickle is interpreted, never executed (torch_pickle.h). PyTorch's
 * legacy pre-1.6 format and non-contiguous tensors are refused. */
#ifndef GLIMPSE_WEIGHTS_TORCH_BIN_H
#define GLIMPSE_WEIGHTS_TORCH_BIN_H

#include <stddef.h>
#include <stdint.h>

#include "weights/safetensors.h"

/* Parses a .bin held in memory (borrowed: it must outlive the result) into
 * the table safetensors_parse makes (entries sorted by name; free with
 * safetensors_close). label names it in errors. */
glimpse_status torch_bin_parse(const uint8_t *bytes, size_t size, const char *label, safetensors **out);

/* Maps and parses a file. */
glimpse_status torch_bin_open(const char *path, safetensors **out);

#endif
