/* florence2_vision.c — florence2_vision.h: DaViT's tokens made into the rows BART reads. */
#include "families/florence2_vision.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "weights/config.h"
#include "weights/layers.h"

#define FLORENCE2_NORM_EPS 1e-5f

/* What the published checkpoints use, and all this file computes: refused otherwise by name. */
static glimpse_status check_sources(const cJSON *vision_json, const char *where) {
    const cJSON *embed = cJSON_GetObjectItemCaseSensitive(vision_json, "image_pos_embed");
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(embed, "type");
    if (embed && !(cJSON_IsString(type) && !strcmp(type->valuestring, "learned_abs_2d")))
        return error_set(GLIMPSE_STATUS_UNSUPPORTED, "%s: image_pos_embed of another type than learned_abs_2d is not "
                         "supported", where);
    const cJSON *sources = cJSON_GetObjectItemCaseSensitive(vision_json, "image_feature_source");
    const char *expected[2] = {"spatial_avg_pool", "temporal_avg_pool"};
    if (sources) {
        int ok = cJSON_IsArray(sources) && cJSON_GetArraySize(sources) == 2;
        for (int i = 0; ok && i < 2; i++) {
            const cJSON *item = cJSON_GetArrayItem(sources, i);
            ok = cJSON_IsString(item) && !strcmp(item->valuestring, expected[i]);
        }
        if (!ok)
            return error_set(GLIMPSE_STATUS_UNSUPPORTED, "%s: image_feature_source other than [\"spatial_avg_pool\", "
                             "\"temporal_avg_pool\"] is not supported", where);
    }
    return GLIMPSE_STATUS_OK;
}

/* The position and temporal embeddings, the projection and its norm. */
static glimpse_status load_projection(florence2_vision *v, const florence2_names *names, weight_store *store) {
    const tensor_entry *columns = weight_store_find(store, names->column_embeddings);
    const tensor_entry *temporal = weight_store_find(store, names->temporal_embeddings);
    if (!columns || columns->rank != 2 || !temporal || temporal->rank != 2)
        return error_set(GLIMPSE_STATUS_BAD_FORMAT, "the checkpoint lacks %s or %s (or they are not tables)",
                         names->column_embeddings, names->temporal_embeddings);
    size_t positions = columns->shape[0], half = v->dim / 2;
    if (v->grid > positions)
        return error_set(GLIMPSE_STATUS_UNSUPPORTED, "a %zu × %zu grid of image tokens is more than the %zu positions "
                         "of %s", v->grid, v->grid, positions, names->column_embeddings);
    size_t column_shape[2] = {positions, v->dim - half}, row_shape[2] = {positions, half};
    size_t temporal_shape[2] = {temporal->shape[0], v->dim};
    glimpse_status status = weight_store_get(store, &v->column_embeddings, 2, column_shape, names->column_embeddings);
    if (!status) status = weight_store_get(store, &v->row_embeddings, 2, row_shape, names->row_embeddings);
    if (!status) status = weight_store_get(store, &v->temporal, 2, temporal_shape, names->temporal_embeddings);
    if (!status)
        status = weight_store_get_matrix_transposed(store, &v->projection, v->projection_dim, v->dim,
                                                    names->image_projection);
    if (!status)
        status = layers_load_norm(store, names->image_projection_norm, v->projection_dim, &v->norm_weight,
                                  &v->norm_bias);
    return status;
}

glimpse_status florence2_vision_load(florence2_vision *v, const cJSON *config, const cJSON *vision_json,
                                     int image_size, const florence2_names *names, weight_store *store) {
    memset(v, 0, sizeof *v);
    const char *where = "config.json: vision_config";
    davit_config davit;
    int projection_dim;
    glimpse_status status = davit_config_read(vision_json, where, image_size, &davit);
    if (!status) status = check_sources(vision_json, where);
    if (!status) status = config_int(config, "config.json", "projection_dim", 1, CONFIG_MAX_PROJECTION, &projection_dim);
    if (!status) status = davit_model_load(&v->davit, &davit, &names->vision, store);
    if (status) return status;
    const davit_stage *last = &v->davit.stages[DAVIT_STAGES - 1];
    if (last->height != last->width) {
        davit_model_free(&v->davit);
        return error_set(GLIMPSE_STATUS_UNSUPPORTED, "Florence-2 takes square grids of image tokens, not %zu × %zu",
                         last->height, last->width);
    }
    v->grid = last->height, v->dim = davit_output_dim(&v->davit), v->projection_dim = (size_t)projection_dim;
    if ((status = load_projection(v, names, store))) davit_model_free(&v->davit);
    return status;
}

void florence2_vision_free(florence2_vision *v) { davit_model_free(&v->davit); }

size_t florence2_image_rows(const florence2_vision *v) { return 1 + v->grid * v->grid; }

glimpse_status florence2_vision_state_create(const florence2_vision *v, florence2_vision_state *out) {
    memset(out, 0, sizeof *out);
    glimpse_status status = davit_state_create(&v->davit, &out->davit);
    out->tokens = status ? NULL : malloc(florence2_image_rows(v) * v->dim * sizeof(float));
    if (!status && !out->tokens) status = ERROR_OOM();
    if (status) florence2_vision_state_free(out);
    return status;
}

void florence2_vision_state_free(florence2_vision_state *state) {
    davit_state_free(state->davit);
    free(state->tokens);
    memset(state, 0, sizeof *state);
}

glimpse_status florence2_image_features(const florence2_vision *v, florence2_vision_state *state,
                                        const float *pixel_values, float *out, davit_stage_fn on_stage, void *user,
                                        pool *threads) {
    size_t dim = v->dim, tokens = v->grid * v->grid, half = dim / 2, columns = dim - half;
    float *rows = state->tokens, *grid = rows + dim; /* row 0: the mean; then the tokens */
    glimpse_status status = davit_forward(&v->davit, state->davit, pixel_values, grid, on_stage, user, threads);
    if (status) return status;
    for (size_t y = 0; y < v->grid; y++)
        for (size_t x = 0; x < v->grid; x++) {
            float *t = grid + (y * v->grid + x) * dim;
            for (size_t d = 0; d < columns; d++) t[d] += v->column_embeddings[x * columns + d];
            for (size_t d = 0; d < half; d++) t[columns + d] += v->row_embeddings[y * half + d];
            for (size_t d = 0; d < dim; d++) t[d] += v->temporal[d];
        }
    for (size_t d = 0; d < dim; d++) {
        double sum = 0;
        for (size_t t = 0; t < tokens; t++) sum += grid[t * dim + d];
        rows[d] = (float)(sum / (double)tokens);
    }
    size_t n = florence2_image_rows(v);
    kernel_linear(out, v->projection_dim, rows, dim, &v->projection, NULL, n, dim, v->projection_dim, false, threads);
    kernel_layernorm(out, out, v->norm_weight, v->norm_bias, n, v->projection_dim, FLORENCE2_NORM_EPS);
    return GLIMPSE_STATUS_OK;
}
