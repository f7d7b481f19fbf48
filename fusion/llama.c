/* llama.c — the Llama / Qwen2 decoder: config with each class's defaults, loading by the names table, RMSNorm,
 * rotary embeddings, grouped-query attention over a cache of several sequences (its probabilities recorded where
 * a state asks: core/attention_record.h), SwiGLU, beam reordering, and the adapter through which
 * caption_generate drives it after a merged sequence of embeddings. */
#include "fusion/llama.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/encoder_layer.h"
#include "core/error.h"
#include "core/memory.h"
#include "weights/config.h"
#include "weights/layers.h"

/* LlamaConfig's and Qwen2Config's defaults (transformers 4.40), by llama_kind. */
static const struct llama_defaults {
    const char *model_type;
    int vocab_size, hidden_size, intermediate_size, layers, heads, max_positions;
    int kv_heads; /* 0: as many as the query heads */
    int qkv_bias;
} llama_defaults[] = {
    [LLAMA_KIND_LLAMA] = {"llama", 32000, 4096, 11008, 32, 32, 2048, 0, 0},
    [LLAMA_KIND_QWEN2] = {"qwen2", 151936, 4096, 22016, 32, 32, 32768, 32, 1},
};

/* model_type → kind; hidden_act and rope_scaling checked. */
static glimpse_status read_kind(const cJSON *json, const char *where, llama_kind *kind) {
    const char *type, *act;
    glimpse_status status = config_string_or(json, where, "model_type", "llama", &type);
    if (!status) status = config_string_or(json, where, "hidden_act", "silu", &act);
    if (status) return status;
    size_t k = 0, kinds = sizeof llama_defaults / sizeof llama_defaults[0];
    while (k < kinds && strcmp(type, llama_defaults[k].model_type) != 0) k++;
    if (k == kinds)
        return error_set(GLIMPSE_STATUS_UNSUPPORTED, "%s: model_type \"%s\" is not a Llama or Qwen2 decoder",
                         where, type);
    *kind = (llama_kind)k;
    if (strcmp(act, "silu") != 0)
        return error_set(GLIMPSE_STATUS_UNSUPPORTED, "%s: hidden_act \"%s\" is not supported (silu only)", where,
                         act);
    const cJSON *scaling = cJSON_GetObjectItemCaseSensitive(json, "rope_scaling");
    if (scaling && !cJSON_IsNull(scaling))
        return error_set(GLIMPSE_STATUS_UNSUPPORTED, "%s: rope_scaling is not supported", where);
    return GLIMPSE_STATUS_OK;
}

glimpse_status llama_config_read(const cJSON *json, const char *where, llama_config *config) {
    *config = (llama_config){0};
    glimpse_status status = read_kind(json, where, &config->kind);
    if (status) return status;
    const struct llama_defaults *d = &llama_defaults[config->kind];
    double epsilon, theta;
    int attention_bias;
    if ((status = config_int_or(json, where, "hidden_size", 1, CONFIG_MAX_WIDTH, d->hidden_size,
                                &config->hidden_size)) ||
        (status = config_int_or(json, where, "num_hidden_layers", 1, CONFIG_MAX_LAYERS, d->layers, &config->layers)) ||
        (status = config_int_or(json, where, "num_attention_heads", 1, CONFIG_MAX_HEADS, d->heads, &config->heads)) ||
        (status = config_int_or(json, where, "num_key_value_heads", 1, CONFIG_MAX_HEADS,
                                d->kv_heads ? d->kv_heads : config->heads, &config->kv_heads)) ||
        (status = config_int_or(json, where, "intermediate_size", 1, CONFIG_MAX_INTERMEDIATE, d->intermediate_size,
                                &config->intermediate_size)) ||
        (status = config_int_or(json, where, "vocab_size", 1, CONFIG_MAX_VOCABULARY, d->vocab_size,
                                &config->vocab_size)) ||
        /* (up to 2^24: a state holds only the positions its caller asks for) */
        (status = config_int_or(json, where, "max_position_embeddings", 1, 1 << 24, d->max_positions,
                                &config->max_positions)) ||
        (status = config_double_or(json, where, "rms_norm_eps", 1e-6, &epsilon)) ||
        (status = config_double_or(json, where, "rope_theta", 10000.0, &theta)) ||
        (status = config_bool_or(json, where, "attention_bias", 0, &attention_bias)) ||
        (status = config_bool_or(json, where, "tie_word_embeddings", 0, &config->tie_word_embeddings)))
        return status;
    if (config->hidden_size % config->heads)
        return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: hidden_size %d is not divisible by num_attention_heads %d",
                         where, config->hidden_size, config->heads);
    if ((status = config_int_or(json, where, "head_dim", 2, CONFIG_MAX_WIDTH, config->hidden_size / config->heads,
                                &config->head_dim)))
        return status;
    if (config->heads % config->kv_heads || config->head_dim % 2)
        return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: %d attention heads of %d cannot share %d key/value heads",
                         where, config->heads, config->head_dim, config->kv_heads);
    if (!(epsilon > 0) || !(theta > 0))
        return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: rms_norm_eps and rope_theta must be positive", where);
    config->rms_norm_eps = (float)epsilon, config->rope_theta = theta;
    config->qkv_bias = d->qkv_bias || attention_bias;
    config->output_bias = config->kind == LLAMA_KIND_LLAMA && attention_bias;
    return GLIMPSE_STATUS_OK;
}

