/* sentencepiece.h — a C door to Debian's libsentencepiece (C++): load a
 * serialized SentencePiece model (a spiece.model file's bytes), split text
 * into pieces, look pieces up. Nothing model-family specific lives here;
 * no C++ exception crosses this interface (each becomes a glimpse_status). */
#ifndef GLIMPSE_TEXT_SENTENCEPIECE_H
#define GLIMPSE_TEXT_SENTENCEPIECE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "glimpse.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sentencepiece_model sentencepiece_model;

/* The pieces of one encoded text, in order. Piece i is the NUL-terminated
 * string text + starts[i] of lengths[i] bytes (a known piece as the
 * vocabulary spells it, "▁" marking a space; an unknown run as its normalised
 * surface text), and ids[i] is what the vocabulary says for that string
 * (SentencePiece's PieceToId: the unknown id for a string it does not hold).
 * Owned by the caller: sentencepiece_pieces_free. */
typedef struct sentencepiece_pieces {
    char *text;
    size_t *starts, *lengths;
    int32_t *ids;
    size_t count;
} sentencepiece_pieces;

/* Parses a serialized model. With without_dummy_prefix the normaliser's
 * add_dummy_prefix is switched off and the rest of its spec (precompiled
 * charsmap, whitespace handling) kept as saved, as transformers' T5 and
 * SigLIP tokenizers load it. The model's self-test samples, if any, are not
 * run (SentencePiece reports their failures only on stderr). Logs nothing.
 * GLIMPSE_STATUS_BAD_FORMAT when the bytes are not a model SentencePiece
 * accepts. Caller frees. */
glimpse_status sentencepiece_model_create(const uint8_t *bytes, size_t size, bool without_dummy_prefix,
                                          sentencepiece_model **out);
void sentencepiece_model_free(sentencepiece_model *model);

/* Encodes length bytes of valid UTF-8 (the model's normaliser, then its
 * segmentation: Viterbi for a unigram model) into *pieces. The model is
 * read-only here: many threads may encode with one model. */
glimpse_status sentencepiece_encode(const sentencepiece_model *model, const char *text, size_t length,
                                    sentencepiece_pieces *pieces);
void sentencepiece_pieces_free(sentencepiece_pieces *pieces);

/* The id of a piece string (the unknown id if the vocabulary lacks it). */
int32_t sentencepiece_piece_id(const sentencepiece_model *model, const char *piece);
/* The vocabulary's size. */
size_t sentencepiece_piece_count(const sentencepiece_model *model);
/* The piece of an id ("" outside the vocabulary), owned by the model. */
const char *sentencepiece_id_piece(const sentencepiece_model *model, int32_t id);
/* SentencePiece's decoding of pieces[0..count) (byte pieces joined into UTF-8, invalid sequences as U+FFFD,
 * "▁" as spaces, control pieces as nothing) into a new string (caller frees). */
glimpse_status sentencepiece_decode_pieces(const sentencepiece_model *model, const char *const *pieces,
                                           size_t count, char **out);

#ifdef __cplusplus
}
#endif

#endif
