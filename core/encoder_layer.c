/* encoder_layer.c — one pre-LN encoder block over packed sequences. */
#include "core/encoder_layer.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/pool.h"
#include "core/profile.h"

int activation_from_name(const char *name, activation *out) {
    if (strcmp(name, "gelu") == 0) {
        *out = ACTIVATION_GELU;
    } else if (strcmp(name, "quick_gelu") == 0) {
        *out = ACTIVATION_QUICK_GELU;
    } else if (strcmp(name, "gelu_new") == 0 || strcmp(name, "gelu_pytorch_tanh") == 0 ||
               strcmp(name, "gelu_fast") == 0) {
        *out = ACTIVATION_GELU_TANH;
    } else if (strcmp(name, "relu") == 0) {
        *out = ACTIVATION_RELU;
    } else {
        return 0;
    }
    return 1;
}

void activation_apply(activation act, float *x, size_t n) {
    switch (act) {
    case ACTIVATION_GELU: kernel_gelu(x, n); break;
    case ACTIVATION_QUICK_GELU: kernel_quick_gelu(x, n); break;
    case ACTIVATION_GELU_TANH: kernel_gelu_tanh(x, n); break;
    case ACTIVATION_RELU:
        for (size_t i = 0; i < n; i++)
            if (x[i] < 0.0f) x[i] = 0.0f;
        break;
    }
}

/* Whether the layer's q, k and v are one fused projection (stored so, or fused at int8). */
static bool encoder_layer_fused(const encoder_layer *layer) { return layer->qkv_weight.data || layer->qkv_weight.q8; }

glimpse_status encoder_layers_fuse_q8(encoder_layer *layers, size_t count, const encoder_shape *shape, q8_set *set) {
    size_t h = shape->hidden;
    for (size_t l = 0; l < count; l++) {
        encoder_layer *layer = &layers[l];
        const kernel_weight *parts[3] = {&layer->q_weight, &layer->k_weight, &layer->v_weight};
        const float *biases[3] = {layer->q_bias, layer->k_bias, layer->v_bias};
        if (encoder_layer_fused(layer) || !parts[0]->data || parts[0]->q8) continue;
        weight_type type = parts[0]->type;
        if (parts[1]->type != type || parts[2]->type != type) continue;
        size_t bytes = h * h * weight_type_bytes(type);
        char *values = malloc(3 * bytes);
        float *bias = calloc(3 * h, sizeof *bias);
        if (!values || !bias) {
            free(values), free(bias);
            return ERROR_OOM();
        }
        for (int p = 0; p < 3; p++) {
            memcpy(values + p * bytes, parts[p]->data, bytes);
            if (biases[p]) memcpy(bias + p * h, biases[p], h * sizeof *bias);
        }
        kernel_weight fused = {.data = values, .type = type};
        glimpse_status status = q8_set_add(set, &fused, 3 * h, h); /* (its release finds no mapping: a copy) */
        free(values);
        if (!status) status = q8_set_own(set, bias);
        else free(bias);
        if (status) return status;
        for (int p = 0; p < 3 && set->release; p++) set->release(set->release_user, parts[p]->data, bytes);
        layer->qkv_weight = (kernel_weight){.type = type, .q8 = fused.q8};
        layer->qkv_bias = bias;
    }
    return GLIMPSE_STATUS_OK;
}

glimpse_status encoder_layers_add_twins(encoder_layer *layers, size_t count, const encoder_shape *shape,
                                        kernel_twin_add add, void *set) {
    size_t h = shape->hidden, inter = shape->intermediate;
    glimpse_status status = GLIMPSE_STATUS_OK;
    for (size_t l = 0; l < count && !status; l++) {
        encoder_layer *layer = &layers[l];
        if (layer->qkv_weight.data) {
            status = add(set, &layer->qkv_weight, 3 * h, h);
        } else if (!layer->qkv_weight.q8) { /* (else fused at int8 already: encoder_layers_fuse_q8) */
            if (!status) status = add(set, &layer->q_weight, h, h);
            if (!status) status = add(set, &layer->k_weight, h, h);
            if (!status) status = add(set, &layer->v_weight, h, h);
        }
        if (!status) status = add(set, &layer->out_weight, h, h);
        if (!status) status = add(set, &layer->fc1_weight, inter, h);
        if (!status) status = add(set, &layer->fc2_weight, h, inter);
    }
    return status;
}