/* ------------------------------------------------------------- loading */

/* PREFIX.MODULE's weight [out, in] and, with `bias`, its bias [out]. */
static glimpse_status load_projection(weight_store *store, const char *layer, const char *module, size_t out,
                                      size_t in, int bias, kernel_weight *weight, const float **bias_out) {
    char name[LAYERS_NAME_CAPACITY];
    glimpse_status status = layers_name(name, "%s.%s", layer, module);
    if (status) return status;
    if (bias) return layers_load_projection(store, name, out, in, weight, bias_out);
    *bias_out = NULL;
    char weight_name[LAYERS_NAME_CAPACITY];
    status = layers_name(weight_name, "%s.weight", name);
    return status ? status : weight_store_get_matrix(store, weight, out, in, weight_name);
}

/* An RMSNorm's PREFIX.MODULE.weight [dim]. */
static glimpse_status load_rms_norm(weight_store *store, const char *prefix, const char *module, size_t dim,
                                    const float **out) {
    char name[LAYERS_NAME_CAPACITY];
    size_t shape[1] = {dim};
    glimpse_status status = layers_name(name, "%s%s.weight", prefix, module);
    return status ? status : weight_store_get(store, out, 1, shape, name);
}

static glimpse_status load_layer(weight_store *store, const llama_config *c, const llama_layer_names *n,
                                 const char *layer, llama_layer *out) {
    size_t h = (size_t)c->hidden_size, d = (size_t)c->head_dim, inter = (size_t)c->intermediate_size;
    size_t q_width = (size_t)c->heads * d, kv_width = (size_t)c->kv_heads * d;
    const float *none;
    char prefix[LAYERS_NAME_CAPACITY];
    glimpse_status status = layers_name(prefix, "%s.", layer);
    if (!status) status = load_rms_norm(store, prefix, n->input_norm, h, &out->input_norm);
    if (!status) status = load_rms_norm(store, prefix, n->post_attention_norm, h, &out->post_attention_norm);
    if (!status) status = load_projection(store, layer, n->q, q_width, h, c->qkv_bias, &out->q_weight, &out->q_bias);
    if (!status) status = load_projection(store, layer, n->k, kv_width, h, c->qkv_bias, &out->k_weight, &out->k_bias);
    if (!status) status = load_projection(store, layer, n->v, kv_width, h, c->qkv_bias, &out->v_weight, &out->v_bias);
    if (!status)
        status = load_projection(store, layer, n->o, h, q_width, c->output_bias, &out->o_weight, &out->o_bias);
    if (!status) status = load_projection(store, layer, n->gate, inter, h, 0, &out->gate_weight, &none);
    if (!status) status = load_projection(store, layer, n->up, inter, h, 0, &out->up_weight, &none);
    if (!status) status = load_projection(store, layer, n->down, h, inter, 0, &out->down_weight, &none);
    return status;
}

