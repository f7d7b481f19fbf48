/* zip.h — a read-only ZIP reader over bytes in memory (a mapped file), for
 * the archives torch.save writes: the central directory (ZIP64 where it is
 * there), each entry's local header, stored (uncompressed) entries only.
 * Every offset and length is checked against the size. Writes nothing and
 * never inflates: a compressed or encrypted entry is refused by name. */
#ifndef GLIMPSE_WEIGHTS_ZIP_H
#define GLIMPSE_WEIGHTS_ZIP_H

#include <stddef.h>
#include <stdint.h>

#include "glimpse.h"

typedef struct zip_entry {
    const char *name; /* in the central directory: not NUL-terminated */
    size_t name_length;
    const uint8_t *data; /* the stored bytes, inside the archive */
    size_t size;
    uint32_t crc32; /* as the central directory gives it */
} zip_entry;

typedef struct zip_archive {
    zip_entry *entries; /* in central-directory order */
    size_t count;
} zip_archive;

/* Reads the directory of the archive bytes[0, size) (borrowed: they must
 * outlive the result); label names it in errors. Fails with
 * GLIMPSE_STATUS_BAD_FORMAT naming what is wrong, GLIMPSE_STATUS_UNSUPPORTED
 * for compressed or encrypted entries. Free with zip_free. */
glimpse_status zip_read(const uint8_t *bytes, size_t size, const char *label, zip_archive *out);
void zip_free(zip_archive *archive);

/* The CRC-32 (ZIP's, the same as zlib's) of bytes, for checking an entry. */
uint32_t zip_crc32(const uint8_t *bytes, size_t size);

#endif