/* Positions first .. first+count of every layer of sequence `to` in (keys, values) from sequence `from` in
 * (from_keys, from_values). */
static void kv_cache_copy(const kv_cache *cache, float *keys, float *values, size_t to, const float *from_keys,
                          const float *from_values, size_t from, size_t first, size_t count) {
    size_t layer_floats = cache->max_length * cache->hidden, sequence_floats = cache->layers * layer_floats;
    for (size_t l = 0; l < cache->layers; l++) {
        size_t to_at = to * sequence_floats + l * layer_floats + first * cache->hidden;
        size_t from_at = from * sequence_floats + l * layer_floats + first * cache->hidden;
        memcpy(keys + to_at, from_keys + from_at, count * cache->hidden * sizeof(float));
        memcpy(values + to_at, from_values + from_at, count * cache->hidden * sizeof(float));
    }
}

void kv_cache_reorder(const kv_cache *cache, size_t shared, size_t length, const size_t *from, size_t sequences) {
    if (shared >= length) return;
    size_t count = length - shared;
    float *keys = *cache->keys, *values = *cache->values, *spare_keys = *cache->spare_keys;
    float *spare_values = *cache->spare_values;
    /* first the sequences that are overwritten but copied elsewhere: into the spares */
    for (size_t p = 0; p < sequences; p++) {
        if (from[p] == p) continue;
        for (size_t q = 0; q < sequences; q++)
            if (q != p && from[q] == p) {
                kv_cache_copy(cache, spare_keys, spare_values, p, keys, values, p, shared, count);
                break;
            }
    }
    for (size_t q = 0; q < sequences; q++) {
        size_t source = from[q];
        if (source == q) continue;
        bool saved = from[source] != source; /* (overwritten: its old rows are in the spares) */
        kv_cache_copy(cache, keys, values, q, saved ? spare_keys : keys, saved ? spare_values : values, source,
                      shared, count);
    }
}

/* Row-wise steps of a layer: a LayerNorm and an activation, as kernel_rows_step runs them (spread over the pool
 * with the products parallel, a LayerNorm or an activation left on one thread is time the other waits; or inside
 * the product that reads their rows, kernel_linear_after). */
typedef struct layernorm_step {
    float *out;
    const float *in; /* rows width apart, as out's */
    const float *weight, *bias;
    size_t width;
    float epsilon;
} layernorm_step;

static void layernorm_run(const void *argument, size_t first, size_t count) {
    const layernorm_step *job = argument;
    kernel_layernorm(job->out + first * job->width, job->in + first * job->width, job->weight, job->bias, count,
                     job->width, job->epsilon);
}

typedef struct activation_step {
    float *x;
    size_t width, stride;
    activation act;
} activation_step;

static void activation_run(const void *argument, size_t first, size_t count) {
    const activation_step *job = argument;
    for (size_t r = first; r < first + count; r++) activation_apply(job->act, job->x + r * job->stride, job->width);
}

/* Row strides of the q|k|v and feed-forward buffers: 16 floats past their
 * width, so that rows are not a multiple of 4 KiB apart (3072 or 2048 floats
 * are), which puts the 48 rows a micro-kernel writes in the same L1 sets:
 * 577x768x3072 ran at 320 GFLOP/s written 3072 floats apart, 351-387 at
 * 3056 or 3080. */
static size_t qkv_stride(const encoder_shape *shape) { return 3 * shape->hidden + 16; }
static size_t mlp_stride(const encoder_shape *shape) { return shape->intermediate + 16; }