/* inverse_frequencies[i] = 1 / θ^(2i/d), in float32 as transformers' rotary embedding computes it. */
static glimpse_status make_inverse_frequencies(llama_model *model) {
    size_t half = (size_t)model->config.head_dim / 2;
    model->inverse_frequencies = malloc(half * sizeof(float));
    if (!model->inverse_frequencies) return ERROR_OOM();
    float theta = (float)model->config.rope_theta, d = (float)model->config.head_dim;
    for (size_t i = 0; i < half; i++) model->inverse_frequencies[i] = 1.0f / powf(theta, (float)(2 * i) / d);
    return GLIMPSE_STATUS_OK;
}

glimpse_status llama_model_load(llama_model *model, const llama_config *config, const llama_names *names,
                                const char *model_prefix, const char *head_prefix, weight_store *store) {
    memset(model, 0, sizeof *model);
    model->config = *config;
    size_t h = (size_t)config->hidden_size, vocab = (size_t)config->vocab_size;
    char name[LAYERS_NAME_CAPACITY];
    glimpse_status status = layers_name(name, "%s%s", model_prefix, names->embed_tokens);
    if (!status) status = weight_store_get_matrix(store, &model->embed_tokens, vocab, h, name);
    if (!status) status = load_rms_norm(store, model_prefix, names->final_norm, h, &model->final_norm);
    if (!status && !config->tie_word_embeddings) {
        status = layers_name(name, "%s%s", head_prefix, names->lm_head);
        if (!status) status = weight_store_get_matrix_optional(store, &model->lm_head, vocab, h, name);
    }
    if (!status && !model->lm_head.data) model->lm_head = model->embed_tokens;
    if (!status) {
        model->layers = calloc((size_t)config->layers, sizeof *model->layers);
        if (!model->layers) status = ERROR_OOM();
    }
    for (size_t l = 0; !status && l < (size_t)config->layers; l++) {
        status = layers_name(name, "%s%s.%zu", model_prefix, names->layers, l);
        if (!status) status = load_layer(store, config, &names->layer, name, &model->layers[l]);
    }
    if (!status) status = make_inverse_frequencies(model);
    if (status) llama_model_free(model);
    return status;
}

void llama_model_free(llama_model *model) {
    free(model->layers);
    free(model->inverse_frequencies);
    model->layers = NULL;
    model->inverse_frequencies = NULL;
}

glimpse_status llama_model_quantize(llama_model *model, q8_set *set) {
    const llama_config *c = &model->config;
    size_t h = (size_t)c->hidden_size, d = (size_t)c->head_dim, inter = (size_t)c->intermediate_size;
    size_t q_width = (size_t)c->heads * d, kv_width = (size_t)c->kv_heads * d;
    glimpse_status status = GLIMPSE_STATUS_OK;
    for (size_t l = 0; l < (size_t)c->layers && !status; l++) {
        llama_layer *layer = &model->layers[l];
        struct {
            kernel_weight *weight;
            size_t out, in;
        } each[] = {{&layer->q_weight, q_width, h},    {&layer->k_weight, kv_width, h}, {&layer->v_weight, kv_width, h},
                    {&layer->o_weight, h, q_width},    {&layer->gate_weight, inter, h}, {&layer->up_weight, inter, h},
                    {&layer->down_weight, h, inter}};
        for (size_t i = 0; i < sizeof each / sizeof each[0] && !status; i++)
            status = q8_set_add(set, each[i].weight, each[i].out, each[i].in);
    }
    /* the head (a copy of the token embeddings' weight when tied: their lookup keeps reading the stored rows) */
    if (!status) status = q8_set_add(set, &model->lm_head, (size_t)c->vocab_size, h);
    return status;
}

/* ------------------------------------------------------------- run state */

/* The rotary tables of positions 0 .. max_length-1: angle = position · inverse frequency, in float32. */
static void fill_rotary_tables(const llama_model *model, llama_state *s) {
    size_t half = (size_t)model->config.head_dim / 2;
    for (size_t p = 0; p < s->max_length; p++)
        for (size_t i = 0; i < half; i++) {
            float angle = (float)p * model->inverse_frequencies[i];
            s->cosines[p * half + i] = cosf(angle);
            s->sines[p * half + i] = sinf(angle);
        }
}

