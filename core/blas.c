/* blas.c — the linear layer and attention: their split over the pool's
 * threads, and the choice between our AVX-512 kernels (linear_avx512.c, every
 * product where the CPU has AVX-512) and OpenBLAS (everywhere else; the only
 * file that talks to it). OpenBLAS itself runs single-threaded; parallelism
 * comes from our pool (pool.c), so the thread count stays a parameter of
 * each context rather than a process-wide setting. */
#include <cblas.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>

#include "core/kernels.h"

static pthread_once_t blas_once = PTHREAD_ONCE_INIT;

static void blas_single_threaded(void) { openblas_set_num_threads(1); }

/* Columns per task: wide enough that each sgemm call stays efficient. */
#define LINEAR_COLUMN_BLOCK 128

typedef struct linear_job {
    float *out;
    size_t out_stride;
    const float *in;
    size_t in_stride;
    const void *weight;
    weight_type type;
    const float *bias;
    size_t rows, in_features, out_features, block;
    int accumulate;
} linear_job;

int kernel_avx512_available(void) {
    static int known = -1;
    if (known < 0) {
        __builtin_cpu_init();
        const char *off = getenv("GLIMPSE_NO_AVX512"); /* to run the OpenBLAS path anywhere */
        known = __builtin_cpu_supports("avx512f") && !(off && off[0] && off[0] != '0');
    }
    return known;
}

static void linear_16bit_plain(const linear_job *job, size_t first, size_t count) {
    for (size_t r = 0; r < job->rows; r++)
        for (size_t c = first; c < first + count; c++) {
            const uint16_t *w = (const uint16_t *)job->weight + c * job->in_features;
            const float *x = job->in + r * job->in_stride;
            float sum = 0.0f;
            for (size_t k = 0; k < job->in_features; k++)
                sum += x[k] * (job->type == WEIGHT_TYPE_F16 ? kernel_f16_to_f32(w[k]) : kernel_bf16_to_f32(w[k]));
            if (job->bias) sum += job->bias[c];
            float *cell = job->out + r * job->out_stride + c;
            *cell = job->accumulate ? *cell + sum : sum;
        }
}

static void linear_task(void *argument, size_t index, float *scratch) {
    const linear_job *job = argument;
    size_t first = index * job->block;
    size_t count = job->out_features - first < job->block ? job->out_features - first : job->block;
    if (kernel_avx512_available()) {
        kernel_product product = {job->out,    job->out_stride, job->in,   job->in_stride,
                                  job->weight, job->type,       job->in_features, 1,
                                  job->bias,   1.0f,            job->accumulate,  job->rows,
                                  job->in_features};
        kernel_product_avx512(&product, first, count, scratch, scratch ? POOL_SCRATCH_FLOATS : 0);
        return;
    }
    if (job->type != WEIGHT_TYPE_F32) {
        /* 16-bit weights reach this path only when a caller forces it (models
         * widen them at load where the AVX-512 kernels do not run): plain loops */
        linear_16bit_plain(job, first, count);
        return;
    }
    const float *weights = job->weight;
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

size_t kernel_column_block(const pool *threads, size_t rows, size_t depth, size_t columns) {
    int workers = pool_threads(threads);
    if (workers <= 1 || (double)rows * (double)depth * (double)columns <= 1e5) return columns;
    /* the panel kernels transpose the input once per task: one task per thread
     * there; elsewhere two, so that uneven threads even out */
    size_t share = rows >= 16 && kernel_avx512_available() ? (size_t)workers : (size_t)workers * 2;
    size_t block = (columns + share - 1) / share;
    block = (block + 7) / 8 * 8; /* whole micro-kernels */
    return block < LINEAR_COLUMN_BLOCK ? LINEAR_COLUMN_BLOCK : block;
}

void kernel_linear_typed(float *out, size_t out_stride, const float *in, size_t in_stride, const void *weight,
                         weight_type type, const float *bias, size_t rows, size_t in_features, size_t out_features,
                         int accumulate, pool *threads) {
    pthread_once(&blas_once, blas_single_threaded);
    if (rows == 0 || out_features == 0) return;
    size_t block = kernel_column_block(threads, rows, in_features, out_features);
    linear_job job = {out,  out_stride, in,          in_stride,    weight, type,
                      bias, rows,       in_features, out_features, block,  accumulate};
    size_t tasks = (out_features + block - 1) / block;
    pool_for(threads, tasks, linear_task, &job); /* (one task runs on the caller, with its scratch) */
}

void kernel_linear(float *out, size_t out_stride, const float *in, size_t in_stride, const float *weight,
                   const float *bias, size_t rows, size_t in_features, size_t out_features, pool *threads) {
    kernel_linear_typed(out, out_stride, in, in_stride, weight, WEIGHT_TYPE_F32, bias, rows, in_features, out_features, 0,
                        threads);
}

void kernel_linear_add(float *out, size_t out_stride, const float *in, size_t in_stride, const float *weight,
                       const float *bias, size_t rows, size_t in_features, size_t out_features, pool *threads) {
    kernel_linear_typed(out, out_stride, in, in_stride, weight, WEIGHT_TYPE_F32, bias, rows, in_features, out_features, 1,
                        threads);
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
} attention_job;

/* out[queries, head_dim] = scores[queries, keys] · v[keys, head_dim] (rows v_stride apart) on the AVX-512 kernels. */
static void weighted_values_avx512(float *out, size_t out_stride, const float *scores, size_t queries, size_t keys,
                                   const float *v, size_t v_stride, size_t head_dim, float *scratch) {
    if (queries >= 16) { /* the values as a weight stored transposed: column d, depth (key) j at v[j·stride + d] */
        kernel_product product = {out,  out_stride, scores, keys, v,       WEIGHT_TYPE_F32, 1,
                                  v_stride, NULL, 1.0f, 0,    queries, keys};
        kernel_product_avx512(&product, 0, head_dim, scratch, scratch ? POOL_SCRATCH_FLOATS : 0);
    } else { /* a decoder step's few queries: each a weighted sum of the value rows */
        kernel_weighted_rows_avx512(out, out_stride, scores, keys, v, v_stride, queries, keys, head_dim);
    }
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
    int panels = kernel_avx512_available();
    for (size_t first = 0; first < queries; first += ATTENTION_QUERY_BLOCK) {
        size_t count = queries - first < ATTENTION_QUERY_BLOCK ? queries - first : ATTENTION_QUERY_BLOCK;
        const float *q = job->q + first * job->q_stride + offset;
        float *out = job->out + first * job->out_stride + offset;
        /* scores[count, keys] = scale · q_h · k_hᵀ */
        if (panels) {
            kernel_product product = {scores, keys, q,    job->q_stride, job->k + offset, WEIGHT_TYPE_F32,
                                      job->kv_stride, 1, NULL, job->scale, 0, count, job->head_dim};
            kernel_product_avx512(&product, 0, keys, scratch, scratch ? POOL_SCRATCH_FLOATS : 0);
        } else {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)count, (int)keys, (int)job->head_dim,
                        job->scale, q, (int)job->q_stride, job->k + offset, (int)job->kv_stride, 0.0f, scores,
                        (int)keys);
        }
        if (job->mask == KERNEL_MASK_CAUSAL) /* query first + i sees keys up to first + i + shift */
            for (size_t i = 0; i < count; i++)
                for (size_t j = first + i + shift + 1; j < keys; j++) scores[i * keys + j] = -INFINITY;
        kernel_softmax(scores, count, keys);
        /* out_h[count, head_dim] = scores · v_h */
        if (panels) {
            weighted_values_avx512(out, job->out_stride, scores, count, keys, job->v + offset, job->kv_stride,
                                   job->head_dim, scratch);
        } else {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)count, (int)job->head_dim, (int)keys, 1.0f,
                        scores, (int)keys, job->v + offset, (int)job->kv_stride, 0.0f, out, (int)job->out_stride);
        }
    }
}