size_t encoder_scratch_floats(const encoder_shape *shape, size_t rows, size_t max_sequence) {
    return rows * (2 * shape->hidden + qkv_stride(shape) + mlp_stride(shape)) +
           shape->heads * max_sequence * max_sequence;
}

void encoder_scratch_carve(encoder_scratch *scratch, float *memory, const encoder_shape *shape, size_t rows,
                           size_t max_sequence) {
    (void)max_sequence;
    scratch->qkv_stride = qkv_stride(shape), scratch->mlp_stride = mlp_stride(shape);
    scratch->normed = memory;
    scratch->qkv = scratch->normed + rows * shape->hidden;
    scratch->context = scratch->qkv + rows * scratch->qkv_stride;
    scratch->mlp = scratch->context + rows * shape->hidden;
    scratch->scores = scratch->mlp + rows * scratch->mlp_stride;
}

/* The feed-forward sub-layer on x[rows, hidden] in place. Each LayerNorm and the activation is the step before
 * the product that reads its rows (kernel_linear_after): at int8 on two threads, made by the task that quantizes
 * them, one wait for the pool and one pass less each, ViT-B/32 at batch 1 took 0.991–0.993 of the time (vision)
 * and 0.981–0.987 (text), paired medians of 200–300 alternating calls in one process, AMD EPYC Zen 5. (The
 * activation applied instead by each of fc1's column tasks to its own columns as it finished them won nothing:
 * int8 at batch 1, paired new/old medians of 30 alternating processes, vision 1.008 and text 1.001; float32 at
 * batch 8, whose 400 rows × 1,536 columns a task no longer sit in L2 when it is done, vision 1.021 slower over
 * 12.) */
static void feed_forward(float *x, const encoder_layer *layer, const encoder_shape *shape, size_t rows,
                         const encoder_scratch *scratch, pool *threads) {
    size_t hidden = shape->hidden, stride = scratch->mlp_stride;
    layernorm_step norm = {scratch->normed, x, layer->norm2_weight, layer->norm2_bias, hidden, shape->epsilon};
    kernel_rows_step normed = {layernorm_run, &norm, PROFILE_NORMS};
    kernel_linear_after(scratch->mlp, stride, scratch->normed, hidden, &normed, &layer->fc1_weight, layer->fc1_bias,
                        rows, hidden, shape->intermediate, false, threads);
    activation_step act = {scratch->mlp, shape->intermediate, stride, shape->act};
    kernel_rows_step activated = {activation_run, &act, PROFILE_ACTIVATIONS};
    kernel_linear_after(x, hidden, scratch->mlp, stride, &activated, &layer->fc2_weight, layer->fc2_bias, rows,
                        shape->intermediate, hidden, true, threads);
}

/* The attention sub-layer's inputs: scratch->normed = LN1(x) and, for every
 * row, q | k | v in scratch->qkv. With separate projections the queries are
 * left out unless with_queries; a fused one makes all three. A layer without
 * norm1 (an attention-pooling head) projects x itself and leaves normed alone. */
static void attention_inputs(const float *x, const encoder_layer *layer, const encoder_shape *shape, size_t rows,
                             int with_queries, const encoder_scratch *scratch, pool *threads) {
    size_t hidden = shape->hidden, qs = scratch->qkv_stride;
    float *qkv = scratch->qkv;
    const float *source = x;
    layernorm_step norm = {scratch->normed, x, layer->norm1_weight, layer->norm1_bias, hidden, shape->epsilon};
    kernel_rows_step normed = {layernorm_run, &norm, PROFILE_NORMS}, *before = NULL;
    if (layer->norm1_weight) source = scratch->normed, before = &normed;
    if (encoder_layer_fused(layer)) {
        kernel_linear_after(qkv, qs, source, hidden, before, &layer->qkv_weight, layer->qkv_bias, rows, hidden,
                            3 * hidden, false, threads);
        return;
    }
    const kernel_weight *weights[3] = {&layer->q_weight, &layer->k_weight, &layer->v_weight};
    const float *biases[3] = {layer->q_bias, layer->k_bias, layer->v_bias};
    for (int i = with_queries ? 0 : 1; i < 3; i++, before = NULL) /* (the LayerNorm before the first) */
        kernel_linear_after(qkv + i * hidden, qs, source, hidden, before, weights[i], biases[i], rows, hidden, hidden,
                            false, threads);
}