glimpse_status llama_state_create(const llama_model *model, size_t max_sequences, size_t max_length,
                                  size_t max_step, llama_state **out) {
    *out = NULL;
    const llama_config *c = &model->config;
    if (!max_sequences || !max_length)
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "a decoder state of %zu sequences of %zu positions holds "
                         "nothing", max_sequences, max_length);
    if (max_length > (size_t)c->max_positions) max_length = (size_t)c->max_positions;
    if (max_step > LLAMA_PROMPT_CHUNK) max_step = LLAMA_PROMPT_CHUNK;
    if (max_step > max_length) max_step = max_length;
    if (max_step < 1) max_step = 1;
    llama_state *s = calloc(1, sizeof *s);
    if (!s) return ERROR_OOM();
    size_t h = (size_t)c->hidden_size, d = (size_t)c->head_dim, rows = max_sequences * max_step;
    size_t q_width = (size_t)c->heads * d, kv_width = (size_t)c->kv_heads * d, inter = (size_t)c->intermediate_size;
    size_t cache = max_sequences * (size_t)c->layers * max_length * kv_width;
    size_t spare = max_sequences > 1 ? cache : 0; /* reordering: beams only */
    s->max_sequences = max_sequences, s->max_length = max_length, s->max_step = max_step, s->max_rows = rows;
    /* one allocation, carved in this order, on huge pages (memory_large): a prompt writes all of its scratch and
     * most of its cache, whose 4 KiB page faults were 6-9% of a LLaVA `ask` (0.5b: 4.84-4.87 -> 4.50-4.58 s
     * greedy, 6.17-6.23 -> 5.62-5.85 s with 3 beams; 35 and 50 MB more resident). The spares apart, on small
     * pages: a reordering writes only the few positions past the prompt into each layer's, which huge pages
     * would make 2 MiB each (150 MB more resident with 3 beams). */
    float **parts[] = {&s->keys, &s->values, &s->cosines, &s->sines, &s->x, &s->normed, &s->q, &s->k, &s->v,
                       &s->context, &s->gate, &s->up, &s->embedded, &s->last, &s->scores, &s->logits};
    size_t sizes[] = {cache, cache, max_length * d / 2, max_length * d / 2, rows * h, rows * h, rows * q_width,
                      rows * kv_width, rows * kv_width, rows * q_width, rows * inter, rows * inter, rows * h,
                      max_sequences * h, (size_t)c->heads * max_step * max_length,
                      max_sequences * (size_t)c->vocab_size};
    size_t total = 0;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) total += sizes[i];
    s->memory = memory_large(total * sizeof(float));
    s->spare_memory = spare ? malloc(2 * spare * sizeof(float)) : NULL;
    if (!s->memory || (spare && !s->spare_memory)) {
        free(s->memory), free(s->spare_memory), free(s);
        return ERROR_OOM();
    }
    float *next = s->memory;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) *parts[i] = next, next += sizes[i];
    s->spare_keys = s->spare_memory, s->spare_values = spare ? s->spare_memory + spare : NULL;
    fill_rotary_tables(model, s);
    *out = s;
    return GLIMPSE_STATUS_OK;
}

void llama_state_free(llama_state *s) {
    if (!s) return;
    free(s->memory);
    free(s->spare_memory);
    free(s);
}

/* ------------------------------------------------------------- the forward pass */

glimpse_status llama_embed(const llama_model *model, const int32_t *ids, size_t count, float *out) {
    return caption_embed_ids(out, &model->embed_tokens, (size_t)model->config.hidden_size, model->config.vocab_size,
                             ids, count);
}

/* out[rows, dim] = in / sqrt(mean(in²) + eps) · weight (LlamaRMSNorm / Qwen2RMSNorm). out may equal in. */
static void rms_norm(float *out, const float *in, const float *weight, size_t rows, size_t dim, float epsilon) {
    for (size_t r = 0; r < rows; r++) {
        const float *x = in + r * dim;
        double sum = 0.0;
        for (size_t i = 0; i < dim; i++) sum += (double)x[i] * x[i];
        float scale = 1.0f / sqrtf((float)(sum / (double)dim) + epsilon);
        for (size_t i = 0; i < dim; i++) out[r * dim + i] = weight[i] * (x[i] * scale);
    }
}

