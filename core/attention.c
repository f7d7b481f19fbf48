/* attention.c — scaled dot-product attention over packed heads
 * (kernel_attention, and kernel_attention_keys_transposed for a decoder's
 * cache of transposed keys): scores, masking, softmax and the weighted sum
 * of values for a block of queries at a time, heads split over the pool's
 * threads; a decoder step's one query a head over blocks of keys instead,
 * each cached row read once for every head (or per key/value head where
 * heads share one); probabilities optionally recorded for attention maps.
 * Products on our AVX-512 kernels where the CPU has them, else on OpenBLAS;
 * kernel_attention_bf16's blocks (the int8 encoder layers') on bfloat16
 * (attention_bf16_avx512.c) where it has AVX-512 BF16. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/cpu.h"
#include "core/kernels.h"
#include "core/kernels_avx512.h"
#include "core/openblas.h"
#include "core/profile.h"

/* Multiply-adds of attention's scores (queries × keys × head_dim × heads) up
 * to which the heads run one after another on the calling thread, for the
 * same reason: a caption step's self-attention over its first few tokens
 * (1 × 10 × 64 × 12 = 7.7e3) is done before the pool would have woken. */
#define ATTENTION_PARALLEL_MIN_WORK 2e5

typedef struct attention_job {
    float *out;
    size_t out_stride;
    const float *q;
    size_t q_stride;
    const float *k, *v; /* k: keys in rows (kv_stride apart), or transposed per head (key_stride apart) */
    size_t kv_stride, queries, keys, head_dim;
    size_t group; /* query heads per key/value head */
    float scale;
    kernel_mask mask;
    float *scratch;
    size_t key_stride;
    const kernel_attention_rows *probabilities; /* NULL: nothing recorded */
    float *last_sums; /* a decoder step's last block's sums */
    size_t heads; /* (a decoder step's) */
    bool bf16;    /* the blocks' products on bfloat16 (kernel_attention_bf16, where the CPU has AVX512_BF16) */
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
    openblas_gemm(true, count, keys, head_dim, scale, q, q_stride, k, k_stride, 0.0f, scores, keys);
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
    openblas_gemm(false, count, keys, head_dim, scale, q, q_stride, keys_t, key_stride, 0.0f, scores, keys);
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
    openblas_gemm(false, count, head_dim, keys, 1.0f, scores, keys, v, v_stride, 0.0f, out, out_stride);
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
    size_t kv_offset = head / job->group * job->head_dim; /* (its key/value head's) */
    float *scores = job->scratch + head * queries * keys;
#ifdef GLIMPSE_HAVE_AVX512
    /* with several blocks of queries, the head's values regrouped once at the end of the scratch; on bfloat16,
     * its keys and values rounded and regrouped there whatever the blocks */
    const float *packed_v = NULL;
    const uint32_t *packed_kv = NULL;
    size_t block_scratch = scratch ? POOL_SCRATCH_FLOATS : 0;
    if (scratch && job->bf16) {
        size_t packed = (kernel_attention_bf16_packed_words(keys, job->head_dim) + 15) / 16 * 16;
        if (packed < POOL_SCRATCH_FLOATS / 2) {
            uint32_t *room = (uint32_t *)(scratch + POOL_SCRATCH_FLOATS - packed);
            kernel_attention_bf16_pack_avx512(room, job->k + kv_offset, job->v + kv_offset, job->kv_stride, keys,
                                              job->head_dim);
            packed_kv = room, block_scratch = POOL_SCRATCH_FLOATS - packed;
        }
    } else if (scratch && cpu_has_avx512() && queries >= 2 * ATTENTION_QUERY_BLOCK) {
        size_t packed = (kernel_attention_packed_floats(keys, job->head_dim) + 15) / 16 * 16; /* (64-byte aligned) */
        if (packed + (job->head_dim + keys) * ATTENTION_QUERY_BLOCK <= POOL_SCRATCH_FLOATS) {
            float *room = scratch + POOL_SCRATCH_FLOATS - packed;
            kernel_attention_pack_values_avx512(room, job->v + kv_offset, job->kv_stride, keys, job->head_dim);
            packed_v = room, block_scratch = POOL_SCRATCH_FLOATS - packed;
        }
    }
#endif
    for (size_t first = 0; first < queries; first += ATTENTION_QUERY_BLOCK) {
        size_t count = queries - first < ATTENTION_QUERY_BLOCK ? queries - first : ATTENTION_QUERY_BLOCK;
        /* causal: the keys past the block's last query's, which no query of the block sees, are left out of
         * its scores, softmax and values' product rather than computed and masked (their probabilities are
         * zeros, which add nothing: the same sums; a text tower's first 48 of 77 queries see 48 keys) */
        size_t seen = job->mask == KERNEL_MASK_CAUSAL && first + count + shift < keys ? first + count + shift : keys;
        const float *q = job->q + first * job->q_stride + offset;
        float *out = job->out + first * job->out_stride + offset;
#ifdef GLIMPSE_HAVE_AVX512
        if (cpu_has_avx512()) { /* the three steps in one, where the kernel takes the block */
            const kernel_attention_rows *rows = job->probabilities;
            kernel_attention_block block = {
                .out = out, .out_stride = job->out_stride, .q = q, .q_stride = job->q_stride, .k = job->k + kv_offset,
                .v = job->v + kv_offset, .kv_stride = job->kv_stride, .count = count, .keys = keys, .seen = seen,
                .head_dim = job->head_dim, .scale = job->scale, .causal = job->mask == KERNEL_MASK_CAUSAL,
                .visible = (long long)(first + shift),
                .probabilities = rows ? recorded_row(rows, head, first) : NULL,
                .probability_stride = rows ? rows->row_stride : 0, .packed_v = packed_v};
            if (packed_kv ? kernel_attention_block_bf16_avx512(&block, packed_kv, scratch, block_scratch)
                          : kernel_attention_block_avx512(&block, scratch, block_scratch)) {
                if (rows) clear_past_keys(rows, head, first, count, keys);
                continue;
            }
            packed_v = NULL, packed_kv = NULL; /* (the three kernels below may use all of the scratch) */
        }
#endif
        head_scores(scores, q, job->q_stride, job->k + kv_offset, job->kv_stride, count, seen, job->head_dim,
                    job->scale, scratch);
        if (job->mask == KERNEL_MASK_CAUSAL) /* query first + i sees keys up to first + i + shift */
            for (size_t i = 0; i < count; i++)
                for (size_t j = first + i + shift + 1; j < seen; j++) scores[i * seen + j] = -INFINITY;
        kernel_softmax(scores, count, seen);
        if (job->probabilities) record_probabilities(job->probabilities, head, first, scores, count, seen);
        head_values(out, job->out_stride, scores, count, seen, job->v + kv_offset, job->kv_stride, job->head_dim,
                    scratch);
    }
}

