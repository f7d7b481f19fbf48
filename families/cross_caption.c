/* cross_caption.c — the captioner of the families whose decoder reads the image through cross-attention
 * (cross_caption.h): BLIP's BERT and ViT-GPT2's GPT-2 take the same steps (the prompt after a start token, a
 * state grown to the largest request, the image's keys and values set once, then the search), each with its
 * own block and tokenizer. */
#include "families/cross_caption.h"

#include <stdbool.h>
#include <stdlib.h>

#include "api/context.h"
#include "api/model.h"
#include "core/error.h"
#include "families/family.h"

/* Which of the two decoders model captions with. */
static bool uses_gpt2(const glimpse_model *model) { return model->family->caption == &cross_caption_gpt2; }

/* The prompt's ids after the start token: GPT-2's BPE without special tokens, or WordPiece's without the [SEP]
 * it ends with. */
static glimpse_status encode(const glimpse_model *family_model, const char *prompt, int32_t *ids, size_t capacity,
                             size_t *count) {
    family_blocks blocks, *model = &blocks;
    family_blocks_of(family_model, &blocks);
    if (!uses_gpt2(family_model)) return bert_tokenizer_encode(model->wordpiece, prompt, ids, capacity, count);
    glimpse_status status = gpt2_tokenizer_encode(model->byte_bpe, prompt, 0, ids, capacity, count);
    return status == GLIMPSE_STATUS_TOO_LARGE && !capacity ? GLIMPSE_STATUS_OK : status;
}

/* decode(ids, skip_special_tokens=True). */
static glimpse_status decode(const glimpse_model *model, const int32_t *ids, size_t count, char **text) {
    family_blocks blocks;
    family_blocks_of(model, &blocks);
    return uses_gpt2(model) ? gpt2_tokenizer_decode(blocks.byte_bpe, ids, count, 1, 1, text, NULL)
                            : bert_tokenizer_decode(blocks.wordpiece, ids, count, text);
}

static glimpse_status prompt_ids(const glimpse_model *model, const char *prompt, int32_t **ids, size_t *count) {
    return caption_prompt_ids(model, prompt, encode, ids, count);
}

static size_t max_positions(const glimpse_model *model) {
    family_blocks blocks;
    family_blocks_of(model, &blocks);
    return (size_t)(uses_gpt2(model) ? blocks.gpt2->config.max_positions : blocks.text_decoder->config.max_positions);
}

/* The blocks and run blocks of ctx's model (which glimpse_context_create made). */
static glimpse_status blocks_of(glimpse_context *ctx, family_blocks *blocks, family_run_blocks *run) {
    family_blocks_of(ctx->model, blocks);
    return family_run_blocks_of(ctx, run);
}

/* One image, its vision tokens in the family's vision output: the decoder's image side, then the caption. */
static glimpse_status caption_one(glimpse_context *ctx, size_t image, const caption_request *request,
                                  glimpse_caption *out) {
    family_blocks model;
    family_run_blocks run;
    glimpse_status status = blocks_of(ctx, &model, &run);
    if (status) return status;
    bool vit_gpt2 = uses_gpt2(ctx->model);
    bert_decoder bert = {model.text_decoder, vit_gpt2 ? NULL : *run.bert};
    gpt2_decoder gpt2 = {model.gpt2, vit_gpt2 ? *run.gpt2 : NULL};
    size_t tokens = model.vision->tokens;
    status = vit_gpt2 ? gpt2_set_image(model.gpt2, gpt2.state, run.vision_output, tokens, ctx->threads)
                      : bert_set_image(model.text_decoder, bert.state, run.vision_output, tokens, ctx->threads);
    if (status) return status;
    caption_decoder decoder = vit_gpt2 ? gpt2_caption_decoder(&gpt2) : bert_caption_decoder(&bert);
    return caption_decode_text(ctx, image, request->params, &decoder, request->prompt, request->prompt_length, decode,
                               out);
}

/* The decoder's state for `beams` sequences of max_length, grown to the largest request and then reused, with
 * glimpse_explain_caption's record attached when it records. */