void kernel_attention(float *out, size_t out_stride, const float *q, size_t q_stride, const float *k,
                      const float *v, size_t kv_stride, size_t queries, size_t keys, size_t heads,
                      size_t head_dim, float scale, kernel_mask mask, float *scratch, pool *threads) {
    pthread_once(&blas_once, blas_single_threaded);
    attention_job job = {out,  out_stride, q,     q_stride, k,       v, kv_stride, queries,
                         keys, head_dim,   scale, mask,     scratch, 0};
    double work = (double)queries * (double)keys * (double)head_dim * (double)heads;
    pool_for(work > 2e5 ? threads : NULL, heads, attention_head, &job);
}

static void transposed_head(void *argument, size_t head, float *scratch) {
    const attention_job *job = argument;
    size_t queries = job->queries, keys = job->keys, offset = head * job->head_dim;
    float *scores = job->scratch + head * queries * keys;
    const float *keys_t = job->k + offset * job->key_stride;
    if (queries >= 16) { /* the transposed keys as a weight: column j, depth d at keys_t[d·stride + j] */
        kernel_product product = {scores, keys, job->q + offset, job->q_stride, keys_t, WEIGHT_TYPE_F32, 1, job->key_stride,
                                  NULL, job->scale, 0, queries, job->head_dim};
        kernel_product_avx512(&product, 0, keys, scratch, scratch ? POOL_SCRATCH_FLOATS : 0);
    } else { /* each query's scores: a weighted sum of the head's key rows */
        kernel_weighted_rows_avx512(scores, keys, job->q + offset, job->q_stride, keys_t, job->key_stride, queries,
                                    job->head_dim, keys);
        for (size_t i = 0; i < queries * keys; i++) scores[i] *= job->scale;
    }
    kernel_softmax(scores, queries, keys);
    weighted_values_avx512(job->out + offset, job->out_stride, scores, queries, keys, job->v + offset,
                           job->kv_stride, job->head_dim, scratch);
}

void kernel_attention_keys_transposed(float *out, size_t out_stride, const float *q, size_t q_stride,
                                      const float *keys_t, size_t key_stride, const float *v, size_t v_stride,
                                      size_t queries, size_t keys, size_t heads, size_t head_dim, float scale,
                                      float *scratch, pool *threads) {
    pthread_once(&blas_once, blas_single_threaded);
    attention_job job = {out,  out_stride, q,        q_stride,         keys_t,  v,       v_stride, queries,
                         keys, head_dim,   scale,    KERNEL_MASK_NONE, scratch, key_stride};
    double work = (double)queries * (double)keys * (double)head_dim * (double)heads;
    pool_for(work > 2e5 ? threads : NULL, heads, transposed_head, &job);
}
