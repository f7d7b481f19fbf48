/* zip.c — the central directory of a ZIP archive and each entry's local
 * header, read in place and checked against the archive's size; stored
 * entries only (torch.save never compresses). No inflating, no writing. */
#include "weights/zip.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"

#define EOCD_SIGNATURE 0x06054b50u
#define EOCD_BYTES 22u
#define ZIP64_LOCATOR_SIGNATURE 0x07064b50u
#define ZIP64_LOCATOR_BYTES 20u
#define ZIP64_EOCD_SIGNATURE 0x06064b50u
#define ZIP64_EOCD_BYTES 56u
#define CENTRAL_SIGNATURE 0x02014b50u
#define CENTRAL_BYTES 46u
#define LOCAL_SIGNATURE 0x04034b50u
#define LOCAL_BYTES 30u
#define ZIP64_EXTRA_ID 0x0001u
#define MAX_COMMENT 0xffffu
#define FLAG_ENCRYPTED 0x0001u
#define FLAG_STRONG_ENCRYPTION 0x0040u

static uint16_t u16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t u32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t u64(const uint8_t *p) { return (uint64_t)u32(p) | (uint64_t)u32(p + 4) << 32; }

/* [offset, offset + length) lies inside [0, size). */
static int fits(uint64_t offset, uint64_t length, size_t size) { return offset <= size && length <= size - offset; }

typedef struct directory {
    uint64_t entries, offset, bytes;
} directory;

/* The end-of-central-directory record (searched back over a comment), and the ZIP64 one it points to when present. */
static glimpse_status find_directory(const uint8_t *bytes, size_t size, const char *label, directory *out) {
    if (size < EOCD_BYTES)
        return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: %zu bytes is too short for a ZIP archive", label, size);
    size_t eocd = size - EOCD_BYTES, lowest = size - EOCD_BYTES > MAX_COMMENT ? size - EOCD_BYTES - MAX_COMMENT : 0;
    while (!(u32(bytes + eocd) == EOCD_SIGNATURE && eocd + EOCD_BYTES + u16(bytes + eocd + 20) == size)) {
        if (eocd == lowest)
            return error_set(GLIMPSE_STATUS_BAD_FORMAT,
                             "%s: no ZIP end-of-central-directory record (not a ZIP archive, or truncated)", label);
        eocd--;
    }
    const uint8_t *record = bytes + eocd;
    if (u16(record + 4) != 0 || u16(record + 6) != 0)
        return error_set(GLIMPSE_STATUS_UNSUPPORTED, "%s: a ZIP archive split over several files is not read", label);
    *out = (directory){u16(record + 10), u32(record + 16), u32(record + 12)};
    if (eocd < ZIP64_LOCATOR_BYTES || u32(bytes + eocd - ZIP64_LOCATOR_BYTES) != ZIP64_LOCATOR_SIGNATURE)
        return GLIMPSE_STATUS_OK;
    uint64_t zip64 = u64(bytes + eocd - ZIP64_LOCATOR_BYTES + 8);
    if (!fits(zip64, ZIP64_EOCD_BYTES, eocd) || u32(bytes + zip64) != ZIP64_EOCD_SIGNATURE)
        return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: the ZIP64 locator points to no ZIP64 directory record "
                         "at offset %llu", label, (unsigned long long)zip64);
    record = bytes + zip64;
    *out = (directory){u64(record + 32), u64(record + 48), u64(record + 40)};
    return GLIMPSE_STATUS_OK;
}

/* Replaces the saturated 32-bit sizes and offset of a central entry by its ZIP64 extra field's values. */
static int zip64_extra(const uint8_t *extra, size_t extra_bytes, uint64_t *uncompressed, uint64_t *compressed,
                       uint64_t *offset) {
    while (extra_bytes >= 4) {
        uint16_t id = u16(extra), length = u16(extra + 2);
        if (length > extra_bytes - 4) return 0;
        if (id == ZIP64_EXTRA_ID) {
            uint64_t *fields[3] = {uncompressed, compressed, offset};
            size_t used = 0;
            for (int i = 0; i < 3; i++) {
                if (*fields[i] != 0xffffffffu) continue;
                if (used + 8 > length) return 0;
                *fields[i] = u64(extra + 4 + used);
                used += 8;
            }
            return 1;
        }
        extra += 4 + (size_t)length;
        extra_bytes -= 4 + (size_t)length;
    }
    return *uncompressed != 0xffffffffu && *compressed != 0xffffffffu && *offset != 0xffffffffu;
}