#ifdef GLIMPSE_HAVE_AVX512
/* A decoder step: one query a head, which sees every key (nothing is masked). Head by head, each head read its
 * slice of every cached row: a 4 KiB row of 16 heads gives each head 256 bytes of a page, which the hardware's
 * prefetchers, staying within a page, do not follow (llava-interleave-qwen-0.5b's 357 MB of cache a step after
 * 1,817 positions went at 22 GB/s). Now the keys are taken in blocks whose rows are read once, front to back,
 * for every head: the scores block by block, the softmax head by head, each block's weighted values summed from
 * zero, then the blocks' sums added in order. The blocks are fixed, so the sums are the same whatever the
 * threads, and a grouped call gives what a call per head gives. */
#define STEP_SUMS_FLOATS 8192 /* a step's heads × head_dim sums, on a task's stack (32 KiB) */

static size_t step_width(size_t head_dim) { return (head_dim + 15) / 16 * 16; }
/* Keys a block: 128 (64: 11.0 ms a step's attention above, 256: 10.6, 128: 10.1-10.4), at least head_dim, so that
 * each head's scores of a block have room for the block's sums. */
static size_t step_block(size_t head_dim) { return step_width(head_dim) > 128 ? step_width(head_dim) : 128; }

/* Block `index`'s keys: first .. first + the count returned. */
static size_t step_keys(const attention_job *job, size_t index, size_t *first) {
    size_t block = step_block(job->head_dim);
    *first = index * block;
    return job->keys - *first < block ? job->keys - *first : block;
}

