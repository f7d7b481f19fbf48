/* bert.c — BLIP's BERT layers with cross-attention: loading by the names
 * table, the cached decoder step, cache reordering for beams, and the
 * encoder pass. */
#include "fusion/bert.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "weights/config.h"
#include "core/cpu.h"
#include "core/error.h"
#include "core/memory.h"
#include "weights/layers.h"

glimpse_status bert_config_read(const cJSON *json, const char *where, int vision_hidden, bert_config *config) {
    glimpse_status status;
    *config = (bert_config){0};
    layer_sizes sizes = {768, 12, 12, 3072, 1e-12f, ACTIVATION_GELU, "gelu"};
    if ((status = layers_read_sizes(json, where, &sizes))) return status;
    config->hidden_size = sizes.hidden_size, config->layers = sizes.layers, config->heads = sizes.heads;
    config->intermediate_size = sizes.intermediate_size, config->layer_norm_eps = sizes.layer_norm_eps;
    config->act = sizes.act, config->act_name = sizes.act_name;
    if ((status = config_int_or(json, where, "vocab_size", 1, CONFIG_MAX_VOCABULARY, 30524, &config->vocab_size)))
        return status;
    if ((status = config_int_or(json, where, "max_position_embeddings", 2, CONFIG_MAX_POSITIONS, 512,
                                &config->max_positions)))
        return status;
    if ((status = config_int_or(json, where, "encoder_hidden_size", 1, CONFIG_MAX_WIDTH, vision_hidden,
                                &config->encoder_hidden_size)))
        return status;
    return GLIMPSE_STATUS_OK;
}

glimpse_status bert_layer_load(weight_store *store, const bert_layer_names *names, const char *layer,
                               const bert_config *c, bert_layer *l) {
    size_t h = (size_t)c->hidden_size, e = (size_t)c->encoder_hidden_size, inter = (size_t)c->intermediate_size;
    const projection_slot projections[] = {
        {names->query, h, h, &l->query_weight, &l->query_bias},
        {names->key, h, h, &l->key_weight, &l->key_bias},
        {names->value, h, h, &l->value_weight, &l->value_bias},
        {names->self_out, h, h, &l->self_out_weight, &l->self_out_bias},
        {names->cross_query, h, h, &l->cross_query_weight, &l->cross_query_bias},
        {names->cross_key, h, e, &l->cross_key_weight, &l->cross_key_bias},
        {names->cross_value, h, e, &l->cross_value_weight, &l->cross_value_bias},
        {names->cross_out, h, h, &l->cross_out_weight, &l->cross_out_bias},
        {names->intermediate, inter, h, &l->intermediate_weight, &l->intermediate_bias},
        {names->output, h, inter, &l->output_weight, &l->output_bias},
    };
    const norm_slot norms[] = {{names->self_norm, &l->self_norm_weight, &l->self_norm_bias},
                               {names->cross_norm, &l->cross_norm_weight, &l->cross_norm_bias},
                               {names->output_norm, &l->output_norm_weight, &l->output_norm_bias}};
    glimpse_status status =
        layers_load_projections(store, layer, projections, sizeof projections / sizeof projections[0]);
    return status ? status : layers_load_norms(store, layer, h, norms, sizeof norms / sizeof norms[0]);
}

/* The language-model head below `head`: transform (dense, LayerNorm), then the decoder, tied to the word embeddings
 * when the checkpoint leaves its weight out. */
