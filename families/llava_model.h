/* llava_model.h — LLaVA's parts (LlavaForConditionalGeneration): the vision tower (CLIP's or SigLIP's ViT, run
 * up to vision_feature_layer, class token dropped or kept by vision_feature_select_strategy), the projector
 * (linear_1, exact GELU, linear_2), the Llama / Qwen2 language model (fusion/llama.h), and the merge of image
 * features into the prompt's embeddings. No tokenizer, chat template or family-table entries here
 * (families/llava.c wires these parts). */
#ifndef GLIMPSE_FAMILIES_LLAVA_MODEL_H
#define GLIMPSE_FAMILIES_LLAVA_MODEL_H

#include <cjson/cJSON.h>
#include <stdint.h>

#include "fusion/llama.h"
#include "vision/vit.h"
#include "weights/store.h"

typedef enum llava_select {
    LLAVA_SELECT_DEFAULT = 0, /* "default": the tower's first row (the class token) dropped */
    LLAVA_SELECT_FULL = 1     /* "full": every row */
} llava_select;

typedef struct llava_config {
    vit_config vision;    /* its layers: only those up to vision_feature_layer (the rest are never run) */
    int vision_layers;    /* the tower's num_hidden_layers */
    int feature_layer;    /* vision_feature_layer as config.json gives it (−2: the second-to-last block's output) */
    llava_select select;
    int image_token_id;   /* image_token_index */
    size_t image_rows;    /* feature rows per image (image_seq_length): patches, + class token unless dropped */
    llama_config text;
} llava_config;

/* Reads config.json's object (vision_config, text_config and LlavaConfig's own fields with its defaults:
 * image_token_index 32000, vision_feature_layer −2, "default"). Refuses a projector_hidden_act other than
 * gelu, a list of feature layers, and an image_seq_length that disagrees with the tower. */
glimpse_status llava_config_read(const cJSON *json, llava_config *config);

typedef struct llava_model {
    llava_config config;
    vit_model vision;
    kernel_weight projector_1, projector_2;  /* [text hidden, vision hidden], [text hidden, text hidden] */
    const float *projector_1_bias, *projector_2_bias; /* [text hidden] */
    llama_model text;
    const char *vision_names; /* the prefix of the vision tower's tensor names in the store */
} llava_model;

/* Loads every part from the store, in whichever layout (weights/names.h's names_llava) the file has. Caller
 * frees with llava_model_free. */
glimpse_status llava_model_load(llava_model *model, const llava_config *config, weight_store *store);
void llava_model_free(llava_model *model);
/* int8 twins (core/quantize.h) of the vision tower's projections (the layers run), the projector's and the
 * language model's (fusion/llama.h), owned by set. */
glimpse_status llava_model_quantize(llava_model *model, q8_set *set);

/* Activations of the vision side for up to max_images images. */
typedef struct llava_vision_state {
    size_t max_images;
    vit_state *tower;
    float *selected; /* [images · image_rows, vision hidden]: the rows the projector reads (vision_selected) */
    float *middle;   /* [images · image_rows, text hidden]: linear_1's output */
} llava_vision_state;

glimpse_status llava_vision_state_create(const llava_model *model, size_t max_images, llava_vision_state **out);
void llava_vision_state_free(llava_vision_state *state);

/* features[images · image_rows, text hidden] = the projected features of pixel_values [images, 3, size, size]
 * (image_features); state->selected holds the tower's selected rows afterwards. */
glimpse_status llava_image_features(const llava_model *model, llava_vision_state *state, const float *pixel_values,
                                    size_t images, float *features, pool *threads);

/* The merged sequence's length for prompt ids[count] and `images` images: each image's <image> id expanded to
 * image_rows rows (one id per image, transformers' legacy prompt), or a run of image_rows ids per image
 * overwritten in place (the processor's expanded prompt). Any other count of <image> ids is an
 * INVALID_ARGUMENT error saying what was found and expected. */
glimpse_status llava_merged_length(const llava_model *model, const int32_t *ids, size_t count, size_t images,
                                   size_t *length);
/* out[length, text hidden] (length from llava_merged_length) = the text's embeddings with features
 * [images · image_rows, text hidden] written at the image positions, image after image; the image ids'
 * positions are written to *image_starts[images] when not NULL. */
glimpse_status llava_merge(const llava_model *model, const int32_t *ids, size_t count, const float *features,
                           size_t images, float *out, size_t *image_starts);

#endif