static void step_scores(void *argument, size_t index, float *scratch) {
    (void)scratch;
    const attention_job *job = argument;
    size_t first, count = step_keys(job, index, &first);
    kernel_step_scores_avx512(job->scratch, job->keys, job->q, job->k, job->kv_stride, first, count,
                              job->heads / job->group, job->group, job->head_dim, job->scale);
}

static void step_softmax(void *argument, size_t head, float *scratch) {
    (void)scratch;
    const attention_job *job = argument;
    float *row = job->scratch + head * job->keys;
    kernel_softmax(row, 1, job->keys);
    if (job->probabilities) record_probabilities(job->probabilities, head, 0, row, 1, job->keys);
}

/* A block's sums go to its own scores' slots, which nothing reads after its values, the last block's (which may
 * be shorter than a head) to last_sums. */
static void step_values(void *argument, size_t index, float *scratch) {
    (void)scratch;
    const attention_job *job = argument;
    size_t d = job->head_dim, width = step_width(d), first, count = step_keys(job, index, &first);
    float sums[STEP_SUMS_FLOATS] __attribute__((aligned(64)));
    kernel_step_values_avx512(sums, job->scratch, job->keys, job->v, job->kv_stride, first, count,
                              job->heads / job->group, job->group, d);
    bool last = first + count == job->keys;
    for (size_t h = 0; h < job->heads; h++)
        memcpy(last ? job->last_sums + h * width : job->scratch + h * job->keys + first, sums + h * width,
               d * sizeof(float));
}

static void attention_step(attention_job *job, pool *workers) {
    size_t d = job->head_dim, width = step_width(d), heads = job->heads, keys = job->keys;
    float last_sums[STEP_SUMS_FLOATS] __attribute__((aligned(64)));
    job->last_sums = last_sums;
    size_t block = step_block(d), blocks = (keys + block - 1) / block;
    pool_for(workers, blocks, step_scores, job);
    pool_for(workers, heads, step_softmax, job);
    pool_for(workers, blocks, step_values, job);
    for (size_t h = 0; h < heads; h++) { /* the blocks' sums in order */
        float *out = job->out + h * d;
        for (size_t b = 0; b < blocks; b++) {
            const float *sums = b + 1 == blocks ? last_sums + h * width : job->scratch + h * keys + b * block;
            for (size_t c = 0; c < d; c++) out[c] = b ? out[c] + sums[c] : sums[c];
        }
    }
}

/* The same for the heads that share one key/value head (grouped-query attention): a task a key/value head, whose
 * rows (512 bytes for Qwen2-0.5B's two) its heads read together: their scores as the rows of one dot-product call
 * (each row's sums as its own call's, which are kernel_step_scores_avx512's), their weighted values one pass of
 * the same blocks. Qwen2-0.5B's shapes after 1785 positions: 2.9-3.1 ms a step's attention, against 3.9-4.2 in
 * blocks of keys, whose rows of 512 bytes give each block more dot products than bytes to wait for. */
static void group_step(void *argument, size_t kv_head, float *scratch) {
    const attention_job *job = argument;
    size_t group = job->group, keys = job->keys, d = job->head_dim, first = kv_head * group;
    float *scores = job->scratch + first * keys;
    kernel_product product = {.out = scores, .out_stride = keys, .in = job->q + first * d, .in_stride = d,
                              .weight = job->k + kv_head * d, .weight_type = WEIGHT_TYPE_F32,
                              .column_stride = job->kv_stride, .depth_stride = 1, .scale = job->scale, .rows = group,
                              .depth = d, .rowwise = 1};
    kernel_product_avx512(&product, 0, keys, scratch, scratch ? POOL_SCRATCH_FLOATS : 0);
    kernel_softmax(scores, group, keys);
    if (job->probabilities)
        for (size_t i = 0; i < group; i++)
            record_probabilities(job->probabilities, first + i, 0, scores + i * keys, 1, keys);
    kernel_weighted_rows_blocked_avx512(job->out + first * d, d, scores, keys, job->v + kv_head * d, job->kv_stride,
                                        group, keys, d, step_block(d));
}