static glimpse_status prepare_state(glimpse_context *ctx, size_t beams, size_t max_length) {
    family_blocks model;
    family_run_blocks run;
    glimpse_status status = blocks_of(ctx, &model, &run);
    if (status) return status;
    size_t tokens = model.vision->tokens;
    if (uses_gpt2(ctx->model)) {
        const gpt2_state *state = *run.gpt2;
        if (!state || state->max_sequences < beams || state->max_length < max_length) {
            gpt2_state_free(*run.gpt2);
            *run.gpt2 = NULL;
            status = gpt2_state_create(model.gpt2, beams, max_length, max_length, tokens, run.gpt2);
        }
        if (!status && ctx->caption_record) (*run.gpt2)->record = ctx->caption_record;
        return status;
    }
    const bert_state *state = *run.bert;
    if (!state || state->max_sequences < beams || state->max_length < max_length) {
        bert_state_free(*run.bert);
        *run.bert = NULL;
        status = bert_state_create(model.text_decoder, beams, max_length, max_length, tokens, run.bert);
    }
    if (!status && ctx->caption_record) (*run.bert)->record = ctx->caption_record;
    return status;
}

static glimpse_status caption_images(glimpse_context *ctx, glimpse_image *const *images, size_t count,
                                     const glimpse_caption_params *p, glimpse_caption *out) {
    int32_t *prompt = NULL;
    size_t prompt_length = 0;
    glimpse_status status = caption_prompt_within(ctx->model, p, &prompt, &prompt_length);
    if (!status) status = prepare_state(ctx, (size_t)p->beams, prompt_length + (size_t)p->max_tokens);
    caption_request request = {p, prompt, prompt_length};
    if (!status) status = caption_each_image(ctx, images, count, caption_one, &request, out);
    free(prompt);
    return status;
}

/* A batched run's state: the decoder block's, with the model it runs. */
typedef struct cross_batch {
    bert_decoder bert;
    gpt2_decoder gpt2;
} cross_batch;

static glimpse_status batch_create(glimpse_context *ctx, const family_batch_shape *shape, family_batch *out) {
    const glimpse_model *family_model = ctx->model;
    family_blocks blocks, *model = &blocks;
    family_blocks_of(family_model, &blocks);
    cross_batch *run = calloc(1, sizeof *run);
    if (!run) return ERROR_OOM();
    out->state = run;
    size_t tokens = model->vision->tokens;
    run->bert.model = model->text_decoder, run->gpt2.model = model->gpt2;
    glimpse_status status;
    if (uses_gpt2(family_model)) {
        status = gpt2_state_create_batched(model->gpt2, shape->slots, shape->positions, shape->rows, tokens,
                                           shape->images, &run->gpt2.state);
        if (!status) out->decoder = gpt2_caption_batch_decoder(&run->gpt2);
    } else {
        status = bert_state_create_batched(model->text_decoder, shape->slots, shape->positions, shape->rows, tokens,
                                           shape->images, &run->bert.state);
        if (!status) out->decoder = bert_caption_batch_decoder(&run->bert);
    }
    return status;
}

static glimpse_status batch_admit(glimpse_context *ctx, family_batch *batch, size_t slot, const int32_t *prompt,
                                  size_t prompt_length) {
    family_blocks model;
    family_run_blocks vision;
    glimpse_status status = blocks_of(ctx, &model, &vision);
    if (status) return status;
    const cross_batch *run = batch->state;
    size_t tokens = model.vision->tokens;
    return uses_gpt2(ctx->model)
               ? gpt2_set_image_slot(model.gpt2, run->gpt2.state, slot, vision.vision_output, tokens, ctx->threads)
               : bert_set_image_slot(model.text_decoder, run->bert.state, slot, vision.vision_output, tokens,
                                     ctx->threads);
}

static void batch_free(family_batch *batch) {
    cross_batch *run = batch->state;
    if (run) bert_state_free(run->bert.state), gpt2_state_free(run->gpt2.state);
    free(run);
    batch->state = NULL;
}

const family_captioner cross_caption_bert = {
    .max_tokens = 20,
    .min_tokens = 5,
    .beams = 3,
    .decode = decode,
    .prompt_ids = prompt_ids,
    .max_positions = max_positions,
    .vision_attentions = "vision_attentions",
    .caption_images = caption_images,
    .batch_create = batch_create,
    .batch_admit = batch_admit,
    .batch_free = batch_free,
};

const family_captioner cross_caption_gpt2 = {
    .max_tokens = 19,
    .min_tokens = 0,
    .beams = 1,
    .decode = decode,
    .prompt_ids = prompt_ids,
    .max_positions = max_positions,
    .vision_attentions = "encoder_attentions",
    .caption_images = caption_images,
    .batch_create = batch_create,
    .batch_admit = batch_admit,
    .batch_free = batch_free,
};
