/* opt.c — OPT's decoder: config and loading by the names table, the cached
 * forward over embeddings, beam reordering, and the adapter through which
 * caption_generate drives it after a prefix of vectors. */
#include "fusion/opt.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "weights/config.h"
#include "weights/layers.h"

/* OPT's position table starts 2 rows in (OPTLearnedPositionalEmbedding's offset). */
#define OPT_POSITION_OFFSET 2

glimpse_status opt_config_read(const cJSON *json, const char *where, opt_config *config) {
    *config = (opt_config){0};
    glimpse_status status;
    int remove_final, affine, bias;
    if ((status = config_int_or(json, where, "hidden_size", 1, CONFIG_MAX_WIDTH, 768, &config->hidden_size)) ||
        (status = config_int_or(json, where, "num_hidden_layers", 1, CONFIG_MAX_LAYERS, 12, &config->layers)) ||
        (status = config_int_or(json, where, "num_attention_heads", 1, CONFIG_MAX_HEADS, 12, &config->heads)) ||
        (status = config_int_or(json, where, "ffn_dim", 1, CONFIG_MAX_INTERMEDIATE, 3072, &config->ffn_dim)) ||
        (status = config_int_or(json, where, "vocab_size", 1, CONFIG_MAX_VOCABULARY, 50272, &config->vocab_size)) ||
        (status = config_int_or(json, where, "max_position_embeddings", 1, CONFIG_MAX_POSITIONS, 2048,
                                &config->max_positions)) ||
        (status = config_int_or(json, where, "word_embed_proj_dim", 1, CONFIG_MAX_WIDTH, config->hidden_size,
                                &config->word_embed_proj_dim)) ||
        (status = config_bool_or(json, where, "do_layer_norm_before", 1, &config->layer_norm_before)) ||
        (status = config_bool_or(json, where, "_remove_final_layer_norm", 0, &remove_final)) ||
        (status = config_bool_or(json, where, "layer_norm_elementwise_affine", 1, &affine)) ||
        (status = config_bool_or(json, where, "enable_bias", 1, &bias)) ||
        (status = config_int_or(json, where, "bos_token_id", 0, config->vocab_size - 1, 2, &config->bos_id)) ||
        (status = config_int_or(json, where, "eos_token_id", 0, config->vocab_size - 1, 2, &config->eos_id)) ||
        (status = config_int_or(json, where, "pad_token_id", 0, config->vocab_size - 1, 1, &config->pad_id)) ||
        (status = config_string_or(json, where, "activation_function", "relu", &config->act_name)))
        return status;
    if (!activation_from_name(config->act_name, &config->act))
        return error_set(GLIMPSE_STATUS_UNSUPPORTED, "%s: activation_function \"%s\" is not supported", where,
                         config->act_name);
    if (config->hidden_size % config->heads)
        return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: hidden_size %d is not divisible by num_attention_heads %d",
                         where, config->hidden_size, config->heads);
    if (!affine || !bias)
        return error_set(GLIMPSE_STATUS_UNSUPPORTED, "%s: OPT without LayerNorm weights or without biases is not "
                         "supported", where);
    config->final_layer_norm = config->layer_norm_before && !remove_final;
    return GLIMPSE_STATUS_OK;
}

