/* safetensors.h — reader for the safetensors format: an 8-byte little-endian
 * header length, a JSON header naming each tensor's dtype, shape and byte
 * range, then the raw data. Every offset and length is checked against the
 * file before use. Knows nothing about what the tensors mean. */
#ifndef GLIMPSE_WEIGHTS_SAFETENSORS_H
#define GLIMPSE_WEIGHTS_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "glimpse.h"

#define TENSOR_MAX_RANK 8

typedef enum tensor_dtype {
    TENSOR_DTYPE_F32 = 0,
    TENSOR_DTYPE_F16,
    TENSOR_DTYPE_BF16,
    TENSOR_DTYPE_OTHER /* integer, boolean, float64, float8: listed, never read as weights */
} tensor_dtype;

typedef struct tensor_entry {
    char *name;
    tensor_dtype dtype;
    char dtype_name[12];
    int rank;
    size_t shape[TENSOR_MAX_RANK];
    size_t elements;
    const uint8_t *data; /* points into the file's bytes */
    size_t bytes;
} tensor_entry;

typedef struct safetensors {
    char *label;          /* path or a caller's name, for messages */
    const uint8_t *bytes; /* the whole file */
    size_t size;
    int owns_mapping;
    tensor_entry *entries; /* sorted by name */
    size_t count;
} safetensors;

/* Parses a safetensors image held in memory (borrowed: it must outlive the
 * result). label names it in error messages. Caller frees with
 * safetensors_close. Fails with GLIMPSE_STATUS_BAD_FORMAT naming what is wrong. */
glimpse_status safetensors_parse(const uint8_t *bytes, size_t size, const char *label, safetensors **out);

/* Maps and parses a file. */
glimpse_status safetensors_open(const char *path, safetensors **out);
/* Maps a file and parses it with parse (safetensors_parse, torch_bin_parse), which takes over the mapping. */
typedef glimpse_status (*tensor_file_parser)(const uint8_t *bytes, size_t size, const char *label, safetensors **out);
glimpse_status tensor_file_open(const char *path, tensor_file_parser parse, safetensors **out);
void safetensors_close(safetensors *file);

/* The entry of that name, or NULL. */
const tensor_entry *safetensors_find(const safetensors *file, const char *name);

/* Room for the longest shape text: "[", TENSOR_MAX_RANK sizes of up to 20 digits with ", " between, "]", NUL. */
#define TENSOR_SHAPE_TEXT_CAPACITY (2 + TENSOR_MAX_RANK * 22)

/* "[48, 3, 16, 16]" into buffer (TENSOR_SHAPE_TEXT_CAPACITY holds any shape); returns buffer. */
char *tensor_shape_string(char *buffer, size_t capacity, const size_t *shape, int rank);

#endif
