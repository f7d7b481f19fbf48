/* context.c — glimpse_context: one caller's run state for a model (its thread pool; the family's own state
 * behind ctx->run, made through the family table), and the steps the multi-image calls share: preprocessing a
 * batch of images in parallel into the family's pixel_values, and reporting progress (with cancelling). */
#include "api/context.h"

#include <stdio.h>
#include <stdlib.h>

#include "api/identity.h"
#include "api/model.h"
#include "core/error.h"
#include "families/family.h"

glimpse_context_params glimpse_context_default_params(void) {
    return (glimpse_context_params){.threads = 0, .on_progress = NULL, .user = NULL};
}

void glimpse_context_free(glimpse_context *ctx) {
    if (!ctx) return;
    if (ctx->run && ctx->model && ctx->model->family && ctx->model->family->free_run)
        ctx->model->family->free_run(ctx->run);
    pool_free(ctx->threads);
    free(ctx);
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
    ctx->rollout_budget = CONTEXT_ROLLOUT_BUDGET;
    glimpse_status status = pool_create(params->threads, &ctx->threads);
    family_run_blocks blocks; /* the family's run state made now, so a context is whole or not made at all */
    if (!status) status = family_run_blocks_of(ctx, &blocks);
    if (status)
        glimpse_context_free(ctx);
    else
        *out = ctx;
    return status;
}

const glimpse_model *context_model(const glimpse_context *ctx) { return ctx->model; }

int context_thread_count(const glimpse_context *ctx) { return pool_threads(ctx->threads); }

glimpse_status context_progress(const glimpse_context *ctx, size_t done, size_t total) {
    if (ctx->params.on_progress && ctx->params.on_progress(ctx->params.user, done, total))
        return error_set(GLIMPSE_STATUS_CANCELLED, "cancelled after %zu of %zu images", done, total);
    return GLIMPSE_STATUS_OK;
}

/* Room for a worker's error message: core/error.c keeps at most 1024 bytes of one. */
#define PREPROCESS_MESSAGE_CAPACITY 1024

typedef struct preprocess_job {
    const glimpse_model *model;
    glimpse_image *const *images;
    float *pixel_values;
    int size;     /* the ViT's picture side */
    size_t plane; /* floats of one image's pixel_values */
    /* each image's status, and the message its worker thread recorded */
    glimpse_status *statuses;
    char (*messages)[PREPROCESS_MESSAGE_CAPACITY];
} preprocess_job;

static void preprocess_task(void *argument, size_t index, float *scratch) {
    (void)scratch;
    preprocess_job *job = argument;
    const glimpse_model *model = job->model;
    const glimpse_image *image = job->images[index];
    int height, width, size = job->size;
    preprocess_output_size(&model->preprocess, image->width, image->height, &height, &width);
    glimpse_status status;
    if (height != size || width != size)
        status = error_set(GLIMPSE_STATUS_UNSUPPORTED,
                           "preprocessing gives %dx%d pixels but the model takes %dx%d "
                           "(check preprocessor_config.json)",
                           width, height, size, size);
    else
        status = preprocess_image(job->pixel_values + index * job->plane, image, &model->preprocess);
    job->statuses[index] = status;
    if (status) snprintf(job->messages[index], sizeof job->messages[index], "%s", glimpse_last_error());
}

glimpse_status context_preprocess(glimpse_context *ctx, glimpse_image *const *images, size_t count,
                                  size_t first_index) {
    const glimpse_model *model = ctx->model;
    family_blocks blocks;
    family_run_blocks run;
    family_blocks_of(model, &blocks);
    glimpse_status status = family_run_blocks_of(ctx, &run);
    if (status) return status;
    if (!blocks.vision || !run.pixel_values)
        return error_set(GLIMPSE_STATUS_WRONG_MODEL, "%s has no ViT to preprocess pictures for", model->architecture);
    size_t size = (size_t)blocks.vision->config.image_size;
    glimpse_status statuses[CONTEXT_IMAGE_BATCH];
    char messages[CONTEXT_IMAGE_BATCH][PREPROCESS_MESSAGE_CAPACITY];
    if (count > CONTEXT_IMAGE_BATCH) return error_set(GLIMPSE_STATUS_INTERNAL, "preprocessing batch too large");
    for (size_t i = 0; i < count; i++)
        if (!images[i]) return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "image %zu is NULL", first_index + i);
    preprocess_job job = {.model = model,
                          .images = images,
                          .pixel_values = run.pixel_values,
                          .size = (int)size,
                          .plane = 3 * size * size,
                          .statuses = statuses,
                          .messages = messages};
    pool_for(ctx->threads, count, preprocess_task, &job);
    for (size_t b = 0; b < count; b++)
        if (statuses[b]) return error_set(statuses[b], "image %zu: %s", first_index + b, messages[b]);
    return GLIMPSE_STATUS_OK;
}
