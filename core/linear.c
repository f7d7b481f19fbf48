/* linear.c — the linear layer: kernel_linear, the one entry point for a
 * linear layer whatever its weight's storage (float32, 16-bit, int8, bf16x3
 * parts); its split over the pool's threads by column blocks; and the
 * choice, made here only, between our AVX-512 and AMX kernels
 * (linear_avx512.c, linear_q8_*.c, linear_bf16x3_amx.c, where core/cpu.h
 * says they run) and OpenBLAS (openblas.c) or plain loops everywhere else.
 * Parallelism comes from our pool (pool.c), so the thread count stays a
 * parameter of each context rather than a process-wide setting. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/bf16x3.h"
#include "core/cpu.h"
#include "core/kernels.h"
#include "core/kernels_avx512.h"
#include "core/openblas.h"
#include "core/pool.h"
#include "core/profile.h"
#include "core/quantize.h"

/* Columns per task: wide enough that each sgemm call stays efficient. */
#define LINEAR_COLUMN_BLOCK 128
/* Multiply-adds (rows × depth × columns) up to which a linear layer stays
 * one task on the calling thread: microseconds of work on one core, the
 * order of what handing tasks to the pool and waiting for the last one
 * costs: at 1e5 a decoder step's 1 × 768 × 768 projections (5.9e5) are
 * shared while small heads (ITM's 1 × 768 × 2) are not. */
#define LINEAR_PARALLEL_MIN_WORK 1e5

typedef struct linear_job {
    float *out;
    size_t out_stride;
    const float *in;
    size_t in_stride;
    const kernel_weight *weight;
    const float *bias;
    size_t rows, in_features, out_features, block;
    bool accumulate;
    const q8_path *q8_path; /* with an int8 weight: the kernels that run it */
    void *q8_prepared;      /* and the input quantized once for every column task (NULL: each task quantizes) */
    atomic_int *q8_parts;   /* with q8_prepared, where the path prepares in the tasks: each part's state
                             * (Q8_PART_*); the tasks prepare the parts as they come to them (NULL: prepared
                             * before them) */
    void *bf16x3_prepared;  /* with a bf16x3 twin: the input split once for every column task (NULL: float32) */
    size_t prepare_parts;   /* in this many parts (and with q8_parts, the int8 input: q8_part_first) */
    const kernel_rows_step *before; /* with q8_parts: the step each part's rows go through before they are
                                     * quantized (kernel_linear_after) */
    struct column_range *ranges; /* where the tasks balance their columns (int8 strips prepared in parts, float32
                                  * on AVX-512): each task's in each pass over the rows, tasks a pass (NULL: each
                                  * task runs its block) */
    size_t tasks;                /* (tasks of `block` columns) */
    size_t range_unit, range_take; /* the ranges' unit in columns, and units a take at least */
    bool rowwise; /* kernel_linear_rowwise */
} linear_job;

/* Columns first .. first+count of a float16 / bfloat16 product in plain loops. */
static void linear_16bit_plain(const linear_job *job, size_t first, size_t count) {
    weight_type type = job->weight->type;
    for (size_t r = 0; r < job->rows; r++)
        for (size_t c = first; c < first + count; c++) {
            const uint16_t *w = (const uint16_t *)job->weight->data + c * job->in_features;
            const float *x = job->in + r * job->in_stride;
            float sum = 0.0f;
            for (size_t k = 0; k < job->in_features; k++)
                sum += x[k] * (type == WEIGHT_TYPE_F16 ? kernel_f16_to_f32(w[k]) : kernel_bf16_to_f32(w[k]));
            if (job->bias) sum += job->bias[c];
            float *cell = job->out + r * job->out_stride + c;
            *cell = job->accumulate ? *cell + sum : sum;
        }
}

