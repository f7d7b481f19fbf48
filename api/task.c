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

/* ------------------------------------------------------------ words for a search index */

typedef struct task_words {
    glimpse_words_source source;
    glimpse_context *ctx;
    char identity[GLIMPSE_MODEL_IDENTITY_CAPACITY];
} task_words;

/* The answer of one task, greedy, as a new string: a text task's answer, or the regions' labels one a line. */
static glimpse_status task_words_run(glimpse_context *ctx, glimpse_image *image, const char *task, char **out) {
    glimpse_caption_params params = glimpse_caption_default_params();
    params.beams = 1;
    glimpse_task_result result;
    glimpse_status status = glimpse_run_task(ctx, &image, 1, task, NULL, &params, &result);
    size_t length = 1;
    for (size_t i = 0; !status && i < result.region_count; i++) length += strlen(result.regions[i].label) + 1;
    if (!status && result.answer) length += strlen(result.answer);
    *out = status ? NULL : malloc(length);
    if (!status && !*out) status = ERROR_OOM();
    if (!status) {
        size_t used = 0;
        if (result.answer) used += (size_t)snprintf(*out, length, "%s", result.answer);
        (*out)[used] = '\0';
        for (size_t i = 0; i < result.region_count; i++) {
            const char *label = result.regions[i].label;
            if (!label[0]) continue;
            used += (size_t)snprintf(*out + used, length - used, "%s%s", used ? "\n" : "", label);
        }
    }
    glimpse_task_result_free(&result);
    return status;
}

static glimpse_status task_words_read(void *user, glimpse_image *image, char **text, char **labels) {
    task_words *w = user;
    glimpse_status status = GLIMPSE_STATUS_OK;
    if (text) status = task_words_run(w->ctx, image, "<OCR>", text);
    if (!status && labels) status = task_words_run(w->ctx, image, "<OD>", labels);
    if (status && text) free(*text), *text = NULL;
    return status;
}

glimpse_words_source *glimpse_task_words_new(glimpse_context *ctx) {
    if (!ctx) {
        error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_task_words_new: NULL context");
        return NULL;
    }
    if (!ctx->model->family->run_task) {
        error_set(GLIMPSE_STATUS_WRONG_MODEL, "reading pictures' words needs a task model (Florence-2), this is %s",
                  ctx->model->architecture);
        return NULL;
    }
    task_words *w = calloc(1, sizeof *w);
    if (!w) {
        ERROR_OOM();
        return NULL;
    }
    if (glimpse_model_identity(ctx->model, w->identity, sizeof w->identity)) {
        free(w);
        return NULL;
    }
    w->ctx = ctx;
    w->source = (glimpse_words_source){task_words_read, w, w->identity};
    return &w->source;
}

void glimpse_task_words_free(glimpse_words_source *words) { free(words); }
