/* exif.c — the EXIF Orientation tag read exactly as Pillow 9.4 reads it (its
 * ImageFileDirectory_v2 rules: which types count, first value of many, a
 * truncated entry list keeps what came before), XMP's tiff:Orientation, and
 * the eight transposes of ImageOps.exif_transpose. Every offset and count
 * from the file is checked against the block byte by byte; only the first
 * IFD is read (Pillow reads no other for this), so no IFD chain is followed. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "vision/decoders.h"

#define TAG_ORIENTATION 0x0112

typedef struct ifd_reader {
    const uint8_t *data;
    size_t size;
    int big_endian;
    int bigtiff; /* 8-byte counts and offsets */
} ifd_reader;

/* bytes (1..8) at data[at], in the block's byte order; the caller checked at + bytes <= size. */
static uint64_t read_unsigned(const ifd_reader *reader, size_t at, int bytes) {
    uint64_t value = 0;
    for (int i = 0; i < bytes; i++) {
        int index = reader->big_endian ? i : bytes - 1 - i;
        value = (value << 8) | reader->data[at + (size_t)index];
    }
    return value;
}

/* Bytes per value of each TIFF type Pillow 9.4 loads; 0 for the types it skips. */
static int type_unit_size(unsigned type) {
    switch (type) {
    case 1: case 2: case 6: case 7: return 1; /* BYTE, ASCII, SBYTE, UNDEFINED */
    case 3: case 8: return 2;                 /* SHORT, SSHORT */
    case 4: case 9: case 11: case 13: return 4; /* LONG, SLONG, FLOAT, IFD */
    case 5: case 10: case 12: case 16: return 8; /* RATIONAL, SRATIONAL, DOUBLE, LONG8 */
    default: return 0;
    }
}

static int orientation_from_integer(int64_t value) { return value >= 1 && value <= 8 ? (int)value : 0; }

static int orientation_from_real(double value) {
    for (int k = 1; k <= 8; k++)
        if (value == (double)k) return k;
    return 0;
}

/* The first value of an Orientation entry, matched as Python's dict lookup
 * {2: ..., 8: ...}.get(value) matches it: integers, rationals and floats equal
 * to 1..8 count; BYTE, ASCII and UNDEFINED values are bytes or text and never do. */
static int orientation_value(const ifd_reader *reader, unsigned type, size_t at) {
    switch (type) {
    case 3: case 4: case 13: case 16: return orientation_from_integer((int64_t)read_unsigned(reader, at, type_unit_size(type)));
    case 6: return orientation_from_integer((int8_t)read_unsigned(reader, at, 1));
    case 8: return orientation_from_integer((int16_t)read_unsigned(reader, at, 2));
    case 9: return orientation_from_integer((int32_t)read_unsigned(reader, at, 4));
    case 5: case 10: {
        int64_t numerator, denominator;
        if (type == 5) {
            numerator = (int64_t)read_unsigned(reader, at, 4);
            denominator = (int64_t)read_unsigned(reader, at + 4, 4);
        } else {
            numerator = (int32_t)read_unsigned(reader, at, 4);
            denominator = (int32_t)read_unsigned(reader, at + 4, 4);
        }
        if (denominator == 0 || numerator % denominator != 0) return 0; /* NaN or not whole */
        return orientation_from_integer(numerator / denominator);
    }
    case 11: {
        uint32_t bits = (uint32_t)read_unsigned(reader, at, 4);
        float value;
        memcpy(&value, &bits, sizeof value);
        return orientation_from_real(value);
    }
    case 12: {
        uint64_t bits = read_unsigned(reader, at, 8);
        double value;
        memcpy(&value, &bits, sizeof value);
        return orientation_from_real(value);
    }
    default: return 0;
    }
}

/* Finds tag in the IFD at offset: its type and where its first value is.
 * Pillow stops at the first entry it cannot read whole (keeping the earlier
 * ones), skips entries of unknown type or no data, and lets a later duplicate
 * replace an earlier one; so does this. */
static int ifd_find(const ifd_reader *reader, uint64_t offset, unsigned wanted, unsigned *found_type, size_t *found_at) {
    size_t count_bytes = reader->bigtiff ? 8 : 2, entry_bytes = reader->bigtiff ? 20 : 12;
    size_t inline_bytes = reader->bigtiff ? 8 : 4;
    if (offset > reader->size || reader->size - offset < count_bytes) return 0;
    uint64_t count = read_unsigned(reader, (size_t)offset, (int)count_bytes);
    size_t at = (size_t)offset + count_bytes;
    int found = 0;
    for (uint64_t i = 0; i < count; i++, at += entry_bytes) {
        if (reader->size - at < entry_bytes) break;
        unsigned tag = (unsigned)read_unsigned(reader, at, 2), type = (unsigned)read_unsigned(reader, at + 2, 2);
        uint64_t values = read_unsigned(reader, at + 4, reader->bigtiff ? 8 : 4);
        size_t field = at + 4 + (reader->bigtiff ? 8 : 4);
        int unit = type_unit_size(type);
        if (unit == 0) continue;
        if (values > UINT64_MAX / (uint64_t)unit) break; /* more than any block holds */
        uint64_t bytes = values * (uint64_t)unit;
        size_t data = field;
        if (bytes > inline_bytes) {
            uint64_t where = read_unsigned(reader, field, (int)inline_bytes);
            if (where > reader->size || reader->size - where < bytes) break; /* Pillow: truncated read */
            data = (size_t)where;
        }
        if (bytes == 0 || tag != wanted) continue;
        found = 1;
        *found_type = type;
        *found_at = data;
    }
    return found;
}