/* Columns first .. first+count of a float32 product on OpenBLAS. */
static void linear_f32_blas(const linear_job *job, size_t first, size_t count) {
    const float *weights = job->weight->data;
    if (job->rows == 1) {
        /* one row: a matrix-vector product reads each weight once, where
         * sgemm would first copy (pack) the whole weight block */
        const float *weight = weights + first * job->in_features;
        openblas_gemv(count, job->in_features, 1.0f, weight, job->in_features, job->in, 1,
                      job->accumulate ? 1.0f : 0.0f, job->out + first, 1);
        if (job->bias)
            for (size_t o = 0; o < count; o++) job->out[first + o] += job->bias[first + o];
        return;
    }
    openblas_gemm(true, job->rows, count, job->in_features, 1.0f, job->in, job->in_stride,
                  weights + first * job->in_features, job->in_features, job->accumulate ? 1.0f : 0.0f,
                  job->out + first, job->out_stride);
    if (job->bias)
        for (size_t r = 0; r < job->rows; r++) {
            float *row = job->out + r * job->out_stride + first;
            const float *b = job->bias + first;
            for (size_t o = 0; o < count; o++) row[o] += b[o];
        }
}

/* Quantizes rows of in, every part, into prepared (path->input_bytes of them) through temp. */
static void q8_prepare_rows(const q8_path *path, void *prepared, const float *in, size_t in_stride, const kernel_q8 *q,
                            size_t rows, void *temp) {
    for (size_t part = 0, parts = path->parts(q, rows); part < parts; part++)
        path->prepare(prepared, in, in_stride, q, rows, part, temp);
}

/* A part of an input prepared in the tasks: not yet taken, being prepared by a task, ready. */
enum { Q8_PART_WAITING, Q8_PART_TAKEN, Q8_PART_READY };

/* Parts the column tasks prepare an int8 input in: about 16 rows each, as many as a multiple of the tasks, each
 * part as many rows as the next within one, so that the tasks prepare as many rows each. In parts of 16 rows a
 * single picture's 50 left one task a last part of 2 rows, and it then waited for the other's third part of 16 and
 * its LayerNorm or activation. In-process paired medians of 200 alternating calls, the same bits, ViT-B/32 int8 at
 * batch 1 on two threads (AMD EPYC Zen 5): vision 0.987-0.994 (8 rounds), text (77 rows: 5 parts, now 6)
 * 0.999-1.006. */
static size_t q8_task_parts(size_t rows, size_t tasks) {
    size_t parts = ((rows + 15) / 16 + tasks - 1) / tasks * tasks;
    return parts < rows ? parts : rows;
}

/* The first row of part `part` (of job->prepare_parts, as even as they come; part prepare_parts: the end). */
static size_t q8_part_first(const linear_job *job, size_t part) {
    return job->rows * part / job->prepare_parts;
}

/* Prepares part `part` if no task has taken it yet; true if this call did. */
static bool q8_part_take(const linear_job *job, size_t part) {
    int waiting = Q8_PART_WAITING;
    if (!atomic_compare_exchange_strong_explicit(&job->q8_parts[part], &waiting, Q8_PART_TAKEN, memory_order_acquire,
                                                 memory_order_relaxed))
        return false;
    size_t first = q8_part_first(job, part), count = q8_part_first(job, part + 1) - first;
    if (job->before) job->before->run(job->before->argument, first, count);
    job->q8_path->prepare_rows(job->q8_prepared, job->in, job->in_stride, job->weight->q8, job->rows, first, count);
    atomic_store_explicit(&job->q8_parts[part], Q8_PART_READY, memory_order_release);
    return true;
}

/* Returns once part `part` is ready: preparing it if no task has taken it; while another task prepares it,
 * preparing the next parts no one has taken (which this task needs next), else waiting. No task waits on a
 * part that no running task prepares, however the pool hands out the tasks. */
static void q8_part_ready(const linear_job *job, size_t part) {
    size_t ahead = part + 1, parts = job->prepare_parts;
    while (atomic_load_explicit(&job->q8_parts[part], memory_order_acquire) != Q8_PART_READY) {
        if (q8_part_take(job, part)) return;
        while (ahead < parts && !q8_part_take(job, ahead)) ahead++;
        if (ahead >= parts) pool_spin_pause();
    }
}

