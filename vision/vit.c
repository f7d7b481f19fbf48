/* vit.c — the ViT of CLIP, BLIP and SigLIP vision towers: loading by a names
 * table (weights/names.h), the forward pass, the pooled outputs. */
#include "vision/vit.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "weights/config.h"
#include "core/error.h"
#include "core/memory.h"
#include "weights/layers.h"

/* transformers' CLIPVisionConfig, BlipVisionConfig and SiglipVisionConfig
 * defaults (by vit_variant), used when a published config leaves a field out:
 * SigLIP's are written as a difference from them. */
static const struct vit_defaults {
    layer_sizes sizes;
    int image_size, patch_size;
} vit_defaults[] = {
    [VIT_VARIANT_CLIP] = {{768, 12, 12, 3072, 1e-5f, ACTIVATION_QUICK_GELU, "quick_gelu"}, 224, 32},
    [VIT_VARIANT_BLIP] = {{768, 12, 12, 3072, 1e-5f, ACTIVATION_GELU, "gelu"}, 384, 16},
    [VIT_VARIANT_SIGLIP] = {{768, 12, 12, 3072, 1e-6f, ACTIVATION_GELU_TANH, "gelu_pytorch_tanh"}, 224, 16},
    [VIT_VARIANT_VIT] = {{768, 12, 12, 3072, 1e-12f, ACTIVATION_GELU, "gelu"}, 224, 16},
};

glimpse_status vit_config_read(const cJSON *json, const char *where, vit_variant variant, vit_config *config) {
    glimpse_status status;
    *config = (vit_config){0};
    config->variant = variant;
    const struct vit_defaults *defaults = &vit_defaults[variant];
    layer_sizes sizes = defaults->sizes;
    if ((status = layers_read_sizes(json, where, &sizes))) return status;
    config->hidden_size = sizes.hidden_size, config->layers = sizes.layers, config->heads = sizes.heads;
    config->intermediate_size = sizes.intermediate_size, config->layer_norm_eps = sizes.layer_norm_eps;
    config->act = sizes.act, config->act_name = sizes.act_name;
    if ((status = config_int_or(json, where, "image_size", 1, CONFIG_MAX_IMAGE_SIZE, defaults->image_size,
                                &config->image_size)))
        return status;
    if ((status = config_int_or(json, where, "patch_size", 1, CONFIG_MAX_IMAGE_SIZE, defaults->patch_size,
                                &config->patch_size)))
        return status;
    if ((status = config_int_or(json, where, "num_channels", 3, 3, 3, &config->channels))) return status;
    if (variant == VIT_VARIANT_CLIP && (status = config_int_or(json, where, "projection_dim", 1,
                                                               CONFIG_MAX_PROJECTION, 512, &config->projection_dim)))
        return status;
    if (variant == VIT_VARIANT_SIGLIP) config->projection_dim = config->hidden_size; /* the head's, unprojected */
    /* The patch convolution (stride = kernel, no padding) drops what is left at the right and bottom edges:
     * so400m's 384 pixels make 27 patches of 14 and leave 6. */
    if (config->patch_size > config->image_size)
        return error_set(GLIMPSE_STATUS_UNSUPPORTED, "%s: patch_size %d is larger than image_size %d", where,
                         config->patch_size, config->image_size);
    return GLIMPSE_STATUS_OK;
}