void encoder_layer_forward(float *x, const attention_record *record, size_t layer_index, const encoder_layer *layer,
                           const encoder_shape *shape, const size_t *lengths, size_t sequences,
                           const encoder_scratch *scratch, pool *threads) {
    size_t hidden = shape->hidden, rows = 0;
    for (size_t s = 0; s < sequences; s++) rows += lengths[s];
    size_t head_dim = hidden / shape->heads;
    float scale = 1.0f / sqrtf((float)head_dim);

    /* attention sub-layer; at int8 its products on bfloat16 (kernel_attention_bf16: no less exact than the
     * layer's 8-bit products around it) */
    bool int8 = layer->out_weight.q8 != NULL;
    attention_inputs(x, layer, shape, rows, 1, scratch, threads);
    const float *qkv = scratch->qkv; /* [rows, 3·hidden] (rows qs apart): q | k | v */
    size_t qs = scratch->qkv_stride, start = 0;
    for (size_t s = 0; s < sequences; s++) {
        const float *q = qkv + start * qs;
        kernel_attention_rows place;
        const kernel_attention_rows *probabilities = attention_record_rows(
            record, ATTENTION_KIND_SELF, layer_index, s, shape->heads, 0, lengths[s], lengths[s], &place);
        (int8 ? kernel_attention_bf16 : kernel_attention)(scratch->context + start * hidden, hidden, probabilities, q,
                                                          qs, q + hidden, q + 2 * hidden, qs, lengths[s], lengths[s],
                                                          shape->heads, head_dim, scale, shape->mask, scratch->scores,
                                                          threads);
        start += lengths[s];
    }
    kernel_linear(x, hidden, scratch->context, hidden, &layer->out_weight, layer->out_bias, rows, hidden, hidden, true,
                  threads);

    feed_forward(x, layer, shape, rows, scratch, threads);
}

void encoder_layer_forward_pooled(float *x, const encoder_layer *layer, const encoder_shape *shape,
                                  const size_t *lengths, const size_t *pooled, size_t sequences,
                                  const encoder_scratch *scratch, pool *threads) {
    size_t hidden = shape->hidden, rows = 0;
    for (size_t s = 0; s < sequences; s++) rows += lengths[s];
    size_t head_dim = hidden / shape->heads;
    float scale = 1.0f / sqrtf((float)head_dim);

    /* Keys and values of every row, the query of the pooled rows only. */
    attention_inputs(x, layer, shape, rows, 0, scratch, threads);
    const float *qkv = scratch->qkv;
    size_t qs = scratch->qkv_stride;
    float *queries = scratch->normed; /* [sequences, hidden]; normed is read below before it is overwritten */
    if (encoder_layer_fused(layer)) { /* fused: the pooled rows' queries were made with the rest */
        for (size_t s = 0, start = 0; s < sequences; start += lengths[s], s++)
            memcpy(queries + s * hidden, qkv + (start + pooled[s]) * qs, hidden * sizeof(float));
    } else {
        float *picked = scratch->context; /* the pooled rows' normed inputs, [sequences, hidden] */
        for (size_t s = 0, start = 0; s < sequences; start += lengths[s], s++)
            memcpy(picked + s * hidden, scratch->normed + (start + pooled[s]) * hidden, hidden * sizeof(float));
        kernel_linear(queries, hidden, picked, hidden, &layer->q_weight, layer->q_bias, sequences, hidden, hidden,
                      false, threads);
    }
    for (size_t s = 0, start = 0; s < sequences; start += lengths[s], s++) {
        const float *k = qkv + start * qs;
        size_t keys = shape->mask == KERNEL_MASK_CAUSAL ? pooled[s] + 1 : lengths[s];
        kernel_attention(scratch->context + s * hidden, hidden, NULL, queries + s * hidden, hidden, k + hidden,
                         k + 2 * hidden, qs, 1, keys, shape->heads, head_dim, scale, KERNEL_MASK_NONE,
                         scratch->scores, threads);
    }
    /* The rest of the layer on the pooled rows, gathered, then put back. */
    float *kept = scratch->qkv; /* [sequences, hidden] */
    for (size_t s = 0, start = 0; s < sequences; start += lengths[s], s++)
        memcpy(kept + s * hidden, x + (start + pooled[s]) * hidden, hidden * sizeof(float));
    kernel_linear(kept, hidden, scratch->context, hidden, &layer->out_weight, layer->out_bias, sequences, hidden,
                  hidden, true, threads);
    feed_forward(kept, layer, shape, sequences, scratch, threads);
    for (size_t s = 0, start = 0; s < sequences; start += lengths[s], s++)
        memcpy(x + (start + pooled[s]) * hidden, kept + s * hidden, hidden * sizeof(float));
}