/* A column task's columns where the tasks balance them: units next .. end (next | end << 32) of job->range_unit
 * columns, on a cache line of their own. The task takes its own from the front, half of what is left at a time
 * in whole takes (job->range_take units); a task that has run out of its own takes another's from the back, a
 * take at a time. Each task takes its next columns before it runs those it holds, so that the kernel asks for
 * their weights as it ends them. With int8 strips on VNNI (whose tasks prepare the input in parts) a take is a
 * strip (3 vectors of 16: a last vector alone, too few sums in flight, is joined to the take before it), with
 * float32 2 micro-kernels of 8 columns (kernel_product_avx512 takes them pass by pass over 48 rows).
 * The two threads of a single picture's products had ended their halves 6-7 us apart on average at int8 (of
 * 114-154 us), 8-11 us at float32 (of 230-320 us; ViT-B/32 at batch 1, AMD EPYC Zen 5), more in the stretches
 * where one core runs slower than the other, and the first to finish waited. In-process paired medians of
 * alternating calls, the same bits: in ordinary stretches int8 vision 0.993-1.005 and text 0.992-1.004 (4 rounds
 * of 200), float32 0.998-1.002 and 0.997-1.000 (7 rounds of 100); in slow ones int8 0.935-0.945 and 0.973-0.980
 * (4 rounds), float32 0.933-0.954 and 0.951-0.958 (4 rounds), at batch 8 0.954 and 0.968. Taking a strip at a
 * time, or taking across a take's end without asking for the next weights, cost int8 1-2% in ordinary stretches. */
typedef struct column_range {
    _Alignas(64) atomic_uint_least64_t span;
} column_range;

static uint64_t range_span(size_t next, size_t end) { return (uint64_t)end << 32 | (uint64_t)next; }

/* Sets the job's ranges in memory (passes × tasks of them, 64-byte aligned): each task's block in every pass. */
static void ranges_init(linear_job *job, void *memory, size_t passes, size_t unit, size_t take) {
    job->ranges = memory, job->range_unit = unit, job->range_take = take;
    for (size_t pass = 0; pass < passes; pass++)
        for (size_t t = 0; t < job->tasks; t++) { /* (block: a multiple of unit) */
            size_t first = t * job->block, end = first + job->block < job->out_features ? first + job->block
                                                                                      : job->out_features;
            atomic_init(&job->ranges[pass * job->tasks + t].span, range_span(first / unit, (end + unit - 1) / unit));
        }
}

/* Takes units of *range, from its front (own) or back; false when it is empty. */
static bool range_take(column_range *range, bool own, size_t least, size_t *first, size_t *count) {
    uint64_t span = atomic_load_explicit(&range->span, memory_order_relaxed);
    for (;;) {
        size_t next = (uint32_t)span, end = (size_t)(span >> 32), left = end - next;
        if (next >= end) return false;
        size_t take = own ? (left / 2 + least - 1) / least * least : least;
        if (take < least) take = least;
        if (left <= take + 1) take = left;
        uint64_t after = own ? range_span(next + take, end) : range_span(next, end - take);
        if (atomic_compare_exchange_weak_explicit(&range->span, &span, after, memory_order_relaxed,
                                                  memory_order_relaxed)) {
            *first = own ? next : end - take, *count = take;
            return true;
        }
    }
}

/* Task `index`'s next columns of pass `pass` (first, count; false: none is left): its own while they last, then
 * the others' from the task after it on (*range: which it takes from, its own first). */
static bool columns_take(const linear_job *job, size_t index, size_t pass, size_t *range, size_t *first,
                         size_t *count) {
    column_range *ranges = job->ranges + pass * job->tasks;
    for (; *range < job->tasks; ++*range) {
        size_t unit = job->range_unit, at, units;
        if (range_take(&ranges[(index + *range) % job->tasks], *range == 0, job->range_take, &at, &units)) {
            size_t end = unit * (at + units) < job->out_features ? unit * (at + units) : job->out_features;
            *first = unit * at, *count = end - *first;
            return true;
        }
    }
    return false;
}