static glimpse_status load_head(bert_model *model, const char *head, const bert_layout *layout, weight_store *store) {
    size_t h = (size_t)model->config.hidden_size, vocab = (size_t)model->config.vocab_size;
    size_t bias_shape[1] = {vocab};
    const projection_slot dense = {layout->head_dense, h, h, &model->head_dense_weight, &model->head_dense_bias};
    const norm_slot norm = {layout->head_norm, &model->head_norm_weight, &model->head_norm_bias};
    char name[LAYERS_NAME_CAPACITY];
    glimpse_status status = layers_load_projections(store, head, &dense, 1);
    if (!status) status = layers_load_norms(store, head, h, &norm, 1);
    if (!status) status = layers_name(name, "%s.%s", head, layout->head_decoder_weight);
    if (!status) status = weight_store_get_matrix_optional(store, &model->head_decoder_weight, vocab, h, name);
    if (!status && !model->head_decoder_weight.data) model->head_decoder_weight = model->word_embeddings;
    if (!status && layout->head_decoder_bias) {
        status = layers_name(name, "%s.%s", head, layout->head_decoder_bias);
        if (!status) status = weight_store_get_optional(store, &model->head_decoder_bias, 1, bias_shape, name);
    }
    if (!status && !model->head_decoder_bias) {
        size_t row_shape[2] = {1, vocab};
        status = layers_name(name, "%s.%s", head, layout->head_bias);
        const tensor_entry *bias = status ? NULL : weight_store_find(store, name);
        bool row = bias && bias->rank == 2; /* BART's final_logits_bias [1, vocab] */
        if (!status)
            status = weight_store_get(store, &model->head_decoder_bias, row ? 2 : 1, row ? row_shape : bias_shape, name);
    }
    return status;
}

glimpse_status bert_model_load(bert_model *model, const bert_config *config,
                               const bert_names *names, weight_store *store) {
    memset(model, 0, sizeof *model);
    model->config = *config;
    const bert_layout *layout = names->layout;
    size_t h = (size_t)config->hidden_size, vocab = (size_t)config->vocab_size;
    size_t position_shape[2] = {layout->position_offset + (size_t)config->max_positions, h};
    const norm_slot embedding_norm = {layout->embedding_norm, &model->embedding_norm_weight,
                                      &model->embedding_norm_bias};
    char name[LAYERS_NAME_CAPACITY];
    glimpse_status status = layers_name(name, "%s.%s", names->model, layout->word_embeddings);
    if (!status) status = weight_store_get_matrix(store, &model->word_embeddings, vocab, h, name);
    if (!status) status = layers_name(name, "%s.%s", names->model, layout->position_embeddings);
    if (!status) status = weight_store_get(store, &model->position_embeddings, 2, position_shape, name);
    if (!status) model->position_embeddings += layout->position_offset * h; /* position 0's row */
    if (!status) status = layers_load_norms(store, names->model, h, &embedding_norm, 1);
    if (status) return status;
    model->layers = calloc((size_t)config->layers, sizeof *model->layers);
    if (!model->layers) return ERROR_OOM();
    for (size_t i = 0; i < (size_t)config->layers && !status; i++) {
        status = layers_name(name, "%s.%s.%zu", names->model, layout->layers, i);
        if (!status) status = bert_layer_load(store, &layout->layer, name, config, &model->layers[i]);
    }
    if (!status && names->head) status = load_head(model, names->head, layout, store);
    if (status) bert_model_free(model);
    return status;
}

void bert_model_free(bert_model *model) {
    free(model->layers);
    model->layers = NULL;
}

/* ------------------------------------------------------------- run state */

glimpse_status bert_state_create_batched(const bert_model *model, size_t slots, size_t max_length, size_t max_rows,
                                         size_t max_image_tokens, size_t images, bert_state **out) {
    *out = NULL;
    const bert_config *c = &model->config;
    if (max_length > (size_t)c->max_positions) max_length = (size_t)c->max_positions;
    bert_state *s = calloc(1, sizeof *s);
    if (!s) return ERROR_OOM();
    size_t h = (size_t)c->hidden_size, layers = (size_t)c->layers, rows = max_rows;
    size_t cache = slots * layers * max_length * h;
    size_t widest = max_length > max_image_tokens ? max_length : max_image_tokens;
    s->max_sequences = slots;
    s->max_length = max_length;
    s->max_step = max_rows < max_length ? max_rows : max_length;
    s->max_rows = max_rows;
    s->max_image_tokens = max_image_tokens;
    s->max_images = images;
    s->self_keys = malloc(cache * sizeof(float));
    s->self_values = malloc(cache * sizeof(float));
    s->spare_keys = malloc(cache * sizeof(float));
    s->spare_values = malloc(cache * sizeof(float));
    /* (every picture's keys and values are written whole: on huge pages, 21 MB each for BLIP-base at 384 px) */
    s->cross_keys = memory_large(images * layers * max_image_tokens * h * sizeof(float));
    s->cross_values = memory_large(images * layers * max_image_tokens * h * sizeof(float));
    s->slot_image_tokens = calloc(images, sizeof *s->slot_image_tokens);
    s->table = malloc(slots * sizeof *s->table);
    s->x = malloc(rows * h * sizeof(float));
    s->normed = malloc(rows * h * sizeof(float));
    s->q = malloc(rows * h * sizeof(float));
    s->context = malloc(rows * h * sizeof(float));
    s->mlp = malloc(rows * (size_t)c->intermediate_size * sizeof(float));
    s->scores = malloc((size_t)c->heads * rows * widest * sizeof(float));
    s->logits = malloc(slots * (size_t)c->vocab_size * sizeof(float));
    if (!s->self_keys || !s->self_values || !s->spare_keys || !s->spare_values || !s->cross_keys ||
        !s->cross_values || !s->slot_image_tokens || !s->table || !s->x || !s->normed || !s->q || !s->context ||
        !s->mlp || !s->scores || !s->logits) {
        bert_state_free(s);
        return ERROR_OOM();
    }
    *out = s;
    return GLIMPSE_STATUS_OK;
}

