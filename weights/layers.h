/* layers.h — the generic loader of standard layer layouts: LayerNorms, linear
 * layers and the pre-LN encoder layer of core/encoder_layer.h, filled from a
 * checkpoint by the names a family's table gives (weights/names.h), every
 * shape checked. No family's names are written here, and no maths (that is
 * core/encoder_layer.c). How a model family is added, table and loader:
 * docs/adding-a-model-family.md. */
#ifndef GLIMPSE_WEIGHTS_LAYERS_H
#define GLIMPSE_WEIGHTS_LAYERS_H

#include <cjson/cJSON.h>

#include "weights/store.h"
#include "core/encoder_layer.h"

/* Room for a tensor or module name composed here or by a family's loader
 * (published checkpoints' names run to about 80 characters). */
#define LAYERS_NAME_CAPACITY 256

/* Formats a tensor, module or layer name into name[LAYERS_NAME_CAPACITY]:
 * layers_name(name, "%s.%zu", stack, i). A name that does not fit is
 * GLIMPSE_STATUS_INTERNAL with an error naming its start, never cut short. */
glimpse_status layers_name(char *name, const char *format, ...) __attribute__((format(printf, 2, 3)));

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

/* The parameter names of a pre-LN encoder layer (core's encoder_layer),
 * relative to the layer: "mlp.fc1" under "vision_model.encoder.layers.3".
 * Each names a module whose tensors are NAME.weight and NAME.bias.
 * Attention has q, k and v, or one fused qkv [3·hidden, hidden]; the
 * others are NULL. */
typedef struct encoder_layer_names {
    const char *norm1;      /* LayerNorm before attention */
    const char *q, *k, *v;  /* [hidden, hidden] each, or NULL */
    const char *qkv;        /* [3·hidden, hidden], or NULL */
    const char *out;        /* attention output [hidden, hidden] */
    const char *norm2;      /* LayerNorm before the feed-forward block */
    const char *fc1, *fc2;  /* [intermediate, hidden], [hidden, intermediate] */
} encoder_layer_names;

/* The parameter names of an attention-pooling head (SigLIP's
 * SiglipMultiheadAttentionPoolingHead), relative to the head: a learned
 * query, a torch.nn.MultiheadAttention (its q; k; v stacked in one
 * in_proj_weight, without the module's .weight/.bias pattern), then a
 * LayerNorm and an MLP as in an encoder layer. */
typedef struct attention_pool_names {
    const char *probe;          /* tensor [1, 1, hidden] */
    const char *in_proj_weight; /* tensor [3·hidden, hidden]: q, k, v rows */
    const char *in_proj_bias;   /* tensor [3·hidden] */
    const char *out_proj;       /* module [hidden, hidden] */
    const char *norm;           /* LayerNorm before the MLP */
    const char *fc1, *fc2;      /* [intermediate, hidden], [hidden, intermediate] */
} attention_pool_names;

/* Where a linear layer PARENT.MODULE goes: its size and the fields its
 * weight and bias fill. A NULL module is skipped (a layout without it). */
typedef struct projection_slot {
    const char *module;
    size_t out_features, in_features;
    kernel_weight *weight;
    const float **bias;
} projection_slot;
/* Where a LayerNorm PARENT.MODULE goes. A NULL module is skipped. */
typedef struct norm_slot {
    const char *module;
    const float **weight, **bias;
} norm_slot;

/* Loads each slot in order (layers_load_projection, layers_load_norm of
 * width dim), stopping at the first failure: how a family's loader fills a
 * layer of its own layout from its names table. */
glimpse_status layers_load_projections(weight_store *store, const char *parent, const projection_slot *slots,
                                       size_t count);
glimpse_status layers_load_norms(weight_store *store, const char *parent, size_t dim, const norm_slot *slots,
                                 size_t count);
/* The same as layers_load_projections for Conv1D layers (layers_load_conv1d): GPT-2's. */
glimpse_status layers_load_conv1ds(weight_store *store, const char *parent, const projection_slot *slots,
                                   size_t count);

/* One encoder layer named `layer` ("vision_model.encoder.layers.3"). */
glimpse_status layers_load_encoder(weight_store *store, const encoder_layer_names *names, const char *layer,
                                   size_t hidden, size_t intermediate, encoder_layer *out);
/* `count` encoder layers STACK.0 .. STACK.count-1 (a ModuleList, e.g.
 * "text_model.encoder.layers") into a new array *out the caller frees. */
glimpse_status layers_load_encoder_stack(weight_store *store, const encoder_layer_names *names, const char *stack,
                                         size_t count, size_t hidden, size_t intermediate, encoder_layer **out);

/* An attention-pooling head named `head` ("vision_model.head") into an
 * encoder_layer core's encoder_attention_pool runs: q, k and v are views of
 * the rows of in_proj_weight (so they keep its stored type), out, norm2, fc1
 * and fc2 the rest; norm1 stays NULL. *probe [hidden] is the learned query. */
glimpse_status layers_load_attention_pool(weight_store *store, const attention_pool_names *names, const char *head,
                                          size_t hidden, size_t intermediate, encoder_layer *out,
                                          const float **probe);

/* A LayerNorm's weight and bias, MODULE.weight / MODULE.bias, both [dim]. */
glimpse_status layers_load_norm(weight_store *store, const char *module, size_t dim, const float **weight,
                                const float **bias);
/* A linear layer run by the products: MODULE.weight [out, in] in its stored
 * type (weight_store_get_matrix) and MODULE.bias [out] as float32. */
glimpse_status layers_load_projection(weight_store *store, const char *module, size_t out_features,
                                      size_t in_features, kernel_weight *weight, const float **bias);
/* A Conv1D layer (GPT-2's), y = x·W + b with MODULE.weight stored [in, out], into the same fields as
 * layers_load_projection fills: the weight turned to [out, in] at load (weight_store_get_matrix_transposed). */
glimpse_status layers_load_conv1d(weight_store *store, const char *module, size_t out_features, size_t in_features,
                                  kernel_weight *weight, const float **bias);
/* A linear layer as float32: MODULE.weight [out, in] and MODULE.bias [out] (bias NULL = none expected). */
glimpse_status layers_load_linear(weight_store *store, const char *module, size_t out_features, size_t in_features,
                                  const float **weight, const float **bias);

#endif