/* A float32 task's columns as kernel_product_avx512 takes them, pass by pass. */
typedef struct task_columns {
    kernel_columns columns; /* (first) */
    const linear_job *job;
    size_t index, pass, range;
} task_columns;

static bool task_columns_take(kernel_columns *columns, size_t pass, size_t *first, size_t *count) {
    task_columns *task = (task_columns *)columns;
    if (pass != task->pass) task->pass = pass, task->range = 0;
    return columns_take(task->job, task->index, pass, &task->range, first, count);
}

/* Columns first .. first+count of the product with the weight's int8 twin: against the input quantized once
 * for every task (job->q8_prepared; with job->q8_parts, once the tasks have prepared every part), or, when
 * there is none (one task), quantizing it here a chunk of rows at a time in this thread's scratch (the rest of
 * the scratch the product's). Without scratch (no pool), in plain loops a row at a time. */
static void linear_q8(const linear_job *job, size_t index, size_t first, size_t count, float *scratch) {
    const kernel_q8 *q = job->weight->q8;
    const q8_path *path = job->q8_path;
    size_t scratch_bytes = scratch ? POOL_SCRATCH_FLOATS * sizeof(float) : 0;
    if (job->q8_prepared) {
        if (job->q8_parts)
            for (size_t part = 0; part < job->prepare_parts; part++)
                q8_part_ready(job, part);
        if (!job->ranges) {
            path->product(job->out, job->out_stride, job->q8_prepared, q, job->bias, job->rows, job->accumulate,
                          first, count, Q8_NEXT_NONE, scratch, scratch_bytes);
            return;
        }
        size_t range = 0, next, next_count;
        bool more = columns_take(job, index, 0, &range, &first, &count);
        while (more) {
            more = columns_take(job, index, 0, &range, &next, &next_count);
            path->product(job->out, job->out_stride, job->q8_prepared, q, job->bias, job->rows, job->accumulate,
                          first, count, more ? next : Q8_NEXT_NONE, scratch, scratch_bytes);
            first = next, count = next_count;
        }
        return;
    }
    size_t done = 0;
    while (done < job->rows) {
        size_t rows = scratch ? path->chunk_rows(q, job->rows - done, scratch_bytes) : 0;
        const float *in = job->in + done * job->in_stride;
        float *out = job->out + done * job->out_stride;
        if (!rows) { /* (only a model with rows of hundreds of thousands of features) */
            q8_product_plain(out, job->out_stride, in, job->in_stride, q, job->bias, job->rows - done, job->accumulate,
                             first, count);
            return;
        }
        size_t input = (path->input_bytes(q, rows) + 63) / 64 * 64; /* (temp, then the product's own, after it) */
        q8_prepare_rows(path, scratch, in, job->in_stride, q, rows, (char *)scratch + input);
        path->product(out, job->out_stride, scratch, q, job->bias, rows, job->accumulate, first, count,
                      Q8_NEXT_NONE, (char *)scratch + input, scratch_bytes - input);
        done += rows;
    }
}

/* The job's whole input into job->q8_prepared. */
static void q8_prepare_task(void *argument, size_t index, float *scratch) {
    (void)index;
    const linear_job *job = argument;
    q8_prepare_rows(job->q8_path, job->q8_prepared, job->in, job->in_stride, job->weight->q8, job->rows, scratch);
}

/* Quantizes the input of an int8 product split over the pool once, into the pool's shared buffer, and sets
 * job->q8_prepared to it: where the path prepares in the tasks, the tasks prepare the parts between them
 * (job->q8_parts: each part by whichever task comes to it first, the others preparing the next or waiting);
 * else on the calling thread before the tasks. Leaves it NULL (each task then quantizes the
 * input itself) if the buffer cannot grow or the prepare's temp does not fit the thread's scratch. (Preparing
 * the parts over the threads before the tasks cost one more wait for the pool at every product, more than it
 * saved; preparing them all on the caller left the other threads waiting; each task quantizing the whole input
 * itself took ViT-B/32's int8 vision tower at batch 1 from 7.71 to 7.88 ms, AMD EPYC Zen 5, 10 alternating
 * processes.) */
