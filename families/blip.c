/* blip.c — the BLIP families (BlipForConditionalGeneration, captioning; BlipForImageTextRetrieval, ITM and
 * ITC): their config reading and loader (the ViT tower, the BERT text decoder or encoder with the ITM heads,
 * the WordPiece tokenizer, the token ids) and their lines of the family table. The BERT layers are the shared
 * fusion/bert block. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "api/model.h"
#include "core/error.h"
#include "families/cross_caption.h"
#include "families/family.h"
#include "families/loader_steps.h"
#include "weights/config.h"
#include "weights/names.h"

extern const model_family family_blip_retrieval;

static glimpse_status load_blip(glimpse_model *model, const glimpse_load_params *params, const cJSON *vision_json,
                                const cJSON *text_json) {
    const char *folder = model->folder;
    glimpse_status status;
    /* Without "architectures", BLIP's two heads are told apart by their tensors. */
    if (weight_store_find(model->store, names_blip.retrieval_only)) family_assign(model, &family_blip_retrieval);
    bool retrieval = model->family == &family_blip_retrieval;
    vit_config vision;
    if ((status = vit_config_read(vision_json, "config.json: vision_config", VIT_VARIANT_BLIP, &vision)))
        return status;
    /* Captioning needs both towers whatever the params say. */
    (void)params;
    if ((status = vit_model_load(&model->vision, &vision, &names_blip.vision, model->store))) return status;
    model->has_vision = true;
    model->preprocess = preprocess_default_blip(vision.image_size);
    if ((status = read_preprocessor(model, 1))) return status;
    bert_config text;
    if ((status = bert_config_read(text_json, "config.json: text_config", vision.hidden_size, &text))) return status;
    if (retrieval) {
        int shared;
        if ((status = config_int_or(model->config, "config.json", "image_text_hidden_size", 1, 1 << 16, 256, &shared)))
            return status;
        if ((status = bert_model_load(&model->text_encoder, &text, &names_blip.text_encoder, model->store)))
            return status;
        if ((status = itm_heads_load(&model->itm, &names_blip.itm, model->store, (size_t)vision.hidden_size,
                                     (size_t)text.hidden_size, (size_t)shared)))
            return status;
    } else if ((status = bert_model_load(&model->text_decoder, &text, &names_blip.text_decoder, model->store))) {
        return status;
    }
    model->has_text = true;
    int start, end, pad;
    if ((status = config_int_or(text_json, "config.json: text_config", "bos_token_id", 0, text.vocab_size - 1, 30522,
                                &start)))
        return status;
    if ((status = config_int_or(text_json, "config.json: text_config", "sep_token_id", 0, text.vocab_size - 1, 102,
                                &end)))
        return status;
    if ((status = config_int_or(text_json, "config.json: text_config", "pad_token_id", 0, text.vocab_size - 1, 0,
                                &pad)))
        return status;
    model->start_id = start, model->end_id = end, model->pad_id = pad;
    if ((status = bert_tokenizer_load(folder, &model->wordpiece)) || (status = read_generation_config(model)))
        return status;
    return check_vocabulary(model, "the tokenizer", bert_tokenizer_vocab_size(model->wordpiece), text.vocab_size);
}

static void text_info(const glimpse_model *model, glimpse_model_info *out) {
    if (!model->has_text) return;
    const bert_config *t =
        model->family == &family_blip_retrieval ? &model->text_encoder.config : &model->text_decoder.config;
    loader_text_info(out, t->hidden_size, t->layers, t->heads, t->max_positions, t->vocab_size, t->act_name);
}

const model_family family_blip_caption = {
    .architecture = "BlipForConditionalGeneration",
    .model_type = "blip",
    .kind = GLIMPSE_MODEL_KIND_BLIP_CAPTION,
    .capabilities = FAMILY_CAN(GLIMPSE_CAPABILITY_CAPTION) | FAMILY_CAN(GLIMPSE_CAPABILITY_EXPLAIN),
    .vision_section = "vision_config",
    .text_section = "text_config",
    .sections_required = true,
    .load = load_blip,
    .blocks = legacy_blocks,
    .run_blocks = legacy_run_blocks,
    .tower_twins = legacy_tower_twins,
    .quantize = legacy_quantize,
    .text_info = text_info,
    .caption = &cross_caption_bert,
};

const model_family family_blip_retrieval = {
    .architecture = "BlipForImageTextRetrieval",
    .kind = GLIMPSE_MODEL_KIND_BLIP_RETRIEVAL,
    .capabilities = FAMILY_CAN(GLIMPSE_CAPABILITY_RANK) | FAMILY_CAN(GLIMPSE_CAPABILITY_EXPLAIN) |
                    FAMILY_CAN(GLIMPSE_CAPABILITY_MATCH),
    .vision_section = "vision_config",
    .text_section = "text_config",
    .sections_required = true,
    .load = load_blip,
    .blocks = legacy_blocks,
    .run_blocks = legacy_run_blocks,
    .tower_twins = legacy_tower_twins,
    .quantize = legacy_quantize,
    .text_info = text_info,
};
