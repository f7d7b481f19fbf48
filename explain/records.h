/* records.h — attention records (core/attention_record.h) whose memory is on the heap: one sequence's record made
 * with its memory zeroed, and released. The explanation calls (api/explain.c) and the families' recorded passes
 * (family_explainer.record) make theirs here; what the probabilities mean is maps.h's. */
#ifndef GLIMPSE_EXPLAIN_RECORDS_H
#define GLIMPSE_EXPLAIN_RECORDS_H

#include <stddef.h>
#include <stdint.h>

#include "core/attention_record.h"
#include "glimpse.h"

/* A layers mask of layers 0 .. layers - 1. */
uint64_t explain_all_layers(size_t layers);

/* *r = a record of one sequence: layers of each kind as masks, `rows` query positions, self keys up to
 * self_columns and cross keys up to cross_columns, its memory zeroed (none for a kind without layers). On
 * failure (out of memory) what was made stays in *r for explain_record_release. */
glimpse_status explain_record_make(attention_record *r, uint64_t self_layers, uint64_t cross_layers, size_t heads,
                                   size_t rows, size_t self_columns, size_t cross_columns);
/* Frees the record's memory (NULL pointers are left alone) and empties it. */
void explain_record_release(attention_record *r);

#endif