static void q8_prepare_shared(pool *threads, linear_job *job) {
    const kernel_q8 *q = job->weight->q8;
    const q8_path *path = job->q8_path;
    if (path->temp_bytes(q) > POOL_SCRATCH_FLOATS * sizeof(float)) return;
    bool by_parts = path->prepare_rows != NULL;
    size_t input = (path->input_bytes(q, job->rows) + 63) / 64 * 64;
    size_t parts = by_parts ? q8_task_parts(job->rows, job->tasks) : 0;
    size_t states = (parts * sizeof(atomic_int) + 63) / 64 * 64, ranges = job->tasks * sizeof(column_range);
    void *prepared = pool_shared_buffer(threads, input + (by_parts ? states + ranges : 0));
    if (!prepared) return;
    job->q8_prepared = prepared;
    if (by_parts) {
        job->q8_parts = (atomic_int *)((char *)prepared + input), job->prepare_parts = parts;
        for (size_t part = 0; part < parts; part++) atomic_init(&job->q8_parts[part], Q8_PART_WAITING);
        if (q->layout == Q8_LAYOUT_STRIPS) /* (whose tasks' blocks are whole vectors: linear) */
            ranges_init(job, (char *)prepared + input + states, 1, 16, 3);
        return;
    }
    pool_for(threads, 1, q8_prepare_task, job); /* (one task: on this thread, with its scratch) */
}

/* Part `index` of the input of a product on bf16x3 twins, split into job->bf16x3_prepared. */
static void split_prepare_task(void *argument, size_t index, float *scratch) {
    (void)scratch;
    const linear_job *job = argument;
    size_t blocks = bf16x3_input_blocks(job->rows), share = (blocks + job->prepare_parts - 1) / job->prepare_parts;
    bf16x3_prepare(job->bf16x3_prepared, job->in, job->in_stride, job->weight->bf16x3, job->rows, index * share,
                   share);
}

/* Splits the input once for every column task: over the threads where the product is split over them (a
 * 400 × 3072 input is 1.2 M values), else on this one. */
static void split_prepare(pool *threads, linear_job *job, size_t tasks) {
    size_t blocks = bf16x3_input_blocks(job->rows), workers = (size_t)pool_threads(threads);
    job->prepare_parts = tasks > 1 && blocks > 1 ? (blocks < workers ? blocks : workers) : 1;
    pool_for(threads, job->prepare_parts, split_prepare_task, job);
}

/* Balanced columns for a float32 product split over the pool, where the AVX-512 kernel takes them (in the
 * pool's shared buffer; without it, or the kernel, each task runs its block). */
static void f32_ranges(pool *threads, linear_job *job) {
#ifdef GLIMPSE_HAVE_AVX512
    if (!cpu_has_avx512() || job->weight->type != WEIGHT_TYPE_F32) return;
    kernel_product product = {.weight_type = WEIGHT_TYPE_F32, .depth_stride = 1, .rows = job->rows,
                              .depth = job->in_features, .rowwise = job->rowwise};
    size_t passes = kernel_product_column_passes(&product, POOL_SCRATCH_FLOATS);
    void *memory = passes ? pool_shared_buffer(threads, passes * job->tasks * sizeof(column_range)) : NULL;
    if (memory) ranges_init(job, memory, passes, 8, 2);
#else
    (void)threads, (void)job;
#endif
}

