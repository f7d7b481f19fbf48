/* bert_tokenizer.h — BERT's WordPiece tokenizer as transformers'
 * BertTokenizer runs it for BLIP: special tokens split out first; control
 * characters dropped, CJK characters set apart, lowercasing with accents
 * stripped, punctuation split; greedy longest-match WordPiece with "##"
 * continuations and [UNK] for words over 100 characters. Decoding as
 * decode(ids, skip_special_tokens=True) with its clean-up of spaces.
 * Reads vocab.txt, added_tokens.json and tokenizer_config.json (the
 * special tokens are BERT's five and the added ones). No model maths here. */
#ifndef GLIMPSE_TEXT_BERT_TOKENIZER_H
#define GLIMPSE_TEXT_BERT_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "glimpse.h"

typedef struct bert_tokenizer bert_tokenizer;

/* The files of a snapshot folder; added_tokens.json and
 * tokenizer_config.json are optional. Caller frees. */
glimpse_status bert_tokenizer_load(const char *folder, bert_tokenizer **out);
/* From contents in memory: vocab.txt (one token per line, id = line number)
 * and optionally added_tokens.json text (NULL for none). lowercase as
 * tokenizer_config.json's do_lower_case. */
glimpse_status bert_tokenizer_create(const char *vocab_text, size_t vocab_size, const char *added_tokens_json,
                                     int lowercase, bert_tokenizer **out);
void bert_tokenizer_free(bert_tokenizer *tokenizer);

/* WordPiece ids of text without any [CLS]/[SEP]: writes at most capacity
 * ids and sets *count to how many the text has (which may be larger). */
glimpse_status bert_tokenizer_encode(const bert_tokenizer *tokenizer, const char *text, int32_t *ids,
                                     size_t capacity, size_t *count);

/* decode(ids, skip_special_tokens=True): a new NUL-terminated string the
 * caller frees. */
glimpse_status bert_tokenizer_decode(const bert_tokenizer *tokenizer, const int32_t *ids, size_t count, char **text);

/* The text of one token, or NULL for an id out of range. */
const char *bert_tokenizer_token(const bert_tokenizer *tokenizer, int32_t id);
/* The id of a token string, or -1. */
int32_t bert_tokenizer_id(const bert_tokenizer *tokenizer, const char *token);
int bert_tokenizer_is_special(const bert_tokenizer *tokenizer, int32_t id);
size_t bert_tokenizer_vocab_size(const bert_tokenizer *tokenizer);

#endif
