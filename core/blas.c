/* blas.c — the linear layer and attention: kernel_linear, the one entry
 * point for a linear layer whatever its weight's storage; the split of both
 * over the pool's threads; and the choice, made here only, between our
 * AVX-512 kernels (linear_avx512.c, linear_q8_vnni.c, where core/cpu.h says
 * they run) and OpenBLAS or plain loops everywhere else. The only file that
 * talks to OpenBLAS. OpenBLAS itself runs single-threaded; parallelism comes
 * from our pool (pool.c), so the thread count stays a parameter of each
 * context rather than a process-wide setting. */
#include <cblas.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/bf16x3.h"
#include "core/blas_gemv.h"
#include "core/cpu.h"
#include "core/kernels.h"
#include "core/kernels_avx512.h"
#include "core/profile.h"
#include "core/quantize.h"

static pthread_once_t blas_once = PTHREAD_ONCE_INIT;

static void blas_single_threaded(void) { openblas_set_num_threads(1); }

/* Columns per task: wide enough that each sgemm call stays efficient. */
#define LINEAR_COLUMN_BLOCK 128
/* Multiply-adds (rows × depth × columns) up to which a linear layer stays
 * one task on the calling thread: microseconds of work on one core, the
 * order of what handing tasks to the pool and waiting for the last one
 * costs. It was 1e6 until one-row products went to sgemv; at 1e5 a decoder
 * step's 1 × 768 × 768 projections (5.9e5) are shared while small heads
 * (ITM's 1 × 768 × 2) are not. */
#define LINEAR_PARALLEL_MIN_WORK 1e5
/* Multiply-adds of attention's scores (queries × keys × head_dim × heads) up
 * to which the heads run one after another on the calling thread, for the
 * same reason: a caption step's self-attention over its first few tokens
 * (1 × 10 × 64 × 12 = 7.7e3) is done before the pool would have woken. */
#define ATTENTION_PARALLEL_MIN_WORK 2e5

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
    void *bf16x3_prepared;  /* with a bf16x3 twin: the input split once for every column task (NULL: float32) */
    size_t prepare_parts;   /* in this many parts */
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
        cblas_sgemv(CblasRowMajor, CblasNoTrans, (int)count, (int)job->in_features, 1.0f, weight,
                    (int)job->in_features, job->in, 1, job->accumulate ? 1.0f : 0.0f, job->out + first, 1);
        if (job->bias)
            for (size_t o = 0; o < count; o++) job->out[first + o] += job->bias[first + o];
        return;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)job->rows, (int)count, (int)job->in_features, 1.0f,
                job->in, (int)job->in_stride, weights + first * job->in_features, (int)job->in_features,
                job->accumulate ? 1.0f : 0.0f, job->out + first, (int)job->out_stride);
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

/* Columns first .. first+count of the product with the weight's int8 twin: against the input quantized once
 * for every task (job->q8_prepared), or, when there is none (one task), quantizing it here a chunk of rows at
 * a time in this thread's scratch. Without scratch (no pool), in plain loops a row at a time. */
static void linear_q8(const linear_job *job, size_t first, size_t count, float *scratch) {
    const kernel_q8 *q = job->weight->q8;
    const q8_path *path = job->q8_path;
    if (job->q8_prepared) {
        path->product(job->out, job->out_stride, job->q8_prepared, q, job->bias, job->rows, job->accumulate, first,
                      count);
        return;
    }
    size_t scratch_bytes = scratch ? POOL_SCRATCH_FLOATS * sizeof(float) : 0, done = 0;
    while (done < job->rows) {
        size_t rows = scratch ? path->chunk_rows(q, job->rows - done, scratch_bytes) : 0;
        const float *in = job->in + done * job->in_stride;
        float *out = job->out + done * job->out_stride;
        if (!rows) { /* (only a model with rows of hundreds of thousands of features) */
            q8_product_plain(out, job->out_stride, in, job->in_stride, q, job->bias, job->rows - done, job->accumulate,
                             first, count);
            return;
        }
        q8_prepare_rows(path, scratch, in, job->in_stride, q, rows, (char *)scratch + path->input_bytes(q, rows));
        path->product(out, job->out_stride, scratch, q, job->bias, rows, job->accumulate, first, count);
        done += rows;
    }
}