glimpse_status opt_model_load(opt_model *model, const opt_config *config, const opt_names *names,
                              weight_store *store) {
    memset(model, 0, sizeof *model);
    model->config = *config;
    size_t h = (size_t)config->hidden_size, proj = (size_t)config->word_embed_proj_dim;
    size_t vocab = (size_t)config->vocab_size;
    size_t position_shape[2] = {(size_t)config->max_positions + OPT_POSITION_OFFSET, h};
    glimpse_status status = weight_store_get_matrix(store, &model->embed_tokens, vocab, proj, names->embed_tokens);
    if (!status) status = weight_store_get(store, &model->embed_positions, 2, position_shape, names->embed_positions);
    if (!status) status = weight_store_get_matrix_optional(store, &model->lm_head, vocab, proj, names->lm_head);
    if (!status && !model->lm_head.data) model->lm_head = model->embed_tokens;
    if (!status && proj != h) {
        char name[LAYERS_NAME_CAPACITY];
        status = layers_name(name, "%s.weight", names->project_in);
        if (!status) status = weight_store_get_matrix(store, &model->project_in, h, proj, name);
        if (!status) status = layers_name(name, "%s.weight", names->project_out);
        if (!status) status = weight_store_get_matrix(store, &model->project_out, proj, h, name);
    }
    if (!status && config->final_layer_norm)
        status = layers_load_norm(store, names->final_norm, h, &model->final_norm_weight, &model->final_norm_bias);
    if (!status)
        status = layers_load_encoder_stack(store, names->layer, names->layers, (size_t)config->layers, h,
                                           (size_t)config->ffn_dim, &model->layers);
    return status;
}

void opt_model_free(opt_model *model) {
    free(model->layers);
    model->layers = NULL;
}

glimpse_status opt_model_quantize(opt_model *model, q8_set *set) {
    const opt_config *c = &model->config;
    encoder_shape shape = {(size_t)c->hidden_size, (size_t)c->heads, (size_t)c->ffn_dim, 1e-5f, c->act,
                           KERNEL_MASK_CAUSAL};
    glimpse_status status = encoder_layers_add_twins(model->layers, (size_t)c->layers, &shape, q8_set_add_twin, set);
    if (!status)
        status = q8_set_add(set, &model->lm_head, (size_t)c->vocab_size, (size_t)c->word_embed_proj_dim);
    return status;
}

/* ------------------------------------------------------------- run state */

glimpse_status opt_state_create_batched(const opt_model *model, size_t slots, size_t max_length, size_t max_rows,
                                        size_t images, size_t max_first_rows, opt_state **out) {
    *out = NULL;
    const opt_config *c = &model->config;
    if (max_length > (size_t)c->max_positions) max_length = (size_t)c->max_positions;
    opt_state *s = calloc(1, sizeof *s);
    if (!s) return ERROR_OOM();
    size_t h = (size_t)c->hidden_size, proj = (size_t)c->word_embed_proj_dim, rows = max_rows;
    size_t cache = slots * (size_t)c->layers * max_length * h;
    s->max_sequences = slots, s->max_length = max_length, s->max_rows = max_rows;
    s->max_step = max_rows < max_length ? max_rows : max_length;
    s->max_images = images, s->max_first_rows = max_first_rows;
    s->keys = malloc(cache * sizeof(float));
    s->values = malloc(cache * sizeof(float));
    s->spare_keys = malloc(cache * sizeof(float));
    s->spare_values = malloc(cache * sizeof(float));
    s->x = malloc(rows * h * sizeof(float));
    s->normed = malloc(rows * h * sizeof(float));
    s->q = malloc(rows * h * sizeof(float));
    s->k = malloc(rows * h * sizeof(float));
    s->v = malloc(rows * h * sizeof(float));
    s->context = malloc(rows * h * sizeof(float));
    s->mlp = malloc(rows * (size_t)c->ffn_dim * sizeof(float));
    s->embedded = malloc(rows * proj * sizeof(float));
    s->last = malloc(slots * (proj > h ? proj : h) * sizeof(float));
    s->scores = malloc((size_t)c->heads * rows * max_length * sizeof(float));
    s->logits = malloc(slots * (size_t)c->vocab_size * sizeof(float));
    s->table = malloc(slots * sizeof *s->table);
    s->first_rows = images ? malloc(images * max_first_rows * proj * sizeof(float)) : NULL;
    s->slot_first_rows = images ? calloc(images, sizeof *s->slot_first_rows) : NULL;
    if (!s->keys || !s->values || !s->spare_keys || !s->spare_values || !s->x || !s->normed || !s->q || !s->k ||
        !s->v || !s->context || !s->mlp || !s->embedded || !s->last || !s->scores || !s->logits || !s->table ||
        (images && (!s->first_rows || !s->slot_first_rows))) {
        opt_state_free(s);
        return ERROR_OOM();
    }
    *out = s;
    return GLIMPSE_STATUS_OK;
}