glimpse_status bert_state_create(const bert_model *model, size_t max_sequences, size_t max_length, size_t max_step,
                                 size_t max_image_tokens, bert_state **out) {
    size_t positions = max_length < (size_t)model->config.max_positions ? max_length
                                                                        : (size_t)model->config.max_positions;
    if (max_step > positions) max_step = positions;
    glimpse_status status =
        bert_state_create_batched(model, max_sequences, max_length, max_sequences * max_step, max_image_tokens, 1, out);
    if (!status) (*out)->max_step = max_step;
    return status;
}

void bert_state_free(bert_state *s) {
    if (!s) return;
    free(s->self_keys), free(s->self_values), free(s->spare_keys), free(s->spare_values);
    free(s->cross_keys), free(s->cross_values), free(s->slot_image_tokens), free(s->table);
    free(s->x), free(s->normed), free(s->q), free(s->context), free(s->mlp), free(s->scores), free(s->logits);
    free(s);
}

/* Cache rows of sequence s, layer l: [max_length, h]. */
static float *cache_at(const bert_model *model, const bert_state *s, float *base, size_t sequence, size_t layer) {
    size_t h = (size_t)model->config.hidden_size;
    return base + ((sequence * (size_t)model->config.layers + layer) * s->max_length) * h;
}

/* Image slot `image`'s cross keys or values of layer l: [max_image_tokens, h] (keys maybe transposed). */
static float *image_at(const bert_model *model, const bert_state *s, float *base, size_t image, size_t layer) {
    size_t h = (size_t)model->config.hidden_size;
    return base + (image * (size_t)model->config.layers + layer) * s->max_image_tokens * h;
}

glimpse_status bert_set_image_slot(const bert_model *model, bert_state *s, size_t image, const float *image_tokens,
                                   size_t image_token_count, pool *threads) {
    const bert_config *c = &model->config;
    if (image_token_count > s->max_image_tokens || image >= s->max_images)
        return error_set(GLIMPSE_STATUS_INTERNAL, "%zu image tokens in image slot %zu, state made for %zu in %zu",
                         image_token_count, image, s->max_image_tokens, s->max_images);
    size_t h = (size_t)c->hidden_size, e = (size_t)c->encoder_hidden_size, room = s->max_image_tokens;
    s->keys_transposed = cpu_has_avx512();
    for (int l = 0; l < c->layers; l++) {
        const bert_layer *layer = &model->layers[l];
        if (!layer->cross_key_weight.data) continue; /* a layer without cross-attention (the Q-Former's odd ones) */
        float *keys = image_at(model, s, s->cross_keys, image, (size_t)l);
        float *values = image_at(model, s, s->cross_values, image, (size_t)l);
        /* transposed keys: projected into the values' room first, then turned */
        float *projected = s->keys_transposed ? values : keys;
        kernel_linear(projected, h, image_tokens, e, &layer->cross_key_weight, layer->cross_key_bias,
                      image_token_count, e, h, false, threads);
        if (s->keys_transposed)
            for (size_t j0 = 0; j0 < image_token_count; j0 += 32) /* 32 tokens at a time: both sides in cache */
                for (size_t d = 0; d < h; d++)
                    for (size_t j = j0; j < j0 + 32 && j < image_token_count; j++)
                        keys[d * room + j] = projected[j * h + d];
        kernel_linear(values, h, image_tokens, e, &layer->cross_value_weight,
                      layer->cross_value_bias, image_token_count, e, h, false, threads);
    }
    s->slot_image_tokens[image] = image_token_count;
    if (image == 0) s->image_tokens = image_token_count;
    return GLIMPSE_STATUS_OK;
}