/* The job's whole input into job->q8_prepared. */
static void q8_prepare_task(void *argument, size_t index, float *scratch) {
    (void)index;
    const linear_job *job = argument;
    q8_prepare_rows(job->q8_path, job->q8_prepared, job->in, job->in_stride, job->weight->q8, job->rows, scratch);
}

/* Quantizes the input of an int8 product split over the pool once, on the calling thread, into the pool's
 * shared buffer, and sets job->q8_prepared to it; leaves it NULL (each task then quantizes the input itself)
 * if the buffer cannot grow or the prepare's temp does not fit the thread's scratch. (Spreading the parts
 * over the threads cost one more wait for the pool at every product, more than it saved: ViT-B/32's
 * products at 50 and 400 rows, two threads.) */
static void q8_prepare_shared(pool *threads, linear_job *job) {
    const kernel_q8 *q = job->weight->q8;
    const q8_path *path = job->q8_path;
    if (path->temp_bytes(q) > POOL_SCRATCH_FLOATS * sizeof(float)) return;
    void *prepared = pool_shared_buffer(threads, path->input_bytes(q, job->rows));
    if (!prepared) return;
    job->q8_prepared = prepared;
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

static void linear_task(void *argument, size_t index, float *scratch) {
    const linear_job *job = argument;
    size_t first = index * job->block;
    size_t count = job->out_features - first < job->block ? job->out_features - first : job->block;
    if (job->weight->q8) {
        linear_q8(job, first, count, scratch);
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

static void linear(float *out, size_t out_stride, const float *in, size_t in_stride, const kernel_weight *weight,
                   const float *bias, size_t rows, size_t in_features, size_t out_features, bool accumulate,
                   bool rowwise, pool *threads) {
    pthread_once(&blas_once, blas_single_threaded);
    const kernel_q8 *q = weight->q8;
    if (q) /* (the int8 twin knows its own sizes; its depth is in_features rounded up to 4) */
        out_features = q->out_features;
    if (rows == 0 || out_features == 0) return;
    /* a bf16x3 twin runs with the input split once (split_prepare) into the pool's shared buffer (without a
     * pool, or where it cannot grow, the float32 values it was made from run on the FMA kernels) */
    const kernel_bf16x3 *split = q ? NULL : weight->bf16x3;
    void *split_input = split ? pool_shared_buffer(threads, bf16x3_input_bytes(split, rows)) : NULL;
    /* (rowwise without AVX-512: each row's sgemv calls are a one-row call's, so its columns are split as one
     * row's are: OpenBLAS's sums may depend on where a column falls in the block) */
    size_t block = column_block(threads, rowwise && !cpu_has_avx512() ? 1 : rows, q ? q->depth : in_features,
                                out_features, split_input ? 32 : 8); /* (AMX: two 16-column tiles) */
    linear_job job = {.out = out, .out_stride = out_stride, .in = in, .in_stride = in_stride, .weight = weight,
                      .bias = bias, .rows = rows, .in_features = in_features, .out_features = out_features,
                      .block = block, .accumulate = accumulate, .rowwise = rowwise, .bf16x3_prepared = split_input};
    size_t tasks = (out_features + block - 1) / block;
    uint64_t started = profile_start();
    if (split_input) split_prepare(threads, &job, tasks);
    if (q) {
        job.q8_path = q8_path_choose(rows);
        if (tasks > 1 && rows >= 16) q8_prepare_shared(threads, &job); /* (a few rows quantize in no time) */
    }
    pool_for(threads, tasks, linear_task, &job); /* (one task runs on the caller, with its scratch) */
    profile_stop(PROFILE_PRODUCTS, started);
}

void kernel_linear(float *out, size_t out_stride, const float *in, size_t in_stride, const kernel_weight *weight,
                   const float *bias, size_t rows, size_t in_features, size_t out_features, bool accumulate,
                   pool *threads) {
    linear(out, out_stride, in, in_stride, weight, bias, rows, in_features, out_features, accumulate, false, threads);
}

bool kernel_linear_rows_exact(size_t rows) { return rows <= 1 || (cpu_has_avx512() && rows < KERNEL_LINEAR_FEW_ROWS); }

void kernel_linear_rowwise(float *out, size_t out_stride, const float *in, size_t in_stride,
                           const kernel_weight *weight, const float *bias, size_t rows, size_t in_features,
                           size_t out_features, bool accumulate, pool *threads) {
    linear(out, out_stride, in, in_stride, weight, bias, rows, in_features, out_features, accumulate, true, threads);
}

typedef struct attention_job {
    float *out;
    size_t out_stride;
    const float *q;
    size_t q_stride;
    const float *k, *v; /* k: keys in rows (kv_stride apart), or transposed per head (key_stride apart) */
    size_t kv_stride, queries, keys, head_dim;
    float scale;
    kernel_mask mask;
    float *scratch;
    size_t key_stride;
    const kernel_attention_rows *probabilities; /* NULL: nothing recorded */
} attention_job;

/* Query `query`'s row of one head in the recording. */
static float *recorded_row(const kernel_attention_rows *rows, size_t head, size_t query) {
    return rows->out + head * rows->head_stride + query * rows->row_stride;
}

/* The recording's rows of queries first .. first+count of one head: zero past the keys. */
static void clear_past_keys(const kernel_attention_rows *rows, size_t head, size_t first, size_t count, size_t keys) {
    for (size_t i = 0; i < count; i++) {
        float *row = recorded_row(rows, head, first + i);
        for (size_t j = keys; j < rows->row_stride; j++) row[j] = 0.0f;
    }
}

/* Copies one head's normalised scores of queries first .. first+count (scores[count, keys]) to the recording. */
static void record_probabilities(const kernel_attention_rows *rows, size_t head, size_t first, const float *scores,
                                 size_t count, size_t keys) {
    for (size_t i = 0; i < count; i++)
        memcpy(recorded_row(rows, head, first + i), scores + i * keys, keys * sizeof(float));
    clear_past_keys(rows, head, first, count, keys);
}

/* One head's scores[count, keys] = scale · q[count, head_dim] · kᵀ, k's rows
 * (one per key) k_stride apart. */
static void head_scores(float *scores, const float *q, size_t q_stride, const float *k, size_t k_stride,
                        size_t count, size_t keys, size_t head_dim, float scale, float *scratch) {
#ifdef GLIMPSE_HAVE_AVX512
    if (cpu_has_avx512()) {
        kernel_product product = {.out = scores, .out_stride = keys, .in = q, .in_stride = q_stride, .weight = k,
                                  .weight_type = WEIGHT_TYPE_F32, .column_stride = k_stride, .depth_stride = 1,
                                  .scale = scale, .rows = count, .depth = head_dim};
        kernel_product_avx512(&product, 0, keys, scratch, scratch ? POOL_SCRATCH_FLOATS : 0);
        return;
    }
#endif
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)count, (int)keys, (int)head_dim, scale, q,
                (int)q_stride, k, (int)k_stride, 0.0f, scores, (int)keys);
}

/* The same with the head's keys transposed: dimension d of key j at keys_t[d·key_stride + j]. */
static void head_scores_keys_transposed(float *scores, const float *q, size_t q_stride, const float *keys_t,
                                        size_t key_stride, size_t count, size_t keys, size_t head_dim, float scale,
                                        float *scratch) {
#ifdef GLIMPSE_HAVE_AVX512
    if (cpu_has_avx512()) {
        if (count >= 16) { /* the transposed keys as a weight: column j, depth d at keys_t[d·stride + j] */
            kernel_product product = {.out = scores, .out_stride = keys, .in = q, .in_stride = q_stride,
                                      .weight = keys_t, .weight_type = WEIGHT_TYPE_F32, .column_stride = 1,
                                      .depth_stride = key_stride, .scale = scale, .rows = count, .depth = head_dim};
            kernel_product_avx512(&product, 0, keys, scratch, scratch ? POOL_SCRATCH_FLOATS : 0);
        } else { /* each query's scores: a weighted sum of the head's key rows */
            kernel_weighted_rows_avx512(scores, keys, q, q_stride, keys_t, key_stride, count, head_dim, keys);
            for (size_t i = 0; i < count * keys; i++) scores[i] *= scale;
        }
        return;
    }
#endif
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)count, (int)keys, (int)head_dim, scale, q,
                (int)q_stride, keys_t, (int)key_stride, 0.0f, scores, (int)keys);
}