glimpse_status opt_state_create(const opt_model *model, size_t max_sequences, size_t max_length, size_t max_step,
                                opt_state **out) {
    size_t positions = max_length < (size_t)model->config.max_positions ? max_length
                                                                        : (size_t)model->config.max_positions;
    if (max_step > positions) max_step = positions;
    glimpse_status status = opt_state_create_batched(model, max_sequences, max_length, max_sequences * max_step, 0, 0, out);
    if (!status) (*out)->max_step = max_step;
    return status;
}

void opt_state_free(opt_state *s) {
    if (!s) return;
    free(s->keys), free(s->values), free(s->spare_keys), free(s->spare_values);
    free(s->x), free(s->normed), free(s->q), free(s->k), free(s->v), free(s->context), free(s->mlp);
    free(s->embedded), free(s->last), free(s->scores), free(s->logits), free(s->table);
    free(s->first_rows), free(s->slot_first_rows);
    free(s);
}

/* Cache rows of sequence q, layer l: [max_length, hidden]. */
static float *cache_at(const opt_model *model, const opt_state *s, float *base, size_t sequence, size_t layer) {
    size_t h = (size_t)model->config.hidden_size;
    return base + ((sequence * (size_t)model->config.layers + layer) * s->max_length) * h;
}

glimpse_status opt_embed(const opt_model *model, const int32_t *ids, size_t count, float *out) {
    return caption_embed_ids(out, &model->embed_tokens, (size_t)model->config.word_embed_proj_dim,
                             model->config.vocab_size, ids, count);
}

/* One layer over the rows of a table of sequences in s->x, each sequence's new positions at its length ..;
 * products by `linear`. */
static void run_layer(const opt_model *model, opt_state *s, size_t l, const caption_sequence *table, size_t count,
                      kernel_linear_fn linear, pool *threads) {
    const opt_config *c = &model->config;
    const encoder_layer *layer = &model->layers[l];
    size_t h = (size_t)c->hidden_size, heads = (size_t)c->heads, head_dim = h / heads;
    size_t rows = caption_sequences_rows(table, count);
    float scale = 1.0f / sqrtf((float)head_dim), epsilon = 1e-5f;
    const float *input = s->x;
    if (c->layer_norm_before) {
        kernel_layernorm(s->normed, s->x, layer->norm1_weight, layer->norm1_bias, rows, h, epsilon);
        input = s->normed;
    }
    linear(s->q, h, input, h, &layer->q_weight, layer->q_bias, rows, h, h, false, threads);
    linear(s->k, h, input, h, &layer->k_weight, layer->k_bias, rows, h, h, false, threads);
    linear(s->v, h, input, h, &layer->v_weight, layer->v_bias, rows, h, h, false, threads);
    for (size_t q = 0, row = 0; q < count; row += table[q++].step) {
        const caption_sequence *t = &table[q];
        float *keys = cache_at(model, s, s->keys, t->slot, l), *values = cache_at(model, s, s->values, t->slot, l);
        memcpy(keys + t->length * h, s->k + row * h, t->step * h * sizeof(float));
        memcpy(values + t->length * h, s->v + row * h, t->step * h * sizeof(float));
        kernel_attention_rows place;
        const kernel_attention_rows *probabilities = attention_record_rows(
            s->record, ATTENTION_KIND_SELF, l, q, heads, t->length, t->step, t->length + t->step, &place);
        kernel_attention(s->context + row * h, h, probabilities, s->q + row * h, h, keys, values, h, t->step,
                         t->length + t->step, heads, head_dim, scale, KERNEL_MASK_CAUSAL, s->scores, threads);
    }
    linear(s->x, h, s->context, h, &layer->out_weight, layer->out_bias, rows, h, h, true, threads);
    if (!c->layer_norm_before) kernel_layernorm(s->x, s->x, layer->norm1_weight, layer->norm1_bias, rows, h, epsilon);
    input = s->x;
    if (c->layer_norm_before) {
        kernel_layernorm(s->normed, s->x, layer->norm2_weight, layer->norm2_bias, rows, h, epsilon);
        input = s->normed;
    }
    size_t ffn = (size_t)c->ffn_dim;
    linear(s->mlp, ffn, input, h, &layer->fc1_weight, layer->fc1_bias, rows, h, ffn, false, threads);
    activation_apply(c->act, s->mlp, rows * ffn);
    linear(s->x, h, s->mlp, ffn, &layer->fc2_weight, layer->fc2_bias, rows, ffn, h, true, threads);
    if (!c->layer_norm_before) kernel_layernorm(s->x, s->x, layer->norm2_weight, layer->norm2_bias, rows, h, epsilon);
}