/* Whether a decoder step's ways take this call. */
static bool is_step(const attention_job *job) {
    return job->queries == 1 && job->keys && job->heads % job->group == 0 &&
           job->heads * step_width(job->head_dim) <= STEP_SUMS_FLOATS && cpu_has_avx512();
}
#endif

/* Attention over keys and values in rows (kernel_attention_grouped's), its blocks on bfloat16 where bf16: a
 * decoder step's one query as attention_step, else a block of queries at a time. */
static void attention_in_rows(float *out, size_t out_stride, const kernel_attention_rows *probabilities,
                              const float *q, size_t q_stride, const float *k, const float *v, size_t kv_stride,
                              size_t queries, size_t keys, size_t heads, size_t group, size_t head_dim, float scale,
                              kernel_mask mask, float *scratch, bool bf16, pool *threads) {
    attention_job job = {.out = out, .out_stride = out_stride, .q = q, .q_stride = q_stride, .k = k, .v = v,
                         .kv_stride = kv_stride, .queries = queries, .keys = keys, .head_dim = head_dim,
                         .group = group ? group : 1, .scale = scale, .mask = mask, .scratch = scratch,
                         .probabilities = probabilities, .heads = heads, .bf16 = bf16};
    double work = (double)queries * (double)keys * (double)head_dim * (double)heads;
    pool *workers = work > ATTENTION_PARALLEL_MIN_WORK ? threads : NULL;
    uint64_t started = profile_start();
#ifdef GLIMPSE_HAVE_AVX512
    if (is_step(&job)) {
        if (job.group > 1)
            pool_for(workers, heads / job.group, group_step, &job);
        else
            attention_step(&job, workers);
        profile_stop(PROFILE_ATTENTION, started);
        return;
    }
#endif
    if (workers)
        pool_for(workers, heads, attention_head, &job);
    else /* (with the caller's scratch, which the block kernels need) */
        pool_for_here(threads, heads, attention_head, &job);
    profile_stop(PROFILE_ATTENTION, started);
}

void kernel_attention(float *out, size_t out_stride, const kernel_attention_rows *probabilities, const float *q,
                      size_t q_stride, const float *k, const float *v, size_t kv_stride, size_t queries, size_t keys,
                      size_t heads, size_t head_dim, float scale, kernel_mask mask, float *scratch, pool *threads) {
    attention_in_rows(out, out_stride, probabilities, q, q_stride, k, v, kv_stride, queries, keys, heads, 1, head_dim,
                      scale, mask, scratch, false, threads);
}

void kernel_attention_bf16(float *out, size_t out_stride, const kernel_attention_rows *probabilities, const float *q,
                           size_t q_stride, const float *k, const float *v, size_t kv_stride, size_t queries,
                           size_t keys, size_t heads, size_t head_dim, float scale, kernel_mask mask, float *scratch,
                           pool *threads) {
    attention_in_rows(out, out_stride, probabilities, q, q_stride, k, v, kv_stride, queries, keys, heads, 1, head_dim,
                      scale, mask, scratch, cpu_has_avx512_bf16(), threads);
}

void kernel_attention_grouped(float *out, size_t out_stride, const kernel_attention_rows *probabilities,
                              const float *q, size_t q_stride, const float *k, const float *v, size_t kv_stride,
                              size_t queries, size_t keys, size_t heads, size_t group, size_t head_dim, float scale,
                              kernel_mask mask, float *scratch, pool *threads) {
    attention_in_rows(out, out_stride, probabilities, q, q_stride, k, v, kv_stride, queries, keys, heads, group,
                      head_dim, scale, mask, scratch, false, threads);
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
    attention_job job = {.out = out, .out_stride = out_stride, .q = q, .q_stride = q_stride, .k = keys_t, .v = v,
                         .kv_stride = v_stride, .queries = queries, .keys = keys, .head_dim = head_dim, .group = 1,
                         .scale = scale, .mask = KERNEL_MASK_NONE, .scratch = scratch, .key_stride = key_stride,
                         .probabilities = probabilities};
    double work = (double)queries * (double)keys * (double)head_dim * (double)heads;
    uint64_t started = profile_start();
    pool_for(work > ATTENTION_PARALLEL_MIN_WORK ? threads : NULL, heads, transposed_head, &job);
    profile_stop(PROFILE_ATTENTION, started);
}
