/* vit.h — the ViT image encoder of CLIP, BLIP and SigLIP: patch embedding,
 * class token (not SigLIP), positions, a stack of pre-LN encoder layers, the
 * final LayerNorm, and the pooled output: the class token's (CLIP, then its
 * visual projection) or SigLIP's attention-pooling head. Config, weights and
 * run state are kept apart: the model is read-only once loaded; a vit_state
 * holds the activations of one caller. */
#ifndef GLIMPSE_VISION_VIT_H
#define GLIMPSE_VISION_VIT_H

#include <cjson/cJSON.h>

#include "weights/names.h"
#include "weights/store.h"
#include "core/encoder_layer.h"
#include "core/quantize.h"
#include "vision/preprocess.h"

typedef enum vit_variant {
    VIT_VARIANT_CLIP = 0, /* pre_layrnorm, separate q/k/v, no patch bias, projection */
    VIT_VARIANT_BLIP = 1, /* fused qkv, patch bias, post-LN over every token */
    VIT_VARIANT_SIGLIP = 2, /* no class token, patch bias, post-LN over every token, attention-pooling head */
    VIT_VARIANT_VIT = 3     /* transformers' ViTModel (ViT-GPT2's encoder): BLIP's layout, separate q/k/v */
} vit_variant;

typedef struct vit_config {
    vit_variant variant;
    int hidden_size, layers, heads, intermediate_size;
    int image_size, patch_size, channels;
    int projection_dim; /* the embedding's length: CLIP's projection_dim, SigLIP's hidden_size; 0 for BLIP */
    float layer_norm_eps;
    activation act;
    const char *act_name;
} vit_config;

typedef struct vit_weights {
    const float *patch_weight;       /* [hidden, channels, patch, patch] */
    const float *patch_bias;         /* [hidden] (BLIP) or NULL */
    const float *class_embedding;    /* [hidden], or NULL (SigLIP: no class token) */
    const float *position_embedding; /* [tokens, hidden] */
    const float *pre_norm_weight, *pre_norm_bias;   /* [hidden] (CLIP) or NULL */
    encoder_layer *layers;                          /* [layers] */
    const float *post_norm_weight, *post_norm_bias; /* [hidden], or NULL (no post_norm name) */
    const float *projection;                        /* [projection_dim, hidden] (CLIP) or NULL */
    /* SigLIP's attention-pooling head (encoder_attention_pool), else zeros */
    const float *head_probe; /* [hidden] */
    encoder_layer head;      /* q, k, v views of in_proj; out, norm2, fc1, fc2; no norm1 */
    /* int8 (vit_model_quantize_pixels): the patch embedding folded with the preprocessing's normalisation, so
     * that it multiplies the pixels' own byte values (rows [channels · patch² + 1]: the last column holds 127),
     * as two int8 twins (data NULL): the folded weights' int8 values, then what they leave out; its bias;
     * pixel value v = byte · pixel_step[c] + pixel_base[c] */
    kernel_weight pixel_weight;
    kernel_weight pixel_residual;
    float *pixel_bias;
    float pixel_step[3], pixel_base[3];
} vit_weights;

typedef struct vit_model {
    vit_config config;
    vit_weights weights;
    size_t patches_per_side, tokens; /* tokens = patches + 1, or patches without a class token */
} vit_model;

/* Reads vision_config (object `json`, named `where` in errors). The
 * variant decides the defaults that the published configs leave out. */
glimpse_status vit_config_read(const cJSON *json, const char *where, vit_variant variant, vit_config *config);

/* Fills the weights from the tensors `names` gives (names_clip.vision,
 * names_blip.vision; its optional tensors decide the optional weights).
 * Caller frees with vit_model_free (the tensors stay owned by the store). */
glimpse_status vit_model_load(vit_model *model, const vit_config *config, const vit_names *names,
                              weight_store *store);
void vit_model_free(vit_model *model);
/* Makes twins of every layer's projections with add (encoder_layers_add_twins), owned by set. */
glimpse_status vit_model_add_twins(vit_model *model, kernel_twin_add add, void *set);
/* int8, before the twins: each layer's q, k and v as one fused twin (encoder_layers_fuse_q8; not the attention-
 * pooling head's, which projects its one probe alone). */
glimpse_status vit_model_fuse_q8(vit_model *model, q8_set *set);

/* With int8 twins (set): the patch embedding as int8 products on the pixels' byte values instead of a float32
 * product (ViT-B/32, one picture on 2 Zen 4 cores: 1.4 -> 0.5 ms). The pixels go in exact (byte 0 reads as 1);
 * the weights, folded with the preprocessing's rescale and normalisation (`pre`), go in as two int8 twins, the
 * second holding what the first rounds off, so that embeddings stay as close to float32 as with the float32
 * product (siglip-tiny's smallest cosine 0.99923, against 0.99911; one twin alone gave 0.99864, below
 * test_int8's bound). vit_forward checks each batch's values and runs the float32 product on any that are not
 * bytes so normalised. Nothing for pixels that are not 3 channels of rescaled bytes. */
glimpse_status vit_model_quantize_pixels(vit_model *model, const preprocess_config *pre, q8_set *set);

/* Activations for up to max_batch images. */
typedef struct vit_state {
    size_t max_batch;
    float *hidden;  /* [batch · tokens, hidden]: encoder output before the post-LN (SigLIP: after it) */
    float *pooled;  /* [max_batch, hidden]: the attention-pooling head's output (SigLIP), else NULL */
    float *patches; /* [batch · patches, channels · patch² (+ 1 with the int8 pixel weight)] */
    float *memory;  /* encoder scratch */
    encoder_scratch scratch;
    size_t *lengths;
    size_t *class_rows; /* [max_batch] zeros: the row each image pools */
    /* NULL as created; else vit_forward records self-attention (image b: sequence b); SigLIP's attention-pooling
     * head is self-attention layer `layers` (one past the last), its probe's one query written as row 0 */
    const attention_record *record;
} vit_state;

glimpse_status vit_state_create(const vit_model *model, size_t max_batch, vit_state **out);
void vit_state_free(vit_state *state);

/* Runs batch (≤ max_batch) images: pixel_values [batch, channels, size, size].
 * Leaves state->hidden = encoder output (CLIP's last_hidden_state) — of
 * every token with ENCODER_OUTPUT_ALL_ROWS, of the class tokens only with
 * ENCODER_OUTPUT_POOLED_ROWS (enough for vit_pooled and vit_embed, not for
 * vit_post_norm_all). With state->record every row runs in every layer.
 * SigLIP: every token always (its head reads them all), after
 * post_layernorm (SigLIP's last_hidden_state), and state->pooled. */
void vit_forward(const vit_model *model, vit_state *state, const float *pixel_values, size_t batch,
                 encoder_output output, pool *threads);

/* out[tokens, hidden] = post-LN of every token of image b (BLIP's image_embeds). */
void vit_post_norm_all(const vit_model *model, const vit_state *state, size_t b, float *out);
/* out[hidden] = post-LN of image b's class token, or SigLIP's head output (pooler_output). */
void vit_pooled(const vit_model *model, const vit_state *state, size_t b, float *out);
/* out[projection_dim] = projected (CLIP), L2-normalised pooled output (image_embeds). */
void vit_embed(const vit_model *model, const vit_state *state, size_t b, float *out);

#endif
