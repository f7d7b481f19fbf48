/* layers.c — parameter names of the encoder layers we run. */
#include "weights/layers.h"

#include <stdio.h>

#include "weights/config.h"
#include "core/error.h"

glimpse_status layers_read_sizes(const cJSON *json, const char *where, layer_sizes *out) {
    glimpse_status status;
    if ((status = config_int_or(json, where, "hidden_size", 1, 8192, out->hidden_size, &out->hidden_size))) return status;
    if ((status = config_int_or(json, where, "num_hidden_layers", 1, 1024, out->layers, &out->layers))) return status;
    if ((status = config_int_or(json, where, "num_attention_heads", 1, 1024, out->heads, &out->heads))) return status;
    if ((status = config_int_or(json, where, "intermediate_size", 1, 1 << 20, out->intermediate_size,
                                &out->intermediate_size)))
        return status;
    double eps;
    if ((status = config_double_or(json, where, "layer_norm_eps", out->layer_norm_eps, &eps))) return status;
    out->layer_norm_eps = (float)eps;
    if ((status = config_string_or(json, where, "hidden_act", out->act_name, &out->act_name))) return status;
    if (!activation_from_name(out->act_name, &out->act))
        return error_set(GLIMPSE_STATUS_UNSUPPORTED, "%s: hidden_act \"%s\" is not supported", where, out->act_name);
    if (out->hidden_size % out->heads != 0)
        return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: hidden_size %d is not divisible by num_attention_heads %d",
                         where, out->hidden_size, out->heads);
    return GLIMPSE_STATUS_OK;
}

glimpse_status layers_load_norm(weight_store *store, const char *prefix, size_t dim, const float **weight,
                                const float **bias) {
    size_t shape[1] = {dim};
    glimpse_status status = weight_store_get(store, weight, 1, shape, "%s.weight", prefix);
    if (!status) status = weight_store_get(store, bias, 1, shape, "%s.bias", prefix);
    return status;
}

glimpse_status layers_load_linear(weight_store *store, const char *prefix, size_t out_features, size_t in_features,
                                  const float **weight, const float **bias) {
    size_t shape[2] = {out_features, in_features};
    glimpse_status status = weight_store_get(store, weight, 2, shape, "%s.weight", prefix);
    if (!status && bias) status = weight_store_get(store, bias, 1, shape, "%s.bias", prefix);
    return status;
}

glimpse_status layers_load_projection(weight_store *store, const char *prefix, size_t out_features,
                                      size_t in_features, kernel_weight *weight, const float **bias) {
    size_t shape[1] = {out_features};
    glimpse_status status = weight_store_get_matrix(store, weight, out_features, in_features, "%s.weight", prefix);
    if (!status) status = weight_store_get(store, bias, 1, shape, "%s.bias", prefix);
    return status;
}

static glimpse_status load_common(weight_store *store, const char *prefix, size_t hidden, size_t intermediate,
                                  encoder_layer *out) {
    char name[256];
    glimpse_status status;
    snprintf(name, sizeof name, "%s.layer_norm1", prefix);
    if ((status = layers_load_norm(store, name, hidden, &out->norm1_weight, &out->norm1_bias))) return status;
    snprintf(name, sizeof name, "%s.layer_norm2", prefix);
    if ((status = layers_load_norm(store, name, hidden, &out->norm2_weight, &out->norm2_bias))) return status;
    snprintf(name, sizeof name, "%s.mlp.fc1", prefix);
    if ((status = layers_load_projection(store, name, intermediate, hidden, &out->fc1_weight, &out->fc1_bias)))
        return status;
    snprintf(name, sizeof name, "%s.mlp.fc2", prefix);
    return layers_load_projection(store, name, hidden, intermediate, &out->fc2_weight, &out->fc2_bias);
}

glimpse_status layers_load_clip_encoder(weight_store *store, const char *prefix, size_t hidden, size_t intermediate,
                                        encoder_layer *out) {
    *out = (encoder_layer){0};
    glimpse_status status = load_common(store, prefix, hidden, intermediate, out);
    char name[256];
    const struct {
        const char *what;
        kernel_weight *weight;
        const float **bias;
    } projections[] = {{"q_proj", &out->q_weight, &out->q_bias},
                       {"k_proj", &out->k_weight, &out->k_bias},
                       {"v_proj", &out->v_weight, &out->v_bias},
                       {"out_proj", &out->out_weight, &out->out_bias}};
    for (size_t i = 0; !status && i < 4; i++) {
        snprintf(name, sizeof name, "%s.self_attn.%s", prefix, projections[i].what);
        status = layers_load_projection(store, name, hidden, hidden, projections[i].weight, projections[i].bias);
    }
    return status;
}

glimpse_status layers_load_blip_vision_encoder(weight_store *store, const char *prefix, size_t hidden,
                                               size_t intermediate, encoder_layer *out) {
    *out = (encoder_layer){0};
    glimpse_status status = load_common(store, prefix, hidden, intermediate, out);
    char name[256];
    if (!status) {
        snprintf(name, sizeof name, "%s.self_attn.qkv", prefix);
        status = layers_load_projection(store, name, 3 * hidden, hidden, &out->qkv_weight, &out->qkv_bias);
    }
    if (!status) {
        snprintf(name, sizeof name, "%s.self_attn.projection", prefix);
        status = layers_load_projection(store, name, hidden, hidden, &out->out_weight, &out->out_bias);
    }
    return status;
}
