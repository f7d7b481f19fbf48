/* gpt2.c — GPT-2 blocks with cross-attention (transformers' GPT2LMHeadModel
 * with add_cross_attention): loading by the names table, the image's keys
 * and values, the cached decoder step, cache reordering for beams, and the
 * adapter caption_generate drives. */
#include "fusion/gpt2.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/memory.h"
#include "weights/config.h"
#include "weights/layers.h"

/* A JSON boolean, or fallback when it is missing or not a boolean. */
static int config_flag(const cJSON *json, const char *key, int fallback) {
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(json, key);
    return cJSON_IsBool(item) ? cJSON_IsTrue(item) : fallback;
}

glimpse_status gpt2_config_read(const cJSON *json, const char *where, int encoder_hidden, gpt2_config *config) {
    glimpse_status status;
    gpt2_config c = {0};
    double eps;
    /* GPT2Config's defaults (transformers 4.27) */
    if ((status = config_int_or(json, where, "n_embd", 1, CONFIG_MAX_WIDTH, 768, &c.hidden_size)) ||
        (status = config_int_or(json, where, "n_layer", 1, CONFIG_MAX_LAYERS, 12, &c.layers)) ||
        (status = config_int_or(json, where, "n_head", 1, CONFIG_MAX_HEADS, 12, &c.heads)) ||
        (status = config_int_or(json, where, "n_inner", 1, CONFIG_MAX_INTERMEDIATE,
                                c.hidden_size <= CONFIG_MAX_INTERMEDIATE / 4 ? 4 * c.hidden_size : 0,
                                &c.intermediate_size)) ||
        (status = config_int_or(json, where, "vocab_size", 1, CONFIG_MAX_VOCABULARY, 50257, &c.vocab_size)) ||
        (status = config_int_or(json, where, "n_positions", 1, CONFIG_MAX_POSITIONS, 1024, &c.max_positions)) ||
        (status = config_double_or(json, where, "layer_norm_epsilon", 1e-5, &eps)) ||
        (status = config_string_or(json, where, "activation_function", "gelu_new", &c.act_name)))
        return status;
    c.layer_norm_eps = (float)eps;
    c.encoder_hidden_size = encoder_hidden;
    if (!activation_from_name(c.act_name, &c.act))
        return error_set(GLIMPSE_STATUS_UNSUPPORTED, "%s: activation_function \"%s\" is not supported", where,
                         c.act_name);
    if (c.hidden_size % c.heads != 0)
        return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: n_embd %d is not divisible by n_head %d", where,
                         c.hidden_size, c.heads);
    if (!config_flag(json, "add_cross_attention", 0))
        return error_set(GLIMPSE_STATUS_UNSUPPORTED, "%s: the decoder has no cross-attention (add_cross_attention "
                         "is not true): it cannot look at the image", where);
    c.scale_attention = config_flag(json, "scale_attn_weights", 1);
    c.scale_by_inverse_layer = config_flag(json, "scale_attn_by_inverse_layer_idx", 0);
    c.tie_word_embeddings = config_flag(json, "tie_word_embeddings", 1);
    *config = c;
    return GLIMPSE_STATUS_OK;
}

/* One block, named `block` ("decoder.transformer.h.3"), by the names the table gives. */
static glimpse_status load_layer(weight_store *store, const gpt2_layer_names *names, const char *block,
                                 const gpt2_config *c, gpt2_layer *l) {
    size_t h = (size_t)c->hidden_size, inner = (size_t)c->intermediate_size;
    const projection_slot projections[] = {
        {names->qkv, 3 * h, h, &l->qkv_weight, &l->qkv_bias},
        {names->out, h, h, &l->out_weight, &l->out_bias},
        {names->cross_query, h, h, &l->cross_query_weight, &l->cross_query_bias},
        {names->cross_kv, 2 * h, h, &l->cross_kv_weight, &l->cross_kv_bias},
        {names->cross_out, h, h, &l->cross_out_weight, &l->cross_out_bias},
        {names->fc1, inner, h, &l->fc1_weight, &l->fc1_bias},
        {names->fc2, h, inner, &l->fc2_weight, &l->fc2_bias},
    };
    const norm_slot norms[] = {{names->norm1, &l->norm1_weight, &l->norm1_bias},
                               {names->cross_norm, &l->cross_norm_weight, &l->cross_norm_bias},
                               {names->norm2, &l->norm2_weight, &l->norm2_bias}};
    glimpse_status status = layers_load_conv1ds(store, block, projections, sizeof projections / sizeof projections[0]);
    return status ? status : layers_load_norms(store, block, h, norms, sizeof norms / sizeof norms[0]);
}