glimpse_status vit_model_load(vit_model *model, const vit_config *config, const vit_names *names,
                              weight_store *store) {
    memset(model, 0, sizeof *model);
    model->config = *config;
    size_t hidden = (size_t)config->hidden_size, patch = (size_t)config->patch_size;
    model->patches_per_side = (size_t)(config->image_size / config->patch_size);
    model->tokens = model->patches_per_side * model->patches_per_side + (names->class_embedding ? 1 : 0);
    vit_weights *w = &model->weights;
    int blip = config->variant == VIT_VARIANT_BLIP || config->variant == VIT_VARIANT_VIT; /* [1, ...] shapes */
    size_t patch_shape[4] = {hidden, (size_t)config->channels, patch, patch}, bias_shape[1] = {hidden};
    /* BLIP's class and position embeddings; CLIP's and SigLIP's are the same without the leading 1s */
    size_t class_shape[3] = {1, 1, hidden}, position_shape[3] = {1, model->tokens, hidden};
    glimpse_status status = weight_store_get(store, &w->patch_weight, 4, patch_shape, names->patch_weight);
    if (!status && names->patch_bias)
        status = weight_store_get(store, &w->patch_bias, 1, bias_shape, names->patch_bias);
    if (!status && names->class_embedding)
        status = weight_store_get(store, &w->class_embedding, blip ? 3 : 1, blip ? class_shape : class_shape + 2,
                                  names->class_embedding);
    if (!status)
        status = weight_store_get(store, &w->position_embedding, blip ? 3 : 2,
                                  blip ? position_shape : position_shape + 1, names->position_embedding);
    if (!status && names->pre_norm)
        status = layers_load_norm(store, names->pre_norm, hidden, &w->pre_norm_weight, &w->pre_norm_bias);
    if (!status && names->projection)
        status = layers_load_linear(store, names->projection, (size_t)config->projection_dim, hidden, &w->projection,
                                    NULL);
    if (!status && names->post_norm) /* absent from LLaVA's table: it reads a hidden layer */
        status = layers_load_norm(store, names->post_norm, hidden, &w->post_norm_weight, &w->post_norm_bias);
    if (!status && names->head)
        status = layers_load_attention_pool(store, names->head_names, names->head, hidden,
                                            (size_t)config->intermediate_size, &w->head, &w->head_probe);
    if (!status)
        status = layers_load_encoder_stack(store, names->layer, names->layers, (size_t)config->layers, hidden,
                                           (size_t)config->intermediate_size, &w->layers);
    return status;
}

void vit_model_free(vit_model *model) {
    free(model->weights.layers);
    model->weights.layers = NULL;
    free(model->weights.pixel_bias);
    model->weights.pixel_bias = NULL;
}

static encoder_shape shape_of(const vit_model *model) {
    const vit_config *c = &model->config;
    encoder_shape shape = {(size_t)c->hidden_size, (size_t)c->heads, (size_t)c->intermediate_size, c->layer_norm_eps,
                           c->act, KERNEL_MASK_NONE};
    return shape;
}

glimpse_status vit_model_add_twins(vit_model *model, kernel_twin_add add, void *set) {
    encoder_shape shape = shape_of(model);
    glimpse_status status =
        encoder_layers_add_twins(model->weights.layers, (size_t)model->config.layers, &shape, add, set);
    if (!status && model->weights.head_probe)
        status = encoder_layers_add_twins(&model->weights.head, 1, &shape, add, set);
    return status;
}

glimpse_status vit_model_fuse_q8(vit_model *model, q8_set *set) {
    encoder_shape shape = shape_of(model);
    return encoder_layers_fuse_q8(model->weights.layers, (size_t)model->config.layers, &shape, set);
}

/* The byte offset the int8 pixel rows hold each byte value at: x = byte - PIXEL_OFFSET in [-128, 127], clamped
 * to -127 (the quantized rows' range: byte 0 reads as 1), beside a column of 127 that makes each row's scale
 * exactly 1, so that every x is quantized as itself. */
#define PIXEL_OFFSET 128

