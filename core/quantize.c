/* quantize.c — int8 weights, per-row activation quantization, and the
 * int8 product's plain loops (see quantize.h). Which path a product takes is
 * blas.c's choice (kernel_linear). */
#include "core/quantize.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/cpu.h"
#include "core/error.h"
#include "core/kernels_avx512.h"

glimpse_status kernel_q8_quantize(kernel_q8 *q, const kernel_weight *weight, size_t out_features,
                                  size_t in_features) {
    memset(q, 0, sizeof *q);
    size_t depth = (in_features + 3) / 4 * 4;
    q->weight = calloc(out_features * depth, 1);
    q->scale = malloc(out_features * sizeof *q->scale);
    q->sum = malloc(out_features * sizeof *q->sum);
    float *widened = weight->type == WEIGHT_TYPE_F32 ? NULL : malloc(in_features * sizeof *widened);
    if (!q->weight || !q->scale || !q->sum || (weight->type != WEIGHT_TYPE_F32 && !widened)) {
        kernel_q8_free(q);
        free(widened);
        return ERROR_OOM();
    }
    q->out_features = out_features, q->in_features = in_features, q->depth = depth;
    size_t element = weight_type_bytes(weight->type);
    for (size_t o = 0; o < out_features; o++) {
        const void *stored = (const char *)weight->data + o * in_features * element;
        const float *row = stored;
        if (widened) {
            kernel_widen(widened, stored, weight->type, in_features);
            row = widened;
        }
#ifdef GLIMPSE_HAVE_AVX512
        if (cpu_has_avx512_vnni()) {
            q->sum[o] = q8_quantize_weight_row_avx512(q->weight + o * depth, row, in_features, &q->scale[o]);
            continue;
        }
#endif
#ifdef GLIMPSE_HAVE_AVX2
        if (cpu_has_avx2()) {
            q->sum[o] = q8_quantize_weight_row_avx2(q->weight + o * depth, row, in_features, &q->scale[o]);
            continue;
        }
#endif
        float largest = 0.0f;
        for (size_t k = 0; k < in_features; k++) largest = fmaxf(largest, fabsf(row[k]));
        float scale = largest > 0.0f ? largest / 127.0f : 1.0f, inverse = 1.0f / scale;
        int32_t sum = 0;
        for (size_t k = 0; k < in_features; k++) {
            float v = nearbyintf(row[k] * inverse);
            int8_t s = (int8_t)(v > 127.0f ? 127 : v < -127.0f ? -127 : (int)v);
            q->weight[o * depth + k] = s;
            sum += s;
        }
        q->scale[o] = scale;
        q->sum[o] = sum;
    }
    free(widened);
    return GLIMPSE_STATUS_OK;
}

void kernel_q8_free(kernel_q8 *q) {
    if (!q) return;
    free(q->weight), free(q->scale), free(q->sum);
    memset(q, 0, sizeof *q);
}

float q8_quantize_row(uint8_t *u8, const float *x, size_t in_features, size_t depth) {
    float largest = 0.0f;
    for (size_t k = 0; k < in_features; k++) largest = fmaxf(largest, fabsf(x[k]));
    float scale = largest > 0.0f ? largest / 127.0f : 1.0f, inverse = 127.0f / (largest > 0.0f ? largest : 127.0f);
    for (size_t k = 0; k < in_features; k++) {
        float v = nearbyintf(x[k] * inverse);
        u8[k] = (uint8_t)((v > 127.0f ? 127 : v < -127.0f ? -127 : (int)v) + 128);
    }
    for (size_t k = in_features; k < depth; k++) u8[k] = 128;
    return scale;
}

/* linear_q8_vnni.c's layout: a panel of 48 rows, 16 rows being transposed,
 * up to 16 rows for the few-rows kernel, then 64 row scales. */
size_t q8_scratch_bytes(const kernel_q8 *q) { return 80 * q->depth + 64 * sizeof(float); }

void q8_product_plain(float *out, size_t out_stride, const float *in, size_t in_stride, const kernel_q8 *q,
                      const float *bias, size_t rows, bool accumulate, size_t first, size_t count) {
    uint8_t u8[q->depth]; /* one row: a few KiB for every published model */
    for (size_t r = 0; r < rows; r++) {
        float row_scale = q8_quantize_row(u8, in + r * in_stride, q->in_features, q->depth);
        for (size_t c = first; c < first + count; c++) {
            const int8_t *w = q->weight + c * q->depth;
            int32_t total = 0;
            for (size_t k = 0; k < q->depth; k++) total += (int32_t)u8[k] * w[k];
            float value = q8_finish(total, q->sum[c], row_scale, q->scale[c], bias ? bias + c : NULL);
            float *cell = out + r * out_stride + c;
            *cell = accumulate ? *cell + value : value;
        }
    }
}

glimpse_status q8_set_add(q8_set *set, kernel_weight *weight, size_t out_features, size_t in_features) {
    if (set->count == set->capacity) {
        size_t capacity = set->capacity ? 2 * set->capacity : 64;
        kernel_q8 **items = realloc(set->items, capacity * sizeof *items);
        if (!items) return ERROR_OOM();
        set->items = items, set->capacity = capacity;
    }
    kernel_q8 *q = malloc(sizeof *q);
    if (!q) return ERROR_OOM();
    glimpse_status status = kernel_q8_quantize(q, weight, out_features, in_features);
    if (status) {
        free(q);
        return status;
    }
    set->items[set->count++] = q;
    weight->q8 = q;
    return GLIMPSE_STATUS_OK;
}

void q8_set_free(q8_set *set) {
    for (size_t i = 0; i < set->count; i++) {
        kernel_q8_free(set->items[i]);
        free(set->items[i]);
    }
    free(set->items);
    memset(set, 0, sizeof *set);
}