void llama_final_norm(const llama_model *model, float *out, const float *in, size_t rows) {
    rms_norm(out, in, model->final_norm, rows, (size_t)model->config.hidden_size, model->config.rms_norm_eps);
}

/* Rotates each head of rows [count, heads·d] (row stride `stride`) at positions first .., half-split pairs
 * (i, i + d/2): x·cos + rotate_half(x)·sin. */
static void rotate(float *rows, size_t stride, size_t count, size_t heads, size_t d, size_t first,
                   const llama_state *s) {
    size_t half = d / 2;
    for (size_t r = 0; r < count; r++) {
        const float *cosines = s->cosines + (first + r) * half, *sines = s->sines + (first + r) * half;
        for (size_t head = 0; head < heads; head++) {
            float *x = rows + r * stride + head * d;
            for (size_t i = 0; i < half; i++) {
                float a = x[i], b = x[i + half];
                x[i] = a * cosines[i] - b * sines[i];
                x[i + half] = b * cosines[i] + a * sines[i];
            }
        }
    }
}

/* Cache rows of sequence q, layer l: [max_length, kv_heads·head_dim]. */
static float *cache_at(const llama_model *model, const llama_state *s, float *base, size_t sequence, size_t layer) {
    size_t kv_width = (size_t)model->config.kv_heads * (size_t)model->config.head_dim;
    return base + ((sequence * (size_t)model->config.layers + layer) * s->max_length) * kv_width;
}

/* Self-attention of `sequences` sequences of `step` new rows each (s->q, s->k, s->v, already rotated) into
 * s->context: the new keys and values appended to the cache, each query head attending through its key/value
 * head (query head j uses j / (heads / kv_heads)), all heads in one call over the pool (one call per head left
 * a step's heads, each below the pool's threshold, on one thread, and a prompt's on one thread per head). */
static void attend(const llama_model *model, llama_state *s, size_t l, size_t sequences, size_t step,
                   pool *threads) {
    const llama_config *c = &model->config;
    size_t d = (size_t)c->head_dim, heads = (size_t)c->heads, kv_heads = (size_t)c->kv_heads;
    size_t q_width = heads * d, kv_width = kv_heads * d, group = heads / kv_heads, keys = s->length + step;
    float scale = 1.0f / sqrtf((float)d);
    for (size_t q = 0; q < sequences; q++) {
        float *cached_keys = cache_at(model, s, s->keys, q, l), *cached_values = cache_at(model, s, s->values, q, l);
        memcpy(cached_keys + s->length * kv_width, s->k + q * step * kv_width, step * kv_width * sizeof(float));
        memcpy(cached_values + s->length * kv_width, s->v + q * step * kv_width, step * kv_width * sizeof(float));
        const float *queries = s->q + q * step * q_width;
        float *context = s->context + q * step * q_width;
        kernel_attention_rows place;
        const kernel_attention_rows *recorded =
            s->length < s->record_from ? NULL
                                       : attention_record_rows(s->record, ATTENTION_KIND_SELF, l, q, heads,
                                                               s->length - s->record_from, step, keys, &place);
        kernel_attention_grouped(context, q_width, recorded, queries, q_width, cached_keys, cached_values, kv_width,
                                 step, keys, heads, group, d, scale, KERNEL_MASK_CAUSAL, s->scores, threads);
    }
}

/* silu(gate) · up into gate, over n values. */
static void swiglu(float *gate, const float *up, size_t n) {
    for (size_t i = 0; i < n; i++) gate[i] = gate[i] / (1.0f + expf(-gate[i])) * up[i];
}

/* x[i] += add[i] for i < n. */
static void add_rows(float *x, const float *add, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] += add[i];
}