/* The forward over a table whose rows' embeddings [rows, word_embed_proj_dim] are given: each sequence's
 * next-token logits (its last row) to s->logits [count, vocab]. */
static void forward_table(const opt_model *model, opt_state *s, const float *embeddings,
                          const caption_sequence *table, size_t count, kernel_linear_fn linear, pool *threads) {
    const opt_config *c = &model->config;
    size_t h = (size_t)c->hidden_size, proj = (size_t)c->word_embed_proj_dim;
    size_t rows = caption_sequences_rows(table, count);
    if (model->project_in.data)
        linear(s->x, h, embeddings, proj, &model->project_in, NULL, rows, proj, h, false, threads);
    else
        memcpy(s->x, embeddings, rows * h * sizeof(float));
    for (size_t q = 0, row = 0; q < count; q++)
        for (size_t j = 0; j < table[q].step; j++, row++)
            kernel_add(s->x + row * h, model->embed_positions + (table[q].length + j + OPT_POSITION_OFFSET) * h, h);
    for (size_t l = 0; l < (size_t)c->layers; l++) run_layer(model, s, l, table, count, linear, threads);
    /* the head on each sequence's last row */
    for (size_t q = 0, row = 0; q < count; q++) {
        row += table[q].step;
        memcpy(s->normed + q * h, s->x + (row - 1) * h, h * sizeof(float));
    }
    if (model->final_norm_weight)
        kernel_layernorm(s->normed, s->normed, model->final_norm_weight, model->final_norm_bias, count, h, 1e-5f);
    const float *head_input = s->normed;
    if (model->project_out.data) {
        linear(s->last, proj, s->normed, h, &model->project_out, NULL, count, h, proj, false, threads);
        head_input = s->last;
    }
    linear(s->logits, (size_t)c->vocab_size, head_input, proj, &model->lm_head, NULL, count, proj,
           (size_t)c->vocab_size, false, threads);
}

glimpse_status opt_forward(const opt_model *model, opt_state *s, const float *embeddings, size_t sequences,
                           size_t step, pool *threads) {
    const opt_config *c = &model->config;
    if (sequences > s->max_sequences || step > s->max_step || s->length + step > s->max_length)
        return error_set(GLIMPSE_STATUS_TOO_LARGE, "%zu positions is more than the %zu this decoder state holds",
                         s->length + step, s->max_length);
    if (s->record && !attention_record_fits(s->record, sequences, (size_t)c->heads, s->length + step,
                                            s->length + step, 0))
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "the attention record has no room for %zu sequences of "
                         "%zu positions", sequences, s->length + step);
    for (size_t q = 0; q < sequences; q++) s->table[q] = (caption_sequence){q, s->length, step, 0, NULL};
    /* one position a sequence: the rows as a batched step computes them (caption_batch.c) */
    forward_table(model, s, embeddings, s->table, sequences, step == 1 ? kernel_linear_rowwise : kernel_linear,
                  threads);
    s->length += step;
    return GLIMPSE_STATUS_OK;
}

