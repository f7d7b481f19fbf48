/* model.h — what stands behind a glimpse_model: its family and kind, config, weight store and preprocessing,
 * and the family's own parts (model->parts), read-only once loaded. Internal to libglimpse; a caller's run state
 * is the context (context.h). */
#ifndef GLIMPSE_API_MODEL_H
#define GLIMPSE_API_MODEL_H

#include <cjson/cJSON.h>
#include <stdbool.h>

#include "core/bf16x3.h"
#include "core/quantize.h"
#include "glimpse.h"
#include "vision/preprocess.h"
#include "weights/store.h"

struct model_family;

struct glimpse_model {
    const struct model_family *family; /* its operations (families/family.h) */
    /* The family's own loaded parts (its towers, decoders, tokenizers: a struct its families/ file defines and its
     * load makes), freed by family->free_parts; the generic calls see the shared blocks among them through
     * family->blocks. */
    void *parts;
    /* What every family has, or the generic calls read of every family: */
    glimpse_model_kind kind; /* family->kind */
    char *folder;
    char architecture[64];
    cJSON *config; /* kept: the configs borrow strings from it */
    weight_store *store;
    bool has_vision, has_text; /* the towers loaded (glimpse_load_params) */
    preprocess_config preprocess;
    /* Every captioner's (api/caption.c resolves search settings and stops and pads with them): the snapshot's
     * generation settings (generation_config.json, or what the family makes of its config; NULL: none), and the
     * ids generate starts from, ends on and pads with. */
    cJSON *generation;
    int32_t start_id, end_id, pad_id;
    glimpse_precision precision;
    q8_set quantized; /* the int8 weights, with GLIMPSE_PRECISION_INT8 */
    bf16x3_set split; /* float32: the towers' weights split for AMX's bfloat16 tiles, where they run */
    bool preprocessor_defaults; /* no preprocessor_config.json: the family's default preprocessing */
};

/* A family that reports GLIMPSE_CAPABILITY_EMBED (CLIP, SigLIP): image and text towers embedding into one space
 * (glimpse_embed_*, glimpse_score, the search index). */
bool model_embeds(const glimpse_model *model);

/* The params a question is answered with: *asked = params (NULL: the defaults) with the family's question
 * prompt (family_captioner.question_prompt) in *prompt, which the caller frees (also on failure). Refuses a
 * model that does not answer and params that bring a prompt of their own; `what` names the call in the error. */
glimpse_status caption_question_params(const glimpse_model *model, const glimpse_caption_params *params,
                                       const char *question, const char *what, glimpse_caption_params *asked,
                                       char **prompt);
#endif
