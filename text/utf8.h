/* utf8.h — reading UTF-8 text given by a caller, never refusing it:
 * utf8_next / utf8_repair as Python's bytes.decode("utf-8", errors="replace")
 * does (one U+FFFD per maximal invalid subpart: the GPT-2 tokenizer's input and
 * its byte-level tokens), and utf8_next_bytewise, one U+FFFD per invalid byte
 * (what the CLIP and BERT tokenizers have always done with invalid input).
 * No normalisation here. Internal to text/. */
#ifndef GLIMPSE_TEXT_UTF8_H
#define GLIMPSE_TEXT_UTF8_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <utf8proc.h>

#define UTF8_REPLACEMENT 0xfffd

/* Reads the character at bytes[0] of bytes[0..length) (length >= 1): sets
 * *codepoint and returns how many bytes it took (1-4). An invalid sequence
 * reads as U+FFFD and takes its maximal subpart. */
size_t utf8_next(const uint8_t *bytes, size_t length, int32_t *codepoint);

/* The bytes with every invalid sequence replaced by U+FFFD (EF BF BD): a new
 * NUL-terminated string (caller frees) of *repaired_length bytes, which may
 * hold NUL bytes of the input. NULL when out of memory or too long. */
char *utf8_repair(const uint8_t *bytes, size_t length, size_t *repaired_length);

/* Unicode's White_Space property: what \s matches in Python's regex module
 * and in CLIP's and GPT-2's pre-tokenisation patterns. */
bool utf8_is_white_space(int32_t codepoint);
/* Python's str.isspace(): White_Space and the separators U+001C..U+001F. */
bool utf8_is_python_space(int32_t codepoint);

/* The code point at text[*at] (text holds length bytes, *at < length);
 * moves *at past it. An invalid byte reads as U+FFFD and only that byte is consumed. */
static inline utf8proc_int32_t utf8_next_bytewise(const char *text, size_t length, size_t *at) {
    utf8proc_int32_t c;
    utf8proc_ssize_t used =
        utf8proc_iterate((const utf8proc_uint8_t *)text + *at, (utf8proc_ssize_t)(length - *at), &c);
    if (used <= 0) {
        c = UTF8_REPLACEMENT;
        used = 1;
    }
    *at += (size_t)used;
    return c;
}

#endif
