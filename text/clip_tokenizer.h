/* clip_tokenizer.h — CLIP's byte-level BPE tokenizer as transformers'
 * CLIPTokenizerFast runs it: NFC, whitespace runs to one space, lowercase;
 * split into contractions, letter runs, single digits and runs of other
 * symbols; bytes mapped to printable characters; merges applied by rank with
 * "</w>" marking a word's end; start and end tokens; truncation keeping the
 * end token. Reads vocab.json and merges.txt. No model maths here. */
#ifndef GLIMPSE_TEXT_CLIP_TOKENIZER_H
#define GLIMPSE_TEXT_CLIP_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "glimpse.h"

typedef struct clip_tokenizer clip_tokenizer;

/* Loads folder/vocab.json and folder/merges.txt. Caller frees. */
glimpse_status clip_tokenizer_load(const char *folder, clip_tokenizer **out);
/* The same from the files' contents in memory (tests, fuzzing). */
glimpse_status clip_tokenizer_create(const char *vocab_json, size_t vocab_size, const char *merges_text,
                                     size_t merges_size, clip_tokenizer **out);
void clip_tokenizer_free(clip_tokenizer *tokenizer);

/* Encodes UTF-8 text (invalid bytes become U+FFFD) to at most max_length ids
 * (>= 2) including the start and end tokens: ids receives them, *count their
 * number. */
glimpse_status clip_tokenizer_encode(const clip_tokenizer *tokenizer, const char *text, size_t max_length,
                                     int32_t *ids, size_t *count);

size_t clip_tokenizer_vocab_size(const clip_tokenizer *tokenizer);

#endif
