/* clip_text.c — CLIP's and SigLIP's text tower: loading by a names table
 * (weights/names.h), the forward pass over packed sequences. */
#include "text/clip_text.h"

#include <stdlib.h>
#include <string.h>

#include "weights/config.h"
#include "core/error.h"
#include "core/memory.h"
#include "weights/layers.h"

glimpse_status clip_text_config_read(const cJSON *json, const char *where, clip_text_variant variant,
                                     int projection_dim, clip_text_config *config) {
    glimpse_status status;
    *config = (clip_text_config){0};
    config->variant = variant;
    config->projection_dim = projection_dim;
    /* Defaults are transformers' CLIPTextConfig / SiglipTextConfig ones, used
     * when a published config leaves a field out (SigLIP's leave out most). */
    int siglip = variant == CLIP_TEXT_VARIANT_SIGLIP;
    layer_sizes sizes = siglip ? (layer_sizes){768, 12, 12, 3072, 1e-6f, ACTIVATION_GELU_TANH, "gelu_pytorch_tanh"}
                               : (layer_sizes){512, 12, 8, 2048, 1e-5f, ACTIVATION_QUICK_GELU, "quick_gelu"};
    if ((status = layers_read_sizes(json, where, &sizes))) return status;
    config->hidden_size = sizes.hidden_size, config->layers = sizes.layers, config->heads = sizes.heads;
    config->intermediate_size = sizes.intermediate_size, config->layer_norm_eps = sizes.layer_norm_eps;
    config->act = sizes.act, config->act_name = sizes.act_name;
    if ((status = config_int_or(json, where, "max_position_embeddings", 2, CONFIG_MAX_POSITIONS, siglip ? 64 : 77,
                                &config->max_positions)))
        return status;
    if ((status = config_int_or(json, where, "vocab_size", 1, CONFIG_MAX_VOCABULARY, siglip ? 32000 : 49408,
                                &config->vocab_size)))
        return status;
    if (siglip) /* transformers after 4.37 name the head's size; before, it is hidden_size */
        return config_int_or(json, where, "projection_size", 1, CONFIG_MAX_PROJECTION, config->hidden_size,
                             &config->projection_dim);
    return config_int_or(json, where, "eos_token_id", 0, CONFIG_MAX_VOCABULARY, CLIP_LEGACY_EOS_TOKEN_ID,
                         &config->eos_token_id);
}

glimpse_status clip_text_model_load(clip_text_model *model, const clip_text_config *config,
                                    const clip_text_names *names, weight_store *store) {
    memset(model, 0, sizeof *model);
    model->config = *config;
    clip_text_weights *w = &model->weights;
    size_t hidden = (size_t)config->hidden_size;
    size_t position_shape[2] = {(size_t)config->max_positions, hidden};
    glimpse_status status = weight_store_get_matrix(store, &w->token_embedding, (size_t)config->vocab_size, hidden,
                                                    names->token_embedding);
    if (!status)
        status = weight_store_get(store, &w->position_embedding, 2, position_shape, names->position_embedding);
    if (!status)
        status = layers_load_norm(store, names->final_norm, hidden, &w->final_norm_weight, &w->final_norm_bias);
    if (!status)
        status = layers_load_linear(store, names->projection, (size_t)config->projection_dim, hidden, &w->projection,
                                    config->variant == CLIP_TEXT_VARIANT_SIGLIP ? &w->projection_bias : NULL);
    if (!status)
        status = layers_load_encoder_stack(store, names->layer, names->layers, (size_t)config->layers, hidden,
                                           (size_t)config->intermediate_size, &w->layers);
    return status;
}

void clip_text_model_free(clip_text_model *model) {
    free(model->weights.layers);
    model->weights.layers = NULL;
}

static encoder_shape shape_of(const clip_text_model *model) {
    const clip_text_config *c = &model->config;
    encoder_shape shape = {(size_t)c->hidden_size, (size_t)c->heads, (size_t)c->intermediate_size, c->layer_norm_eps,
                           c->act, c->variant == CLIP_TEXT_VARIANT_SIGLIP ? KERNEL_MASK_NONE : KERNEL_MASK_CAUSAL};
    return shape;
}

glimpse_status clip_text_model_add_twins(clip_text_model *model, kernel_twin_add add, void *set) {
    encoder_shape shape = shape_of(model);
    return encoder_layers_add_twins(model->weights.layers, (size_t)model->config.layers, &shape, add, set);
}

glimpse_status clip_text_model_fuse_q8(clip_text_model *model, q8_set *set) {
    encoder_shape shape = shape_of(model);
    return encoder_layers_fuse_q8(model->weights.layers, (size_t)model->config.layers, &shape, set);
}

