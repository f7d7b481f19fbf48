/* context.h — what stands behind a glimpse_context: the run state of one
 * caller (activations, scratch, its thread pool) for the model it borrows,
 * and the steps every multi-image call shares (preprocessing a batch,
 * reporting progress). Internal to libglimpse; the model is in model.h. */
#ifndef GLIMPSE_API_CONTEXT_H
#define GLIMPSE_API_CONTEXT_H

#include "core/attention_record.h"
#include "core/pool.h"
#include "fusion/generate.h"
#include "glimpse.h"

/* Images per vision forward and texts per text forward. */
#define CONTEXT_IMAGE_BATCH 8
#define CONTEXT_TEXT_BATCH 16

struct glimpse_context {
    const glimpse_model *model;
    glimpse_context_params params;
    pool *threads;
    /* The family's own run state (a struct its families/ file defines: its towers' and decoders' activations and
     * caches, the pictures' pixel values), made on first use (for the families with run_blocks, by
     * glimpse_context_create) and freed by model->family->free_run; the generic calls see the shared blocks'
     * state in it through family->run_blocks. */
    void *run;
    /* NULL but inside glimpse_explain_caption: what glimpse_caption_images has the family's decoder record as it
     * generates (a family attaches it to its decoder's state once it is made), and BLIP-2's Q-Former as it reads
     * the image: explain's protocol with every captioner, so the context's */
    const attention_record *caption_record;
    const attention_record *qformer_record;
    /* Floats of vision self-attention one rollout pass of glimpse_explain_clip may record (without want_raw):
     * layers are recorded in groups that fit, one tower pass each (ViT-B/16: all 12 in one; so400m at 384: 4 a
     * pass). CONTEXT_ROLLOUT_BUDGET as created. */
    size_t rollout_budget;
};

/* params (NULL: glimpse_caption_default_params()) with every field left to the model given the model's value
 * (its generation settings, else its captioner's, else glimpse's), checked, into *out. */
glimpse_status caption_params_resolve(const glimpse_model *model, const glimpse_caption_params *params,
                                      glimpse_caption_params *out);

/* One caption request: resolved params and the prompt's ids as the family's decoder takes them. */
typedef struct caption_request {
    const glimpse_caption_params *params;
    const int32_t *prompt;
    size_t prompt_length;
} caption_request;
/* Captions one image, whose vision tokens (post-LayerNorm, every token) are in its family's vision output
 * (family_run_blocks.vision_output). */
typedef glimpse_status (*caption_image_fn)(glimpse_context *ctx, size_t image, const caption_request *request,
                                           glimpse_caption *out);
/* The loop every captioner shares (api/caption.c): the images through the vision tower in batches, then
 * caption(ctx, i, request, &out[i]) for each, with progress; on failure every out[i] is freed. */
glimpse_status caption_each_image(glimpse_context *ctx, glimpse_image *const *images, size_t count,
                                  caption_image_fn caption, const caption_request *request, glimpse_caption *out);

/* A family's tokenizer on a prompt: its ids without special tokens into ids[0..capacity) and their number in
 * *count (capacity 0: only *count). */
typedef glimpse_status (*caption_encode_fn)(const glimpse_model *model, const char *prompt, int32_t *ids,
                                            size_t capacity, size_t *count);
/* What a cross-attention decoder's generate output starts with: the start token ([DEC], or ViT-GPT2's
 * decoder_start_token_id) and encode's ids of prompt; *ids is the caller's (free()). */
glimpse_status caption_prompt_ids(const glimpse_model *model, const char *prompt, caption_encode_fn encode,
                                  int32_t **ids, size_t *count);
/* The family's prompt ids for p->prompt (family_captioner.prompt_ids), checked to leave room for p->max_tokens
 * within the decoder's positions; *prompt is the caller's (free()), NULL on failure. */
glimpse_status caption_prompt_within(const glimpse_model *model, const glimpse_caption_params *p, int32_t **prompt,
                                     size_t *prompt_length);

/* A family's decode(ids, skip_special_tokens=True) into a new string. */
typedef glimpse_status (*caption_decode_fn)(const glimpse_model *model, const int32_t *ids, size_t count,
                                            char **text);
/* Generates image's caption with a family's decoder (its image side set) from prompt[0..prompt_length) — what
 * generate's output starts with: max_length and min_length count it as transformers' do — streaming the text
 * so far through params->on_token, and decodes the ids into out. */
glimpse_status caption_decode_text(glimpse_context *ctx, size_t image, const glimpse_caption_params *params,
                                   const caption_decoder *decoder, const int32_t *prompt, size_t prompt_length,
                                   caption_decode_fn decode, glimpse_caption *out);

/* Captions images[i] with params[i] (resolved and checked) by continuous batching (fusion/caption_batch.h):
 * up to batch_rows sequences (0: GLIMPSE_CAPTION_DEFAULT_BATCH_ROWS images' beams) step together; each caption token for
 * token as one image at a time gives it. On failure every out[i] is left empty. */
glimpse_status caption_images_batched(glimpse_context *ctx, glimpse_image *const *images, size_t count,
                                      const glimpse_caption_params *const *params, size_t batch_rows,
                                      glimpse_caption *out);
/* The same with each image's own params as a caller gives them (resolved and checked here): tests mix settings
 * in one batch. */
glimpse_status caption_images_each(glimpse_context *ctx, glimpse_image *const *images, size_t count,
                                   const glimpse_caption_params *params, size_t batch_rows, glimpse_caption *out);

#define CONTEXT_ROLLOUT_BUDGET ((size_t)32 << 20)

/* Reports progress of a multi-image call; GLIMPSE_STATUS_CANCELLED if the
 * application's callback asks to stop. */
glimpse_status context_progress(const glimpse_context *ctx, size_t done, size_t total);

/* Preprocesses images[0..count) into the family's pixel_values (family_run_blocks; count <= CONTEXT_IMAGE_BATCH)
 * for its ViT, in parallel; first_index numbers the images in errors (their place in the caller's call). */
glimpse_status context_preprocess(glimpse_context *ctx, glimpse_image *const *images, size_t count,
                                  size_t first_index);

#endif