/* One head's out[count, head_dim] = scores[count, keys] · v[keys, head_dim] (rows v_stride apart). */
static void head_values(float *out, size_t out_stride, const float *scores, size_t count, size_t keys,
                        const float *v, size_t v_stride, size_t head_dim, float *scratch) {
#ifdef GLIMPSE_HAVE_AVX512
    if (cpu_has_avx512()) {
        if (count >= 16) { /* the values as a weight stored transposed: column d, depth (key) j at v[j·stride + d] */
            kernel_product product = {.out = out, .out_stride = out_stride, .in = scores, .in_stride = keys,
                                      .weight = v, .weight_type = WEIGHT_TYPE_F32, .column_stride = 1,
                                      .depth_stride = v_stride, .scale = 1.0f, .rows = count, .depth = keys};
            kernel_product_avx512(&product, 0, head_dim, scratch, scratch ? POOL_SCRATCH_FLOATS : 0);
        } else { /* a decoder step's few queries: each a weighted sum of the value rows */
            kernel_weighted_rows_avx512(out, out_stride, scores, keys, v, v_stride, count, keys, head_dim);
        }
        return;
    }
#endif
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)count, (int)head_dim, (int)keys, 1.0f, scores,
                (int)keys, v, (int)v_stride, 0.0f, out, (int)out_stride);
}