glimpse_status vit_model_quantize_pixels(vit_model *model, const preprocess_config *pre, q8_set *set) {
    const vit_config *c = &model->config;
    vit_weights *w = &model->weights;
    if (c->channels != 3 || !pre->do_rescale || !(pre->rescale_factor > 0) || w->pixel_weight.q8)
        return GLIMPSE_STATUS_OK;
    size_t hidden = (size_t)c->hidden_size, area = (size_t)c->patch_size * (size_t)c->patch_size;
    size_t values = 3 * area, depth = values + 1;
    for (size_t ch = 0; ch < 3; ch++) {
        double std = pre->do_normalize ? pre->std[ch] : 1.0, mean = pre->do_normalize ? pre->mean[ch] : 0.0;
        if (!(std > 0)) return GLIMPSE_STATUS_OK;
        w->pixel_step[ch] = (float)(pre->rescale_factor / std);
        w->pixel_base[ch] = (float)(-mean / std);
    }
    float *folded = malloc(hidden * depth * sizeof(float)), *bias = malloc(hidden * sizeof(float));
    if (!folded || !bias) {
        free(folded), free(bias);
        return ERROR_OOM();
    }
    /* v = byte · step + base = (x + PIXEL_OFFSET) · step + base, so
     * W·v = (W·step)·x + W·(PIXEL_OFFSET · step + base) */
    for (size_t o = 0; o < hidden; o++) {
        const float *row = w->patch_weight + o * values;
        double constant = w->patch_bias ? w->patch_bias[o] : 0.0;
        for (size_t ch = 0; ch < 3; ch++)
            for (size_t i = 0; i < area; i++) {
                double weight = row[ch * area + i];
                folded[o * depth + ch * area + i] = (float)(weight * w->pixel_step[ch]);
                constant += weight * ((double)PIXEL_OFFSET * w->pixel_step[ch] + w->pixel_base[ch]);
            }
        folded[o * depth + values] = 0.0f; /* (the column of 127) */
        bias[o] = (float)constant;
    }
    w->pixel_weight = kernel_weight_f32(folded);
    glimpse_status status = q8_set_add(set, &w->pixel_weight, hidden, depth);
    if (!status) { /* the folded weights less what the int8 values give back, quantized in turn */
        const kernel_q8 *q = w->pixel_weight.q8;
        for (size_t o = 0; o < hidden; o++)
            for (size_t k = 0; k < values; k++)
                folded[o * depth + k] -= (float)q->weight[q8_weight_offset(q, o, k)] * q->scale[o];
        w->pixel_residual = kernel_weight_f32(folded);
        status = q8_set_add(set, &w->pixel_residual, hidden, depth);
    }
    free(folded); /* (only the twins are read) */
    w->pixel_weight.data = w->pixel_residual.data = NULL;
    if (status) {
        free(bias);
        w->pixel_weight.q8 = w->pixel_residual.q8 = NULL;
        return status;
    }
    w->pixel_bias = bias;
    return GLIMPSE_STATUS_OK;
}

glimpse_status vit_state_create(const vit_model *model, size_t max_batch, vit_state **out) {
    *out = NULL;
    vit_state *state = calloc(1, sizeof *state);
    if (!state) return ERROR_OOM();
    encoder_shape shape = shape_of(model);
    size_t rows = max_batch * model->tokens, patch = (size_t)model->config.patch_size;
    size_t patch_values = (size_t)model->config.channels * patch * patch;
    size_t patches = model->patches_per_side * model->patches_per_side;
    state->max_batch = max_batch;
    state->hidden = memory_large(rows * shape.hidden * sizeof(float)); /* (the large ones on huge pages) */
    state->patches = memory_large(max_batch * patches * (patch_values + 1) * sizeof(float));
    if (model->weights.head_probe) state->pooled = malloc(max_batch * shape.hidden * sizeof(float));
    state->memory = memory_large(encoder_scratch_floats(&shape, rows, model->tokens) * sizeof(float));
    state->lengths = malloc(max_batch * sizeof(size_t));
    state->class_rows = calloc(max_batch, sizeof(size_t)); /* the class token is each image's row 0 */
    if (!state->hidden || !state->patches || !state->memory || !state->lengths || !state->class_rows ||
        (model->weights.head_probe && !state->pooled)) {
        vit_state_free(state);
        return ERROR_OOM();
    }
    encoder_scratch_carve(&state->scratch, state->memory, &shape, rows, model->tokens);
    *out = state;
    return GLIMPSE_STATUS_OK;
}

void vit_state_free(vit_state *state) {
    if (!state) return;
    free(state->hidden);
    free(state->pooled);
    free(state->patches);
    free(state->memory);
    free(state->lengths);
    free(state->class_rows);
    free(state);
}

