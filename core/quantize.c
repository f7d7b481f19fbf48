/* quantize.c — int8 weights, per-row activation quantization, and the
 * int8 product's plain loops (see quantize.h). Which path a product takes is
 * linear.c's choice (kernel_linear). */
#include "core/quantize.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/cpu.h"
#include "core/error.h"
#include "core/kernels_avx512.h"
#include "core/memory.h"
#include "core/pool.h"

/* One weight row quantized (scale = max |w| / 127, rounded to nearest even, clamped to ±127): returns its sum. */
static int32_t quantize_weight_row(int8_t *out, const float *row, size_t n, float *scale_out) {
#ifdef GLIMPSE_HAVE_AVX512
    if (cpu_has_avx512_vnni()) return q8_quantize_weight_row_avx512(out, row, n, scale_out);
#endif
#ifdef GLIMPSE_HAVE_AVX2
    if (cpu_has_avx2()) return q8_quantize_weight_row_avx2(out, row, n, scale_out);
#endif
    float largest = 0.0f;
    for (size_t k = 0; k < n; k++) largest = fmaxf(largest, fabsf(row[k]));
    float scale = largest > 0.0f ? largest / 127.0f : 1.0f, inverse = 1.0f / scale;
    int32_t sum = 0;
    for (size_t k = 0; k < n; k++) {
        float v = nearbyintf(row[k] * inverse);
        int8_t s = (int8_t)(v > 127.0f ? 127 : v < -127.0f ? -127 : (int)v);
        out[k] = s;
        sum += s;
    }
    *scale_out = scale;
    return sum;
}

/* count (≤ Q8_STRIP_COLUMNS) rows of depth bytes, laid out as a strip (Q8_LAYOUT_STRIPS) whose other columns
 * stay as they are (zero). */
static void strip_from_rows(int8_t *strip, const int8_t *rows, size_t depth, size_t count) {
#ifdef GLIMPSE_HAVE_AVX512
    if (cpu_has_avx512_vnni()) {
        q8_strip_from_rows_avx512(strip, rows, depth, count);
        return;
    }
#endif
    for (size_t j = 0; j < count; j++)
        for (size_t g = 0; g < depth / 4; g++)
            memcpy(strip + (g * Q8_STRIP_COLUMNS + j) * 4, rows + j * depth + 4 * g, 4);
}

/* kernel_q8_quantize's work: blocks of Q8_STRIP_COLUMNS output columns, a share of them per task, each task with
 * its buffer (a block's rows for strips, then a widened row for 16-bit weights). */
typedef struct quantize_job {
    kernel_q8 *q;
    const kernel_weight *weight;
    size_t tasks, buffer_bytes;
    char *buffers;
} quantize_job;

static void quantize_task(void *argument, size_t index, float *scratch) {
    (void)scratch;
    const quantize_job *job = argument;
    kernel_q8 *q = job->q;
    size_t depth = q->depth, in = q->in_features, element = weight_type_bytes(job->weight->type);
    size_t blocks = (q->out_features + Q8_STRIP_COLUMNS - 1) / Q8_STRIP_COLUMNS;
    int8_t *rows = (int8_t *)(job->buffers + index * job->buffer_bytes);
    float *widened = (float *)(rows + (q->layout == Q8_LAYOUT_STRIPS ? Q8_STRIP_COLUMNS * depth : 0));
    for (size_t block = blocks * index / job->tasks; block < blocks * (index + 1) / job->tasks; block++) {
        size_t first = block * Q8_STRIP_COLUMNS, end = first + Q8_STRIP_COLUMNS;
        if (end > q->out_features) end = q->out_features;
        for (size_t o = first; o < end; o++) {
            const void *stored = (const char *)job->weight->data + o * in * element;
            const float *row = stored;
            if (job->weight->type != WEIGHT_TYPE_F32) {
                kernel_widen(widened, stored, job->weight->type, in);
                row = widened;
            }
            /* (rows: straight into place, the padding to depth zeroed; strips: into the block's rows, whose
             * padding stays the zeros it was allocated with) */
            int8_t *out = q->layout == Q8_LAYOUT_ROWS ? q->weight + o * depth : rows + (o - first) * depth;
            q->sum[o] = quantize_weight_row(out, row, in, &q->scale[o]);
            if (q->layout == Q8_LAYOUT_ROWS) memset(out + in, 0, depth - in);
        }
        if (q->layout == Q8_LAYOUT_STRIPS) {
            int8_t *strip = q->weight + first * depth;
            if (end - first < Q8_STRIP_COLUMNS) memset(strip, 0, Q8_STRIP_COLUMNS * depth); /* (the padding columns) */
            strip_from_rows(strip, rows, depth, end - first);
        }
    }
}

