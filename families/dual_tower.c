/* dual_tower.c — the family-table hooks CLIP and SigLIP share over their dual_tower_parts (dual_tower.h): who
 * frees the parts and the run state, what the generic calls see of them, the towers' twins, the model info's
 * text side. Their loaders are in clip.c and siglip.c. */
#include "families/dual_tower.h"

#include <stdlib.h>

#include "api/context.h"
#include "api/model.h"
#include "families/loader_steps.h"
#include "families/vit_run.h"

typedef struct dual_tower_run {
    vit_run vision;
    clip_text_state *text;
} dual_tower_run;

void dual_tower_free_parts(void *parts_pointer) {
    dual_tower_parts *parts = parts_pointer;
    vit_model_free(&parts->vision);
    clip_text_model_free(&parts->text);
    clip_tokenizer_free(parts->tokenizer);
    siglip_tokenizer_free(parts->sentencepiece);
    free(parts);
}

void dual_tower_free_run(void *run_pointer) {
    dual_tower_run *run = run_pointer;
    vit_run_free(&run->vision);
    clip_text_state_free(run->text);
    free(run);
}

void dual_tower_blocks(const glimpse_model *model, family_blocks *out) {
    const dual_tower_parts *parts = model->parts;
    out->vision = &parts->vision, out->text = &parts->text;
    out->clip_tokenizer = parts->tokenizer, out->sentencepiece = parts->sentencepiece;
    out->logit_scale = parts->logit_scale, out->logit_bias = parts->logit_bias;
}

glimpse_status dual_tower_run_blocks(glimpse_context *ctx, family_run_blocks *out) {
    const dual_tower_parts *parts = ctx->model->parts;
    bool fresh = ctx->run == NULL;
    dual_tower_run *run;
    glimpse_status status = vit_run_of(ctx, &parts->vision, false, sizeof *run, dual_tower_free_run, (void **)&run);
    if (status) return status;
    if (fresh && ctx->model->has_text &&
        (status = clip_text_state_create(&parts->text, CONTEXT_TEXT_BATCH, &run->text))) {
        dual_tower_free_run(run);
        ctx->run = NULL;
        return status;
    }
    vit_run_blocks(&run->vision, out);
    out->text = run->text;
    return GLIMPSE_STATUS_OK;
}

glimpse_status dual_tower_twins(glimpse_model *model, kernel_twin_add add, void *set) {
    dual_tower_parts *parts = model->parts;
    glimpse_status status = vit_run_tower_twins(&parts->vision, add, set);
    if (!status && parts->text.weights.layers) status = clip_text_model_add_twins(&parts->text, add, set);
    return status;
}

void dual_tower_text_info(const glimpse_model *model, glimpse_model_info *out) {
    if (!model->has_text) return;
    const clip_text_config *t = &((const dual_tower_parts *)model->parts)->text.config;
    loader_text_info(out, t->hidden_size, t->layers, t->heads, t->max_positions, t->vocab_size, t->act_name);
}
