/* task.c — glimpse_run_task, the public door to a family's tasks (Florence-2's captions, OCR, objects,
 * grounding and regions): the arguments checked, the search settings resolved as for captions, then the family's
 * own run_task; and freeing a task's result. What a task is and how its text becomes regions is the family's. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/context.h"
#include "api/model.h"
#include "core/error.h"
#include "families/family.h"

glimpse_status glimpse_run_task(glimpse_context *ctx, glimpse_image *const *images, size_t count, const char *task,
                                const char *input, const glimpse_caption_params *params, glimpse_task_result *out) {
    if (!ctx || !images || !task || !out)
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_run_task: NULL argument");
    if (!count) return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_run_task: no images");
    for (size_t i = 0; i < count; i++) memset(&out[i], 0, sizeof out[i]);
    const glimpse_model *model = ctx->model;
    if (!model->family->run_task) {
        char names[256];
        family_names(FAMILY_CAN(GLIMPSE_CAPABILITY_TASK), false, names, sizeof names);
        return error_set(GLIMPSE_STATUS_WRONG_MODEL, "tasks need a task model (%s), this is %s", names,
                         model->architecture);
    }
    if (params && params->prompt)
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT,
                         "glimpse_run_task: the task makes the prompt; give the phrase or region as its input");
    glimpse_caption_params resolved;
    glimpse_status status = caption_params_resolve(model, params, &resolved);
    if (status) return status;
    return model->family->run_task(ctx, images, count, task, input, &resolved, out);
}

void glimpse_task_result_free(glimpse_task_result *result) {
    if (!result) return;
    for (size_t i = 0; i < result->region_count && result->regions; i++) {
        free((void *)result->regions[i].label);
        free((void *)result->regions[i].coords);
    }
    free(result->regions);
    free(result->task);
    free(result->ids);
    free(result->text);
    free(result->answer);
    free(result->json);
    memset(result, 0, sizeof *result);
}

glimpse_status glimpse_task_region(int width, int height, const float region[4], char *out, size_t capacity) {
    if (!region || !out) return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_task_region: NULL argument");
    if (width < 1 || height < 1)
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_task_region: the picture is %d x %d", width,
                         height);
    if (capacity < 64) return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_task_region: room under 64 bytes");
    /* the processor's BoxQuantizer ("floor" mode): a float32 coordinate over a bin's size (size / 1000 as a
     * Python float, which the float32 tensor's division rounds to float32) */
    int bins[4];
    for (int i = 0; i < 4; i++) {
        if (!isfinite(region[i]))
            return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_task_region: a coordinate is not a number");
        float bin = (float)((i % 2 ? height : width) / 1000.0);
        float q = floorf(region[i] / bin);
        bins[i] = q < 0 ? 0 : q > 999 ? 999 : (int)q;
    }
    snprintf(out, capacity, "<loc_%d><loc_%d><loc_%d><loc_%d>", bins[0], bins[1], bins[2], bins[3]);
    return GLIMPSE_STATUS_OK;
}