/* encoder_stack_forward's shares of a batch: share i is sequences first[i] .. first[i+1]-1, rows row[i] on. */
typedef struct stack_job {
    float *x;
    const encoder_layer *layers;
    size_t count;
    const size_t *pooled, *lengths;
    const encoder_shape *shape;
    const encoder_scratch *scratch;
    float *scores; /* shares 1 on: their attention's scores, score_floats each (share 0: the scratch's) */
    size_t score_floats;
    size_t first[POOL_MAX_THREADS + 1], row[POOL_MAX_THREADS + 1];
    pool *threads;
} stack_job;

static void stack_layers(float *x, const encoder_layer *layers, size_t count, const attention_record *record,
                         const size_t *pooled, const encoder_shape *shape, const size_t *lengths, size_t sequences,
                         const encoder_scratch *scratch, pool *threads) {
    size_t full = pooled ? count - 1 : count;
    for (size_t l = 0; l < full; l++)
        encoder_layer_forward(x, record, l, &layers[l], shape, lengths, sequences, scratch, threads);
    if (full < count)
        encoder_layer_forward_pooled(x, &layers[full], shape, lengths, pooled, sequences, scratch, threads);
}

static void stack_share(void *argument, size_t share, float *scratch) {
    const stack_job *job = argument;
    int thread = pool_thread_of(job->threads, scratch);
    size_t first = job->first[share], row = job->row[share], hidden = job->shape->hidden;
    encoder_scratch mine = *job->scratch; /* its rows' part of every buffer */
    mine.normed += row * hidden, mine.context += row * hidden;
    mine.qkv += row * mine.qkv_stride, mine.mlp += row * mine.mlp_stride;
    if (share) mine.scores = job->scores + (share - 1) * job->score_floats;
    profile_mute(thread != 0); /* (the caller's share is counted, as a pass on one thread would be) */
    stack_layers(job->x + row * hidden, job->layers, job->count, NULL, job->pooled ? job->pooled + first : NULL,
                 job->shape, job->lengths + first, job->first[share + 1] - first, &mine,
                 pool_alone(job->threads, thread));
    profile_mute(false);
}

/* Splits sequences into `shares` runs of about equal rows; false if one would hold a fifth more than its part
 * (then the column split, which balances any batch, is faster). */
static bool stack_split(stack_job *job, size_t sequences, size_t shares) {
    size_t rows = 0;
    for (size_t s = 0; s < sequences; s++) rows += job->lengths[s];
    size_t s = 0, done = 0;
    for (size_t i = 0; i < shares; i++) {
        job->first[i] = s, job->row[i] = done;
        size_t goal = (rows * (i + 1) + shares / 2) / shares, here = 0;
        while (s < sequences && (i + 1 == shares || done + job->lengths[s] / 2 < goal))
            done += job->lengths[s], here += job->lengths[s], s++;
        if (here == 0 || 5 * here > 6 * rows / shares) return false;
    }
    job->first[shares] = sequences, job->row[shares] = rows;
    return true;
}

