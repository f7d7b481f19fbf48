/* npy.h — the header of a NumPy .npy file (format versions 1-3), read from
 * bytes already in memory with every length checked: the shard and vector
 * files of glimpse.dask and glimpse.faiss. Reads no data and no pickles. */
#ifndef GLIMPSE_SEARCH_NPY_H
#define GLIMPSE_SEARCH_NPY_H

#include <stddef.h>
#include <stdint.h>

#include "glimpse.h"

/* What a .npy header says: a C-order array of one or two dimensions. */
typedef struct npy_array {
    char descr[8];        /* "<f4", "<u8", ... */
    size_t shape[2];      /* shape[1] is 1 for a one-dimensional array */
    size_t dims;          /* 1 or 2 */
    size_t data_offset;   /* where the data starts in the file */
    size_t element_bytes; /* from descr: 4 for <f4, 8 for <u8 */
} npy_array;

/* Parses the header at the start of bytes[0..size) (a whole file, or at
 * least its header). Refuses (BAD_FORMAT, "LABEL: ...") anything but a
 * little-endian f4/f8/u8/i8 array in C order of one or two dimensions, and a
 * header running past size. With whole set, the data must fill the rest of
 * the file exactly (a truncated or padded file is refused). */
glimpse_status npy_parse(const uint8_t *bytes, size_t size, int whole, const char *label, npy_array *out);

#endif