glimpse_status bert_set_image(const bert_model *model, bert_state *s, const float *image_tokens,
                              size_t image_token_count, pool *threads) {
    glimpse_status status = bert_set_image_slot(model, s, 0, image_tokens, image_token_count, threads);
    if (!status) s->length = 0;
    return status;
}

/* x = LayerNorm(projection(input) + x): BERT's "output" sub-layers. */
static void add_and_norm(const bert_model *model, bert_state *s, kernel_linear_fn linear, const float *input,
                         size_t in_features, const kernel_weight *weight, const float *bias, const float *norm_weight,
                         const float *norm_bias, size_t rows, pool *threads) {
    size_t h = (size_t)model->config.hidden_size;
    linear(s->normed, h, input, in_features, weight, bias, rows, in_features, h, false, threads);
    kernel_add(s->normed, s->x, rows * h);
    kernel_layernorm(s->x, s->normed, norm_weight, norm_bias, rows, h, model->config.layer_norm_eps);
}

/* Cross-attention of layer l to image slot `image` for rows first .. first+count of s->q into the same rows of
 * s->context. */
static void cross_attention(const bert_model *model, bert_state *s, size_t l, size_t image, size_t first,
                            size_t count, const kernel_attention_rows *probabilities, pool *threads) {
    size_t h = (size_t)model->config.hidden_size, heads = (size_t)model->config.heads, head_dim = h / heads;
    float scale = 1.0f / sqrtf((float)head_dim);
    const float *image_keys = image_at(model, s, s->cross_keys, image, l);
    const float *image_values = image_at(model, s, s->cross_values, image, l);
    size_t tokens = s->slot_image_tokens[image];
    float *context = s->context + first * h;
    const float *q = s->q + first * h;
    if (s->keys_transposed)
        kernel_attention_keys_transposed(context, h, probabilities, q, h, image_keys, s->max_image_tokens,
                                         image_values, h, count, tokens, heads, head_dim, scale, s->scores, threads);
    else
        kernel_attention(context, h, probabilities, q, h, image_keys, image_values, h, count, tokens, heads, head_dim,
                         scale, KERNEL_MASK_NONE, s->scores, threads);
}

/* The layers over the rows of a table of sequences in s->x (each sequence's rows in turn, its new tokens at
 * cache positions length .. of its slot); self-attention causal or not; products by `linear`. */
