/* embed.c — the embedding calls of the public API (the families that report GLIMPSE_CAPABILITY_EMBED): images
 * are preprocessed in parallel and encoded in batches through the family's ViT; texts are tokenized and encoded
 * packed together through its text tower; scores and token ids. The towers are the family's (family_blocks). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/context.h"
#include "api/model.h"
#include "core/error.h"
#include "core/kernels.h"
#include "core/pool.h"
#include "families/family.h"
#include "fusion/retrieval.h"

glimpse_status glimpse_embed_images(glimpse_context *ctx, glimpse_image *const *images, size_t count,
                                    float *out) {
    if (!ctx || !images || !out)
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_embed_images: NULL argument");
    if (!count) return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_embed_images: no images");
    const glimpse_model *model = ctx->model;
    if (!model->has_vision)
        return error_set(GLIMPSE_STATUS_WRONG_MODEL, "this model was loaded without its vision tower");
    if (!model_embeds(model))
        return error_set(GLIMPSE_STATUS_WRONG_MODEL, "embeddings need a CLIP or SigLIP model");
    size_t dim = glimpse_model_embedding_dim(model);
    family_blocks blocks;
    family_run_blocks run;
    family_blocks_of(model, &blocks);
    glimpse_status status = family_run_blocks_of(ctx, &run);
    if (status) return status;
    for (size_t first = 0; first < count; first += CONTEXT_IMAGE_BATCH) {
        size_t batch = count - first < CONTEXT_IMAGE_BATCH ? count - first : CONTEXT_IMAGE_BATCH;
        if ((status = context_preprocess(ctx, images + first, batch, first))) return status;
        vit_forward(blocks.vision, run.vision, run.pixel_values, batch, ENCODER_OUTPUT_POOLED_ROWS, ctx->threads);
        for (size_t b = 0; b < batch; b++) vit_embed(blocks.vision, run.vision, b, out + (first + b) * dim);
        if ((status = context_progress(ctx, first + batch, count))) return status;
    }
    return GLIMPSE_STATUS_OK;
}

/* One text's ids as the model's tokenizer gives them, in ids[0 .. positions): CLIP's
 * start ... end, or SigLIP's padded to its fixed length; *length of them. */
static glimpse_status tokenize(const family_blocks *blocks, const char *text, size_t positions, int32_t *ids,
                               size_t *length) {
    if (blocks->clip_tokenizer) return clip_tokenizer_encode(blocks->clip_tokenizer, text, positions, ids, length);
    size_t unpadded;
    *length = siglip_tokenizer_length(blocks->sentencepiece);
    return siglip_tokenizer_encode(blocks->sentencepiece, text, ids, positions, &unpadded);
}

glimpse_status glimpse_embed_texts(glimpse_context *ctx, const char *const *texts, size_t count, float *out) {
    if (!ctx || !texts || !out)
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_embed_texts: NULL argument");
    if (!count) return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_embed_texts: no texts");
    const glimpse_model *model = ctx->model;
    if (!model_embeds(model))
        return error_set(GLIMPSE_STATUS_WRONG_MODEL, "embeddings need a CLIP or SigLIP model");
    if (!model->has_text) return error_set(GLIMPSE_STATUS_WRONG_MODEL, "this model was loaded without its text tower");
    family_blocks blocks;
    family_run_blocks run;
    family_blocks_of(model, &blocks);
    glimpse_status status = family_run_blocks_of(ctx, &run);
    if (status) return status;
    size_t positions = (size_t)blocks.text->config.max_positions, dim = glimpse_model_embedding_dim(model);
    int32_t *ids = malloc(CONTEXT_TEXT_BATCH * positions * sizeof *ids);
    size_t lengths[CONTEXT_TEXT_BATCH];
    if (!ids) return ERROR_OOM();
    for (size_t first = 0; first < count && !status; first += CONTEXT_TEXT_BATCH) {
        size_t batch = count - first < CONTEXT_TEXT_BATCH ? count - first : CONTEXT_TEXT_BATCH, rows = 0;
        for (size_t b = 0; b < batch && !status; b++) {
            status = tokenize(&blocks, texts[first + b], positions, ids + rows, &lengths[b]);
            rows += lengths[b];
        }
        if (!status)
            status = clip_text_forward(blocks.text, run.text, ids, lengths, batch, ENCODER_OUTPUT_POOLED_ROWS,
                                       ctx->threads);
        rows = 0;
        for (size_t b = 0; b < batch && !status; b++) {
            clip_text_embed(blocks.text, run.text, rows, ids + rows, lengths[b], out + (first + b) * dim);
            rows += lengths[b];
        }
    }
    free(ids);
    return status;
}

