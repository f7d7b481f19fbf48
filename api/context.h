/* context.h — what stands behind a glimpse_context: the run state of one
 * caller (activations, scratch, its thread pool) for the model it borrows,
 * and the steps every multi-image call shares (preprocessing a batch,
 * reporting progress). Internal to libglimpse; the model is in model.h. */
#ifndef GLIMPSE_API_CONTEXT_H
#define GLIMPSE_API_CONTEXT_H

#include "core/pool.h"
#include "fusion/bert.h"
#include "fusion/gpt2.h"
#include "glimpse.h"
#include "text/clip_text.h"
#include "vision/vit.h"

/* Images per vision forward and texts per text forward. */
#define CONTEXT_IMAGE_BATCH 8
#define CONTEXT_TEXT_BATCH 16

struct glimpse_context {
    const glimpse_model *model;
    glimpse_context_params params;
    pool *threads;
    vit_state *vision;        /* with the vision tower: CONTEXT_IMAGE_BATCH images */
    clip_text_state *text;    /* with CLIP's or SigLIP's text tower: CONTEXT_TEXT_BATCH texts */
    float *pixel_values;      /* [CONTEXT_IMAGE_BATCH, 3, size, size]: the batch context_preprocess made */
    /* BLIP: one image's vision output as the BERT side reads it: every token
     * after the post-LayerNorm [tokens, vision hidden] (captioning, ITM), or
     * the pooled class token alone [vision hidden] (ITC) */
    float *vision_output;
    /* BLIP: the run state of the model's BERT with cross-attention, made on
     * first use and grown to the largest request so far: the caption
     * decoder's (beams x caption length) or the retrieval text encoder's (one
     * text at a time, for ITM and ITC) */
    bert_state *bert;
    /* ViT-GPT2: the GPT-2 decoder's run state, made and grown as BLIP's bert is */
    gpt2_state *gpt2;
    /* NULL but inside glimpse_explain_caption: what glimpse_caption_images has the decoder record as it generates
     * (attached to bert once it is made) */
    const attention_record *caption_record;
    /* Floats of vision self-attention one rollout pass of glimpse_explain_clip may record (without want_raw):
     * layers are recorded in groups that fit, one tower pass each (ViT-B/16: all 12 in one; so400m at 384: 4 a
     * pass). CONTEXT_ROLLOUT_BUDGET as created. */
    size_t rollout_budget;
};

#define CONTEXT_ROLLOUT_BUDGET ((size_t)32 << 20)

/* Reports progress of a multi-image call; GLIMPSE_STATUS_CANCELLED if the
 * application's callback asks to stop. */
glimpse_status context_progress(const glimpse_context *ctx, size_t done, size_t total);

/* Preprocesses images[0..count) into ctx->pixel_values (count <= CONTEXT_IMAGE_BATCH), in
 * parallel; first_index numbers the images in errors (their place in the caller's call). */
glimpse_status context_preprocess(glimpse_context *ctx, glimpse_image *const *images, size_t count,
                                  size_t first_index);

#endif
