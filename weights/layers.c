/* layers.c — loading LayerNorms, linear layers and pre-LN encoder layers by
 * the names a family's table gives, and composing those names without ever
 * cutting one short. */
#include "weights/layers.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "weights/config.h"
#include "core/error.h"

glimpse_status layers_name(char *name, const char *format, ...) {
    va_list args;
    va_start(args, format);
    int length = vsnprintf(name, LAYERS_NAME_CAPACITY, format, args);
    va_end(args);
    if (length < 0) name[0] = '\0';
    if (length < 0 || length >= LAYERS_NAME_CAPACITY)
        return error_set(GLIMPSE_STATUS_INTERNAL, "the tensor name '%.80s...' is longer than the %d characters a "
                         "loader composes", name, LAYERS_NAME_CAPACITY - 1);
    return GLIMPSE_STATUS_OK;
}

glimpse_status layers_read_sizes(const cJSON *json, const char *where, layer_sizes *out) {
    glimpse_status status;
    if ((status = config_int_or(json, where, "hidden_size", 1, CONFIG_MAX_WIDTH, out->hidden_size, &out->hidden_size)))
        return status;
    if ((status = config_int_or(json, where, "num_hidden_layers", 1, CONFIG_MAX_LAYERS, out->layers, &out->layers)))
        return status;
    if ((status = config_int_or(json, where, "num_attention_heads", 1, CONFIG_MAX_HEADS, out->heads, &out->heads)))
        return status;
    if ((status = config_int_or(json, where, "intermediate_size", 1, CONFIG_MAX_INTERMEDIATE, out->intermediate_size,
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

/* MODULE.bias [features] as float32. */
static glimpse_status load_bias(weight_store *store, const char *module, size_t features, const float **bias) {
    char name[LAYERS_NAME_CAPACITY];
    size_t shape[1] = {features};
    glimpse_status status = layers_name(name, "%s.bias", module);
    return status ? status : weight_store_get(store, bias, 1, shape, name);
}

glimpse_status layers_load_norm(weight_store *store, const char *module, size_t dim, const float **weight,
                                const float **bias) {
    char name[LAYERS_NAME_CAPACITY];
    size_t shape[1] = {dim};
    glimpse_status status = layers_name(name, "%s.weight", module);
    if (!status) status = weight_store_get(store, weight, 1, shape, name);
    return status ? status : load_bias(store, module, dim, bias);
}

glimpse_status layers_load_linear(weight_store *store, const char *module, size_t out_features, size_t in_features,
                                  const float **weight, const float **bias) {
    char name[LAYERS_NAME_CAPACITY];
    size_t shape[2] = {out_features, in_features};
    glimpse_status status = layers_name(name, "%s.weight", module);
    if (!status) status = weight_store_get(store, weight, 2, shape, name);
    return status || !bias ? status : load_bias(store, module, out_features, bias);
}

glimpse_status layers_load_projection(weight_store *store, const char *module, size_t out_features,
                                      size_t in_features, kernel_weight *weight, const float **bias) {
    char name[LAYERS_NAME_CAPACITY];
    glimpse_status status = layers_name(name, "%s.weight", module);
    if (!status) status = weight_store_get_matrix(store, weight, out_features, in_features, name);
    return status ? status : load_bias(store, module, out_features, bias);
}

glimpse_status layers_load_conv1d(weight_store *store, const char *module, size_t out_features, size_t in_features,
                                  kernel_weight *weight, const float **bias) {
    char name[LAYERS_NAME_CAPACITY];
    glimpse_status status = layers_name(name, "%s.weight", module);
    if (!status) status = weight_store_get_matrix_transposed(store, weight, out_features, in_features, name);
    return status ? status : load_bias(store, module, out_features, bias);
}

typedef glimpse_status (*projection_loader)(weight_store *store, const char *module, size_t out_features,
                                           size_t in_features, kernel_weight *weight, const float **bias);

static glimpse_status load_slots(weight_store *store, const char *parent, const projection_slot *slots, size_t count,
                                 projection_loader load) {
    char module[LAYERS_NAME_CAPACITY];
    glimpse_status status = GLIMPSE_STATUS_OK;
    for (size_t i = 0; !status && i < count; i++) {
        if (!slots[i].module) continue;
        status = layers_name(module, "%s.%s", parent, slots[i].module);
        if (!status)
            status = load(store, module, slots[i].out_features, slots[i].in_features, slots[i].weight, slots[i].bias);
    }
    return status;
}

glimpse_status layers_load_projections(weight_store *store, const char *parent, const projection_slot *slots,
                                       size_t count) {
    return load_slots(store, parent, slots, count, layers_load_projection);
}

glimpse_status layers_load_conv1ds(weight_store *store, const char *parent, const projection_slot *slots,
                                   size_t count) {
    return load_slots(store, parent, slots, count, layers_load_conv1d);
}

glimpse_status layers_load_norms(weight_store *store, const char *parent, size_t dim, const norm_slot *slots,
                                 size_t count) {
    char module[LAYERS_NAME_CAPACITY];
    glimpse_status status = GLIMPSE_STATUS_OK;
    for (size_t i = 0; !status && i < count; i++) {
        if (!slots[i].module) continue;
        status = layers_name(module, "%s.%s", parent, slots[i].module);
        if (!status) status = layers_load_norm(store, module, dim, slots[i].weight, slots[i].bias);
    }
    return status;
}

glimpse_status layers_load_encoder(weight_store *store, const encoder_layer_names *names, const char *layer,
                                   size_t hidden, size_t intermediate, encoder_layer *out) {
    *out = (encoder_layer){0};
    const norm_slot norms[] = {{names->norm1, &out->norm1_weight, &out->norm1_bias},
                               {names->norm2, &out->norm2_weight, &out->norm2_bias}};
    const projection_slot feed_forward[] = {{names->fc1, intermediate, hidden, &out->fc1_weight, &out->fc1_bias},
                                            {names->fc2, hidden, intermediate, &out->fc2_weight, &out->fc2_bias}};
    const projection_slot attention[] = {
        {names->q, hidden, hidden, &out->q_weight, &out->q_bias},
        {names->k, hidden, hidden, &out->k_weight, &out->k_bias},
        {names->v, hidden, hidden, &out->v_weight, &out->v_bias},
        {names->qkv, 3 * hidden, hidden, &out->qkv_weight, &out->qkv_bias},
        {names->out, hidden, hidden, &out->out_weight, &out->out_bias},
    };
    glimpse_status status = layers_load_norms(store, layer, hidden, norms, sizeof norms / sizeof norms[0]);
    if (!status) status = layers_load_projections(store, layer, feed_forward, 2);
    return status ? status : layers_load_projections(store, layer, attention, sizeof attention / sizeof attention[0]);
}

glimpse_status layers_load_encoder_stack(weight_store *store, const encoder_layer_names *names, const char *stack,
                                         size_t count, size_t hidden, size_t intermediate, encoder_layer **out) {
    encoder_layer *layers = calloc(count, sizeof *layers);
    *out = NULL;
    if (!layers) return ERROR_OOM();
    char layer[LAYERS_NAME_CAPACITY];
    glimpse_status status = GLIMPSE_STATUS_OK;
    for (size_t i = 0; !status && i < count; i++) {
        status = layers_name(layer, "%s.%zu", stack, i);
        if (!status) status = layers_load_encoder(store, names, layer, hidden, intermediate, &layers[i]);
    }
    if (status) {
        free(layers);
        return status;
    }
    *out = layers;
    return GLIMPSE_STATUS_OK;
}

glimpse_status layers_load_attention_pool(weight_store *store, const attention_pool_names *names, const char *head,
                                          size_t hidden, size_t intermediate, encoder_layer *out,
                                          const float **probe) {
    *out = (encoder_layer){0};
    char name[LAYERS_NAME_CAPACITY];
    size_t probe_shape[3] = {1, 1, hidden}, bias_shape[1] = {3 * hidden};
    kernel_weight in_proj;
    const float *in_bias = NULL;
    glimpse_status status = layers_name(name, "%s.%s", head, names->probe);
    if (!status) status = weight_store_get(store, probe, 3, probe_shape, name);
    if (!status) status = layers_name(name, "%s.%s", head, names->in_proj_weight);
    if (!status) status = weight_store_get_matrix(store, &in_proj, 3 * hidden, hidden, name);
    if (!status) status = layers_name(name, "%s.%s", head, names->in_proj_bias);
    if (!status) status = weight_store_get(store, &in_bias, 1, bias_shape, name);
    if (status) return status;
    kernel_weight *parts[3] = {&out->q_weight, &out->k_weight, &out->v_weight};
    const float **biases[3] = {&out->q_bias, &out->k_bias, &out->v_bias};
    size_t part_bytes = hidden * hidden * weight_type_bytes(in_proj.type);
    for (size_t i = 0; i < 3; i++) {
        *parts[i] = (kernel_weight){.data = (const char *)in_proj.data + i * part_bytes, .type = in_proj.type};
        *biases[i] = in_bias + i * hidden;
    }
    const norm_slot norm[] = {{names->norm, &out->norm2_weight, &out->norm2_bias}};
    const projection_slot projections[] = {{names->out_proj, hidden, hidden, &out->out_weight, &out->out_bias},
                                           {names->fc1, intermediate, hidden, &out->fc1_weight, &out->fc1_bias},
                                           {names->fc2, hidden, intermediate, &out->fc2_weight, &out->fc2_bias}};
    status = layers_load_norms(store, head, hidden, norm, 1);
    return status ? status : layers_load_projections(store, head, projections, 3);
}