glimpse_status kernel_q8_quantize(kernel_q8 *q, const kernel_weight *weight, size_t out_features,
                                  size_t in_features, q8_layout layout, pool *threads) {
    memset(q, 0, sizeof *q);
    size_t depth = (in_features + 3) / 4 * 4, strips = (out_features + Q8_STRIP_COLUMNS - 1) / Q8_STRIP_COLUMNS;
    /* (rows: slack past the last row, the AMX kernel's tiles read 16 rows of 64 bytes from any column; aligned
     * to 64 bytes, so that a tile's 64-byte rows are whole cache lines where depth allows: calloc's large blocks
     * start 16 bytes into a page, and every row then straddled two lines; strips: whole blocks. Large ones on
     * huge pages: a page fault per 2 MiB as they are first written, and as few TLB misses as the kernels
     * stream them) */
    size_t columns = layout == Q8_LAYOUT_ROWS ? out_features + 16 : strips * Q8_STRIP_COLUMNS;
    size_t used = columns * depth, weight_bytes = (used + 64 + 63) / 64 * 64;
    q->weight = weight_bytes >= MEMORY_HUGE_PAGE_BYTES ? memory_large(weight_bytes) : aligned_alloc(64, weight_bytes);
    q->scale = malloc(out_features * sizeof *q->scale);
    q->sum = malloc(out_features * sizeof *q->sum);
    quantize_job job = {.q = q, .weight = weight, .tasks = (size_t)pool_threads(threads)};
    if (job.tasks > strips) job.tasks = strips ? strips : 1;
    job.buffer_bytes = (layout == Q8_LAYOUT_STRIPS ? Q8_STRIP_COLUMNS * depth : 0) +
                       (weight->type == WEIGHT_TYPE_F32 ? 0 : in_features * sizeof(float));
    job.buffer_bytes = (job.buffer_bytes + 63) / 64 * 64;
    job.buffers = job.buffer_bytes ? calloc(job.tasks, job.buffer_bytes) : NULL;
    if (!q->weight || !q->scale || !q->sum || (job.buffer_bytes && !job.buffers)) {
        kernel_q8_free(q);
        free(job.buffers);
        return ERROR_OOM();
    }
    q->out_features = out_features, q->in_features = in_features, q->depth = depth, q->layout = layout;
    /* (the rows' slack: whole rows past the last, then the 64 bytes; the strips': the 64 bytes) */
    size_t slack = layout == Q8_LAYOUT_ROWS ? out_features * depth : used;
    memset(q->weight + slack, 0, weight_bytes - slack);
    pool_for(threads, job.tasks, quantize_task, &job);
    free(job.buffers);
    return GLIMPSE_STATUS_OK;
}