static void run_layers(const bert_model *model, bert_state *s, const caption_sequence *table, size_t count,
                       int causal, int with_image, kernel_linear_fn linear, pool *threads) {
    const bert_config *c = &model->config;
    size_t h = (size_t)c->hidden_size, heads = (size_t)c->heads, head_dim = h / heads;
    size_t rows = caption_sequences_rows(table, count);
    float scale = 1.0f / sqrtf((float)head_dim);
    for (int l = 0; l < c->layers; l++) {
        const bert_layer *layer = &model->layers[l];
        /* self-attention: new keys and values go into the cache */
        linear(s->q, h, s->x, h, &layer->query_weight, layer->query_bias, rows, h, h, false, threads);
        linear(s->context, h, s->x, h, &layer->key_weight, layer->key_bias, rows, h, h, false, threads);
        for (size_t q = 0, row = 0; q < count; row += table[q++].step)
            memcpy(cache_at(model, s, s->self_keys, table[q].slot, (size_t)l) + table[q].length * h,
                   s->context + row * h, table[q].step * h * sizeof(float));
        linear(s->context, h, s->x, h, &layer->value_weight, layer->value_bias, rows, h, h, false, threads);
        for (size_t q = 0, row = 0; q < count; row += table[q++].step)
            memcpy(cache_at(model, s, s->self_values, table[q].slot, (size_t)l) + table[q].length * h,
                   s->context + row * h, table[q].step * h * sizeof(float));
        for (size_t q = 0, row = 0; q < count; row += table[q++].step) {
            const caption_sequence *t = &table[q];
            size_t keys = t->length + t->step;
            kernel_attention_rows place;
            const kernel_attention_rows *probabilities = attention_record_rows(
                s->record, ATTENTION_KIND_SELF, (size_t)l, q, heads, t->length, t->step, keys, &place);
            kernel_attention(s->context + row * h, h, probabilities, s->q + row * h, h,
                             cache_at(model, s, s->self_keys, t->slot, (size_t)l),
                             cache_at(model, s, s->self_values, t->slot, (size_t)l), h, t->step, keys, heads,
                             head_dim, scale, causal ? KERNEL_MASK_CAUSAL : KERNEL_MASK_NONE, s->scores, threads);
        }
        add_and_norm(model, s, linear, s->context, h, &layer->self_out_weight, layer->self_out_bias,
                     layer->self_norm_weight, layer->self_norm_bias, rows, threads);
        /* cross-attention: each row attends to its sequence's image tokens (in the layers that have it); the
         * rows of sequences after one another on the same image in one call, each sequence's alone when recorded */
        if (with_image && layer->cross_query_weight.data) {
            linear(s->q, h, s->x, h, &layer->cross_query_weight, layer->cross_query_bias, rows, h, h, false,
                   threads);
            for (size_t q = 0, row = 0; q < count;) {
                size_t last = q, group_rows = table[q].step;
                while (!s->record && last + 1 < count && table[last + 1].image == table[q].image)
                    group_rows += table[++last].step;
                kernel_attention_rows place;
                const kernel_attention_rows *probabilities =
                    attention_record_rows(s->record, ATTENTION_KIND_CROSS, (size_t)l, q, heads, table[q].length,
                                          table[q].step, s->slot_image_tokens[table[q].image], &place);
                cross_attention(model, s, (size_t)l, table[q].image, row, group_rows, probabilities, threads);
                row += group_rows;
                q = last + 1;
            }
            add_and_norm(model, s, linear, s->context, h, &layer->cross_out_weight, layer->cross_out_bias,
                         layer->cross_norm_weight, layer->cross_norm_bias, rows, threads);
        }
        /* feed-forward */
        size_t inter = (size_t)c->intermediate_size;
        linear(s->mlp, inter, s->x, h, &layer->intermediate_weight, layer->intermediate_bias, rows, h, inter, false,
               threads);
        activation_apply(c->act, s->mlp, rows * inter);
        add_and_norm(model, s, linear, s->mlp, inter, &layer->output_weight, layer->output_bias,
                     layer->output_norm_weight, layer->output_norm_bias, rows, threads);
    }
}

/* One sequence of `length` tokens in slot 0 at position 0 (the encoder passes). */
static caption_sequence whole_text(size_t length) { return (caption_sequence){0, 0, length, 0, NULL}; }

/* What the state holds, as caption_decoder_check_room and caption_decoder_embed check it. */
static caption_decoder_room state_room(const bert_model *model, const bert_state *s) {
    return (caption_decoder_room){s->max_sequences, s->max_step, s->max_length, s->length, s->record,
                                  (size_t)model->config.heads, s->image_tokens};
}

/* Embeds the table's tokens into s->x with the embedding LayerNorm. */
static glimpse_status embed_table(const bert_model *model, bert_state *s, const caption_sequence *table,
                                  size_t count) {
    const bert_config *c = &model->config;
    size_t h = (size_t)c->hidden_size;
    caption_decoder_room room = state_room(model, s);
    room.max_step = s->max_rows;
    glimpse_status status = caption_decoder_embed_table(s->x, &room, &model->word_embeddings,
                                                        model->position_embeddings, h, c->vocab_size, table, count);
    if (status) return status;
    kernel_layernorm(s->x, s->x, model->embedding_norm_weight, model->embedding_norm_bias,
                     caption_sequences_rows(table, count), h, c->layer_norm_eps);
    return GLIMPSE_STATUS_OK;
}

