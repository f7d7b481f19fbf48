/* bpe.h — what byte-level BPE tokenizers (GPT-2, OPT, CLIP) share: the
 * printable character standing in for each byte, merges.txt read into ranks,
 * and the merging of one word's symbols by rank. No pre-tokenisation, no
 * vocabulary, no special tokens: those differ between the families. */
#ifndef GLIMPSE_TEXT_BPE_H
#define GLIMPSE_TEXT_BPE_H

#include <stddef.h>
#include <stdint.h>

#include "core/strmap.h"
#include "glimpse.h"

/* Stand-ins are U+0021..U+007E, U+00A1..U+00AC, U+00AE..U+00FF for the bytes
 * of the same value, and U+0100.. (68 of them) for the other bytes in order. */
#define BPE_STAND_IN_LIMIT 324

/* GPT-2's bytes_to_unicode, both ways. */
typedef struct bpe_alphabet {
    char stand_in[256][3];                /* UTF-8 of each byte's stand-in, NUL-padded */
    uint8_t stand_in_length[256];         /* 1 or 2 bytes */
    int16_t byte_of[BPE_STAND_IN_LIMIT];  /* stand-in code point -> byte, -1 for others */
} bpe_alphabet;

void bpe_alphabet_init(bpe_alphabet *alphabet);

/* The byte a code point stands for, or -1 if it stands for none. */
int bpe_alphabet_byte(const bpe_alphabet *alphabet, int32_t codepoint);

/* Reads merges.txt: an optional first line starting "#version", then one
 * merge a line, "left right" (fields split by spaces or tabs, a "\r" before
 * the "\n" and a last line without "\n" accepted, blank lines skipped).
 * *ranks maps "left right" (one space) to the merge's rank, counted from 0
 * in file order; a merge listed twice keeps its later rank, as a Python dict
 * built from the list does. A line without exactly two fields is
 * GLIMPSE_STATUS_BAD_FORMAT. Caller frees *ranks with strmap_free. */
glimpse_status bpe_ranks_parse(const char *text, size_t size, strmap **ranks);

/* Merges one word as BPE's reference implementation (and transformers'
 * GPT2Tokenizer.bpe) does: while a neighbouring pair of symbols has a rank,
 * every occurrence of the lowest-ranked pair, left to right and not
 * overlapping, becomes one symbol; pairs formed by those merges count from
 * the next round. The symbols are consecutive spans of text[0..length): on
 * entry starts[0..*count) gives where each begins (starts[0] = 0, strictly
 * increasing, below length; a symbol ends where the next begins); on return
 * starts[0..*count) are those of the merged symbols. Rank lookups join two
 * symbols with one space, so no symbol may contain a space. O(n log n) in the
 * symbols. Fails only when out of memory or with more than 2^31 symbols. */
glimpse_status bpe_merge(const strmap *ranks, const char *text, size_t length, size_t *starts, size_t *count);

#endif
