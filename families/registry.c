/* registry.c — the table of model families, one line each, and what walks it: detecting a snapshot's family
 * from config.json and finding the family of a public kind. The families' code is in their own files. */
#include "families/family.h"

#include <stdio.h>
#include <string.h>

#include "api/identity.h"
#include "api/model.h"
#include "core/error.h"

extern const model_family family_clip, family_blip_caption, family_blip_retrieval, family_siglip, family_vit_gpt2,
    family_blip2, family_florence2, family_llava;

/* In the order an unknown architecture's error lists them. */
static const model_family *const families[] = {
    &family_clip,
    &family_blip_caption,
    &family_blip_retrieval,
    &family_siglip,
    &family_vit_gpt2,
    &family_blip2,
    &family_florence2,
    &family_llava,
};
#define FAMILY_COUNT (sizeof families / sizeof families[0])

void family_blocks_of(const glimpse_model *model, family_blocks *out) {
    memset(out, 0, sizeof *out);
    if (model->family->blocks) model->family->blocks(model, out);
}

glimpse_status family_run_blocks_of(glimpse_context *ctx, family_run_blocks *out) {
    memset(out, 0, sizeof *out);
    const glimpse_model *model = context_model(ctx);
    return model->family->run_blocks ? model->family->run_blocks(ctx, out) : GLIMPSE_STATUS_OK;
}

void family_assign(glimpse_model *model, const model_family *family) {
    model->family = family;
    model->kind = family->kind;
    snprintf(model->architecture, sizeof model->architecture, "%s", family->architecture);
}

glimpse_status family_detect(const cJSON *config, const char *folder, const model_family **out) {
    const cJSON *architectures = cJSON_GetObjectItemCaseSensitive(config, "architectures");
    const cJSON *first = cJSON_IsArray(architectures) ? cJSON_GetArrayItem(architectures, 0) : NULL;
    const cJSON *model_type = cJSON_GetObjectItemCaseSensitive(config, "model_type");
    const char *name = cJSON_IsString(first) ? first->valuestring : NULL;
    const char *type = cJSON_IsString(model_type) ? model_type->valuestring : "";
    for (size_t i = 0; i < FAMILY_COUNT; i++) {
        const model_family *f = families[i];
        if (name ? strcmp(name, f->architecture) == 0 : f->model_type && strcmp(type, f->model_type) == 0) {
            *out = f;
            return GLIMPSE_STATUS_OK;
        }
    }
    char supported[512];
    family_names(0, true, supported, sizeof supported);
    return error_set(GLIMPSE_STATUS_UNSUPPORTED,
                     "%s/config.json: architecture \"%s\" (model_type \"%s\") is not one glimpse runs; supported: %s",
                     folder, name ? name : "?", type, supported);
}

void family_names(unsigned capabilities, bool summaries, char *out, size_t capacity) {
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < FAMILY_COUNT && used < capacity; i++) {
        const model_family *f = families[i];
        if ((f->capabilities & capabilities) != capabilities) continue;
        int n = snprintf(out + used, capacity - used, "%s%s", used ? ", " : "",
                         summaries && f->summary ? f->summary : f->architecture);
        if (n > 0) used += (size_t)n;
    }
}

const model_family *family_of_kind(glimpse_model_kind kind) {
    for (size_t i = 0; i < FAMILY_COUNT; i++)
        if (families[i]->kind == kind) return families[i];
    return NULL;
}
