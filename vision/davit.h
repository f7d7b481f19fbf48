/* davit.h — DaViT, the vision tower of Florence-2 (its forward_features_unpool): four stages, each a
 * convolutional patch embedding (stage 0 normalises the conv's output, the others normalise their input
 * before the conv) and pairs of blocks: a spatial block (depthwise 3×3 conv, window attention over windows
 * padded with zeros at the right and bottom and no mask, depthwise conv, MLP) and a channel block (the same
 * with attention between channels in groups, scaled by the number of tokens). Tokens are row-major; every
 * sub-block is a residual; LayerNorm eps 1e-5, GELU exact. Config, weights and run state apart. */
#ifndef GLIMPSE_VISION_DAVIT_H
#define GLIMPSE_VISION_DAVIT_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>

#include "core/kernels.h"
#include "core/pool.h"
#include "weights/names.h"
#include "weights/store.h"

#define DAVIT_STAGES 4

typedef struct davit_config {
    int dims[DAVIT_STAGES], depths[DAVIT_STAGES], heads[DAVIT_STAGES], groups[DAVIT_STAGES];
    int patch_size[DAVIT_STAGES], patch_stride[DAVIT_STAGES], patch_padding[DAVIT_STAGES];
    bool patch_prenorm[DAVIT_STAGES];
    int window_size;
    int mlp_ratio; /* the MLP's width over the stage's (4) */
    int image_size; /* the square pictures it is given (the preprocessor's size) */
} davit_config;

/* Reads Florence-2's vision_config; image_size is the preprocessor's. Refuses what the runtime does not run
 * (a patch embedding without a norm, an MLP ratio other than 4). */
glimpse_status davit_config_read(const cJSON *json, const char *where, int image_size, davit_config *config);

/* A depthwise 3×3 convolution (weight [C, 1, 3, 3], bias [C]). */
typedef struct davit_conv {
    const float *weight, *bias; /* [C, 1, 3, 3] as stored, [C] */
    float *taps;                /* the weights tap by tap, [9, C] (owned): a tap's weights lie side by side */
} davit_conv;

/* A spatial or channel block: x += conv1(x); x += proj(attention(LN(x))); x += conv2(x); x += fc2(gelu(fc1(LN(x)))) */
typedef struct davit_block {
    davit_conv conv1, conv2;
    const float *attention_norm_weight, *attention_norm_bias;
    kernel_weight qkv, proj;
    const float *qkv_bias, *proj_bias;
    const float *ffn_norm_weight, *ffn_norm_bias;
    kernel_weight fc1, fc2;
    const float *fc1_bias, *fc2_bias;
} davit_block;

typedef struct davit_stage {
    kernel_weight conv;          /* [C, C_in · k · k] (the conv weight as stored, [C, C_in, k, k]) */
    const float *conv_bias;      /* [C] */
    const float *norm_weight, *norm_bias; /* [C_in] before the conv (patch_prenorm) or [C] after */
    davit_block *spatial, *channel; /* [depth] each */
    size_t height, width;        /* the stage's token grid for config.image_size pictures */
} davit_stage;

typedef struct davit_model {
    davit_config config;
    davit_stage stages[DAVIT_STAGES];
} davit_model;

glimpse_status davit_model_load(davit_model *model, const davit_config *config, const davit_names *names,
                                weight_store *store);
void davit_model_free(davit_model *model);
/* Makes twins (int8: q8_set_add_twin) of every block's qkv, proj, fc1 and fc2, owned by set. */
glimpse_status davit_model_add_twins(davit_model *model, kernel_twin_add add, void *set);
/* The last stage's tokens for one picture: rows (height × width) and width (its dim). */
size_t davit_output_tokens(const davit_model *model);
size_t davit_output_dim(const davit_model *model);

/* Scratch for one picture at a time. */
typedef struct davit_state davit_state;
glimpse_status davit_state_create(const davit_model *model, davit_state **out);
void davit_state_free(davit_state *state);

/* Called with each stage's tokens [height × width, dim] as it finishes (tests compare them; NULL: none). */
typedef void (*davit_stage_fn)(void *user, int stage, const float *tokens, size_t count, size_t dim);

/* pixel_values [3, image_size, image_size] through the four stages: out [davit_output_tokens, davit_output_dim]. */
glimpse_status davit_forward(const davit_model *model, davit_state *state, const float *pixel_values, float *out,
                             davit_stage_fn on_stage, void *user, pool *threads);

#endif