/* One layer over s->x [rows, hidden], rows = sequences × step at positions s->length ... */
static void run_layer(const llama_model *model, llama_state *s, size_t l, size_t sequences, size_t step,
                      pool *threads) {
    const llama_config *c = &model->config;
    const llama_layer *layer = &model->layers[l];
    size_t h = (size_t)c->hidden_size, d = (size_t)c->head_dim, rows = sequences * step;
    size_t q_width = (size_t)c->heads * d, kv_width = (size_t)c->kv_heads * d, inter = (size_t)c->intermediate_size;
    rms_norm(s->normed, s->x, layer->input_norm, rows, h, c->rms_norm_eps);
    kernel_linear(s->q, q_width, s->normed, h, &layer->q_weight, layer->q_bias, rows, h, q_width, false, threads);
    kernel_linear(s->k, kv_width, s->normed, h, &layer->k_weight, layer->k_bias, rows, h, kv_width, false, threads);
    kernel_linear(s->v, kv_width, s->normed, h, &layer->v_weight, layer->v_bias, rows, h, kv_width, false, threads);
    for (size_t q = 0; q < sequences; q++) {
        rotate(s->q + q * step * q_width, q_width, step, (size_t)c->heads, d, s->length, s);
        rotate(s->k + q * step * kv_width, kv_width, step, (size_t)c->kv_heads, d, s->length, s);
    }
    attend(model, s, l, sequences, step, threads);
    /* the residual additions after the products (into s->normed, free by then), not in them: the same sums, and a
     * prompt's 16-bit products take the kernel that widens each weight once for all its rows */
    kernel_linear(s->normed, h, s->context, q_width, &layer->o_weight, layer->o_bias, rows, q_width, h, false, threads);
    add_rows(s->x, s->normed, rows * h);
    rms_norm(s->normed, s->x, layer->post_attention_norm, rows, h, c->rms_norm_eps);
    kernel_linear(s->gate, inter, s->normed, h, &layer->gate_weight, NULL, rows, h, inter, false, threads);
    kernel_linear(s->up, inter, s->normed, h, &layer->up_weight, NULL, rows, h, inter, false, threads);
    swiglu(s->gate, s->up, rows * inter);
    kernel_linear(s->normed, h, s->gate, inter, &layer->down_weight, NULL, rows, inter, h, false, threads);
    add_rows(s->x, s->normed, rows * h);
}

/* One pass of `step` rows per sequence through every layer (the head's logits on each sequence's last row when
 * `head`). */
static void forward_step(const llama_model *model, llama_state *s, const float *embeddings, size_t sequences,
                         size_t step, bool head, pool *threads) {
    const llama_config *c = &model->config;
    size_t h = (size_t)c->hidden_size, vocab = (size_t)c->vocab_size;
    memcpy(s->x, embeddings, sequences * step * h * sizeof(float));
    for (size_t l = 0; l < (size_t)c->layers; l++) run_layer(model, s, l, sequences, step, threads);
    s->length += step;
    if (!head) return;
    for (size_t q = 0; q < sequences; q++) /* the head on each sequence's last row */
        memcpy(s->last + q * h, s->x + ((q + 1) * step - 1) * h, h * sizeof(float));
    llama_final_norm(model, s->last, s->last, sequences);
    kernel_linear(s->logits, vocab, s->last, h, &model->lm_head, NULL, sequences, h, vocab, false, threads);
}

glimpse_status llama_forward(const llama_model *model, llama_state *s, const float *embeddings, size_t sequences,
                             size_t step, pool *threads) {
    const llama_config *c = &model->config;
    size_t h = (size_t)c->hidden_size;
    if (sequences > s->max_sequences || (step > s->max_step && sequences > 1) || s->length + step > s->max_length)
        return error_set(GLIMPSE_STATUS_TOO_LARGE, "%zu sequences of %zu positions: more than this decoder state "
                         "holds (%zu of %zu)", sequences, s->length + step, s->max_sequences, s->max_length);
    if (s->record && s->length >= s->record_from &&
        !attention_record_fits(s->record, sequences, (size_t)c->heads, s->length + step - s->record_from,
                               s->length + step, 0))
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "the attention record has no room for %zu sequences of "
                         "%zu positions", sequences, s->length + step);
    /* one sequence's rows beyond max_step: in chunks of max_step (the head on the last one only) */
    size_t done = 0;
    for (; step - done > s->max_step; done += s->max_step)
        forward_step(model, s, embeddings + done * h, 1, s->max_step, false, threads);
    forward_step(model, s, embeddings + done * h, sequences, step - done, true, threads);
    return GLIMPSE_STATUS_OK;
}