/* One central-directory entry at *at (advanced past it), and its local header. */
static glimpse_status read_entry(const uint8_t *bytes, size_t size, const char *label, const directory *dir,
                                 uint64_t *at, zip_entry *entry) {
    uint64_t end = dir->offset + dir->bytes;
    if (!fits(*at, CENTRAL_BYTES, (size_t)end) || u32(bytes + *at) != CENTRAL_SIGNATURE)
        return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: ZIP central directory entry at offset %llu is damaged",
                         label, (unsigned long long)*at);
    const uint8_t *central = bytes + *at;
    uint16_t flags = u16(central + 8), method = u16(central + 10);
    uint64_t compressed = u32(central + 20), uncompressed = u32(central + 24), offset = u32(central + 42);
    size_t name_length = u16(central + 28), extra_length = u16(central + 30), comment_length = u16(central + 32);
    uint64_t record = CENTRAL_BYTES + (uint64_t)name_length + extra_length + comment_length;
    if (!fits(*at, record, (size_t)end))
        return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: ZIP central directory entry at offset %llu runs past the "
                         "directory", label, (unsigned long long)*at);
    entry->name = (const char *)central + CENTRAL_BYTES;
    entry->name_length = name_length;
    entry->crc32 = u32(central + 16);
    int name_shown = name_length > 200 ? 200 : (int)name_length;
    if (!zip64_extra(central + CENTRAL_BYTES + name_length, extra_length, &uncompressed, &compressed, &offset))
        return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: ZIP entry '%.*s' lacks its ZIP64 sizes", label, name_shown,
                         entry->name);
    if (flags & (FLAG_ENCRYPTED | FLAG_STRONG_ENCRYPTION))
        return error_set(GLIMPSE_STATUS_UNSUPPORTED, "%s: ZIP entry '%.*s' is encrypted", label, name_shown,
                         entry->name);
    if (method != 0 || compressed != uncompressed)
        return error_set(GLIMPSE_STATUS_UNSUPPORTED, "%s: ZIP entry '%.*s' is compressed (method %u); only stored "
                         "entries are read, as torch.save writes them", label, name_shown, entry->name, method);
    if (!fits(offset, LOCAL_BYTES, size) || u32(bytes + offset) != LOCAL_SIGNATURE)
        return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: ZIP entry '%.*s' has no local header at offset %llu", label,
                         name_shown, entry->name, (unsigned long long)offset);
    const uint8_t *local = bytes + offset;
    uint64_t data = offset + LOCAL_BYTES + u16(local + 26) + u16(local + 28);
    if (u16(local + 26) != name_length || !fits(offset + LOCAL_BYTES, name_length, size) ||
        memcmp(local + LOCAL_BYTES, entry->name, name_length) != 0 || u16(local + 8) != 0)
        return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: ZIP entry '%.*s': its local header disagrees with the "
                         "central directory", label, name_shown, entry->name);
    if (!fits(data, uncompressed, size))
        return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: ZIP entry '%.*s' claims %llu bytes at offset %llu, past the "
                         "end of the %zu-byte file (truncated?)", label, name_shown, entry->name,
                         (unsigned long long)uncompressed, (unsigned long long)data, size);
    entry->data = bytes + data;
    entry->size = (size_t)uncompressed;
    *at += record;
    return GLIMPSE_STATUS_OK;
}

glimpse_status zip_read(const uint8_t *bytes, size_t size, const char *label, zip_archive *out) {
    *out = (zip_archive){0};
    directory dir = {0};
    glimpse_status status = find_directory(bytes, size, label, &dir);
    if (status) return status;
    if (!fits(dir.offset, dir.bytes, size))
        return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: the ZIP central directory (%llu bytes at %llu) lies past "
                         "the end of the %zu-byte file", label, (unsigned long long)dir.bytes,
                         (unsigned long long)dir.offset, size);
    if (dir.entries > dir.bytes / CENTRAL_BYTES)
        return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: the ZIP directory claims %llu entries in %llu bytes", label,
                         (unsigned long long)dir.entries, (unsigned long long)dir.bytes);
    out->entries = calloc(dir.entries ? (size_t)dir.entries : 1, sizeof *out->entries);
    if (!out->entries) return ERROR_OOM();
    uint64_t at = dir.offset;
    for (; out->count < dir.entries; out->count++)
        if ((status = read_entry(bytes, size, label, &dir, &at, &out->entries[out->count]))) {
            zip_free(out);
            return status;
        }
    return GLIMPSE_STATUS_OK;
}

void zip_free(zip_archive *archive) {
    free(archive->entries);
    *archive = (zip_archive){0};
}

uint32_t zip_crc32(const uint8_t *bytes, size_t size) {
    uint32_t crc = 0xffffffffu;
    for (size_t i = 0; i < size; i++) {
        crc ^= bytes[i];
        for (int bit = 0; bit < 8; bit++) crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1u)));
    }
    return ~crc;
}