static void linear_task(void *argument, size_t index, float *scratch) {
    const linear_job *job = argument;
    size_t first = index * job->block;
    size_t count = job->out_features - first < job->block ? job->out_features - first : job->block;
    if (job->weight->q8) {
        linear_q8(job, index, first, count, scratch);
        return;
    }
    if (job->bf16x3_prepared) {
        bf16x3_product(job->out, job->out_stride, job->bf16x3_prepared, job->weight->bf16x3, job->bias, job->rows,
                       job->accumulate, first, count);
        return;
    }
#ifdef GLIMPSE_HAVE_AVX512
    if (cpu_has_avx512()) {
        kernel_product product = {.out = job->out, .out_stride = job->out_stride, .in = job->in,
                                  .in_stride = job->in_stride, .weight = job->weight->data,
                                  .weight_type = job->weight->type, .column_stride = job->in_features,
                                  .depth_stride = 1, .bias = job->bias, .scale = 1.0f, .accumulate = job->accumulate,
                                  .rows = job->rows, .depth = job->in_features, .rowwise = job->rowwise};
        task_columns columns = {{task_columns_take}, job, index, 0, 0};
        if (job->ranges) product.columns = &columns.columns;
        kernel_product_avx512(&product, first, count, scratch, scratch ? POOL_SCRATCH_FLOATS : 0);
        return;
    }
#endif
    if (job->weight->type != WEIGHT_TYPE_F32) {
        /* 16-bit weights reach this path only when a caller forces it (models
         * widen them at load where the AVX-512 kernels do not run): plain loops */
        linear_16bit_plain(job, first, count);
        return;
    }
    if (job->rowwise && job->rows > 1) { /* sgemm's sums may depend on the rows beside: one sgemv per row */
        for (size_t r = 0; r < job->rows; r++) {
            linear_job row = *job;
            row.in = job->in + r * job->in_stride, row.out = job->out + r * job->out_stride, row.rows = 1;
            linear_f32_blas(&row, first, count);
        }
        return;
    }
    linear_f32_blas(job, first, count);
}

/* Output columns per task when a product of rows × depth × columns is split
 * over the pool's threads (all of them for one task). */
static size_t column_block(const pool *threads, size_t rows, size_t depth, size_t columns, size_t multiple) {
    int workers = pool_threads(threads);
    if (workers <= 1 || (double)rows * (double)depth * (double)columns <= LINEAR_PARALLEL_MIN_WORK) return columns;
    /* the panel kernels transpose the input once per task: one task per thread
     * there; elsewhere two, so that uneven threads even out */
    size_t share = rows >= 16 && cpu_has_avx512() ? (size_t)workers : (size_t)workers * 2;
    size_t block = (columns + share - 1) / share;
    block = (block + multiple - 1) / multiple * multiple; /* whole micro-kernels */
    return block < LINEAR_COLUMN_BLOCK ? LINEAR_COLUMN_BLOCK : block;
}

/* kernel_rows_run's blocks: block rows each. */
typedef struct rows_job {
    const kernel_rows_step *step;
    size_t rows, block;
} rows_job;

static void rows_task(void *argument, size_t index, float *scratch) {
    (void)scratch;
    const rows_job *job = argument;
    size_t first = index * job->block, left = job->rows - first;
    job->step->run(job->step->argument, first, left < job->block ? left : job->block);
}

void kernel_rows_run(const kernel_rows_step *step, size_t rows, size_t width, pool *threads) {
    if (rows == 0) return;
    size_t share = (size_t)pool_threads(threads) * 2, block = (rows + share - 1) / share;
    size_t least = (4096 + width - 1) / width; /* below ~4K values a step is not worth a hand-off */
    rows_job job = {step, rows, block < least ? least : block};
    pool_for(threads, (rows + job.block - 1) / job.block, rows_task, &job);
}

/* before over every row, timed as its kind. */
static void rows_step_apart(const kernel_rows_step *before, size_t rows, size_t width, pool *threads) {
    uint64_t started = profile_start();
    kernel_rows_run(before, rows, width, threads);
    profile_stop(before->kind, started);
}