void llama_state_keep(const llama_model *model, llama_state *to, const llama_state *from, size_t positions) {
    if (positions > to->max_length) positions = to->max_length;
    if (positions > from->max_length) positions = from->max_length;
    size_t width = (size_t)model->config.kv_heads * (size_t)model->config.head_dim;
    for (size_t l = 0; l < (size_t)model->config.layers; l++) {
        memcpy(cache_at(model, to, to->keys, 0, l), cache_at(model, from, from->keys, 0, l),
               positions * width * sizeof(float));
        memcpy(cache_at(model, to, to->values, 0, l), cache_at(model, from, from->values, 0, l),
               positions * width * sizeof(float));
    }
    to->length = positions, to->shared_length = 0;
}

void llama_reorder(const llama_model *model, llama_state *s, const size_t *from, size_t sequences) {
    kv_cache cache = {&s->keys, &s->values, &s->spare_keys, &s->spare_values, (size_t)model->config.layers,
                      s->max_length, (size_t)model->config.kv_heads * (size_t)model->config.head_dim};
    kv_cache_reorder(&cache, s->shared_length, s->length, from, sequences);
}

/* ------------------------------------------------ as caption_generate's decoder */

static void llama_decoder_restart(void *self) {
    llama_decoder *d = self;
    d->state->length = d->kept, d->state->shared_length = 0;
}

/* Every sequence after the first takes the first's cache and logits (a first step all beams share). */
static void share_first_sequence(const llama_model *model, llama_state *s, size_t sequences) {
    size_t vocab = (size_t)model->config.vocab_size;
    size_t filled = s->length * (size_t)model->config.kv_heads * (size_t)model->config.head_dim * sizeof(float);
    for (size_t q = 1; q < sequences; q++) {
        for (size_t l = 0; l < (size_t)model->config.layers; l++) {
            memcpy(cache_at(model, s, s->keys, q, l), cache_at(model, s, s->keys, 0, l), filled);
            memcpy(cache_at(model, s, s->values, q, l), cache_at(model, s, s->values, 0, l), filled);
        }
        memcpy(s->logits + q * vocab, s->logits, vocab * sizeof(float));
    }
    s->shared_length = s->length; /* (llama_reorder leaves these positions alone) */
}

static glimpse_status llama_decoder_step(void *self, const int32_t *ids, size_t sequences, size_t step,
                                         float **logits, pool *threads) {
    llama_decoder *d = self;
    llama_state *s = d->state;
    *logits = s->logits;
    if (s->length == d->kept) {
        /* caption_generate's prompt ids stand for the merged rows, the same in every sequence: run once */
        if (sequences > s->max_sequences)
            return error_set(GLIMPSE_STATUS_TOO_LARGE, "%zu sequences: this decoder state holds %zu", sequences,
                             s->max_sequences);
        glimpse_status status = llama_forward(d->model, s, d->first_rows, 1, d->first_row_count, threads);
        if (!status && sequences > 1) share_first_sequence(d->model, s, sequences);
        return status;
    }
    if (sequences * step > s->max_rows)
        return error_set(GLIMPSE_STATUS_TOO_LARGE, "%zu rows: this decoder state holds %zu", sequences * step,
                         s->max_rows);
    glimpse_status status = llama_embed(d->model, ids, sequences * step, s->embedded);
    return status ? status : llama_forward(d->model, s, s->embedded, sequences, step, threads);
}

static void llama_decoder_reorder(void *self, const size_t *from, size_t sequences) {
    llama_decoder *d = self;
    llama_reorder(d->model, d->state, from, sequences);
}

caption_decoder llama_caption_decoder(llama_decoder *self) {
    size_t room = self->state->max_length, first = self->kept + self->first_row_count;
    /* the prompt's ids take the first rows' place in generate's length */
    size_t max_length = room >= first ? room - first + self->prompt_length : 0;
    return (caption_decoder){self,
                             self->model->config.vocab_size,
                             self->state->max_sequences,
                             max_length,
                             llama_decoder_restart,
                             llama_decoder_step,
                             llama_decoder_reorder};
}