glimpse_status gpt2_model_load(gpt2_model *model, const gpt2_config *config, const gpt2_names *names,
                               const char *encoder_to_decoder, weight_store *store) {
    memset(model, 0, sizeof *model);
    model->config = *config;
    size_t h = (size_t)config->hidden_size, vocab = (size_t)config->vocab_size;
    size_t position_shape[2] = {(size_t)config->max_positions, h};
    glimpse_status status = weight_store_get_matrix(store, &model->token_embedding, vocab, h, names->token_embedding);
    if (!status)
        status = weight_store_get(store, &model->position_embedding, 2, position_shape, names->position_embedding);
    if (!status) status = layers_load_norm(store, names->final_norm, h, &model->final_norm_weight,
                                           &model->final_norm_bias);
    if (!status && config->tie_word_embeddings) model->head = model->token_embedding;
    if (!status && !config->tie_word_embeddings) status = weight_store_get_matrix(store, &model->head, vocab, h,
                                                                                  names->head);
    if (!status && config->encoder_hidden_size != config->hidden_size)
        status = layers_load_projection(store, encoder_to_decoder, h, (size_t)config->encoder_hidden_size,
                                        &model->projection_weight, &model->projection_bias);
    if (status) return status;
    model->layers = calloc((size_t)config->layers, sizeof *model->layers);
    if (!model->layers) return ERROR_OOM();
    char block[LAYERS_NAME_CAPACITY];
    for (int l = 0; l < config->layers && !status; l++) {
        status = layers_name(block, "%s.%d", names->layers, l);
        if (!status) status = load_layer(store, &names->layer, block, config, &model->layers[l]);
    }
    if (status) gpt2_model_free(model);
    return status;
}

void gpt2_model_free(gpt2_model *model) {
    free(model->layers);
    model->layers = NULL;
}

glimpse_status gpt2_model_quantize(gpt2_model *model, q8_set *set) {
    const gpt2_config *c = &model->config;
    size_t h = (size_t)c->hidden_size, inner = (size_t)c->intermediate_size;
    glimpse_status status = GLIMPSE_STATUS_OK;
    for (int l = 0; l < c->layers && !status; l++) {
        gpt2_layer *layer = &model->layers[l];
        struct {
            kernel_weight *weight;
            size_t out, in;
        } projections[] = {{&layer->qkv_weight, 3 * h, h},     {&layer->out_weight, h, h},
                           {&layer->cross_query_weight, h, h}, {&layer->cross_kv_weight, 2 * h, h},
                           {&layer->cross_out_weight, h, h},   {&layer->fc1_weight, inner, h},
                           {&layer->fc2_weight, h, inner}};
        for (size_t i = 0; i < sizeof projections / sizeof projections[0] && !status; i++)
            status = q8_set_add(set, projections[i].weight, projections[i].out, projections[i].in);
    }
    if (!status) status = q8_set_add(set, &model->head, (size_t)c->vocab_size, h);
    return status;
}

glimpse_status gpt2_state_create_batched(const gpt2_model *model, size_t slots, size_t max_length, size_t max_rows,
                                         size_t max_image_tokens, size_t images, gpt2_state **out) {
    *out = NULL;
    const gpt2_config *c = &model->config;
    size_t h = (size_t)c->hidden_size, inner = (size_t)c->intermediate_size, layers = (size_t)c->layers;
    size_t rows = max_rows, widest = max_length > max_image_tokens ? max_length : max_image_tokens;
    size_t work = inner > 3 * h ? inner : 3 * h, cache = slots * layers * max_length * 2 * h;
    gpt2_state *s = calloc(1, sizeof *s);
    if (!s) return ERROR_OOM();
    *s = (gpt2_state){.max_sequences = slots, .max_length = max_length, .max_step = max_rows,
                      .max_image_tokens = max_image_tokens, .max_images = images, .max_rows = max_rows};
    s->cache = malloc(cache * sizeof(float));
    s->spare = malloc(cache * sizeof(float));
    s->image_kv = memory_large(images * layers * max_image_tokens * 2 * h * sizeof(float)); /* (written whole) */
    s->slot_image_tokens = calloc(images, sizeof *s->slot_image_tokens);
    s->table = malloc(slots * sizeof *s->table);
    if (model->projection_weight.data) s->image = malloc(max_image_tokens * h * sizeof(float));
    s->x = malloc(rows * h * sizeof(float));
    s->normed = malloc(rows * h * sizeof(float));
    s->context = malloc(rows * h * sizeof(float));
    s->work = malloc(rows * work * sizeof(float));
    s->scores = malloc((size_t)c->heads * rows * widest * sizeof(float));
    s->logits = malloc(slots * (size_t)c->vocab_size * sizeof(float));
    if (!s->cache || !s->spare || !s->image_kv || !s->slot_image_tokens || !s->table ||
        (model->projection_weight.data && !s->image) || !s->x || !s->normed || !s->context || !s->work ||
        !s->scores || !s->logits) {
        gpt2_state_free(s);
        return ERROR_OOM();
    }
    *out = s;
    return GLIMPSE_STATUS_OK;
}

