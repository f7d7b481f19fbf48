/* siglip_tokenizer.h — SigLIP's tokenizer as transformers 4.37.2's slow
 * SiglipTokenizer runs it under SiglipProcessor(padding="max_length",
 * truncation=True): lower-case, delete ASCII punctuation, collapse whitespace,
 * SentencePiece (text/sentencepiece.h) with the model's own normaliser,
 * truncate, append </s>, pad with </s>. Reads spiece.model. No model maths. */
#ifndef GLIMPSE_TEXT_SIGLIP_TOKENIZER_H
#define GLIMPSE_TEXT_SIGLIP_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "glimpse.h"

/* SiglipProcessor's max_length, and model_max_length in every published
 * SigLIP tokenizer_config.json: the text tower's 64 positions. */
#define SIGLIP_TOKENIZER_DEFAULT_LENGTH 64
/* The longest padded length a tokenizer_config.json may ask for. */
#define SIGLIP_TOKENIZER_LENGTH_LIMIT 4096

typedef struct siglip_tokenizer siglip_tokenizer;

/* Loads folder/spiece.model, and model_max_length from
 * folder/tokenizer_config.json when that file exists and gives one (else
 * SIGLIP_TOKENIZER_DEFAULT_LENGTH). Errors name the file:
 * GLIMPSE_STATUS_BAD_FORMAT for a broken spiece.model or config,
 * GLIMPSE_STATUS_UNSUPPORTED for a vocabulary without </s> or <unk>.
 * Caller frees. */
glimpse_status siglip_tokenizer_load(const char *folder, siglip_tokenizer **out);
/* The same from a spiece.model's bytes in memory, with that padded length
 * (1 ... SIGLIP_TOKENIZER_LENGTH_LIMIT). */
glimpse_status siglip_tokenizer_create(const uint8_t *spiece_model, size_t size, size_t length,
                                       siglip_tokenizer **out);
void siglip_tokenizer_free(siglip_tokenizer *tokenizer);

/* The number of ids every encoding has (64 for the published models). */
size_t siglip_tokenizer_length(const siglip_tokenizer *tokenizer);
/* The number of pieces in the vocabulary (every id is below it). */
size_t siglip_tokenizer_vocab_size(const siglip_tokenizer *tokenizer);
/* </s> (end of text and padding) and <unk>. */
int32_t siglip_tokenizer_end_id(const siglip_tokenizer *tokenizer);
int32_t siglip_tokenizer_unknown_id(const siglip_tokenizer *tokenizer);

/* Encodes UTF-8 text into exactly siglip_tokenizer_length() ids: the text's
 * ids truncated to length - 1, then </s> (unless the kept ids already end
 * with a literal "</s>" from the text), then </s> as padding. *unpadded_count
 * receives the number before the padding (>= 1). The text is a Python str in
 * the reference, so it cannot hold invalid UTF-8; here each byte that does not
 * start a valid sequence becomes U+FFFD, as in text/clip_tokenizer.c.
 * GLIMPSE_STATUS_INVALID_ARGUMENT if capacity (the size of ids) is too small.
 * A loaded tokenizer is read-only: many threads may encode with it. */
glimpse_status siglip_tokenizer_encode(const siglip_tokenizer *tokenizer, const char *text, int32_t *ids,
                                       size_t capacity, size_t *unpadded_count);

/* Python's chr(codepoint).lower() — the full lower-case mapping of one code
 * point, as transformers applies it (one character at a time, so never the
 * final-sigma rule): writes 1 or 2 code points to lower, returns how many. */
int siglip_lowercase(int32_t codepoint, int32_t lower[2]);

#endif