static glimpse_status embed_tokens(const bert_model *model, bert_state *s, const int32_t *ids, size_t sequences,
                                   size_t step) {
    const bert_config *c = &model->config;
    size_t h = (size_t)c->hidden_size;
    caption_decoder_room room = state_room(model, s);
    glimpse_status status = caption_decoder_embed(s->x, &room, &model->word_embeddings, model->position_embeddings, h,
                                                  c->vocab_size, ids, sequences, step);
    if (status) return status;
    kernel_layernorm(s->x, s->x, model->embedding_norm_weight, model->embedding_norm_bias, sequences * step, h,
                     c->layer_norm_eps);
    return GLIMPSE_STATUS_OK;
}

/* The layers and the LM head over a table whose tokens are embedded in s->x: each sequence's next-token logits
 * (at its last row) to s->logits [count, vocab]. */
static void decode_table(const bert_model *model, bert_state *s, const caption_sequence *table, size_t count,
                         kernel_linear_fn linear, pool *threads) {
    run_layers(model, s, table, count, 1, 1, linear, threads);
    /* LM head on each sequence's last token: dense, activation, LayerNorm, decoder */
    const bert_config *c = &model->config;
    size_t h = (size_t)c->hidden_size;
    for (size_t q = 0, row = 0; q < count; q++) {
        row += table[q].step;
        memcpy(s->normed + q * h, s->x + (row - 1) * h, h * sizeof(float));
    }
    const float *last = s->normed;
    if (model->head_dense_weight.data) { /* BERT's transform; BART has none */
        linear(s->q, h, s->normed, h, &model->head_dense_weight, model->head_dense_bias, count, h, h, false, threads);
        activation_apply(c->act, s->q, count * h);
        kernel_layernorm(s->q, s->q, model->head_norm_weight, model->head_norm_bias, count, h, c->layer_norm_eps);
        last = s->q;
    }
    linear(s->logits, (size_t)c->vocab_size, last, h, &model->head_decoder_weight, model->head_decoder_bias, count, h,
           (size_t)c->vocab_size, false, threads);
}

glimpse_status bert_decode_step(const bert_model *model, bert_state *s, const int32_t *ids, size_t sequences,
                                size_t step, pool *threads) {
    if (!model->head_decoder_weight.data)
        return error_set(GLIMPSE_STATUS_WRONG_MODEL, "this text model has no LM head");
    glimpse_status status = embed_tokens(model, s, ids, sequences, step);
    if (status) return status;
    for (size_t q = 0; q < sequences; q++) s->table[q] = (caption_sequence){q, s->length, step, 0, ids + q * step};
    /* one token a sequence: the rows as a batched step computes them (caption_batch.c) */
    decode_table(model, s, s->table, sequences, step == 1 ? kernel_linear_rowwise : kernel_linear, threads);
    s->length += step;
    return GLIMPSE_STATUS_OK;
}

glimpse_status bert_model_quantize(bert_model *model, q8_set *set) {
    const bert_config *c = &model->config;
    size_t h = (size_t)c->hidden_size, e = (size_t)c->encoder_hidden_size, inter = (size_t)c->intermediate_size;
    glimpse_status status = GLIMPSE_STATUS_OK;
    for (int l = 0; l < c->layers && !status; l++) {
        bert_layer *layer = &model->layers[l];
        status = q8_set_add(set, &layer->query_weight, h, h);
        if (!status) status = q8_set_add(set, &layer->key_weight, h, h);
        if (!status) status = q8_set_add(set, &layer->value_weight, h, h);
        if (!status) status = q8_set_add(set, &layer->self_out_weight, h, h);
        if (!status && layer->cross_query_weight.data) {
            status = q8_set_add(set, &layer->cross_query_weight, h, h);
            if (!status) status = q8_set_add(set, &layer->cross_key_weight, h, e);
            if (!status) status = q8_set_add(set, &layer->cross_value_weight, h, e);
            if (!status) status = q8_set_add(set, &layer->cross_out_weight, h, h);
        }
        if (!status) status = q8_set_add(set, &layer->intermediate_weight, inter, h);
        if (!status) status = q8_set_add(set, &layer->output_weight, h, inter);
    }
    if (!status && model->head_dense_weight.data) status = q8_set_add(set, &model->head_dense_weight, h, h);
    if (!status && model->head_decoder_weight.data)
        status = q8_set_add(set, &model->head_decoder_weight, (size_t)c->vocab_size, h);
    return status;
}