void opt_reorder(const opt_model *model, opt_state *s, const size_t *from, size_t sequences) {
    kv_cache cache = {&s->keys, &s->values, &s->spare_keys, &s->spare_values, (size_t)model->config.layers,
                      s->max_length, (size_t)model->config.hidden_size};
    kv_cache_reorder(&cache, 0, s->length, from, sequences);
}

/* ------------------------------------------------ as caption_generate's decoder */

static void opt_decoder_restart(void *self) { ((opt_decoder *)self)->state->length = 0; }

/* Sequences 1 .. sequences-1 become copies of sequence 0: its cache and its logits. */
static void copy_first_sequence(const opt_model *model, opt_state *s, size_t sequences) {
    size_t h = (size_t)model->config.hidden_size, vocab = (size_t)model->config.vocab_size;
    for (size_t q = 1; q < sequences; q++) {
        for (size_t l = 0; l < (size_t)model->config.layers; l++) {
            memcpy(cache_at(model, s, s->keys, q, l), cache_at(model, s, s->keys, 0, l), s->length * h * sizeof(float));
            memcpy(cache_at(model, s, s->values, q, l), cache_at(model, s, s->values, 0, l),
                   s->length * h * sizeof(float));
        }
        memcpy(s->logits + q * vocab, s->logits, vocab * sizeof(float));
    }
}

static glimpse_status opt_decoder_step(void *self, const int32_t *ids, size_t sequences, size_t step, float **logits,
                                       pool *threads) {
    opt_decoder *d = self;
    opt_state *s = d->state;
    size_t proj = (size_t)d->model->config.word_embed_proj_dim;
    size_t first_rows = d->prefix_rows + d->prompt_length;
    size_t rows_each = s->length == 0 ? first_rows : step;
    *logits = s->logits;
    if (sequences > s->max_sequences || rows_each > s->max_step)
        return error_set(GLIMPSE_STATUS_TOO_LARGE, "%zu positions is more than the %zu this decoder state holds",
                         rows_each, s->max_step);
    glimpse_status status = GLIMPSE_STATUS_OK;
    if (s->length == 0) {
        /* generate's placeholder ids stand for the prefix and the prompt, the same in every sequence (beams): run
         * once and copied, unless a record wants each sequence's rows */
        size_t run = s->record ? sequences : 1;
        for (size_t q = 0; q < run && !status; q++) {
            float *rows = s->embedded + q * rows_each * proj;
            memcpy(rows, d->prefix, d->prefix_rows * proj * sizeof(float));
            status = opt_embed(d->model, d->prompt, d->prompt_length, rows + d->prefix_rows * proj);
        }
        if (!status) status = opt_forward(d->model, s, s->embedded, run, rows_each, threads);
        if (!status && run < sequences) copy_first_sequence(d->model, s, sequences);
        return status;
    }
    for (size_t q = 0; q < sequences && !status; q++)
        status = opt_embed(d->model, ids + q * step, step, s->embedded + q * step * proj);
    return status ? status : opt_forward(d->model, s, s->embedded, sequences, step, threads);
}

static void opt_decoder_reorder(void *self, const size_t *from, size_t sequences) {
    opt_decoder *d = self;
    opt_reorder(d->model, d->state, from, sequences);
}

caption_decoder opt_caption_decoder(opt_decoder *self) {
    size_t first_rows = self->prefix_rows + self->prompt_length, room = self->state->max_length;
    /* the placeholder counts one in generate's length and takes the first rows' place */
    size_t max_length = room >= first_rows ? room - first_rows + 1 : 0;
    return (caption_decoder){self,
                             self->model->config.vocab_size,
                             self->state->max_sequences,
                             max_length,
                             opt_decoder_restart,
                             opt_decoder_step,
                             opt_decoder_reorder};
}

