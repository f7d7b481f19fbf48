/* qformer.c — BLIP-2's Q-Former and language projection: config, loading
 * through BERT's layer loader (fusion/bert.c) with cross-attention only
 * where cross_attention_frequency puts it, and the pass from image tokens to
 * the language model's prefix vectors. */
#include "fusion/qformer.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "weights/config.h"
#include "weights/layers.h"

/* Blip2Config's and Blip2QFormerConfig's defaults (transformers 4.27). */
#define BLIP2_DEFAULT_QUERIES 32
#define BLIP2_DEFAULT_FREQUENCY 2
#define BLIP2_MAX_QUERIES 4096

glimpse_status blip2_qformer_config_read(const cJSON *root, const cJSON *json, int vision_hidden, int projection_dim,
                                         blip2_qformer *q) {
    memset(q, 0, sizeof *q);
    glimpse_status status = bert_config_read(json, "config.json: qformer_config", vision_hidden, &q->config);
    if (!status)
        status = config_int_or(json, "config.json: qformer_config", "cross_attention_frequency", 1, CONFIG_MAX_LAYERS,
                               BLIP2_DEFAULT_FREQUENCY, &q->cross_attention_frequency);
    if (!status)
        status = config_int_or(root, "config.json", "num_query_tokens", 1, BLIP2_MAX_QUERIES, BLIP2_DEFAULT_QUERIES,
                               &q->queries);
    q->projection_dim = projection_dim;
    return status;
}

glimpse_status blip2_qformer_load(blip2_qformer *q, const blip2_names *names, weight_store *store) {
    const bert_config *c = &q->config;
    size_t h = (size_t)c->hidden_size, queries = (size_t)q->queries;
    size_t query_shape[3] = {1, queries, h};
    bert_model *bert = &q->bert;
    memset(bert, 0, sizeof *bert);
    bert->config = *c;
    const bert_layout *layout = names->qformer.layout;
    const norm_slot embedding_norm = {layout->embedding_norm, &bert->embedding_norm_weight, &bert->embedding_norm_bias};
    glimpse_status status = weight_store_get(store, &q->query_tokens, 3, query_shape, names->query_tokens);
    if (!status) status = layers_load_norms(store, names->qformer.model, h, &embedding_norm, 1);
    if (!status)
        status = layers_load_projection(store, names->language_projection, (size_t)q->projection_dim, h,
                                        &q->projection, &q->projection_bias);
    if (status) return status;
    bert->layers = calloc((size_t)c->layers, sizeof *bert->layers);
    if (!bert->layers) return ERROR_OOM();
    char name[LAYERS_NAME_CAPACITY];
    for (int i = 0; i < c->layers && !status; i++) {
        bert_layer_names layer = layout->layer;
        if (i % q->cross_attention_frequency != 0) /* Blip2QFormerLayer has no crossattention here */
            layer.cross_query = layer.cross_key = layer.cross_value = layer.cross_out = layer.cross_norm = NULL;
        status = layers_name(name, "%s.%s.%d", names->qformer.model, layout->layers, i);
        if (!status) status = bert_layer_load(store, &layer, name, c, &bert->layers[i]);
    }
    if (status) blip2_qformer_free(q);
    return status;
}

void blip2_qformer_free(blip2_qformer *q) { bert_model_free(&q->bert); }

glimpse_status blip2_qformer_quantize(blip2_qformer *q, q8_set *set) {
    glimpse_status status = bert_model_quantize(&q->bert, set);
    return status ? status
                  : q8_set_add(set, &q->projection, (size_t)q->projection_dim, (size_t)q->config.hidden_size);
}

glimpse_status blip2_qformer_state_create(const blip2_qformer *q, size_t image_tokens, bert_state **out) {
    return bert_state_create(&q->bert, 1, (size_t)q->queries, (size_t)q->queries, image_tokens, out);
}

glimpse_status blip2_qformer_forward(const blip2_qformer *q, bert_state *state, const float *image_tokens,
                                     size_t count, float *out, pool *threads) {
    size_t h = (size_t)q->config.hidden_size, queries = (size_t)q->queries;
    glimpse_status status = bert_set_image(&q->bert, state, image_tokens, count, threads);
    if (!status) status = bert_encode_embedded(&q->bert, state, q->query_tokens, queries, 1, threads);
    if (!status)
        kernel_linear(out, (size_t)q->projection_dim, state->x, h, &q->projection, q->projection_bias, queries, h,
                      (size_t)q->projection_dim, false, threads);
    return status;
}
