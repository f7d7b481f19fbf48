/* attention_record.h — an opt-in recording of attention probabilities: the
 * caller says which layers of which kind (self, cross) to keep and owns the
 * memory they go to; the forward passes (vit_forward through
 * vit_state.record, bert_decode_step and bert_encode through
 * bert_state.record) have the attention kernels copy those layers' softmax
 * rows there. A NULL record costs one pointer test per attention call. */
#ifndef GLIMPSE_CORE_ATTENTION_RECORD_H
#define GLIMPSE_CORE_ATTENTION_RECORD_H

#include <stddef.h>
#include <stdint.h>

#include "core/kernels.h"

typedef enum attention_kind {
    ATTENTION_KIND_SELF = 0, /* queries and keys from the same sequence */
    ATTENTION_KIND_CROSS = 1 /* text queries over image keys */
} attention_kind;
#define ATTENTION_KINDS 2
#define ATTENTION_RECORD_MAX_LAYERS 64 /* bits of a layers mask */

typedef struct attention_record {
    /* What to record: bit l of layers[kind] keeps layer l of that kind (0: none of it). */
    uint64_t layers[ATTENTION_KINDS];
    /* Room: sequences (a vision batch's images, a decoder step's sequences), heads, rows (query positions:
     * tokens, a caption's whole length) and columns per kind (keys: self, image tokens). */
    size_t sequences, heads, rows, columns[ATTENTION_KINDS];
    /* Where, caller-owned, attention_record_floats(record, kind) floats each:
     * [recorded layer (in layer order)][sequence][head][row][column]. Row t is the query at position t; a row
     * holds its keys' probabilities then zeros up to columns[kind]. Rows no forward reached are left as they were. */
    float *probabilities[ATTENTION_KINDS];
} attention_record;

/* Floats probabilities[kind] must hold. */
size_t attention_record_floats(const attention_record *record, attention_kind kind);

/* Where the attention of `kind` in layer `layer` of sequence `sequence` goes, for `heads` heads, queries at
 * positions first_row .. first_row+queries-1 over `keys` keys: filled into *place and returned, or NULL when it
 * is not recorded (the layer or kind is not asked for) or does not fit the room. */
const kernel_attention_rows *attention_record_find(const attention_record *record, attention_kind kind, size_t layer,
                                                   size_t sequence, size_t heads, size_t first_row, size_t queries,
                                                   size_t keys, kernel_attention_rows *place);

/* The same, NULL at once without a record: what every forward pass calls. */
static inline const kernel_attention_rows *attention_record_rows(const attention_record *record, attention_kind kind,
                                                                 size_t layer, size_t sequence, size_t heads,
                                                                 size_t first_row, size_t queries, size_t keys,
                                                                 kernel_attention_rows *place) {
    if (!record) return NULL;
    return attention_record_find(record, kind, layer, sequence, heads, first_row, queries, keys, place);
}

/* Whether a pass of `sequences` sequences over query positions up to rows_end, with self keys up to self_keys
 * and cross keys up to cross_keys (0: no cross-attention), fits the room of the kinds asked for. */
int attention_record_fits(const attention_record *record, size_t sequences, size_t heads, size_t rows_end,
                          size_t self_keys, size_t cross_keys);

#endif