glimpse_status gpt2_state_create(const gpt2_model *model, size_t max_sequences, size_t max_length, size_t max_step,
                                 size_t max_image_tokens, gpt2_state **out) {
    glimpse_status status =
        gpt2_state_create_batched(model, max_sequences, max_length, max_sequences * max_step, max_image_tokens, 1, out);
    if (!status) (*out)->max_step = max_step;
    return status;
}

void gpt2_state_free(gpt2_state *s) {
    if (!s) return;
    free(s->cache), free(s->spare), free(s->image_kv), free(s->image), free(s->slot_image_tokens), free(s->table);
    free(s->x), free(s->normed), free(s->context), free(s->work), free(s->scores), free(s->logits);
    free(s);
}

/* The cached rows of sequence `sequence`, block `layer`: [max_length][2h], key then value. */
static float *cached(const gpt2_model *model, const gpt2_state *s, float *base, size_t sequence, size_t layer) {
    size_t h = (size_t)model->config.hidden_size;
    return base + (sequence * (size_t)model->config.layers + layer) * s->max_length * 2 * h;
}

/* Image slot `image`'s keys and values of block `layer`: [max_image_tokens][2h]. */
static float *image_at(const gpt2_model *model, const gpt2_state *s, size_t image, size_t layer) {
    size_t h = (size_t)model->config.hidden_size;
    return s->image_kv + (image * (size_t)model->config.layers + layer) * s->max_image_tokens * 2 * h;
}

glimpse_status gpt2_set_image_slot(const gpt2_model *model, gpt2_state *s, size_t image, const float *image_tokens,
                                   size_t image_token_count, pool *threads) {
    const gpt2_config *c = &model->config;
    if (image_token_count > s->max_image_tokens || image >= s->max_images)
        return error_set(GLIMPSE_STATUS_INTERNAL, "%zu image tokens in image slot %zu, state made for %zu in %zu",
                         image_token_count, image, s->max_image_tokens, s->max_images);
    size_t h = (size_t)c->hidden_size;
    if (model->projection_weight.data) { /* enc_to_dec_proj: the image tokens to the decoder's width */
        size_t e = (size_t)c->encoder_hidden_size;
        kernel_linear(s->image, h, image_tokens, e, &model->projection_weight, model->projection_bias,
                      image_token_count, e, h, false, threads);
        image_tokens = s->image;
    }
    for (int l = 0; l < c->layers; l++) {
        const gpt2_layer *layer = &model->layers[l];
        kernel_linear(image_at(model, s, image, (size_t)l), 2 * h, image_tokens, h, &layer->cross_kv_weight,
                      layer->cross_kv_bias, image_token_count, h, 2 * h, false, threads);
    }
    s->slot_image_tokens[image] = image_token_count;
    if (image == 0) s->image_tokens = image_token_count;
    return GLIMPSE_STATUS_OK;
}

glimpse_status gpt2_set_image(const gpt2_model *model, gpt2_state *s, const float *image_tokens,
                              size_t image_token_count, pool *threads) {
    glimpse_status status = gpt2_set_image_slot(model, s, 0, image_tokens, image_token_count, threads);
    if (!status) s->length = 0;
    return status;
}