static void linear(float *out, size_t out_stride, const float *in, size_t in_stride, const kernel_rows_step *before,
                   const kernel_weight *weight, const float *bias, size_t rows, size_t in_features,
                   size_t out_features, bool accumulate, bool rowwise, pool *threads) {
    const kernel_q8 *q = weight->q8;
    if (q) /* (the int8 twin knows its own sizes; its depth is in_features rounded up to 4) */
        out_features = q->out_features;
    if (rows == 0 || out_features == 0) {
        if (before) rows_step_apart(before, rows, in_features, threads);
        return;
    }
    /* a bf16x3 twin runs with the input split once (split_prepare) into the pool's shared buffer (without a
     * pool, or where it cannot grow, the float32 values it was made from run on the FMA kernels) */
    const kernel_bf16x3 *split = q ? NULL : weight->bf16x3;
    void *split_input = split ? pool_shared_buffer(threads, bf16x3_input_bytes(split, rows)) : NULL;
    /* (rowwise without AVX-512: each row's sgemv calls are a one-row call's, so its columns are split as one
     * row's are: OpenBLAS's sums may depend on where a column falls in the block) */
    /* (tasks of whole micro-kernels: bf16x3's two 16-column AMX tiles, int8 strips' 16-column vectors, else 8) */
    size_t multiple = split_input ? 32 : q && q->layout == Q8_LAYOUT_STRIPS ? 16 : 8;
    size_t block = column_block(threads, rowwise && !cpu_has_avx512() ? 1 : rows, q ? q->depth : in_features,
                                out_features, multiple);
    linear_job job = {.out = out, .out_stride = out_stride, .in = in, .in_stride = in_stride, .weight = weight,
                      .bias = bias, .rows = rows, .in_features = in_features, .out_features = out_features,
                      .block = block, .accumulate = accumulate, .rowwise = rowwise, .bf16x3_prepared = split_input};
    size_t tasks = (out_features + block - 1) / block;
    job.tasks = tasks;
    if (q) job.q8_path = q8_path_choose(q, rows);
    /* (a few rows quantize in no time) */
    bool shared_q8 = q && tasks > 1 && rows >= 16, in_parts = shared_q8 && job.q8_path->prepare_rows;
    if (before && !in_parts) rows_step_apart(before, rows, in_features, threads);
    uint64_t started = profile_start();
    if (split_input) split_prepare(threads, &job, tasks);
    if (shared_q8) q8_prepare_shared(threads, &job);
    if (!q && !split_input && tasks > 1) f32_ranges(threads, &job);
    if (before && in_parts) {
        if (job.q8_parts)
            job.before = before;
        else /* (the shared buffer could not grow: each task quantizes all rows) */
            kernel_rows_run(before, rows, in_features, threads);
    }
    pool_for(threads, tasks, linear_task, &job); /* (one task runs on the caller, with its scratch) */
    profile_stop(PROFILE_PRODUCTS, started);
}

void kernel_linear(float *out, size_t out_stride, const float *in, size_t in_stride, const kernel_weight *weight,
                   const float *bias, size_t rows, size_t in_features, size_t out_features, bool accumulate,
                   pool *threads) {
    linear(out, out_stride, in, in_stride, NULL, weight, bias, rows, in_features, out_features, accumulate, false,
           threads);
}

void kernel_linear_after(float *out, size_t out_stride, const float *in, size_t in_stride,
                         const kernel_rows_step *before, const kernel_weight *weight, const float *bias, size_t rows,
                         size_t in_features, size_t out_features, bool accumulate, pool *threads) {
    linear(out, out_stride, in, in_stride, before, weight, bias, rows, in_features, out_features, accumulate, false,
           threads);
}

bool kernel_linear_rows_exact(size_t rows) { return rows <= 1 || (cpu_has_avx512() && rows < KERNEL_LINEAR_FEW_ROWS); }

void kernel_linear_rowwise(float *out, size_t out_stride, const float *in, size_t in_stride,
                           const kernel_weight *weight, const float *bias, size_t rows, size_t in_features,
                           size_t out_features, bool accumulate, pool *threads) {
    linear(out, out_stride, in, in_stride, NULL, weight, bias, rows, in_features, out_features, accumulate, true,
           threads);
}