/* Queries whose scores are made, normalised and used together (one panel of
 * the product kernel): their rows of scores (48 × 577 floats for BLIP's
 * 384-pixel tower, 108 KiB) stay in L2 between the three steps, where a
 * whole head's (1.3 MiB) would not. 12 heads of 577 tokens: 4.8 -> 3.95 ms
 * (96 rows: 4.05 ms). */
#define ATTENTION_QUERY_BLOCK 48

static void attention_head(void *argument, size_t head, float *scratch) {
    const attention_job *job = argument;
    size_t queries = job->queries, keys = job->keys, offset = head * job->head_dim, shift = keys - queries;
    float *scores = job->scratch + head * queries * keys;
#ifdef GLIMPSE_HAVE_AVX512
    /* with several blocks of queries, the head's values regrouped once at the end of the scratch */
    const float *packed_v = NULL;
    size_t block_scratch = scratch ? POOL_SCRATCH_FLOATS : 0;
    if (scratch && cpu_has_avx512() && queries >= 2 * ATTENTION_QUERY_BLOCK) {
        size_t packed = (kernel_attention_packed_floats(keys, job->head_dim) + 15) / 16 * 16; /* (64-byte aligned) */
        if (packed + (job->head_dim + keys) * ATTENTION_QUERY_BLOCK <= POOL_SCRATCH_FLOATS) {
            float *room = scratch + POOL_SCRATCH_FLOATS - packed;
            kernel_attention_pack_values_avx512(room, job->v + offset, job->kv_stride, keys, job->head_dim);
            packed_v = room, block_scratch = POOL_SCRATCH_FLOATS - packed;
        }
    }
#endif
    for (size_t first = 0; first < queries; first += ATTENTION_QUERY_BLOCK) {
        size_t count = queries - first < ATTENTION_QUERY_BLOCK ? queries - first : ATTENTION_QUERY_BLOCK;
        const float *q = job->q + first * job->q_stride + offset;
        float *out = job->out + first * job->out_stride + offset;
#ifdef GLIMPSE_HAVE_AVX512
        if (cpu_has_avx512()) { /* the three steps in one, where the kernel takes the block */
            const kernel_attention_rows *rows = job->probabilities;
            kernel_attention_block block = {
                .out = out, .out_stride = job->out_stride, .q = q, .q_stride = job->q_stride, .k = job->k + offset,
                .v = job->v + offset, .kv_stride = job->kv_stride, .count = count, .keys = keys,
                .head_dim = job->head_dim, .scale = job->scale, .causal = job->mask == KERNEL_MASK_CAUSAL,
                .visible = (long long)(first + shift),
                .probabilities = rows ? recorded_row(rows, head, first) : NULL,
                .probability_stride = rows ? rows->row_stride : 0, .packed_v = packed_v};
            if (kernel_attention_block_avx512(&block, scratch, block_scratch)) {
                if (rows) clear_past_keys(rows, head, first, count, keys);
                continue;
            }
            packed_v = NULL; /* (the three kernels below may use all of the scratch) */
        }
#endif
        head_scores(scores, q, job->q_stride, job->k + offset, job->kv_stride, count, keys, job->head_dim,
                    job->scale, scratch);
        if (job->mask == KERNEL_MASK_CAUSAL) /* query first + i sees keys up to first + i + shift */
            for (size_t i = 0; i < count; i++)
                for (size_t j = first + i + shift + 1; j < keys; j++) scores[i * keys + j] = -INFINITY;
        kernel_softmax(scores, count, keys);
        if (job->probabilities) record_probabilities(job->probabilities, head, first, scores, count, keys);
        head_values(out, job->out_stride, scores, count, keys, job->v + offset, job->kv_stride, job->head_dim,
                    scratch);
    }
}

