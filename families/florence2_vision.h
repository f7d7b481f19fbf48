/* florence2_vision.h — Florence-2's image side (Florence2ForConditionalGeneration._encode_image for a still
 * picture): DaViT's last-stage tokens (a square grid) + the learned 2-D position embedding (column half, then
 * row half) + the temporal embedding of frame 0; then [the mean of the tokens, the tokens] · image_projection,
 * image_proj_norm: the rows the BART encoder reads before the prompt. */
#ifndef GLIMPSE_FAMILIES_FLORENCE2_VISION_H
#define GLIMPSE_FAMILIES_FLORENCE2_VISION_H

#include <cjson/cJSON.h>

#include "core/pool.h"
#include "vision/davit.h"
#include "weights/names.h"
#include "weights/store.h"

typedef struct florence2_vision {
    davit_model davit;
    size_t grid;             /* the last stage's side: grid × grid tokens */
    size_t dim, projection_dim;
    const float *column_embeddings, *row_embeddings; /* [positions, dim - dim / 2], [positions, dim / 2] */
    const float *temporal;   /* frame 0's row [dim] */
    kernel_weight projection; /* [projection_dim, dim] (the checkpoint's [dim, projection_dim] turned) */
    const float *norm_weight, *norm_bias; /* [projection_dim] */
} florence2_vision;

/* Reads vision_config (and the top level's projection_dim) for pictures of image_size, and loads the weights. */
glimpse_status florence2_vision_load(florence2_vision *vision, const cJSON *config, const cJSON *vision_json,
                                     int image_size, const florence2_names *names, weight_store *store);
void florence2_vision_free(florence2_vision *vision);

/* Rows of a picture's features: the mean, then the grid's tokens. */
size_t florence2_image_rows(const florence2_vision *vision);

typedef struct florence2_vision_state {
    davit_state *davit;
    float *tokens; /* [grid², dim] */
} florence2_vision_state;

glimpse_status florence2_vision_state_create(const florence2_vision *vision, florence2_vision_state *out);
void florence2_vision_state_free(florence2_vision_state *state);

/* pixel_values [3, size, size] → out [florence2_image_rows, projection_dim]; on_stage as davit_forward's. */
glimpse_status florence2_image_features(const florence2_vision *vision, florence2_vision_state *state,
                                        const float *pixel_values, float *out, davit_stage_fn on_stage, void *user,
                                        pool *threads);

#endif
