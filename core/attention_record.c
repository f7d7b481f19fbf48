/* attention_record.c — where a recorded layer's attention rows go in the
 * caller's memory, and whether a pass fits the room the caller made. */
#include "core/attention_record.h"

/* Layers of `kind` asked for below `layer`: the recorded layer's slot. */
static size_t recorded_below(const attention_record *record, attention_kind kind, size_t layer) {
    size_t count = 0;
    for (size_t l = 0; l < layer; l++) count += (record->layers[kind] >> l) & 1;
    return count;
}

size_t attention_record_floats(const attention_record *record, attention_kind kind) {
    size_t layers = recorded_below(record, kind, ATTENTION_RECORD_MAX_LAYERS);
    return layers * record->sequences * record->heads * record->rows * record->columns[kind];
}

const kernel_attention_rows *attention_record_find(const attention_record *record, attention_kind kind, size_t layer,
                                                   size_t sequence, size_t heads, size_t first_row, size_t queries,
                                                   size_t keys, kernel_attention_rows *place) {
    if (layer >= ATTENTION_RECORD_MAX_LAYERS || !((record->layers[kind] >> layer) & 1) || !record->probabilities[kind])
        return NULL;
    size_t columns = record->columns[kind];
    if (sequence >= record->sequences || heads != record->heads || first_row + queries > record->rows ||
        keys > columns)
        return NULL;
    size_t head_stride = record->rows * columns;
    size_t slot = recorded_below(record, kind, layer) * record->sequences + sequence;
    *place = (kernel_attention_rows){.out = record->probabilities[kind] + (slot * heads * head_stride) +
                                            first_row * columns,
                                     .head_stride = head_stride,
                                     .row_stride = columns};
    return place;
}

int attention_record_fits(const attention_record *record, size_t sequences, size_t heads, size_t rows_end,
                          size_t self_keys, size_t cross_keys) {
    if (sequences > record->sequences || heads != record->heads || rows_end > record->rows) return 0;
    if (record->layers[ATTENTION_KIND_SELF] && self_keys > record->columns[ATTENTION_KIND_SELF]) return 0;
    return !(record->layers[ATTENTION_KIND_CROSS] && cross_keys > record->columns[ATTENTION_KIND_CROSS]);
}
