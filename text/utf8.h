/* utf8.h — reading UTF-8 the way both tokenizers take text from a caller:
 * code point by code point, an invalid sequence read as U+FFFD (one byte
 * consumed) rather than refused. Internal to text/. */
#ifndef GLIMPSE_TEXT_UTF8_H
#define GLIMPSE_TEXT_UTF8_H

#include <stddef.h>
#include <utf8proc.h>

#define UTF8_REPLACEMENT_CHARACTER 0xfffd

/* The code point at text[*at] (text holds length bytes, *at < length);
 * moves *at past it. */
static inline utf8proc_int32_t utf8_next(const char *text, size_t length, size_t *at) {
    utf8proc_int32_t c;
    utf8proc_ssize_t used =
        utf8proc_iterate((const utf8proc_uint8_t *)text + *at, (utf8proc_ssize_t)(length - *at), &c);
    if (used <= 0) {
        c = UTF8_REPLACEMENT_CHARACTER;
        used = 1;
    }
    *at += (size_t)used;
    return c;
}

#endif
