/* model.h — what stands behind the public handles: a loaded model (its
 * kind, config, weights, tokenizer, preprocessing) and a context (the run
 * state of one caller and its thread pool). Internal to libglimpse. */
#ifndef GLIMPSE_API_MODEL_H
#define GLIMPSE_API_MODEL_H

#include <cjson/cJSON.h>

#include "fusion/bert.h"
#include "text/bert_tokenizer.h"
#include "text/clip_text.h"
#include "fusion/itm.h"
#include "text/clip_tokenizer.h"
#include "glimpse.h"
#include "core/pool.h"
#include "vision/preprocess.h"
#include "weights/store.h"
#include "vision/vit.h"

struct glimpse_model {
    glimpse_model_kind kind;
    char *folder;
    char architecture[64];
    cJSON *config; /* kept: the configs borrow strings from it */
    weight_store *store;
    int has_vision, has_text;
    preprocess_config preprocess;
    vit_model vision;
    clip_text_model text;
    clip_tokenizer *tokenizer;
    float logit_scale; /* exponentiated */
    /* BLIP */
    bert_model text_decoder;      /* captioning: text_decoder.bert + cls.predictions */
    bert_model text_encoder;      /* retrieval: text_encoder, bidirectional */
    itm_heads itm;
    bert_tokenizer *wordpiece;
    int32_t start_id, end_id, pad_id; /* [DEC], [SEP], [PAD] as text_config names them */
    cJSON *generation; /* generation_config.json, when the snapshot has one */
    glimpse_precision precision;
    q8_set quantized; /* the int8 weights, with GLIMPSE_PRECISION_INT8 */
};

/* Images per vision forward and texts per text forward. */
#define CONTEXT_IMAGE_BATCH 8
#define CONTEXT_TEXT_BATCH 16

struct glimpse_context {
    const glimpse_model *model;
    glimpse_context_params params;
    pool *threads;
    vit_state *vision;
    clip_text_state *text;
    float *pixel_values; /* [CONTEXT_IMAGE_BATCH, 3, size, size] */
    bert_state *decoder;  /* made for the largest beams × length asked so far */
    float *image_tokens;  /* [tokens, vision hidden]: one image's post-LN tokens */
};

/* A string that identifies the model's weights: architecture, embedding
 * size, and a hash of config.json and of the projection tensors' bytes. */
glimpse_status model_identity(const glimpse_model *model, char *out, size_t capacity);

/* Reports progress of a multi-image call; GLIMPSE_STATUS_CANCELLED if the
 * application's callback asks to stop. */
glimpse_status context_progress(const glimpse_context *ctx, size_t done, size_t total);

/* Preprocesses images[0..count) into ctx->pixel_values (count <= CONTEXT_IMAGE_BATCH). */
glimpse_status context_preprocess(glimpse_context *ctx, glimpse_image *const *images, size_t count,
                                  size_t first_index);

#endif