/* One block over the rows of a table of sequences in s->x; products by `linear`. */
static void run_block(const gpt2_model *model, gpt2_state *s, size_t l, const caption_sequence *table, size_t count,
                      kernel_linear_fn linear, pool *threads) {
    const gpt2_config *c = &model->config;
    const gpt2_layer *layer = &model->layers[l];
    size_t h = (size_t)c->hidden_size, heads = (size_t)c->heads, head_dim = h / heads;
    size_t inner = (size_t)c->intermediate_size, rows = caption_sequences_rows(table, count);
    float scale = c->scale_attention ? 1.0f / sqrtf((float)head_dim) : 1.0f;
    if (c->scale_by_inverse_layer) scale /= (float)(l + 1);
    float eps = c->layer_norm_eps;
    /* x += c_proj(causal self-attention(ln_1(x))); the new keys and values join the cache */
    kernel_layernorm(s->normed, s->x, layer->norm1_weight, layer->norm1_bias, rows, h, eps);
    linear(s->work, 3 * h, s->normed, h, &layer->qkv_weight, layer->qkv_bias, rows, h, 3 * h, false, threads);
    for (size_t q = 0, row = 0; q < count; row += table[q++].step) {
        const caption_sequence *t = &table[q];
        size_t keys = t->length + t->step;
        float *cache = cached(model, s, s->cache, t->slot, l);
        for (size_t j = 0; j < t->step; j++)
            memcpy(cache + (t->length + j) * 2 * h, s->work + (row + j) * 3 * h + h, 2 * h * sizeof(float));
        kernel_attention_rows place;
        const kernel_attention_rows *probabilities =
            attention_record_rows(s->record, ATTENTION_KIND_SELF, l, q, heads, t->length, t->step, keys, &place);
        kernel_attention(s->context + row * h, h, probabilities, s->work + row * 3 * h, 3 * h, cache, cache + h,
                         2 * h, t->step, keys, heads, head_dim, scale, KERNEL_MASK_CAUSAL, s->scores, threads);
    }
    linear(s->x, h, s->context, h, &layer->out_weight, layer->out_bias, rows, h, h, true, threads);
    /* x += c_proj(cross-attention(q_attn(ln_cross_attn(x)), the image's keys and values)) */
    kernel_layernorm(s->normed, s->x, layer->cross_norm_weight, layer->cross_norm_bias, rows, h, eps);
    linear(s->work, h, s->normed, h, &layer->cross_query_weight, layer->cross_query_bias, rows, h, h, false, threads);
    for (size_t q = 0, row = 0; q < count; row += table[q++].step) {
        const caption_sequence *t = &table[q];
        const float *image = image_at(model, s, t->image, l);
        size_t tokens = s->slot_image_tokens[t->image];
        kernel_attention_rows place;
        const kernel_attention_rows *probabilities =
            attention_record_rows(s->record, ATTENTION_KIND_CROSS, l, q, heads, t->length, t->step, tokens, &place);
        kernel_attention(s->context + row * h, h, probabilities, s->work + row * h, h, image, image + h, 2 * h,
                         t->step, tokens, heads, head_dim, scale, KERNEL_MASK_NONE, s->scores, threads);
    }
    linear(s->x, h, s->context, h, &layer->cross_out_weight, layer->cross_out_bias, rows, h, h, true, threads);
    /* x += mlp.c_proj(act(mlp.c_fc(ln_2(x)))) */
    kernel_layernorm(s->normed, s->x, layer->norm2_weight, layer->norm2_bias, rows, h, eps);
    linear(s->work, inner, s->normed, h, &layer->fc1_weight, layer->fc1_bias, rows, h, inner, false, threads);
    activation_apply(c->act, s->work, rows * inner);
    linear(s->x, h, s->work, inner, &layer->fc2_weight, layer->fc2_bias, rows, inner, h, true, threads);
}

/* The blocks, ln_f and the head over a table whose tokens are embedded in s->x: each sequence's next-token
 * logits (its last row) to s->logits [count, vocab]. */
static void decode_table(const gpt2_model *model, gpt2_state *s, const caption_sequence *table, size_t count,
                         kernel_linear_fn linear, pool *threads) {
    const gpt2_config *c = &model->config;
    for (size_t l = 0; l < (size_t)c->layers; l++) run_block(model, s, l, table, count, linear, threads);
    size_t h = (size_t)c->hidden_size;
    for (size_t q = 0, row = 0; q < count; q++) {
        row += table[q].step;
        kernel_layernorm(s->normed + q * h, s->x + (row - 1) * h, model->final_norm_weight, model->final_norm_bias,
                         1, h, c->layer_norm_eps);
    }
    linear(s->logits, (size_t)c->vocab_size, s->normed, h, &model->head, NULL, count, h, (size_t)c->vocab_size, false,
           threads);
}

/* What the state holds, as caption_decoder_check_room and caption_decoder_embed check it. */
static caption_decoder_room state_room(const gpt2_model *model, const gpt2_state *s) {
    return (caption_decoder_room){s->max_sequences, s->max_step, s->max_length, s->length, s->record,
                                  (size_t)model->config.heads, s->image_tokens};
}