/* Writes n pixel values v of one channel as the int8 pixel weight's row values (vit_model_quantize_pixels):
 * x = byte - PIXEL_OFFSET, clamped to -127, where v = byte · step + base. Returns false if any v is not such a
 * byte (the preprocessing's float rounding is ~1e-7 of a step). Plain arithmetic that compilers vectorise
 * (rintf is a library call at this file's baseline). */
static bool pixel_bytes(float *v, size_t n, float step, float base) {
    float inverse = 1.0f / step, tolerance = 1e-3f * step;
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        /* to the nearest integer by adding and taking away 1.5 · 2^23 (exact below 2^22; no conversion to int,
         * which C leaves undefined out of range or for NaN, and which GCC does not vectorise guarded) */
        float t = (v[i] - base) * inverse, byte = (t + 0x1.8p23f) - 0x1.8p23f;
        bad |= !(t > -0.5f) | !(t < 255.5f) | (fabsf(byte * step + base - v[i]) > tolerance);
        v[i] = byte - PIXEL_OFFSET < -127.0f ? -127.0f : byte - PIXEL_OFFSET;
    }
    return !bad;
}

/* Unfolds the patches of pixel_values[batch, channels, size, size] into rows `stride` apart, ordered (channel,
 * row, column) like the convolution's weight. */
static void unfold_patches(float *rows, size_t stride, const float *pixel_values, const vit_model *model,
                           size_t batch) {
    size_t side = model->patches_per_side, patches = side * side, patch = (size_t)model->config.patch_size;
    size_t size = (size_t)model->config.image_size, channels = (size_t)model->config.channels;
    for (size_t b = 0; b < batch; b++)
        for (size_t py = 0; py < side; py++)
            for (size_t px = 0; px < side; px++) {
                float *row = rows + ((b * patches) + py * side + px) * stride;
                for (size_t ch = 0; ch < channels; ch++)
                    for (size_t y = 0; y < patch; y++)
                        memcpy(row + (ch * patch + y) * patch,
                               pixel_values + ((b * channels + ch) * size + py * patch + y) * size + px * patch,
                               patch * sizeof(float));
            }
}

/* With the int8 pixel weight, the patches of pixel_values as its rows[count, 3 · patch² + 1] (pixel_bytes,
 * then the column of 127) if every value is a normalised byte, returning true; else as float32 values (rows
 * [count, 3 · patch²]), returning false. */
static bool patch_rows(float *rows, const float *pixel_values, const vit_model *model, size_t batch) {
    const vit_weights *w = &model->weights;
    size_t area = (size_t)model->config.patch_size * (size_t)model->config.patch_size;
    size_t values = (size_t)model->config.channels * area;
    size_t count = batch * model->patches_per_side * model->patches_per_side;
    if (w->pixel_weight.q8) {
        unfold_patches(rows, values + 1, pixel_values, model, batch);
        bool ok = true;
        for (size_t r = 0; r < count; r++) {
            float *row = rows + r * (values + 1);
            for (size_t ch = 0; ch < 3; ch++)
                ok &= pixel_bytes(row + ch * area, area, w->pixel_step[ch], w->pixel_base[ch]);
            row[values] = 127.0f;
        }
        if (ok) return true;
    }
    unfold_patches(rows, values, pixel_values, model, batch);
    return false;
}

