/* records.c — heap-backed attention records of one sequence (see records.h). */
#include "explain/records.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"

uint64_t explain_all_layers(size_t layers) { return layers >= 64 ? UINT64_MAX : ((uint64_t)1 << layers) - 1; }

glimpse_status explain_record_make(attention_record *r, uint64_t self_layers, uint64_t cross_layers, size_t heads,
                                   size_t rows, size_t self_columns, size_t cross_columns) {
    *r = (attention_record){.layers = {self_layers, cross_layers},
                            .sequences = 1,
                            .heads = heads,
                            .rows = rows,
                            .columns = {self_columns, cross_columns}};
    for (int kind = 0; kind < ATTENTION_KINDS; kind++) {
        size_t floats = attention_record_floats(r, (attention_kind)kind);
        if (floats && !(r->probabilities[kind] = calloc(floats, sizeof(float)))) return ERROR_OOM();
    }
    return GLIMPSE_STATUS_OK;
}

void explain_record_release(attention_record *r) {
    free(r->probabilities[ATTENTION_KIND_SELF]);
    free(r->probabilities[ATTENTION_KIND_CROSS]);
    memset(r, 0, sizeof *r);
}