q8_layout q8_layout_best(void) {
#ifdef GLIMPSE_HAVE_AVX512
    if (cpu_has_avx512_vnni() && !cpu_has_amx_int8()) return Q8_LAYOUT_STRIPS;
#endif
    return Q8_LAYOUT_ROWS;
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

/* ------------------------------------------------ the plain path (q8_path) */

size_t q8_planes_parts(const kernel_q8 *q, size_t rows) { return (void)q, (rows + Q8_PART_ROWS - 1) / Q8_PART_ROWS; }
size_t q8_planes_temp_bytes(const kernel_q8 *q) { return (void)q, 0; }

static size_t plain_input_bytes(const kernel_q8 *q, size_t rows) { return q8_planes_bytes(q, rows, 1); }

static void plain_prepare(void *prepared, const float *in, size_t in_stride, const kernel_q8 *q, size_t rows,
                          size_t part, void *temp) {
    (void)temp;
    float *scales = prepared;
    uint8_t *u8 = (uint8_t *)prepared + q8_planes_offset(rows);
    size_t end = (part + 1) * Q8_PART_ROWS < rows ? (part + 1) * Q8_PART_ROWS : rows;
    for (size_t r = part * Q8_PART_ROWS; r < end; r++)
        scales[r] = q8_quantize_row(u8 + r * q->depth, in + r * in_stride, q->in_features, q->depth);
}

static void plain_product(float *out, size_t out_stride, const void *prepared, const kernel_q8 *q, const float *bias,
                          size_t rows, bool accumulate, size_t first, size_t count, size_t next, void *scratch,
                          size_t scratch_bytes) {
    (void)next, (void)scratch, (void)scratch_bytes;
    const float *scales = prepared;
    const uint8_t *u8 = (const uint8_t *)prepared + q8_planes_offset(rows);
    for (size_t r = 0; r < rows; r++)
        for (size_t c = first; c < first + count; c++) {
            const uint8_t *x = u8 + r * q->depth;
            int32_t total = 0;
            for (size_t k = 0; k < q->depth; k++) total += (int32_t)x[k] * q->weight[q8_weight_offset(q, c, k)];
            float value = q8_finish(total, q->sum[c], scales[r], q->scale[c], bias ? bias + c : NULL);
            float *cell = out + r * out_stride + c;
            *cell = accumulate ? *cell + value : value;
        }
}

static size_t plain_chunk_rows(const kernel_q8 *q, size_t rows_left, size_t scratch_bytes) {
    return q8_planes_chunk_rows(q, rows_left, scratch_bytes, 1);
}

const q8_path q8_path_plain = {plain_input_bytes, q8_planes_temp_bytes, q8_planes_parts, plain_prepare, plain_product,
                               plain_chunk_rows, NULL};

void q8_product_plain(float *out, size_t out_stride, const float *in, size_t in_stride, const kernel_q8 *q,
                      const float *bias, size_t rows, bool accumulate, size_t first, size_t count) {
    float prepared[(q8_planes_bytes(q, 1, 1) + 3) / 4]; /* one row (floats: the scale's alignment): a few KiB */
    for (size_t r = 0; r < rows; r++) {
        plain_prepare(prepared, in + r * in_stride, in_stride, q, 1, 0, NULL);
        plain_product(out + r * out_stride, out_stride, prepared, q, bias, 1, accumulate, first, count, Q8_NEXT_NONE,
                      NULL, 0);
    }
}

const q8_path *q8_path_choose(const kernel_q8 *q, size_t rows) {
#ifdef GLIMPSE_HAVE_AVX512
    if (q->layout == Q8_LAYOUT_STRIPS) return cpu_has_avx512_vnni() ? &q8_path_vnni : &q8_path_plain;
    if (rows >= 16 && cpu_has_amx_int8()) return &q8_path_amx;
    if (cpu_has_avx512_vnni()) return &q8_path_vnni;
#else
    if (q->layout == Q8_LAYOUT_STRIPS) return &q8_path_plain;
#endif
#ifdef GLIMPSE_HAVE_AVX2
    if (cpu_has_avx2()) return &q8_path_avx2;
#endif
    (void)rows;
    return &q8_path_plain;
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
    glimpse_status status = kernel_q8_quantize(q, weight, out_features, in_features, q8_layout_best(), set->threads);
    if (status) {
        free(q);
        return status;
    }
    set->items[set->count++] = q;
    weight->q8 = q;
    if (set->release) set->release(set->release_user, weight->data, out_features * in_features * weight_type_bytes(weight->type));
    return GLIMPSE_STATUS_OK;
}

glimpse_status q8_set_add_twin(void *set, kernel_weight *weight, size_t out_features, size_t in_features) {
    return q8_set_add(set, weight, out_features, in_features);
}

glimpse_status q8_set_own(q8_set *set, void *memory) {
    void **grown = realloc(set->owned, (set->owned_count + 1) * sizeof *grown);
    if (!grown) {
        free(memory);
        return ERROR_OOM();
    }
    set->owned = grown;
    set->owned[set->owned_count++] = memory;
    return GLIMPSE_STATUS_OK;
}

void q8_set_free(q8_set *set) {
    for (size_t i = 0; i < set->count; i++) {
        kernel_q8_free(set->items[i]);
        free(set->items[i]);
    }
    free(set->items);
    for (size_t i = 0; i < set->owned_count; i++) free(set->owned[i]);
    free(set->owned);
    memset(set, 0, sizeof *set);
}
