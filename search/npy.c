/* npy.c — a strict reader of .npy headers (see npy.h): the magic, the
 * version's header length, and the dict NumPy writes, {'descr': '<f4',
 * 'fortran_order': False, 'shape': (N, D), }; nothing else is accepted. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "search/npy.h"

static glimpse_status refuse(const char *label, const char *what) {
    return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: not a NumPy array file glimpse reads (%s)", label, what);
}

/* The text after key's colon in header[0..length), or NULL. */
static const char *value_of(const char *header, size_t length, const char *key) {
    size_t key_length = strlen(key);
    for (size_t i = 0; i + key_length <= length; i++) {
        if (memcmp(header + i, key, key_length) != 0) continue;
        const char *c = header + i + key_length, *end = header + length;
        while (c < end && *c == ' ') c++;
        if (c >= end || *c != ':') return NULL;
        for (c++; c < end && *c == ' '; c++) {
        }
        return c < end ? c : NULL;
    }
    return NULL;
}

/* Reads a decimal size at *c (below end), advancing past it; 0 on failure or overflow. */
static int read_size(const char **c, const char *end, size_t *out) {
    size_t value = 0;
    const char *start = *c;
    while (*c < end && isdigit((unsigned char)**c)) {
        size_t digit = (size_t)(**c - '0');
        if (value > (SIZE_MAX - digit) / 10) return 0;
        value = value * 10 + digit;
        (*c)++;
    }
    *out = value;
    return *c > start;
}

glimpse_status npy_parse(const uint8_t *bytes, size_t size, int whole, const char *label, npy_array *out) {
    memset(out, 0, sizeof *out);
    if (size < 10 || memcmp(bytes, "\x93NUMPY", 6) != 0) return refuse(label, "no .npy magic");
    unsigned major = bytes[6];
    size_t header_length, start;
    if (major == 1) {
        header_length = (size_t)bytes[8] | (size_t)bytes[9] << 8, start = 10;
    } else if (major == 2 || major == 3) {
        if (size < 12) return refuse(label, "truncated header");
        header_length = (size_t)bytes[8] | (size_t)bytes[9] << 8 | (size_t)bytes[10] << 16 | (size_t)bytes[11] << 24;
        start = 12;
    } else {
        return refuse(label, "unknown format version");
    }
    if (header_length > size - start) return refuse(label, "its header runs past the end of the file");
    const char *header = (const char *)bytes + start, *end = header + header_length;
    const char *descr = value_of(header, header_length, "'descr'");
    const char *fortran = value_of(header, header_length, "'fortran_order'");
    const char *shape = value_of(header, header_length, "'shape'");
    if (!descr || !fortran || !shape) return refuse(label, "its header lacks descr, fortran_order or shape");
    if (end - fortran < 5 || memcmp(fortran, "False", 5) != 0) return refuse(label, "Fortran order");
    static const struct {
        const char *text;
        size_t bytes;
    } types[] = {{"'<f4'", 4}, {"'<f8'", 8}, {"'<u8'", 8}, {"'<i8'", 8}};
    for (size_t t = 0; t < sizeof types / sizeof *types; t++)
        if ((size_t)(end - descr) >= strlen(types[t].text) && memcmp(descr, types[t].text, strlen(types[t].text)) == 0) {
            snprintf(out->descr, sizeof out->descr, "%.3s", types[t].text + 1);
            out->element_bytes = types[t].bytes;
        }
    if (!out->element_bytes) return refuse(label, "elements other than little-endian float32, float64, uint64 or int64");
    const char *c = shape;
    if (c >= end || *c++ != '(') return refuse(label, "a shape that is not a tuple");
    while (out->dims < 3) {
        while (c < end && *c == ' ') c++;
        if (c < end && *c == ')') break;
        size_t extent;
        if (out->dims == 2 || !read_size(&c, end, &extent)) return refuse(label, "a shape of more than two numbers");
        out->shape[out->dims++] = extent;
        while (c < end && *c == ' ') c++;
        if (c < end && *c == ',') c++;
    }
    if (c >= end || *c != ')' || out->dims == 0) return refuse(label, "a shape of no dimensions");
    if (out->dims == 1) out->shape[1] = 1;
    out->data_offset = start + header_length;
    size_t elements = out->shape[0], data_bytes;
    if (out->shape[1] && elements > SIZE_MAX / out->shape[1]) return refuse(label, "a shape too large");
    elements *= out->shape[1];
    if (elements > SIZE_MAX / out->element_bytes) return refuse(label, "a shape too large");
    data_bytes = elements * out->element_bytes;
    if (whole && data_bytes != size - out->data_offset) {
        char what[160];
        snprintf(what, sizeof what, "its shape needs %zu bytes of data and the file has %zu: truncated or damaged",
                 data_bytes, size - out->data_offset);
        return refuse(label, what);
    }
    return GLIMPSE_STATUS_OK;
}
