/* utf8.c — UTF-8 with Python's replacement of invalid sequences (Unicode's
 * "maximal subpart" practice, table 3-7 of the standard for the valid ranges). */
#include "text/utf8.h"

#include <stdlib.h>
#include <string.h>

size_t utf8_next(const uint8_t *bytes, size_t length, int32_t *codepoint) {
    uint8_t lead = bytes[0];
    if (lead < 0x80) {
        *codepoint = lead;
        return 1;
    }
    /* continuation bytes needed, the lead's payload, and the range the first
     * continuation must fall in (narrower after E0, ED, F0, F4: no overlong
     * forms, no surrogates, nothing above U+10FFFF) */
    size_t needed;
    int32_t value;
    uint8_t low = 0x80, high = 0xbf;
    if (lead >= 0xc2 && lead <= 0xdf) {
        needed = 1;
        value = lead & 0x1f;
    } else if (lead >= 0xe0 && lead <= 0xef) {
        needed = 2;
        value = lead & 0x0f;
        if (lead == 0xe0) low = 0xa0;
        if (lead == 0xed) high = 0x9f;
    } else if (lead >= 0xf0 && lead <= 0xf4) {
        needed = 3;
        value = lead & 0x07;
        if (lead == 0xf0) low = 0x90;
        if (lead == 0xf4) high = 0x8f;
    } else {
        *codepoint = UTF8_REPLACEMENT; /* 80-C1, F5-FF never start a character */
        return 1;
    }
    size_t used = 1;
    for (; used <= needed; used++) {
        if (used >= length || bytes[used] < low || bytes[used] > high) {
            *codepoint = UTF8_REPLACEMENT; /* the valid prefix so far is one maximal subpart */
            return used;
        }
        value = value << 6 | (bytes[used] & 0x3f);
        low = 0x80;
        high = 0xbf;
    }
    *codepoint = value;
    return used;
}

char *utf8_repair(const uint8_t *bytes, size_t length, size_t *repaired_length) {
    *repaired_length = 0;
    /* first the size: each invalid subpart of 1-3 bytes becomes 3 bytes */
    size_t size = 0;
    for (size_t at = 0, used; at < length; at += used) {
        int32_t codepoint;
        used = utf8_next(bytes + at, length - at, &codepoint);
        size += codepoint == UTF8_REPLACEMENT ? 3 : used;
        if (size > SIZE_MAX - 4) return NULL;
    }
    char *repaired = malloc(size + 1);
    if (!repaired) return NULL;
    char *write = repaired;
    for (size_t at = 0, used; at < length; at += used) {
        int32_t codepoint;
        used = utf8_next(bytes + at, length - at, &codepoint);
        /* an invalid sequence, or U+FFFD itself: the same three bytes */
        const void *source = codepoint == UTF8_REPLACEMENT ? (const void *)"\xef\xbf\xbd" : (const void *)(bytes + at);
        size_t written = codepoint == UTF8_REPLACEMENT ? 3 : used;
        memcpy(write, source, written);
        write += written;
    }
    *write = '\0';
    *repaired_length = size;
    return repaired;
}

bool utf8_is_white_space(int32_t c) {
    return (c >= 0x09 && c <= 0x0d) || c == 0x20 || c == 0x85 || c == 0xa0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}

bool utf8_is_python_space(int32_t c) { return utf8_is_white_space(c) || (c >= 0x1c && c <= 0x1f); }