glimpse_status glimpse_score(const glimpse_model *model, const float *image_embeddings, size_t image_count,
                             const float *text_embeddings, size_t text_count, float *logits) {
    if (!model || !image_embeddings || !text_embeddings || !logits)
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_score: NULL argument");
    if (!image_count || !text_count)
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_score: %zu images and %zu texts: nothing to score",
                         image_count, text_count);
    if (!model_embeds(model))
        return error_set(GLIMPSE_STATUS_WRONG_MODEL, "glimpse_score needs a CLIP or SigLIP model");
    family_blocks blocks;
    family_blocks_of(model, &blocks);
    retrieval_logits(logits, image_embeddings, image_count, text_embeddings, text_count,
                     glimpse_model_embedding_dim(model), blocks.logit_scale, blocks.logit_bias);
    return GLIMPSE_STATUS_OK;
}

/* Below this many rows glimpse_dot_rows runs on the caller: a thread's start costs more than it saves. */
#define DOT_ROWS_PARALLEL_FROM 1024

glimpse_status glimpse_dot_rows(const float *matrix, size_t count, size_t dim, const int64_t *rows, size_t n,
                                const float *query, int threads, float *out) {
    if (!n) return GLIMPSE_STATUS_OK;
    if (!matrix || !query || !out) return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_dot_rows: NULL argument");
    if (!dim || count > SIZE_MAX / dim / sizeof(float))
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_dot_rows: %zu rows of %zu floats", count, dim);
    if (!rows && n > count)
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_dot_rows: %zu rows of a matrix of %zu", n, count);
    for (size_t i = 0; rows && i < n; i++)
        if (rows[i] < 0 || (uint64_t)rows[i] >= count)
            return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_dot_rows: row %lld (item %zu) outside a matrix of %zu rows",
                             (long long)rows[i], i, count);
    pool *workers = NULL;
    if (n >= DOT_ROWS_PARALLEL_FROM && threads != 1 && pool_create(threads, &workers) != GLIMPSE_STATUS_OK)
        workers = NULL; /* no threads to be had: the caller alone */
    kernel_dot_rows(out, matrix, dim, rows, n, query, workers);
    pool_free(workers);
    return GLIMPSE_STATUS_OK;
}

glimpse_status glimpse_tokenize(const glimpse_model *model, const char *text, int32_t *ids, size_t capacity,
                                size_t *count) {
    if (!model || !text || !count || (capacity && !ids))
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_tokenize: NULL argument");
    family_blocks blocks;
    family_blocks_of(model, &blocks);
    if (blocks.wordpiece) { /* BLIP: [CLS] text [SEP], as its processor tokenizes */
        size_t n = 0;
        glimpse_status status = bert_tokenizer_encode(blocks.wordpiece, text, capacity > 1 ? ids + 1 : NULL,
                                                      capacity > 1 ? capacity - 2 : 0, &n);
        if (status) return status;
        *count = n + 2;
        if (*count > capacity)
            return error_set(GLIMPSE_STATUS_TOO_LARGE, "%zu token ids do not fit in %zu", *count, capacity);
        ids[0] = bert_tokenizer_id(blocks.wordpiece, "[CLS]");
        ids[n + 1] = bert_tokenizer_id(blocks.wordpiece, "[SEP]");
        return GLIMPSE_STATUS_OK;
    }
    if (blocks.byte_bpe) /* ViT-GPT2: GPT-2's BPE, which adds no start or end token */
        return gpt2_tokenizer_encode(blocks.byte_bpe, text, 1, ids, capacity, count);
    if (!blocks.clip_tokenizer && !blocks.sentencepiece)
        return error_set(GLIMPSE_STATUS_WRONG_MODEL, "this model was loaded without its tokenizer");
    size_t positions = (size_t)blocks.text->config.max_positions;
    int32_t *all = malloc(positions * sizeof *all);
    if (!all) return ERROR_OOM();
    glimpse_status status = tokenize(&blocks, text, positions, all, count);
    if (!status) {
        memcpy(ids, all, (*count < capacity ? *count : capacity) * sizeof *ids);
        if (*count > capacity)
            status = error_set(GLIMPSE_STATUS_TOO_LARGE, "%zu token ids do not fit in %zu", *count, capacity);
    }
    free(all);
    return status;
}
