/* layers.h — where the standard layer layouts keep their tensors: fills a
 * core encoder_layer from a checkpoint by Hugging Face parameter names, with
 * every shape checked. Names only; the maths is in core/transformer.c. */
#ifndef GLIMPSE_WEIGHTS_LAYERS_H
#define GLIMPSE_WEIGHTS_LAYERS_H

#include "store.h"
#include "transformer.h"

/* CLIP's encoder layer (vision and text): PREFIX.layer_norm1, .self_attn.{q,k,v,out}_proj, .layer_norm2, .mlp.fc{1,2}. */
glimpse_status layers_load_clip_encoder(weight_store *store, const char *prefix, size_t hidden, size_t intermediate,
                                        encoder_layer *out);
/* BLIP's vision layer: as CLIP, but attention is PREFIX.self_attn.qkv (fused) and .self_attn.projection. */
glimpse_status layers_load_blip_vision_encoder(weight_store *store, const char *prefix, size_t hidden,
                                               size_t intermediate, encoder_layer *out);
/* A LayerNorm's weight and bias, PREFIX.weight / PREFIX.bias, both [dim]. */
glimpse_status layers_load_norm(weight_store *store, const char *prefix, size_t dim, const float **weight,
                                const float **bias);
/* A linear layer PREFIX.weight [out, in] and PREFIX.bias [out] (bias NULL = none expected). */
glimpse_status layers_load_linear(weight_store *store, const char *prefix, size_t out_features, size_t in_features,
                                  const float **weight, const float **bias);

#endif