/* ------------------------------------------------ as caption_batch's decoder */

glimpse_status opt_set_first_rows(const opt_model *model, opt_state *s, size_t image, const float *prefix,
                                  size_t prefix_rows, const int32_t *prompt, size_t prompt_length) {
    size_t proj = (size_t)model->config.word_embed_proj_dim;
    if (image >= s->max_images || prefix_rows + prompt_length > s->max_first_rows)
        return error_set(GLIMPSE_STATUS_INTERNAL, "%zu first rows in image slot %zu: the state holds %zu in %zu",
                         prefix_rows + prompt_length, image, s->max_first_rows, s->max_images);
    float *rows = s->first_rows + image * s->max_first_rows * proj;
    memcpy(rows, prefix, prefix_rows * proj * sizeof(float));
    glimpse_status status = opt_embed(model, prompt, prompt_length, rows + prefix_rows * proj);
    s->slot_first_rows[image] = status ? 0 : prefix_rows + prompt_length;
    return status;
}

static glimpse_status opt_batch_step(void *self, const caption_sequence *table, size_t count, int rowwise,
                                     float **logits, pool *threads) {
    opt_decoder *d = self;
    opt_state *s = d->state;
    size_t proj = (size_t)d->model->config.word_embed_proj_dim;
    *logits = s->logits;
    if (count > s->max_sequences || caption_sequences_rows(table, count) > s->max_rows)
        return error_set(GLIMPSE_STATUS_TOO_LARGE, "%zu sequences of %zu rows: the state holds %zu of %zu", count,
                         caption_sequences_rows(table, count), s->max_sequences, s->max_rows);
    glimpse_status status = GLIMPSE_STATUS_OK;
    float *embedded = s->embedded;
    for (size_t q = 0; q < count && !status; embedded += table[q++].step * proj) {
        const caption_sequence *t = &table[q];
        if (t->slot >= s->max_sequences || t->length + t->step > s->max_length)
            return error_set(GLIMPSE_STATUS_TOO_LARGE, "%zu positions in slot %zu: more than the %zu positions of "
                             "%zu slots this decoder state holds", t->length + t->step, t->slot, s->max_length,
                             s->max_sequences);
        if (t->length > 0) {
            status = opt_embed(d->model, t->ids, t->step, embedded);
        } else if (t->image >= s->max_images || t->step != s->slot_first_rows[t->image]) {
            status = error_set(GLIMPSE_STATUS_INTERNAL, "a sequence starts with %zu rows, its image slot has %zu",
                               t->step, t->image < s->max_images ? s->slot_first_rows[t->image] : 0);
        } else {
            memcpy(embedded, s->first_rows + t->image * s->max_first_rows * proj, t->step * proj * sizeof(float));
        }
    }
    if (!status)
        forward_table(d->model, s, s->embedded, table, count, rowwise ? kernel_linear_rowwise : kernel_linear, threads);
    return status;
}

static void opt_batch_copy(void *self, size_t to, size_t from, size_t length) {
    opt_decoder *d = self;
    size_t h = (size_t)d->model->config.hidden_size;
    for (size_t l = 0; l < (size_t)d->model->config.layers; l++) {
        memcpy(cache_at(d->model, d->state, d->state->keys, to, l), cache_at(d->model, d->state, d->state->keys, from, l),
               length * h * sizeof(float));
        memcpy(cache_at(d->model, d->state, d->state->values, to, l),
               cache_at(d->model, d->state, d->state->values, from, l), length * h * sizeof(float));
    }
}

caption_batch_decoder opt_caption_batch_decoder(opt_decoder *self) {
    return (caption_batch_decoder){.self = self,
                                   .vocab_size = self->model->config.vocab_size,
                                   .slots = self->state->max_sequences,
                                   .max_rows = self->state->max_rows,
                                   .max_length = self->state->max_length,
                                   .first_step_each_beam = 0,
                                   .step = opt_batch_step,
                                   .copy = opt_batch_copy};
}
