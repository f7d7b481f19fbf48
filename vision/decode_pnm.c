/* decode_pnm.c — PBM, PGM and PPM (P1–P6, plain and raw, maxval 1..65535) read as Pillow 9.4's
 * PpmImagePlugin reads them and turned into RGB as its convert("RGB") does, with every size and count
 * checked against the data before a pixel is written. Not PAM (P7); see decode_pnm.h. */
#include "vision/decode_pnm.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

/* Pillow reads at most 10 characters a number, in the header and in plain data alike. */
#define PNM_TOKEN_MAX 10

typedef struct pnm_cursor {
    const uint8_t *bytes;
    size_t size, at;
} pnm_cursor;

static bool pnm_space(uint8_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'; }

bool pnm_signature(const uint8_t *bytes, size_t size) {
    return size >= 3 && bytes[0] == 'P' && bytes[1] >= '1' && bytes[1] <= '6' && pnm_space(bytes[2]);
}

/* Past a comment: '#' to the end of its line, the CR or LF included (as Pillow drops it, so the text on
 * either side of a comment joins into one token). */
static void skip_comment(pnm_cursor *cursor) {
    while (cursor->at < cursor->size && cursor->bytes[cursor->at] != '\n' && cursor->bytes[cursor->at] != '\r')
        cursor->at++;
    if (cursor->at < cursor->size) cursor->at++;
}

/* The next number, as Pillow's _read_token (header) and its plain decoder (data) find one: whitespace
 * before it skipped, comments inside it removed, ended by whitespace (consumed) or the end of the data.
 * 1 with *value, 0 at the end of the data, -1 (message in *why) for a token that is no number. */
static int next_number(pnm_cursor *cursor, uint32_t *value, const char **why) {
    uint64_t number = 0;
    int length = 0;
    while (cursor->at < cursor->size) {
        uint8_t c = cursor->bytes[cursor->at++];
        if (pnm_space(c)) {
            if (length) break;
            continue;
        }
        if (c == '#') {
            skip_comment(cursor);
            continue;
        }
        if (c < '0' || c > '9') {
            *why = "a number holds something other than digits";
            return -1;
        }
        if (++length > PNM_TOKEN_MAX) {
            *why = "a number is longer than 10 digits";
            return -1;
        }
        number = number * 10 + (uint64_t)(c - '0');
    }
    if (!length) return 0;
    *value = number > UINT32_MAX ? UINT32_MAX : (uint32_t)number;
    return 1;
}

typedef struct pnm_header {
    int kind;       /* 1..6: the digit of the magic number */
    uint32_t width, height, maxval;
    int bands;      /* 1 (PBM, PGM) or 3 (PPM) */
    uint8_t *table; /* sample value 0..maxval to its 8-bit RGB value; NULL for PBM */
} pnm_header;

static glimpse_status read_header(pnm_cursor *cursor, const char *label, pnm_header *header) {
    header->kind = cursor->bytes[1] - '0';
    header->bands = header->kind == 3 || header->kind == 6 ? 3 : 1;
    header->maxval = 1;
    cursor->at = 3;
    uint32_t *fields[3] = {&header->width, &header->height, &header->maxval};
    int count = header->kind == 1 || header->kind == 4 ? 2 : 3; /* PBM has no maxval */
    for (int i = 0; i < count; i++) {
        const char *why = NULL;
        int found = next_number(cursor, fields[i], &why);
        if (found < 0) return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: broken PNM header: %s", label, why);
        if (found == 0)
            return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: broken image: the PNM header is truncated", label);
    }
    if (header->maxval < 1 || header->maxval > 65535)
        return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: broken PNM header: maxval %u is not within 1..65535", label,
                         header->maxval);
    return GLIMPSE_STATUS_OK;
}

/* What convert("RGB") makes of each sample value. Pillow scales a sample to 0..255 (round half to
 * even of value / maxval × 255), except that a PGM with maxval over 255 becomes mode I, scaled to
 * 0..65535 the same way, whose conversion to RGB clips at 255 rather than scaling. */
static uint8_t *sample_table(const pnm_header *header) {
    uint8_t *table = malloc((size_t)header->maxval + 1);
    if (!table) return NULL;
    double top = header->bands == 1 && header->maxval > 255 ? 65535.0 : 255.0;
    for (uint32_t value = 0; value <= header->maxval; value++) {
        double scaled = nearbyint((double)value / (double)header->maxval * top);
        table[value] = (uint8_t)(scaled > 255.0 ? 255 : scaled);
    }
    return table;
}

/* P4: rows of bits padded to a byte, 1 black. */
static void read_raw_bits(const uint8_t *data, const pnm_header *header, uint8_t *rgb) {
    size_t row_bytes = ((size_t)header->width + 7) / 8;
    for (size_t y = 0; y < header->height; y++)
        for (size_t x = 0; x < header->width; x++, rgb += 3)
            memset(rgb, (data[y * row_bytes + x / 8] >> (7 - x % 8)) & 1 ? 0 : 255, 3);
}

