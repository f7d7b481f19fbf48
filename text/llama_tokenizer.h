/* llama_tokenizer.h — Llama's tokenizer as transformers 4.40's slow LlamaTokenizer runs it (LLaVA-1.5's): the
 * added tokens written in the text split out first (leftmost, longest), and with `legacy: false` "▁" read as a
 * space, one "▁" put before the text, SentencePiece (text/sentencepiece.h, the dummy prefix off) on each
 * stretch — a stretch that begins with a space encoded behind "<unk>" whose pieces are dropped, so it keeps its
 * "▁" — a lone leading "▁" dropped before a special token, and <s> in front. Byte-fallback pieces <0xNN> for
 * what the vocabulary lacks. `legacy: true` encodes each stretch with the model's own dummy prefix. Decoding
 * skips the special tokens, drops the first piece's "▁" and lets SentencePiece join the rest. Reads
 * tokenizer.model, tokenizer_config.json, special_tokens_map.json and added_tokens.json. */
#ifndef GLIMPSE_TEXT_LLAMA_TOKENIZER_H
#define GLIMPSE_TEXT_LLAMA_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "glimpse.h"

typedef struct llama_tokenizer llama_tokenizer;

glimpse_status llama_tokenizer_load(const char *folder, llama_tokenizer **out);
void llama_tokenizer_free(llama_tokenizer *tokenizer);

/* tokenizer(text)'s input_ids (with <s> when add_special_tokens and the config adds it) into a new array. */
glimpse_status llama_tokenizer_encode(const llama_tokenizer *tokenizer, const char *text, bool add_special_tokens,
                                      int32_t **ids, size_t *count);
/* decode(ids, skip_special_tokens) into a new string. An id outside the vocabulary and the added tokens is
 * GLIMPSE_STATUS_INVALID_ARGUMENT. */
glimpse_status llama_tokenizer_decode(const llama_tokenizer *tokenizer, const int32_t *ids, size_t count,
                                      bool skip_special_tokens, char **text);
/* The id of an added or special token's text (-1 for none): "<image>", "</s>". */
int32_t llama_tokenizer_token_id(const llama_tokenizer *tokenizer, const char *content);
/* Pieces of the SentencePiece vocabulary plus added tokens past it: every id is below this. */
size_t llama_tokenizer_vocab_size(const llama_tokenizer *tokenizer);

#endif