void vit_forward(const vit_model *model, vit_state *state, const float *pixel_values, size_t batch,
                 encoder_output output, pool *threads) {
    const vit_config *c = &model->config;
    const vit_weights *w = &model->weights;
    size_t hidden = (size_t)c->hidden_size, patch = (size_t)c->patch_size, side = model->patches_per_side;
    size_t patch_values = (size_t)c->channels * patch * patch, patches = side * side, tokens = model->tokens;

    /* Patch embedding as a matrix product */
    float *embedded = state->scratch.context; /* [batch · patches, hidden], free until the first layer */
    if (patch_rows(state->patches, pixel_values, model, batch)) {
        kernel_linear(embedded, hidden, state->patches, patch_values + 1, &w->pixel_weight, w->pixel_bias,
                      batch * patches, patch_values + 1, hidden, false, threads);
        kernel_linear(embedded, hidden, state->patches, patch_values + 1, &w->pixel_residual, NULL, batch * patches,
                      patch_values + 1, hidden, true, threads);
    } else {
        const kernel_weight patch_weight = kernel_weight_f32(w->patch_weight);
        kernel_linear(embedded, hidden, state->patches, patch_values, &patch_weight, w->patch_bias,
                      batch * patches, patch_values, hidden, false, threads);
    }
    size_t first = w->class_embedding ? 1 : 0; /* the class token, if any, is each image's row 0 */
    for (size_t b = 0; b < batch; b++) {
        float *x = state->hidden + b * tokens * hidden;
        if (first)
            for (size_t i = 0; i < hidden; i++) x[i] = w->class_embedding[i] + w->position_embedding[i];
        for (size_t t = first; t < tokens; t++) {
            const float *p = embedded + (b * patches + t - first) * hidden;
            const float *position = w->position_embedding + t * hidden;
            for (size_t i = 0; i < hidden; i++) x[t * hidden + i] = p[i] + position[i];
        }
        state->lengths[b] = tokens;
    }
    if (w->pre_norm_weight)
        kernel_layernorm(state->hidden, state->hidden, w->pre_norm_weight, w->pre_norm_bias, batch * tokens, hidden,
                         c->layer_norm_eps);
    encoder_shape shape = shape_of(model);
    /* SigLIP's head attends to every token, and a record takes every row: no class row to take alone */
    bool class_rows_only = output == ENCODER_OUTPUT_POOLED_ROWS && !w->head_probe && !state->record;
    encoder_stack_forward(state->hidden, state->record, w->layers, (size_t)c->layers,
                          class_rows_only ? state->class_rows : NULL, &shape, state->lengths, batch, &state->scratch,
                          threads);
    if (w->head_probe) {
        kernel_layernorm(state->hidden, state->hidden, w->post_norm_weight, w->post_norm_bias, batch * tokens, hidden,
                         c->layer_norm_eps);
        encoder_attention_pool(state->pooled, state->record, (size_t)c->layers, state->hidden, &w->head, w->head_probe,
                               &shape, state->lengths, batch, &state->scratch, threads);
    }
}

void vit_post_norm_all(const vit_model *model, const vit_state *state, size_t b, float *out) {
    size_t hidden = (size_t)model->config.hidden_size;
    const float *tokens = state->hidden + b * model->tokens * hidden;
    if (model->weights.head_probe) { /* vit_forward applied it already */
        memcpy(out, tokens, model->tokens * hidden * sizeof(float));
        return;
    }
    kernel_layernorm(out, tokens, model->weights.post_norm_weight, model->weights.post_norm_bias, model->tokens,
                     hidden, model->config.layer_norm_eps);
}

void vit_pooled(const vit_model *model, const vit_state *state, size_t b, float *out) {
    size_t hidden = (size_t)model->config.hidden_size;
    if (model->weights.head_probe) {
        memcpy(out, state->pooled + b * hidden, hidden * sizeof(float));
        return;
    }
    kernel_layernorm(out, state->hidden + b * model->tokens * hidden, model->weights.post_norm_weight,
                     model->weights.post_norm_bias, 1, hidden, model->config.layer_norm_eps);
}

void vit_embed(const vit_model *model, const vit_state *state, size_t b, float *out) {
    size_t hidden = (size_t)model->config.hidden_size, dim = (size_t)model->config.projection_dim;
    float pooled[hidden];
    vit_pooled(model, state, b, model->weights.projection ? pooled : out);
    if (model->weights.projection) {
        const kernel_weight projection = kernel_weight_f32(model->weights.projection);
        kernel_linear(out, dim, pooled, hidden, &projection, NULL, 1, hidden, dim, false, NULL);
    }
    kernel_l2_normalize(out, dim);
}