glimpse_status clip_text_state_create(const clip_text_model *model, size_t max_sequences, clip_text_state **out) {
    *out = NULL;
    clip_text_state *state = calloc(1, sizeof *state);
    if (!state) return ERROR_OOM();
    encoder_shape shape = shape_of(model);
    size_t positions = (size_t)model->config.max_positions;
    state->max_rows = max_sequences * positions;
    state->max_sequences = max_sequences;
    state->hidden = memory_large(state->max_rows * shape.hidden * sizeof(float)); /* (on huge pages when large) */
    state->memory = memory_large(encoder_scratch_floats(&shape, state->max_rows, positions) * sizeof(float));
    state->pooled = malloc(max_sequences * sizeof *state->pooled);
    if (!state->hidden || !state->memory || !state->pooled) {
        clip_text_state_free(state);
        return ERROR_OOM();
    }
    encoder_scratch_carve(&state->scratch, state->memory, &shape, state->max_rows, positions);
    *out = state;
    return GLIMPSE_STATUS_OK;
}

void clip_text_state_free(clip_text_state *state) {
    if (!state) return;
    free(state->hidden);
    free(state->memory);
    free(state->pooled);
    free(state);
}

glimpse_status clip_text_forward(const clip_text_model *model, clip_text_state *state, const int32_t *ids,
                                 const size_t *lengths, size_t sequences, encoder_output output, pool *threads) {
    const clip_text_config *c = &model->config;
    const clip_text_weights *w = &model->weights;
    size_t hidden = (size_t)c->hidden_size, rows = 0;
    for (size_t s = 0; s < sequences; s++) {
        if (lengths[s] == 0 || lengths[s] > (size_t)c->max_positions)
            return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "text of %zu tokens: the model takes 1 to %d",
                             lengths[s], c->max_positions);
        rows += lengths[s];
    }
    if (rows > state->max_rows || sequences > state->max_sequences)
        return error_set(GLIMPSE_STATUS_INTERNAL, "text batch larger than its state");
    size_t row = 0;
    for (size_t s = 0; s < sequences; s++)
        for (size_t t = 0; t < lengths[s]; t++, row++) {
            int32_t id = ids[row];
            if (id < 0 || id >= c->vocab_size)
                return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "token id %d is outside the vocabulary of %d", id,
                                 c->vocab_size);
            kernel_weight_row_add(state->hidden + row * hidden, &w->token_embedding, (size_t)id, hidden,
                                  w->position_embedding + t * hidden);
        }
    encoder_shape shape = shape_of(model);
    if (output == ENCODER_OUTPUT_ALL_ROWS) {
        encoder_stack_forward(state->hidden, NULL, w->layers, (size_t)c->layers, NULL, &shape, lengths, sequences,
                              &state->scratch, threads);
        kernel_layernorm(state->hidden, state->hidden, w->final_norm_weight, w->final_norm_bias, rows, hidden,
                         c->layer_norm_eps);
        return GLIMPSE_STATUS_OK;
    }
    for (size_t s = 0, first = 0; s < sequences; first += lengths[s], s++)
        state->pooled[s] = clip_text_pool_index(model, ids + first, lengths[s]);
    encoder_stack_forward(state->hidden, NULL, w->layers, (size_t)c->layers, state->pooled, &shape, lengths,
                          sequences, &state->scratch, threads);
    for (size_t s = 0, first = 0; s < sequences; first += lengths[s], s++) {
        float *row = state->hidden + (first + state->pooled[s]) * hidden;
        kernel_layernorm(row, row, w->final_norm_weight, w->final_norm_bias, 1, hidden, c->layer_norm_eps);
    }
    return GLIMPSE_STATUS_OK;
}

size_t clip_text_pool_index(const clip_text_model *model, const int32_t *ids, size_t length) {
    size_t best = 0;
    if (model->config.variant == CLIP_TEXT_VARIANT_SIGLIP) return length - 1;
    if (model->config.eos_token_id == CLIP_LEGACY_EOS_TOKEN_ID) { /* argmax of the ids, first on ties */
        for (size_t i = 1; i < length; i++)
            if (ids[i] > ids[best]) best = i;
        return best;
    }
    for (size_t i = 0; i < length; i++)
        if (ids[i] == model->config.eos_token_id) return i;
    return length - 1;
}

void clip_text_pooled(const clip_text_model *model, const clip_text_state *state, size_t first, const int32_t *ids,
                      size_t length, float *out) {
    size_t hidden = (size_t)model->config.hidden_size, dim = (size_t)model->config.projection_dim;
    const float *pooled = state->hidden + (first + clip_text_pool_index(model, ids, length)) * hidden;
    const kernel_weight projection = kernel_weight_f32(model->weights.projection);
    kernel_linear(out, dim, pooled, hidden, &projection, model->weights.projection_bias, 1, hidden, dim, false, NULL);
}

void clip_text_embed(const clip_text_model *model, const clip_text_state *state, size_t first, const int32_t *ids,
                     size_t length, float *out) {
    clip_text_pooled(model, state, first, ids, length, out);
    kernel_l2_normalize(out, (size_t)model->config.projection_dim);
}
