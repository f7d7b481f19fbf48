/* model.h — what stands behind a glimpse_model: its kind, config, weights,
 * tokenizers and preprocessing, read-only once loaded. Internal to
 * libglimpse; a caller's run state is the context (context.h). */
#ifndef GLIMPSE_API_MODEL_H
#define GLIMPSE_API_MODEL_H

#include <cjson/cJSON.h>
#include <stdbool.h>

#include "core/bf16x3.h"
#include "fusion/bert.h"
#include "fusion/qformer.h"
#include "fusion/gpt2.h"
#include "fusion/opt.h"
#include "text/gpt2_tokenizer.h"
#include "fusion/itm.h"
#include "glimpse.h"
#include "text/bert_tokenizer.h"
#include "text/clip_text.h"
#include "text/clip_tokenizer.h"
#include "text/gpt2_tokenizer.h"
#include "text/siglip_tokenizer.h"
#include "vision/preprocess.h"
#include "vision/vit.h"
#include "weights/store.h"

struct model_family;

struct glimpse_model {
    const struct model_family *family; /* its operations (families/family.h) */
    /* The family's own loaded parts (a struct its families/ file defines and its load makes), freed by
     * family->free_parts; NULL for the families whose parts are still the fields below. */
    void *parts;
    glimpse_model_kind kind;           /* family->kind */
    char *folder;
    char architecture[64];
    cJSON *config; /* kept: the configs borrow strings from it */
    weight_store *store;
    bool has_vision, has_text; /* the towers loaded (glimpse_load_params) */
    preprocess_config preprocess;
    vit_model vision;
    clip_text_model text;          /* CLIP's, or SigLIP's (its variant) */
    clip_tokenizer *tokenizer;     /* CLIP */
    siglip_tokenizer *sentencepiece; /* SigLIP */
    float logit_scale; /* exponentiated */
    float logit_bias;  /* SigLIP; 0 for CLIP */
    /* BLIP */
    bert_model text_decoder;      /* captioning: text_decoder.bert + cls.predictions */
    bert_model text_encoder;      /* retrieval: text_encoder, bidirectional */
    itm_heads itm;
    bert_tokenizer *wordpiece;
    int32_t start_id, end_id, pad_id; /* [DEC], [SEP], [PAD] as text_config names them */
    cJSON *generation; /* generation_config.json, when the snapshot has one (BLIP-2: else its text_config) */
    /* ViT-GPT2: vision (the ViT encoder) + this; start_id, end_id, pad_id from config.json */
    gpt2_model gpt2;
    /* GPT-2's byte-level BPE: ViT-GPT2's, and BLIP-2's OPT tokenizer */
    gpt2_tokenizer *byte_bpe;
    /* BLIP-2 (families/blip2.c): vision above, then the Q-Former with the language projection, and OPT */
    blip2_qformer qformer;
    opt_model language_model;
    glimpse_precision precision;
    q8_set quantized; /* the int8 weights, with GLIMPSE_PRECISION_INT8 */
    bf16x3_set split; /* float32: the towers' weights split for AMX's bfloat16 tiles, where they run */
    bool preprocessor_defaults; /* no preprocessor_config.json: the family's default preprocessing */
};

/* CLIP and SigLIP: image and text towers embedding into one space
 * (glimpse_embed_*, glimpse_score, the search index). */
bool model_embeds(const glimpse_model *model);

/* The params a question is answered with: *asked = params (NULL: the defaults) with the family's question
 * prompt (family_captioner.question_prompt) in *prompt, which the caller frees (also on failure). Refuses a
 * model that does not answer and params that bring a prompt of their own; `what` names the call in the error. */
glimpse_status caption_question_params(const glimpse_model *model, const glimpse_caption_params *params,
                                       const char *question, const char *what, glimpse_caption_params *asked,
                                       char **prompt);
#endif
