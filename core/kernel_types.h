/* kernel_types.h — the types the kernels' headers share: how a weight's
 * numbers are stored (weight_type), an int8 twin of a weight (kernel_q8) and
 * a way of running the int8 product (q8_path). Types only, no functions:
 * kernels.h, quantize.h and kernels_avx512.h include it, and it includes
 * none of them, so those headers need not include each other. */
#ifndef GLIMPSE_CORE_KERNEL_TYPES_H
#define GLIMPSE_CORE_KERNEL_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* How a weight matrix's numbers are stored: as the checkpoint has them. */
typedef enum weight_type { WEIGHT_TYPE_F32 = 0, WEIGHT_TYPE_F16, WEIGHT_TYPE_BF16 } weight_type;
/* Bytes of one stored value. */
static inline size_t weight_type_bytes(weight_type type) { return type == WEIGHT_TYPE_F32 ? 4 : 2; }

/* How an int8 twin's weights lie in memory (quantize.h's q8_layout_best picks one per CPU). */
typedef enum q8_layout {
    /* [out_features, depth], each output column's weights a row, zero-padded from in_features to depth; 16
     * rows and 64 bytes of slack after the last (allocated, zero, never part of a result): the AMX tiles',
     * the AVX2 kernel's and the search index's layout */
    Q8_LAYOUT_ROWS = 0,
    /* blocks of Q8_STRIP_COLUMNS output columns (the last zero-padded to a whole block), each block depth / 4
     * lines of Q8_STRIP_COLUMNS × 4 bytes, line g holding features 4g..4g+3 of each of the block's columns;
     * 64 bytes of slack after the last: VNNI's many-rows kernel reads it as it is */
    Q8_LAYOUT_STRIPS
} q8_layout;
#define Q8_STRIP_COLUMNS 48

/* An int8 twin of a weight (quantize.h makes it and runs it). */
typedef struct kernel_q8 {
    int8_t *weight;     /* out_features × depth values (as `layout` says), 64-byte aligned */
    float *scale;       /* [out_features]: max |w| of the column's weights / 127 */
    int32_t *sum;       /* [out_features]: Σ of the column's q (activations go in offset by 128) */
    size_t out_features, in_features, depth; /* depth: in_features rounded up to a multiple of 4 */
    q8_layout layout;
} kernel_q8;

/* q8_path.product's `next` when the caller runs no more columns. */
#define Q8_NEXT_NONE ((size_t)-1)

/* One way of running the int8 product (VNNI, AVX2 or plain loops), in two
 * steps so that a product split over a pool's column tasks quantizes its input
 * once (kernel_linear): prepare() quantizes the rows in[rows, in_stride] into
 * the layout product() reads (in parts that may run on different threads),
 * then product() runs any range of output columns against them. Every path
 * gives q8_product_plain's results bit for bit. Buffers are 64-byte aligned. */
typedef struct q8_path {
    /* bytes of `rows` prepared rows */
    size_t (*input_bytes)(const kernel_q8 *q, size_t rows);
    /* bytes of scratch prepare() needs beside them (per thread) */
    size_t (*temp_bytes)(const kernel_q8 *q);
    /* how many independent parts prepare() splits `rows` rows into */
    size_t (*parts)(const kernel_q8 *q, size_t rows);
    /* part `part` of the rows into prepared (input_bytes), temp holding temp_bytes */
    void (*prepare)(void *prepared, const float *in, size_t in_stride, const kernel_q8 *q, size_t rows,
                    size_t part, void *temp);
    /* columns first .. first+count of out[rows, out_stride] (+)= prepared rows · q + bias (first a multiple
     * of 16 where q's layout is Q8_LAYOUT_STRIPS: kernel_linear's column tasks are); scratch
     * (scratch_bytes, 64-byte aligned, may be NULL): the calling thread's, free for the kernel's own use; next:
     * the first of the columns the caller runs next (Q8_NEXT_NONE: none), whose weights a path may ask for as
     * it ends these */
    void (*product)(float *out, size_t out_stride, const void *prepared, const kernel_q8 *q, const float *bias,
                    size_t rows, bool accumulate, size_t first, size_t count, size_t next, void *scratch,
                    size_t scratch_bytes);
    /* how many of rows_left rows to prepare at a time when the prepared rows, temp and what product() uses
     * of its scratch must share scratch_bytes of scratch (a chunk at the most; 0: not even one row fits) */
    size_t (*chunk_rows)(const kernel_q8 *q, size_t rows_left, size_t scratch_bytes);
    /* rows first .. first+count of the rows into prepared, as the parts that prepare() makes of them would be
     * (any rows: each is quantized on its own); where there is this, kernel_linear has the column tasks prepare
     * the rows between them, in parts of its own choosing, each task running product() once every part is ready
     * (NULL: it prepares them all on the calling thread before the tasks) */
    void (*prepare_rows)(void *prepared, const float *in, size_t in_stride, const kernel_q8 *q, size_t rows,
                         size_t first, size_t count);
} q8_path;

#endif
