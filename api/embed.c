/* embed.c — contexts and the embedding calls of the public API: images are
 * preprocessed in parallel and encoded in batches; texts are tokenized and
 * encoded packed together. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "api/model.h"
#include "fusion/retrieval.h"

glimpse_context_params glimpse_context_default_params(void) {
    glimpse_context_params params = {0};
    return params;
}

glimpse_status glimpse_context_create(const glimpse_model *model, const glimpse_context_params *params,
                                      glimpse_context **out) {
    if (!out) return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_context_create: out is NULL");
    *out = NULL;
    if (!model) return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_context_create: model is NULL");
    glimpse_context_params defaults = glimpse_context_default_params();
    if (!params) params = &defaults;
    if (params->threads < 0)
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "thread count %d is negative", params->threads);
    glimpse_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return ERROR_OOM();
    ctx->model = model;
    ctx->params = *params;
    glimpse_status status = pool_create(params->threads, &ctx->threads);
    if (!status && model->has_vision) {
        size_t size = (size_t)model->vision.config.image_size;
        status = vit_state_create(&model->vision, CONTEXT_IMAGE_BATCH, &ctx->vision);
        if (!status) {
            ctx->pixel_values = malloc(CONTEXT_IMAGE_BATCH * 3 * size * size * sizeof(float));
            if (!ctx->pixel_values) status = ERROR_OOM();
        }
    }
    if (!status && model->has_text && model->kind == GLIMPSE_MODEL_KIND_CLIP)
        status = clip_text_state_create(&model->text, CONTEXT_TEXT_BATCH, &ctx->text);
    if (!status && model->has_vision && model->kind != GLIMPSE_MODEL_KIND_CLIP) {
        ctx->image_tokens = malloc(model->vision.tokens * (size_t)model->vision.config.hidden_size * sizeof(float));
        if (!ctx->image_tokens) status = ERROR_OOM();
    }
    if (status) {
        glimpse_context_free(ctx);
        return status;
    }
    *out = ctx;
    return GLIMPSE_STATUS_OK;
}

void glimpse_context_free(glimpse_context *ctx) {
    if (!ctx) return;
    pool_free(ctx->threads);
    vit_state_free(ctx->vision);
    clip_text_state_free(ctx->text);
    free(ctx->pixel_values);
    bert_state_free(ctx->decoder);
    free(ctx->image_tokens);
    free(ctx);
}

typedef struct preprocess_job {
    const glimpse_model *model;
    glimpse_image *const *images;
    float *pixel_values;
    size_t plane;
    glimpse_status *statuses;
    char (*messages)[256];
} preprocess_job;

static void preprocess_task(void *argument, size_t index, float *scratch) {
    (void)scratch;
    preprocess_job *job = argument;
    const glimpse_model *model = job->model;
    const glimpse_image *image = job->images[index];
    int height, width, size = model->vision.config.image_size;
    preprocess_output_size(&model->preprocess, image->width, image->height, &height, &width);
    glimpse_status status;
    if (height != size || width != size)
        status = error_set(GLIMPSE_STATUS_UNSUPPORTED,
                           "preprocessing gives %dx%d pixels but the model takes %dx%d (check preprocessor_config.json)",
                           width, height, size, size);
    else
        status = preprocess_image(job->pixel_values + index * job->plane, image, &model->preprocess);
    job->statuses[index] = status;
    if (status) snprintf(job->messages[index], sizeof job->messages[index], "%s", glimpse_last_error());
}

glimpse_status context_progress(const glimpse_context *ctx, size_t done, size_t total) {
    if (ctx->params.on_progress && ctx->params.on_progress(ctx->params.user, done, total))
        return error_set(GLIMPSE_STATUS_CANCELLED, "cancelled after %zu of %zu images", done, total);
    return GLIMPSE_STATUS_OK;
}

glimpse_status context_preprocess(glimpse_context *ctx, glimpse_image *const *images, size_t count,
                                  size_t first_index) {
    const glimpse_model *model = ctx->model;
    size_t size = (size_t)model->vision.config.image_size;
    glimpse_status statuses[CONTEXT_IMAGE_BATCH];
    char messages[CONTEXT_IMAGE_BATCH][256];
    if (count > CONTEXT_IMAGE_BATCH) return error_set(GLIMPSE_STATUS_INTERNAL, "preprocessing batch too large");
    for (size_t i = 0; i < count; i++)
        if (!images[i]) return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "image %zu is NULL", first_index + i);
    preprocess_job job = {model, images, ctx->pixel_values, 3 * size * size, statuses, messages};
    pool_for(ctx->threads, count, preprocess_task, &job);
    for (size_t b = 0; b < count; b++)
        if (statuses[b]) return error_set(statuses[b], "image %zu: %s", first_index + b, messages[b]);
    return GLIMPSE_STATUS_OK;
}

glimpse_status glimpse_embed_images(glimpse_context *ctx, glimpse_image *const *images, size_t count,
                                    float *out) {
    if (!ctx || (count && (!images || !out)))
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_embed_images: NULL argument");
    const glimpse_model *model = ctx->model;
    if (!model->has_vision)
        return error_set(GLIMPSE_STATUS_WRONG_MODEL, "this model was loaded without its vision tower");
    if (model->kind != GLIMPSE_MODEL_KIND_CLIP)
        return error_set(GLIMPSE_STATUS_WRONG_MODEL, "embeddings need a CLIP model");
    size_t dim = glimpse_model_embedding_dim(model);
    for (size_t first = 0; first < count; first += CONTEXT_IMAGE_BATCH) {
        size_t batch = count - first < CONTEXT_IMAGE_BATCH ? count - first : CONTEXT_IMAGE_BATCH;
        glimpse_status status = context_preprocess(ctx, images + first, batch, first);
        if (status) return status;
        vit_forward(&model->vision, ctx->vision, ctx->pixel_values, batch, ENCODER_OUTPUT_POOLED_ROWS, ctx->threads);
        for (size_t b = 0; b < batch; b++) vit_embed(&model->vision, ctx->vision, b, out + (first + b) * dim);
        if ((status = context_progress(ctx, first + batch, count))) return status;
    }
    return GLIMPSE_STATUS_OK;
}

glimpse_status glimpse_embed_texts(glimpse_context *ctx, const char *const *texts, size_t count, float *out) {
    if (!ctx || (count && (!texts || !out)))
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_embed_texts: NULL argument");
    const glimpse_model *model = ctx->model;
    if (model->kind != GLIMPSE_MODEL_KIND_CLIP)
        return error_set(GLIMPSE_STATUS_WRONG_MODEL, "embeddings need a CLIP model");
    if (!model->has_text) return error_set(GLIMPSE_STATUS_WRONG_MODEL, "this model was loaded without its text tower");
    size_t positions = (size_t)model->text.config.max_positions, dim = glimpse_model_embedding_dim(model);
    int32_t *ids = malloc(CONTEXT_TEXT_BATCH * positions * sizeof *ids);
    size_t lengths[CONTEXT_TEXT_BATCH];
    if (!ids) return ERROR_OOM();
    glimpse_status status = GLIMPSE_STATUS_OK;
    for (size_t first = 0; first < count && !status; first += CONTEXT_TEXT_BATCH) {
        size_t batch = count - first < CONTEXT_TEXT_BATCH ? count - first : CONTEXT_TEXT_BATCH, rows = 0;
        for (size_t b = 0; b < batch && !status; b++) {
            status = clip_tokenizer_encode(model->tokenizer, texts[first + b], positions, ids + rows, &lengths[b]);
            rows += lengths[b];
        }
        if (!status)
            status = clip_text_forward(&model->text, ctx->text, ids, lengths, batch, ENCODER_OUTPUT_POOLED_ROWS,
                                       ctx->threads);
        rows = 0;
        for (size_t b = 0; b < batch && !status; b++) {
            clip_text_embed(&model->text, ctx->text, rows, ids + rows, lengths[b], out + (first + b) * dim);
            rows += lengths[b];
        }
    }
    free(ids);
    return status;
}

glimpse_status glimpse_score(const glimpse_model *model, const float *image_embeddings, size_t image_count,
                             const float *text_embeddings, size_t text_count, float *logits) {
    if (!model || ((image_count && !image_embeddings) || (text_count && !text_embeddings) ||
                   (image_count && text_count && !logits)))
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_score: NULL argument");
    if (model->kind != GLIMPSE_MODEL_KIND_CLIP)
        return error_set(GLIMPSE_STATUS_WRONG_MODEL, "glimpse_score needs a CLIP model");
    retrieval_logits(logits, image_embeddings, image_count, text_embeddings, text_count,
                     glimpse_model_embedding_dim(model), model->logit_scale, 0.0f);
    return GLIMPSE_STATUS_OK;
}

glimpse_status glimpse_tokenize(const glimpse_model *model, const char *text, int32_t *ids, size_t capacity,
                                size_t *count) {
    if (!model || !text || !count || (capacity && !ids))
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_tokenize: NULL argument");
    if (model->wordpiece) { /* BLIP: [CLS] text [SEP], as its processor tokenizes */
        size_t n = 0;
        glimpse_status status = bert_tokenizer_encode(model->wordpiece, text, capacity > 1 ? ids + 1 : NULL,
                                                      capacity > 1 ? capacity - 2 : 0, &n);
        if (status) return status;
        *count = n + 2;
        if (*count > capacity)
            return error_set(GLIMPSE_STATUS_TOO_LARGE, "%zu token ids do not fit in %zu", *count, capacity);
        ids[0] = bert_tokenizer_id(model->wordpiece, "[CLS]");
        ids[n + 1] = bert_tokenizer_id(model->wordpiece, "[SEP]");
        return GLIMPSE_STATUS_OK;
    }
    if (!model->tokenizer) return error_set(GLIMPSE_STATUS_WRONG_MODEL, "this model was loaded without its tokenizer");
    size_t positions = (size_t)model->text.config.max_positions;
    int32_t *all = malloc(positions * sizeof *all);
    if (!all) return ERROR_OOM();
    glimpse_status status = clip_tokenizer_encode(model->tokenizer, text, positions, all, count);
    if (!status) {
        memcpy(ids, all, (*count < capacity ? *count : capacity) * sizeof *ids);
        if (*count > capacity)
            status = error_set(GLIMPSE_STATUS_TOO_LARGE, "%zu token ids do not fit in %zu", *count, capacity);
    }
    free(all);
    return status;
}