static int ifd_orientation(const ifd_reader *reader, uint64_t offset) {
    unsigned type;
    size_t at;
    if (!ifd_find(reader, offset, TAG_ORIENTATION, &type, &at)) return ORIENTATION_ABSENT;
    return orientation_value(reader, type, at);
}

/* Pillow's accepted TIFF prefixes, including its two "invalid but assume" ones. */
static int read_header(ifd_reader *reader, int allow_bigtiff, uint64_t *first_ifd) {
    const uint8_t *d = reader->data;
    if (reader->size < 8) return 0;
    if (d[0] == 'I' && d[1] == 'I') reader->big_endian = 0;
    else if (d[0] == 'M' && d[1] == 'M') reader->big_endian = 1;
    else return 0;
    int classic = (d[2] == 0 && d[3] == 42) || (d[2] == 42 && d[3] == 0);
    if (classic) {
        reader->bigtiff = 0;
        *first_ifd = read_unsigned(reader, 4, 4);
        return 1;
    }
    /* BigTIFF: Pillow reads "II+\0" as one, but its "MM\0+" as a classic
     * header of garbage, so a big-endian BigTIFF's orientation is not read. */
    if (!allow_bigtiff || reader->big_endian || d[2] != 43 || d[3] != 0 || reader->size < 16) return 0;
    reader->bigtiff = 1;
    *first_ifd = read_unsigned(reader, 8, 8);
    return 1;
}

int exif_orientation(const uint8_t *block, size_t size) {
    if (size >= 6 && memcmp(block, "Exif\0\0", 6) == 0) {
        block += 6;
        size -= 6;
    }
    /* Pillow's Exif.load reads an 8-byte header: a BigTIFF one fails there. */
    ifd_reader reader = {block, size, 0, 0};
    uint64_t first_ifd;
    if (!read_header(&reader, 0, &first_ifd)) return ORIENTATION_ABSENT;
    return ifd_orientation(&reader, first_ifd);
}

int tiff_file_orientation(const uint8_t *file, size_t size) {
    ifd_reader reader = {file, size, 0, 0};
    uint64_t first_ifd;
    if (!read_header(&reader, 1, &first_ifd)) return ORIENTATION_ABSENT;
    return ifd_orientation(&reader, first_ifd);
}

int tiff_file_has_tag(const uint8_t *file, size_t size, unsigned tag) {
    ifd_reader reader = {file, size, 0, 0};
    uint64_t first_ifd;
    unsigned type;
    size_t at;
    return read_header(&reader, 1, &first_ifd) && ifd_find(&reader, first_ifd, tag, &type, &at);
}

int xmp_orientation(const uint8_t *text, size_t size) {
    static const char name[] = "tiff:Orientation";
    size_t length = sizeof name - 1;
    for (size_t at = 0; at + length < size; at++) {
        if (memcmp(text + at, name, length) != 0) continue;
        size_t next = at + length;
        if (text[next] == '=' && next + 2 < size && text[next + 1] == '"') next += 2;
        else if (text[next] == '>' && next + 1 < size) next += 1;
        else continue;
        if (text[next] < '0' || text[next] > '9') continue;
        int digit = text[next] - '0';
        return digit >= 1 && digit <= 8 ? digit : 0;
    }
    return ORIENTATION_ABSENT;
}

/* ------------------------------------------------------------ transposes */

glimpse_status image_orient(glimpse_image **image, int orientation) {
    if (orientation < 2 || orientation > 8) return GLIMPSE_STATUS_OK;
    glimpse_image *source = *image;
    size_t width = (size_t)source->width, height = (size_t)source->height;
    uint8_t *pixels = source->pixels;
    if (orientation <= 4) { /* same size: flips and the half turn, in place */
        if (orientation != 4) /* 2 and 3 mirror each row */
            for (size_t y = 0; y < height; y++) {
                uint8_t *row = pixels + y * width * 3;
                for (size_t x = 0; x < width / 2; x++) {
                    uint8_t t[3];
                    memcpy(t, row + 3 * x, 3);
                    memcpy(row + 3 * x, row + 3 * (width - 1 - x), 3);
                    memcpy(row + 3 * (width - 1 - x), t, 3);
                }
            }
        if (orientation != 2) /* 3 and 4 swap the rows top to bottom */
            for (size_t y = 0; y < height / 2; y++) {
                uint8_t *top = pixels + y * width * 3, *bottom = pixels + (height - 1 - y) * width * 3;
                for (size_t i = 0; i < width * 3; i++) {
                    uint8_t t = top[i];
                    top[i] = bottom[i];
                    bottom[i] = t;
                }
            }
        return GLIMPSE_STATUS_OK;
    }
    glimpse_image *turned;
    glimpse_status status = image_allocate((int)height, (int)width, &turned);
    if (status) return status;
    /* target (x, y) of a height-wide, width-tall image takes source (sx, sy) */
    for (size_t y = 0; y < width; y++)
        for (size_t x = 0; x < height; x++) {
            size_t sx, sy;
            switch (orientation) {
            case 5: sx = y; sy = x; break;                           /* TRANSPOSE */
            case 6: sx = y; sy = height - 1 - x; break;              /* ROTATE_270: a quarter turn clockwise */
            case 7: sx = width - 1 - y; sy = height - 1 - x; break;  /* TRANSVERSE */
            default: sx = width - 1 - y; sy = x; break;              /* 8, ROTATE_90: counter-clockwise */
            }
            memcpy(turned->pixels + (y * height + x) * 3, pixels + (sy * width + sx) * 3, 3);
        }
    glimpse_image_free(source);
    *image = turned;
    return GLIMPSE_STATUS_OK;
}
