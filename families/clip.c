/* clip.c — the CLIP family (CLIPModel): its config reading and loader (ViT and CLIP text towers, the BPE
 * tokenizer, logit_scale) and its line of the family table. The towers are the shared vision/vit and
 * text/clip_text blocks; SigLIP's family is in siglip.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/model.h"
#include "core/error.h"
#include "families/dual_tower.h"
#include "families/family.h"
#include "families/loader_steps.h"
#include "weights/config.h"
#include "weights/names.h"

/* The loader reads the config sections the family line names. */
static glimpse_status load_clip(glimpse_model *model, const glimpse_load_params *params, const cJSON *vision_json,
                                const cJSON *text_json) {
    const char *folder = model->folder;
    glimpse_status status;
    dual_tower_parts *parts = calloc(1, sizeof *parts);
    if (!(model->parts = parts)) return ERROR_OOM();
    int projection_dim;
    if ((status = config_int_or(model->config, "config.json", "projection_dim", 1, 1 << 16, 512, &projection_dim)))
        return status;
    const float *logit_scale;
    size_t scalar_shape[1] = {0};
    if ((status = weight_store_get(model->store, &logit_scale, 0, scalar_shape, names_clip.logit_scale))) return status;
    parts->logit_scale = expf(*logit_scale);
    if (params->load_vision) {
        vit_config config;
        if ((status = vit_config_read(vision_json, "config.json: vision_config", VIT_VARIANT_CLIP, &config)))
            return status;
        config.projection_dim = projection_dim;
        if ((status = vit_model_load(&parts->vision, &config, &names_clip.vision, model->store))) return status;
        model->has_vision = true;
        model->preprocess = preprocess_default_clip(config.image_size);
        if ((status = read_preprocessor(model, 0))) return status;
    }
    if (params->load_text) {
        clip_text_config config;
        if ((status = clip_text_config_read(text_json, "config.json: text_config", CLIP_TEXT_VARIANT_CLIP,
                                            projection_dim, &config)))
            return status;
        if ((status = clip_text_model_load(&parts->text, &config, &names_clip.text, model->store))) return status;
        model->has_text = true;
        if ((status = clip_tokenizer_load(folder, &parts->tokenizer))) return status;
        return check_vocabulary(model, "vocab.json", clip_tokenizer_vocab_size(parts->tokenizer), config.vocab_size);
    }
    return GLIMPSE_STATUS_OK;
}

const model_family family_clip = {
    .architecture = "CLIPModel",
    .model_type = "clip",
    .kind = GLIMPSE_MODEL_KIND_CLIP,
    .capabilities = FAMILY_CAN(GLIMPSE_CAPABILITY_EMBED) | FAMILY_CAN(GLIMPSE_CAPABILITY_RANK) | FAMILY_CAN(GLIMPSE_CAPABILITY_EXPLAIN),
    .vision_section = "vision_config",
    .text_section = "text_config",
    .sections_required = true,
    .load = load_clip,
    .blocks = dual_tower_blocks,
    .run_blocks = dual_tower_run_blocks,
    .tower_twins = dual_tower_twins,
    .free_parts = dual_tower_free_parts,
    .free_run = dual_tower_free_run,
    .text_info = dual_tower_text_info,
};