void bert_reorder(const bert_model *model, bert_state *s, const size_t *from, size_t sequences) {
    kv_cache cache = {&s->self_keys, &s->self_values, &s->spare_keys, &s->spare_values, (size_t)model->config.layers,
                      s->max_length, (size_t)model->config.hidden_size};
    kv_cache_reorder(&cache, 0, s->length, from, sequences);
}

glimpse_status bert_encode(const bert_model *model, bert_state *s, const int32_t *ids, size_t length, int with_image,
                           pool *threads) {
    s->length = 0;
    glimpse_status status = embed_tokens(model, s, ids, 1, length);
    if (status) return status;
    caption_sequence text = whole_text(length);
    run_layers(model, s, &text, 1, 0, with_image, kernel_linear, threads);
    s->length = 0; /* an encoder pass leaves nothing to continue from */
    return GLIMPSE_STATUS_OK;
}

glimpse_status bert_encode_embedded(const bert_model *model, bert_state *s, const float *embeddings, size_t length,
                                    int with_image, pool *threads) {
    s->length = 0;
    caption_decoder_room room = state_room(model, s);
    glimpse_status status = caption_decoder_check_room(&room, 1, length);
    if (status) return status;
    kernel_layernorm(s->x, embeddings, model->embedding_norm_weight, model->embedding_norm_bias, length,
                     (size_t)model->config.hidden_size, model->config.layer_norm_eps);
    caption_sequence text = whole_text(length);
    run_layers(model, s, &text, 1, 0, with_image, kernel_linear, threads);
    return GLIMPSE_STATUS_OK;
}

/* ------------------------------------------------ as caption_generate's decoder */

static void bert_decoder_restart(void *self) { ((bert_decoder *)self)->state->length = 0; }

static glimpse_status bert_decoder_step(void *self, const int32_t *ids, size_t sequences, size_t step, float **logits,
                                        pool *threads) {
    bert_decoder *d = self;
    glimpse_status status = bert_decode_step(d->model, d->state, ids, sequences, step, threads);
    *logits = d->state->logits;
    return status;
}

static void bert_decoder_reorder(void *self, const size_t *from, size_t sequences) {
    bert_decoder *d = self;
    bert_reorder(d->model, d->state, from, sequences);
}

caption_decoder bert_caption_decoder(bert_decoder *self) {
    return (caption_decoder){self,
                             self->model->config.vocab_size,
                             self->state->max_sequences,
                             self->state->max_length,
                             bert_decoder_restart,
                             bert_decoder_step,
                             bert_decoder_reorder};
}

/* ------------------------------------------------ as caption_batch's decoder */

static glimpse_status bert_batch_step(void *self, const caption_sequence *table, size_t count, int rowwise,
                                      float **logits, pool *threads) {
    bert_decoder *d = self;
    *logits = d->state->logits;
    if (count > d->state->max_sequences)
        return error_set(GLIMPSE_STATUS_TOO_LARGE, "%zu sequences: the state holds %zu", count,
                         d->state->max_sequences);
    glimpse_status status = embed_table(d->model, d->state, table, count);
    if (!status) decode_table(d->model, d->state, table, count, rowwise ? kernel_linear_rowwise : kernel_linear, threads);
    return status;
}

static void bert_batch_copy(void *self, size_t to, size_t from, size_t length) {
    bert_decoder *d = self;
    size_t h = (size_t)d->model->config.hidden_size;
    for (size_t l = 0; l < (size_t)d->model->config.layers; l++) {
        memcpy(cache_at(d->model, d->state, d->state->self_keys, to, l),
               cache_at(d->model, d->state, d->state->self_keys, from, l), length * h * sizeof(float));
        memcpy(cache_at(d->model, d->state, d->state->self_values, to, l),
               cache_at(d->model, d->state, d->state->self_values, from, l), length * h * sizeof(float));
    }
}

caption_batch_decoder bert_caption_batch_decoder(bert_decoder *self) {
    return (caption_batch_decoder){.self = self,
                                   .vocab_size = self->model->config.vocab_size,
                                   .slots = self->state->max_sequences,
                                   .max_rows = self->state->max_rows,
                                   .max_length = self->state->max_length,
                                   .first_step_each_beam = 1,
                                   .step = bert_batch_step,
                                   .copy = bert_batch_copy};
}