glimpse_status gpt2_decode_step(const gpt2_model *model, gpt2_state *s, const int32_t *ids, size_t sequences,
                                size_t step, pool *threads) {
    const gpt2_config *c = &model->config;
    caption_decoder_room room = state_room(model, s);
    glimpse_status status = caption_decoder_embed(s->x, &room, &model->token_embedding, model->position_embedding,
                                                  (size_t)c->hidden_size, c->vocab_size, ids, sequences, step);
    if (status) return status;
    for (size_t q = 0; q < sequences; q++) s->table[q] = (caption_sequence){q, s->length, step, 0, ids + q * step};
    /* one token a sequence: the rows as a batched step computes them (caption_batch.c) */
    decode_table(model, s, s->table, sequences, step == 1 ? kernel_linear_rowwise : kernel_linear, threads);
    s->length += step;
    return GLIMPSE_STATUS_OK;
}

void gpt2_reorder(const gpt2_model *model, gpt2_state *s, const size_t *from, size_t sequences) {
    size_t row = 2 * (size_t)model->config.hidden_size;
    for (size_t q = 0; q < sequences; q++)
        for (size_t l = 0; l < (size_t)model->config.layers; l++)
            memcpy(cached(model, s, s->spare, q, l), cached(model, s, s->cache, from[q], l),
                   s->length * row * sizeof(float));
    float *swap = s->cache;
    s->cache = s->spare;
    s->spare = swap;
}

/* ------------------------------------------------ as caption_generate's decoder */

static void gpt2_decoder_restart(void *self) { ((gpt2_decoder *)self)->state->length = 0; }

static glimpse_status gpt2_decoder_step(void *self, const int32_t *ids, size_t sequences, size_t step, float **logits,
                                        pool *threads) {
    gpt2_decoder *d = self;
    *logits = d->state->logits;
    return gpt2_decode_step(d->model, d->state, ids, sequences, step, threads);
}

static void gpt2_decoder_reorder(void *self, const size_t *from, size_t sequences) {
    gpt2_decoder *d = self;
    gpt2_reorder(d->model, d->state, from, sequences);
}

caption_decoder gpt2_caption_decoder(gpt2_decoder *self) {
    return (caption_decoder){.self = self,
                             .vocab_size = self->model->config.vocab_size,
                             .max_sequences = self->state->max_sequences,
                             .max_length = self->state->max_length,
                             .restart = gpt2_decoder_restart,
                             .step = gpt2_decoder_step,
                             .reorder = gpt2_decoder_reorder};
}

/* ------------------------------------------------ as caption_batch's decoder */

static glimpse_status gpt2_batch_step(void *self, const caption_sequence *table, size_t count, int rowwise,
                                      float **logits, pool *threads) {
    gpt2_decoder *d = self;
    gpt2_state *s = d->state;
    const gpt2_config *c = &d->model->config;
    *logits = s->logits;
    if (count > s->max_sequences)
        return error_set(GLIMPSE_STATUS_TOO_LARGE, "%zu sequences: the state holds %zu", count, s->max_sequences);
    caption_decoder_room room = state_room(d->model, s);
    room.max_step = s->max_rows;
    glimpse_status status = caption_decoder_embed_table(s->x, &room, &d->model->token_embedding,
                                                        d->model->position_embedding, (size_t)c->hidden_size,
                                                        c->vocab_size, table, count);
    if (!status) decode_table(d->model, s, table, count, rowwise ? kernel_linear_rowwise : kernel_linear, threads);
    return status;
}

static void gpt2_batch_copy(void *self, size_t to, size_t from, size_t length) {
    gpt2_decoder *d = self;
    size_t row = 2 * (size_t)d->model->config.hidden_size;
    for (size_t l = 0; l < (size_t)d->model->config.layers; l++)
        memcpy(cached(d->model, d->state, d->state->cache, to, l), cached(d->model, d->state, d->state->cache, from, l),
               length * row * sizeof(float));
}

caption_batch_decoder gpt2_caption_batch_decoder(gpt2_decoder *self) {
    return (caption_batch_decoder){.self = self,
                                   .vocab_size = self->model->config.vocab_size,
                                   .slots = self->state->max_sequences,
                                   .max_rows = self->state->max_rows,
                                   .max_length = self->state->max_length,
                                   .first_step_each_beam = 1,
                                   .step = gpt2_batch_step,
                                   .copy = gpt2_batch_copy};
}
