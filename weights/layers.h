/* layers.h — where the standard layer layouts keep their tensors: fills a
 * core encoder_layer from a checkpoint by Hugging Face parameter names, with
 * every shape checked. Names only; the maths is in core/transformer.c. */
#ifndef GLIMPSE_WEIGHTS_LAYERS_H
#define GLIMPSE_WEIGHTS_LAYERS_H

#include <cjson/cJSON.h>

#include "weights/store.h"
#include "core/transformer.h"

/* The sizes every transformer config names the same way. */
typedef struct layer_sizes {
    int hidden_size, layers, heads, intermediate_size;
    float layer_norm_eps;
    activation act;
    const char *act_name; /* borrowed from the JSON (or the default) */
} layer_sizes;

/* Reads hidden_size, num_hidden_layers, num_attention_heads,
 * intermediate_size, layer_norm_eps and hidden_act over the defaults given
 * in out (act_name set), and checks that the heads divide the width. */
glimpse_status layers_read_sizes(const cJSON *json, const char *where, layer_sizes *out);

/* CLIP's encoder layer (vision and text): PREFIX.layer_norm1, .self_attn.{q,k,v,out}_proj, .layer_norm2, .mlp.fc{1,2}. */
glimpse_status layers_load_clip_encoder(weight_store *store, const char *prefix, size_t hidden, size_t intermediate,
                                        encoder_layer *out);
/* BLIP's vision layer: as CLIP, but attention is PREFIX.self_attn.qkv (fused) and .self_attn.projection. */
glimpse_status layers_load_blip_vision_encoder(weight_store *store, const char *prefix, size_t hidden,
                                               size_t intermediate, encoder_layer *out);
/* A LayerNorm's weight and bias, PREFIX.weight / PREFIX.bias, both [dim]. */
glimpse_status layers_load_norm(weight_store *store, const char *prefix, size_t dim, const float **weight,
                                const float **bias);
/* A linear layer run by the products: PREFIX.weight [out, in] in its stored
 * type (weight_store_get_matrix) and PREFIX.bias [out] as float32. */
glimpse_status layers_load_projection(weight_store *store, const char *prefix, size_t out_features,
                                      size_t in_features, kernel_weight *weight, const float **bias);
/* A linear layer as float32: PREFIX.weight [out, in] and PREFIX.bias [out] (bias NULL = none expected). */
glimpse_status layers_load_linear(weight_store *store, const char *prefix, size_t out_features, size_t in_features,
                                  const float **weight, const float **bias);

#endif
