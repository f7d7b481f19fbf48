/* siglip.c — the SigLIP family (SiglipModel): its config reading and loader (the ViT and CLIP text towers in
 * their SigLIP variants, the SentencePiece tokenizer, logit_scale and logit_bias) and its line of the family
 * table. The towers are the shared vision/vit and text/clip_text blocks, as CLIP's (clip.c). */
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

/* SiglipModel: CLIP's towers in their SigLIP variants, the SentencePiece
 * tokenizer, logit_scale and logit_bias. A config section left out takes
 * every default, as SiglipConfig does. */
static glimpse_status load_siglip(glimpse_model *model, const glimpse_load_params *params, const cJSON *vision_json,
                                  const cJSON *text_json) {
    const char *folder = model->folder;
    glimpse_status status;
    dual_tower_parts *parts = calloc(1, sizeof *parts);
    if (!(model->parts = parts)) return ERROR_OOM();
    const float *logit_scale, *logit_bias;
    size_t scalar_shape[1] = {1};
    if ((status = weight_store_get(model->store, &logit_scale, 1, scalar_shape, names_siglip.logit_scale)) ||
        (status = weight_store_get(model->store, &logit_bias, 1, scalar_shape, names_siglip.logit_bias)))
        return status;
    parts->logit_scale = expf(*logit_scale), parts->logit_bias = *logit_bias;
    vit_config vision;
    clip_text_config text;
    if ((status = vit_config_read(vision_json, "config.json: vision_config", VIT_VARIANT_SIGLIP, &vision)) ||
        (status = clip_text_config_read(text_json, "config.json: text_config", CLIP_TEXT_VARIANT_SIGLIP, 0, &text)))
        return status;
    if (vision.projection_dim != text.projection_dim)
        return error_set(GLIMPSE_STATUS_UNSUPPORTED, "%s/config.json: the vision tower embeds in %d dimensions, the "
                         "text tower's head in %d: they cannot be compared", folder, vision.projection_dim,
                         text.projection_dim);
    if (params->load_vision) {
        if ((status = vit_model_load(&parts->vision, &vision, &names_siglip.vision, model->store))) return status;
        model->has_vision = true;
        model->preprocess = preprocess_default_siglip(vision.image_size);
        if ((status = read_preprocessor(model, 1))) return status;
        model->preprocess.do_center_crop = 0; /* SiglipImageProcessor never crops, whatever the file says */
    }
    if (params->load_text) {
        if ((status = clip_text_model_load(&parts->text, &text, &names_siglip.text, model->store))) return status;
        model->has_text = true;
        if ((status = siglip_tokenizer_load(folder, &parts->sentencepiece)) ||
            (status = check_vocabulary(model, "spiece.model", siglip_tokenizer_vocab_size(parts->sentencepiece),
                                       text.vocab_size)))
            return status;
        if (siglip_tokenizer_length(parts->sentencepiece) > (size_t)text.max_positions)
            return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: the tokenizer pads to %zu tokens but the model has %d "
                             "positions", folder, siglip_tokenizer_length(parts->sentencepiece), text.max_positions);
    }
    return GLIMPSE_STATUS_OK;
}

const model_family family_siglip = {
    .architecture = "SiglipModel",
    .model_type = "siglip",
    .kind = GLIMPSE_MODEL_KIND_SIGLIP,
    .capabilities = FAMILY_CAN(GLIMPSE_CAPABILITY_EMBED) | FAMILY_CAN(GLIMPSE_CAPABILITY_RANK) | FAMILY_CAN(GLIMPSE_CAPABILITY_EXPLAIN),
    .vision_section = "vision_config",
    .text_section = "text_config",
    .sections_required = false,
    .load = load_siglip,
    .blocks = dual_tower_blocks,
    .run_blocks = dual_tower_run_blocks,
    .tower_twins = dual_tower_twins,
    .free_parts = dual_tower_free_parts,
    .free_run = dual_tower_free_run,
    .text_info = dual_tower_text_info,
    .sigmoid_scores = true,
};
