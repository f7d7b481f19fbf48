/* vit_run.c — the ViT part of the run state of the families built on the shared ViT (vit_run.h), made as
 * glimpse_context_create asks for it. */
#include "families/vit_run.h"

#include <stdlib.h>

#include "api/context.h"
#include "api/model.h"
#include "core/error.h"

glimpse_status vit_run_of(glimpse_context *ctx, const vit_model *vision, bool output, size_t size,
                          void (*free_run)(void *), void **out) {
    *out = ctx->run;
    if (ctx->run) return GLIMPSE_STATUS_OK;
    vit_run *run = calloc(1, size);
    if (!run) return ERROR_OOM();
    glimpse_status status = GLIMPSE_STATUS_OK;
    if (ctx->model->has_vision) {
        size_t side = (size_t)vision->config.image_size;
        status = vit_state_create(vision, CONTEXT_IMAGE_BATCH, &run->vision);
        if (!status && !(run->pixel_values = malloc(CONTEXT_IMAGE_BATCH * 3 * side * side * sizeof(float))))
            status = ERROR_OOM();
        if (!status && output &&
            !(run->vision_output = malloc(vision->tokens * (size_t)vision->config.hidden_size * sizeof(float))))
            status = ERROR_OOM();
    }
    if (status) {
        free_run(run);
        return status;
    }
    *out = ctx->run = run;
    return GLIMPSE_STATUS_OK;
}

void vit_run_free(vit_run *run) {
    vit_state_free(run->vision);
    free(run->pixel_values);
    free(run->vision_output);
}

void vit_run_blocks(const vit_run *run, family_run_blocks *out) {
    out->vision = run->vision, out->pixel_values = run->pixel_values, out->vision_output = run->vision_output;
}

glimpse_status vit_run_tower_twins(vit_model *vision, kernel_twin_add add, void *set) {
    return vision->weights.layers ? vit_model_add_twins(vision, add, set) : GLIMPSE_STATUS_OK;
}
