/* gpt2_tokenizer.h — GPT-2's byte-level BPE tokenizer as transformers'
 * GPT2Tokenizer (the slow one, 4.27) runs it, for GPT-2 and OPT: special
 * tokens written in the text split out first, then GPT-2's pre-tokenisation
 * pattern, bytes mapped to printable stand-ins ("Ġ" for a space), merges by
 * rank, no lowercasing, no "</w>"; and decode(ids, skip_special_tokens) with
 * UTF-8 errors replaced and the clean-up of spaces. Reads vocab.json,
 * merges.txt, tokenizer_config.json and special_tokens_map.json. No model
 * maths here; added_tokens.json is not read. */
#ifndef GLIMPSE_TEXT_GPT2_TOKENIZER_H
#define GLIMPSE_TEXT_GPT2_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "glimpse.h"

typedef struct gpt2_tokenizer gpt2_tokenizer;

#define GPT2_TOKENIZER_MAX_ADDITIONAL 64

/* The family's special tokens and flags, as tokenizer_config.json and
 * special_tokens_map.json give them. A token is NULL where there is none;
 * every token given must be in vocab.json (tokens added beyond the vocabulary
 * are GLIMPSE_STATUS_UNSUPPORTED). A special token written in the text
 * becomes its id; strip_left / strip_right (AddedToken's lstrip / rstrip,
 * which transformers sets for tokens given as plain strings in
 * special_tokens_map.json) remove the whitespace before / after it. */
typedef struct gpt2_special_token {
    const char *content;
    int strip_left, strip_right;
} gpt2_special_token;

typedef struct gpt2_tokenizer_options {
    gpt2_special_token bos, eos, unk, sep, pad, cls, mask;
    gpt2_special_token additional[GPT2_TOKENIZER_MAX_ADDITIONAL];
    size_t additional_count;
    int add_bos_token;    /* encoding with special tokens prepends bos (OPT) */
    int add_prefix_space; /* a space is put before the text (off for both families) */
    int qwen2;            /* Qwen2Tokenizer: NFC first, and Qwen2's pre-tokenisation pattern (single digits, a
                             letter run takes one symbol before it, newlines on their own) */
} gpt2_tokenizer_options;

/* GPT2Tokenizer's defaults: "<|endoftext|>" as bos, eos and unk, no pad,
 * add_bos_token and add_prefix_space off. */
gpt2_tokenizer_options gpt2_tokenizer_default_options(void);

/* The loaders also read the added tokens of tokenizer_config.json's added_tokens_decoder and of added_tokens.json
 * (ids past vocab.json's extend it; decode skips only the named and additional special tokens), before the
 * named special tokens, which may be among them (Qwen2's <|endoftext|>); tokenizer_class "Qwen2Tokenizer" sets
 * options.qwen2. */
/* Loads folder/vocab.json and folder/merges.txt with the options of
 * folder/tokenizer_config.json, overridden by folder/special_tokens_map.json
 * (each optional; the defaults above where absent). Caller frees. */
glimpse_status gpt2_tokenizer_load(const char *folder, gpt2_tokenizer **out);
/* The same over a family's own defaults (BART's "<s>", "</s>", "<unk>", "<pad>", "<mask>") instead of GPT-2's.
 * Without merges.txt the merges are tokenizer.json's (model.merges). */
glimpse_status gpt2_tokenizer_load_with(const char *folder, const gpt2_tokenizer_options *defaults,
                                        gpt2_tokenizer **out);
/* The same from the files' contents in memory (tests, fuzzing); the options
 * are copied. options NULL = the defaults. */
glimpse_status gpt2_tokenizer_create(const char *vocab_json, size_t vocab_size, const char *merges_text,
                                     size_t merges_size, const gpt2_tokenizer_options *options,
                                     gpt2_tokenizer **out);
void gpt2_tokenizer_free(gpt2_tokenizer *tokenizer);

/* Tokens added beyond the vocabulary (Florence-2's processor adds 1,024 from id 50265): contents[i] becomes id
 * first_id + i (first_id at or past the vocabulary's ids), split out of a text before the pattern as special
 * tokens are (no whitespace stripped) and decoded as its own text; special for skip_special_tokens. */
glimpse_status gpt2_tokenizer_add_tokens(gpt2_tokenizer *tokenizer, const char *const *contents, size_t count,
                                         int32_t first_id);

/* Encodes UTF-8 text (invalid sequences read as U+FFFD, as Python decodes
 * bytes with errors="replace") as encode(text, add_special_tokens=...) does:
 * with add_special_tokens the family's start token comes first where it adds
 * one (OPT's "</s>"; GPT-2 adds none). Writes at most capacity ids and sets
 * *count to the full number; GLIMPSE_STATUS_TOO_LARGE if they did not fit. */
glimpse_status gpt2_tokenizer_encode(const gpt2_tokenizer *tokenizer, const char *text, int add_special_tokens,
                                     int32_t *ids, size_t capacity, size_t *count);

/* decode(ids, skip_special_tokens, clean_up_tokenization_spaces): the tokens'
 * bytes joined and read as UTF-8 with errors replaced (a character whose
 * bytes are split over tokens comes out whole), then, with clean_up_spaces,
 * " ." -> "." and the rest of transformers' list. *text is a new
 * NUL-terminated string (caller frees); *length (may be NULL) its length,
 * which counts any NUL the ids decode to. An id not in vocab.json is
 * GLIMPSE_STATUS_INVALID_ARGUMENT. */
glimpse_status gpt2_tokenizer_decode(const gpt2_tokenizer *tokenizer, const int32_t *ids, size_t count,
                                     int skip_special_tokens, int clean_up_spaces, char **text, size_t *length);

/* The raw bytes one token stands for (not UTF-8 on its own when it holds part
 * of a character), for streaming; owned by the tokenizer. NULL for an id not
 * in vocab.json or holding characters outside the byte alphabet. */
const uint8_t *gpt2_tokenizer_token_bytes(const gpt2_tokenizer *tokenizer, int32_t id, size_t *length);

/* Ids of the special tokens, -1 where the tokenizer has none; the pad id is
 * the end token's when no pad token is named (GPT-2 pads with it). */
int32_t gpt2_tokenizer_bos_id(const gpt2_tokenizer *tokenizer);
int32_t gpt2_tokenizer_eos_id(const gpt2_tokenizer *tokenizer);
int32_t gpt2_tokenizer_unk_id(const gpt2_tokenizer *tokenizer);
int32_t gpt2_tokenizer_pad_id(const gpt2_tokenizer *tokenizer);
/* 1 if id is one of the special tokens decode skips. */
int gpt2_tokenizer_is_special(const gpt2_tokenizer *tokenizer, int32_t id);
/* 1 if encoding with special tokens prepends the start token. */
int gpt2_tokenizer_adds_bos(const gpt2_tokenizer *tokenizer);
/* Entries in vocab.json (transformers' vocab_size; the model's embedding
 * table may have more rows, as OPT's). */
size_t gpt2_tokenizer_vocab_size(const gpt2_tokenizer *tokenizer);

/* GPT-2's pre-tokenisation: the end of the piece of text[0..length) that
 * starts at `at` (< length, on a character boundary) under the pattern
 * 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * with Unicode's categories and White_Space (invalid UTF-8 reads as U+FFFD). */
size_t gpt2_pretokenize_next(const char *text, size_t length, size_t at);
/* The same with Qwen2's pattern: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|
 * ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+ */
size_t qwen2_pretokenize_next(const char *text, size_t length, size_t at);

#endif