void kernel_attention(float *out, size_t out_stride, const kernel_attention_rows *probabilities, const float *q,
                      size_t q_stride, const float *k, const float *v, size_t kv_stride, size_t queries, size_t keys,
                      size_t heads, size_t head_dim, float scale, kernel_mask mask, float *scratch, pool *threads) {
    pthread_once(&blas_once, blas_single_threaded);
    attention_job job = {.out = out, .out_stride = out_stride, .q = q, .q_stride = q_stride, .k = k, .v = v,
                         .kv_stride = kv_stride, .queries = queries, .keys = keys, .head_dim = head_dim, .scale = scale,
                         .mask = mask, .scratch = scratch, .probabilities = probabilities};
    double work = (double)queries * (double)keys * (double)head_dim * (double)heads;
    uint64_t started = profile_start();
    pool_for(work > ATTENTION_PARALLEL_MIN_WORK ? threads : NULL, heads, attention_head, &job);
    profile_stop(PROFILE_ATTENTION, started);
}

static void transposed_head(void *argument, size_t head, float *scratch) {
    const attention_job *job = argument;
    size_t queries = job->queries, keys = job->keys, offset = head * job->head_dim;
    float *scores = job->scratch + head * queries * keys;
    head_scores_keys_transposed(scores, job->q + offset, job->q_stride, job->k + offset * job->key_stride,
                                job->key_stride, queries, keys, job->head_dim, job->scale, scratch);
    kernel_softmax(scores, queries, keys);
    if (job->probabilities) record_probabilities(job->probabilities, head, 0, scores, queries, keys);
    head_values(job->out + offset, job->out_stride, scores, queries, keys, job->v + offset, job->kv_stride,
                job->head_dim, scratch);
}

void kernel_attention_keys_transposed(float *out, size_t out_stride, const kernel_attention_rows *probabilities,
                                      const float *q, size_t q_stride, const float *keys_t, size_t key_stride,
                                      const float *v, size_t v_stride, size_t queries, size_t keys, size_t heads,
                                      size_t head_dim, float scale, float *scratch, pool *threads) {
    pthread_once(&blas_once, blas_single_threaded);
    attention_job job = {.out = out, .out_stride = out_stride, .q = q, .q_stride = q_stride, .k = keys_t, .v = v,
                         .kv_stride = v_stride, .queries = queries, .keys = keys, .head_dim = head_dim, .scale = scale,
                         .mask = KERNEL_MASK_NONE, .scratch = scratch, .key_stride = key_stride,
                         .probabilities = probabilities};
    double work = (double)queries * (double)keys * (double)head_dim * (double)heads;
    uint64_t started = profile_start();
    pool_for(work > ATTENTION_PARALLEL_MIN_WORK ? threads : NULL, heads, transposed_head, &job);
    profile_stop(PROFILE_ATTENTION, started);
}

void blas_matrix_vector(float *out, const float *matrix, size_t rows, size_t cols, const float *x) {
    pthread_once(&blas_once, blas_single_threaded);
    cblas_sgemv(CblasRowMajor, CblasNoTrans, (int)rows, (int)cols, 1.0f, matrix, (int)cols, x, 1, 0.0f, out, 1);
}