/* P5, P6: one or two bytes (big-endian) a sample; a raw sample above maxval counts as maxval, as
 * Pillow's decoder caps it. */
static void read_raw_samples(const uint8_t *data, const pnm_header *header, uint8_t *rgb) {
    size_t samples = (size_t)header->width * header->height * (size_t)header->bands;
    int wide = header->maxval > 255;
    for (size_t i = 0; i < samples; i++) {
        uint32_t value = wide ? (uint32_t)data[2 * i] << 8 | data[2 * i + 1] : data[i];
        uint8_t out = header->table[value > header->maxval ? header->maxval : value];
        if (header->bands == 3)
            rgb[i] = out;
        else
            memset(rgb + 3 * i, out, 3);
    }
}

/* P1: every character that is not whitespace or in a comment is one pixel, '1' black, '0' white. */
static glimpse_status read_plain_bits(pnm_cursor *cursor, const char *label, const pnm_header *header,
                                      uint8_t *rgb) {
    size_t pixels = (size_t)header->width * header->height, done = 0;
    while (done < pixels && cursor->at < cursor->size) {
        uint8_t c = cursor->bytes[cursor->at++];
        if (c == '#') {
            skip_comment(cursor);
        } else if (c == '0' || c == '1') {
            memset(rgb + 3 * done++, c == '1' ? 0 : 255, 3);
        } else if (!pnm_space(c)) {
            return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: broken image: a PBM pixel is neither 0 nor 1", label);
        }
    }
    if (done < pixels) return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: broken image: not enough image data", label);
    return GLIMPSE_STATUS_OK;
}

/* P2, P3: decimal samples separated by whitespace, none above maxval. */
static glimpse_status read_plain_samples(pnm_cursor *cursor, const char *label, const pnm_header *header,
                                         uint8_t *rgb) {
    size_t samples = (size_t)header->width * header->height * (size_t)header->bands;
    for (size_t i = 0; i < samples; i++) {
        uint32_t value = 0;
        const char *why = NULL;
        int found = next_number(cursor, &value, &why);
        if (found < 0) return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: broken image: %s", label, why);
        if (found == 0) return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: broken image: not enough image data", label);
        if (value > header->maxval)
            return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: broken image: sample %u is above maxval %u", label, value,
                             header->maxval);
        if (header->bands == 3)
            rgb[i] = header->table[value];
        else
            memset(rgb + 3 * i, header->table[value], 3);
    }
    return GLIMPSE_STATUS_OK;
}

/* The fewest bytes the pixel data can take: raw data exactly, plain data one character a sample
 * (SIZE_MAX when that does not fit in a size_t: no data is that long). */
static size_t least_data(const pnm_header *header) {
    size_t pixels = (size_t)header->width * header->height; /* sides within 2^31: fits */
    if (pixels > SIZE_MAX / 6) return SIZE_MAX;
    if (header->kind == 4) return ((size_t)header->width + 7) / 8 * header->height;
    size_t samples = pixels * (size_t)header->bands;
    if (header->kind <= 3) return samples;
    return samples * (header->maxval > 255 ? 2 : 1);
}

glimpse_status decode_pnm(const uint8_t *bytes, size_t size, const char *label, uint64_t max_pixels,
                          glimpse_image **out, int *orientation) {
    *orientation = ORIENTATION_ABSENT; /* Pillow reads no EXIF from these */
    *out = NULL;
    pnm_cursor cursor = {bytes, size, 0};
    pnm_header header = {0};
    glimpse_status status = read_header(&cursor, label, &header);
    if (!status) status = check_dimensions(label, header.width, header.height, max_pixels);
    if (status) return status;
    if (size - cursor.at < least_data(&header))
        return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: broken image: image file is truncated", label);
    if (header.kind != 1 && header.kind != 4 && !(header.table = sample_table(&header))) return ERROR_OOM();
    glimpse_image *image;
    status = image_allocate((int)header.width, (int)header.height, &image);
    if (status) {
        free(header.table);
        return error_prefix(status, "%s", label);
    }
    switch (header.kind) {
    case 1: status = read_plain_bits(&cursor, label, &header, image->pixels); break;
    case 2:
    case 3: status = read_plain_samples(&cursor, label, &header, image->pixels); break;
    case 4: read_raw_bits(bytes + cursor.at, &header, image->pixels); break;
    default: read_raw_samples(bytes + cursor.at, &header, image->pixels); break;
    }
    free(header.table);
    if (status) {
        glimpse_image_free(image);
        return status;
    }
    *out = image;
    return GLIMPSE_STATUS_OK;
}
