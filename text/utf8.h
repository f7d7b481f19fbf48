/* utf8.h — reading UTF-8 as Python's bytes.decode("utf-8", errors="replace")
 * does: each invalid sequence becomes one U+FFFD per maximal subpart (the
 * longest prefix of a valid sequence, or one byte). Used by the tokenizers for
 * their input and for decoding byte-level tokens. No normalisation here. */
#ifndef GLIMPSE_TEXT_UTF8_H
#define GLIMPSE_TEXT_UTF8_H

#include <stddef.h>
#include <stdint.h>

#define UTF8_REPLACEMENT 0xfffd

/* Reads the character at bytes[0] of bytes[0..length) (length >= 1): sets
 * *codepoint and returns how many bytes it took (1-4). An invalid sequence
 * reads as U+FFFD and takes its maximal subpart. */
size_t utf8_next(const uint8_t *bytes, size_t length, int32_t *codepoint);

/* The bytes with every invalid sequence replaced by U+FFFD (EF BF BD): a new
 * NUL-terminated string (caller frees) of *repaired_length bytes, which may
 * hold NUL bytes of the input. NULL when out of memory or too long. */
char *utf8_repair(const uint8_t *bytes, size_t length, size_t *repaired_length);

#endif