/* How many shares encoder_stack_forward splits the batch into (1: none), as stack_split has set them in job. */
static size_t stack_shares(stack_job *job, const attention_record *record, size_t sequences) {
    size_t threads = (size_t)pool_threads(job->threads), shares = threads < sequences ? threads : sequences;
    bool apart = job->count && job->layers[0].out_weight.q8 && !record && shares > 1 &&
                 stack_split(job, sequences, shares);
    return apart ? shares : 1;
}

size_t encoder_stack_shares(const encoder_layer *layers, size_t count, const attention_record *record,
                            const size_t *lengths, size_t sequences, pool *threads) {
    stack_job job = {.layers = layers, .count = count, .lengths = lengths, .threads = threads};
    return stack_shares(&job, record, sequences);
}

void encoder_stack_forward(float *x, const attention_record *record, const encoder_layer *layers, size_t count,
                           const size_t *pooled, const encoder_shape *shape, const size_t *lengths, size_t sequences,
                           const encoder_scratch *scratch, pool *threads) {
    stack_job job = {.x = x, .layers = layers, .count = count, .pooled = pooled, .lengths = lengths,
                     .shape = shape, .scratch = scratch, .threads = threads};
    size_t shares = stack_shares(&job, record, sequences);
    if (shares > 1) {
        size_t longest = 0;
        for (size_t s = 0; s < sequences; s++) longest = lengths[s] > longest ? lengths[s] : longest;
        job.score_floats = shape->heads * longest * longest;
        job.scores = pool_shared_buffer(threads, (shares - 1) * job.score_floats * sizeof(float));
    }
    if (shares == 1 || !job.scores) {
        stack_layers(x, layers, count, record, pooled, shape, lengths, sequences, scratch, threads);
        return;
    }
    pool_for(threads, shares, stack_share, &job);
}

void encoder_attention_pool(float *out, const attention_record *record, size_t layer_index, const float *x,
                            const encoder_layer *layer, const float *probe, const encoder_shape *shape,
                            const size_t *lengths, size_t sequences, const encoder_scratch *scratch, pool *threads) {
    size_t hidden = shape->hidden, rows = 0, qs = scratch->qkv_stride;
    for (size_t s = 0; s < sequences; s++) rows += lengths[s];
    size_t head_dim = hidden / shape->heads;
    float scale = 1.0f / sqrtf((float)head_dim);

    attention_inputs(x, layer, shape, rows, 0, scratch, threads); /* keys and values of every row, from x */
    float *query = scratch->mlp; /* the probe's query, the same for every sequence; mlp is free until feed_forward */
    kernel_linear(query, hidden, probe, hidden, &layer->q_weight, layer->q_bias, 1, hidden, hidden, false, threads);
    for (size_t s = 0, start = 0; s < sequences; start += lengths[s], s++) {
        const float *k = scratch->qkv + start * qs;
        kernel_attention_rows place;
        const kernel_attention_rows *probabilities =
            attention_record_rows(record, ATTENTION_KIND_SELF, layer_index, s, shape->heads, 0, 1, lengths[s], &place);
        kernel_attention(scratch->context + s * hidden, hidden, probabilities, query, hidden, k + hidden,
                         k + 2 * hidden, qs, 1, lengths[s], shape->heads, head_dim, scale, KERNEL_MASK_NONE,
                         scratch->scores, threads);
    }
    kernel_linear(out, hidden, scratch->context, hidden, &layer->out_weight, layer->out_bias, sequences, hidden, hidden,
                  false, threads);
    feed_forward(out, layer, shape, sequences, scratch, threads); /* no residual around the attention: the probe is
                                                                     not added back */
}
