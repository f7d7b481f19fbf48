/* bf16x3.c — the twins' set and the entry points where the AMX kernels are not
 * built (linear_bf16x3_amx.c holds the kernels themselves). */
#include "core/bf16x3.h"

#include <stdlib.h>
#include <string.h>

#include "core/cpu.h"
#include "core/error.h"

bool bf16x3_available(void) { return cpu_has_amx_bf16(); }

#ifndef GLIMPSE_HAVE_AVX512 /* (cpu_has_amx_bf16() is false: nothing below is ever reached but make's refusal) */
glimpse_status kernel_bf16x3_make(kernel_bf16x3 *s, const float *weight, size_t out_features, size_t in_features,
                                  pool *threads) {
    (void)weight, (void)out_features, (void)in_features, (void)threads;
    memset(s, 0, sizeof *s);
    return error_set(GLIMPSE_STATUS_UNSUPPORTED, "built without the AVX-512 and AMX kernels");
}
void kernel_bf16x3_free(kernel_bf16x3 *s) { memset(s, 0, sizeof *s); }
size_t bf16x3_input_bytes(const kernel_bf16x3 *s, size_t rows) { return (void)s, (void)rows, 0; }
size_t bf16x3_input_blocks(size_t rows) { return (void)rows, 0; }
void bf16x3_prepare(void *prepared, const float *in, size_t in_stride, const kernel_bf16x3 *s, size_t rows,
                    size_t first_block, size_t block_count) {
    (void)prepared, (void)in, (void)in_stride, (void)s, (void)rows, (void)first_block, (void)block_count;
}
void bf16x3_product(float *out, size_t out_stride, const void *prepared, const kernel_bf16x3 *s, const float *bias,
                    size_t rows, bool accumulate, size_t first, size_t count) {
    (void)out, (void)out_stride, (void)prepared, (void)s, (void)bias, (void)rows, (void)accumulate, (void)first,
        (void)count;
}
void bf16x3_split_value(float x, uint16_t parts[3]) { (void)x, memset(parts, 0, 3 * sizeof *parts); }
#endif

glimpse_status bf16x3_set_add(void *set_pointer, kernel_weight *weight, size_t out_features, size_t in_features) {
    bf16x3_set *set = set_pointer;
    if (weight->type != WEIGHT_TYPE_F32 || weight->q8) return GLIMPSE_STATUS_OK;
    if (set->count == set->capacity) {
        size_t capacity = set->capacity ? 2 * set->capacity : 64;
        kernel_bf16x3 **items = realloc(set->items, capacity * sizeof *items);
        if (!items) return ERROR_OOM();
        set->items = items, set->capacity = capacity;
    }
    kernel_bf16x3 *s = malloc(sizeof *s);
    if (!s) return ERROR_OOM();
    glimpse_status status = kernel_bf16x3_make(s, weight->data, out_features, in_features, set->threads);
    if (status) {
        free(s);
        return status;
    }
    set->items[set->count++] = s;
    weight->bf16x3 = s;
    if (set->release) set->release(set->release_user, weight->data, out_features * in_features * sizeof(float));
    return GLIMPSE_STATUS_OK;
}

glimpse_status bf16x3_twin_clear(void *set, kernel_weight *weight, size_t out_features, size_t in_features) {
    (void)set, (void)out_features, (void)in_features;
    weight->bf16x3 = NULL;
    return GLIMPSE_STATUS_OK;
}

void bf16x3_set_free(bf16x3_set *set) {
    for (size_t i = 0; i < set->count; i++) {
        kernel_bf16x3_free(set->items[i]);
        free(set->items[i]);
    }
    free(set->items);
    memset(set, 0, sizeof *set);
}
