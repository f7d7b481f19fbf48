/* blip.c — the BLIP families (BlipForConditionalGeneration, captioning; BlipForImageTextRetrieval, ITM and
 * ITC): their config reading and loader (the ViT tower, the BERT text decoder or encoder with the ITM heads,
 * the WordPiece tokenizer, the token ids) and their lines of the family table. The BERT layers are the shared
 * fusion/bert block. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/context.h"
#include "api/model.h"
#include "core/error.h"
#include "families/cross_caption.h"
#include "families/family.h"
#include "families/loader_steps.h"
#include "families/vit_run.h"
#include "weights/config.h"
#include "weights/names.h"

extern const model_family family_blip_retrieval;

/* What load makes (model->parts): the ViT, then captioning's BERT decoder (text_decoder.bert with
 * cls.predictions), or retrieval's bidirectional text encoder with the ITM and ITC heads; the WordPiece
 * tokenizer. The token ids and generation settings are model->start_id, ... (every captioner's). */
typedef struct blip_parts {
    vit_model vision;
    bert_model text_decoder;
    bert_model text_encoder;
    itm_heads itm;
    bert_tokenizer *wordpiece;
} blip_parts;

/* A context's run state (ctx->run): the ViT's, and the BERT's with cross-attention, made on first use and grown
 * to the largest request so far: the caption decoder's (beams x caption length) or the retrieval text
 * encoder's (one text at a time, for ITM and ITC). */
typedef struct blip_run {
    vit_run vision;
    bert_state *bert;
} blip_run;

static blip_parts *parts_of(const glimpse_model *model) { return model->parts; }

static void free_parts(void *parts_pointer) {
    blip_parts *parts = parts_pointer;
    vit_model_free(&parts->vision);
    bert_model_free(&parts->text_decoder);
    bert_model_free(&parts->text_encoder);
    bert_tokenizer_free(parts->wordpiece);
    free(parts);
}

static void free_run(void *run_pointer) {
    blip_run *run = run_pointer;
    vit_run_free(&run->vision);
    bert_state_free(run->bert);
    free(run);
}

static glimpse_status load_blip(glimpse_model *model, const glimpse_load_params *params, const cJSON *vision_json,
                                const cJSON *text_json) {
    const char *folder = model->folder;
    blip_parts *parts = calloc(1, sizeof *parts);
    if (!(model->parts = parts)) return ERROR_OOM();
    glimpse_status status;
    /* Without "architectures", BLIP's two heads are told apart by their tensors. */
    if (weight_store_find(model->store, names_blip.retrieval_only)) family_assign(model, &family_blip_retrieval);
    bool retrieval = model->family == &family_blip_retrieval;
    vit_config vision;
    if ((status = vit_config_read(vision_json, "config.json: vision_config", VIT_VARIANT_BLIP, &vision)))
        return status;
    /* Captioning needs both towers whatever the params say. */
    (void)params;
    if ((status = vit_model_load(&parts->vision, &vision, &names_blip.vision, model->store))) return status;
    model->has_vision = true;
    model->preprocess = preprocess_default_blip(vision.image_size);
    if ((status = read_preprocessor(model, 1))) return status;
    bert_config text;
    if ((status = bert_config_read(text_json, "config.json: text_config", vision.hidden_size, &text))) return status;
    if (retrieval) {
        int shared;
        if ((status = config_int_or(model->config, "config.json", "image_text_hidden_size", 1, 1 << 16, 256, &shared)))
            return status;
        if ((status = bert_model_load(&parts->text_encoder, &text, &names_blip.text_encoder, model->store)))
            return status;
        if ((status = itm_heads_load(&parts->itm, &names_blip.itm, model->store, (size_t)vision.hidden_size,
                                     (size_t)text.hidden_size, (size_t)shared)))
            return status;
    } else if ((status = bert_model_load(&parts->text_decoder, &text, &names_blip.text_decoder, model->store))) {
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
    if ((status = bert_tokenizer_load(folder, &parts->wordpiece)) || (status = read_generation_config(model)))
        return status;
    return check_vocabulary(model, "the tokenizer", bert_tokenizer_vocab_size(parts->wordpiece), text.vocab_size);
}

static void text_info(const glimpse_model *model, glimpse_model_info *out) {
    if (!model->has_text) return;
    const blip_parts *parts = parts_of(model);
    const bert_config *t =
        model->family == &family_blip_retrieval ? &parts->text_encoder.config : &parts->text_decoder.config;
    loader_text_info(out, t->hidden_size, t->layers, t->heads, t->max_positions, t->vocab_size, t->act_name);
}

static void blocks(const glimpse_model *model, family_blocks *out) {
    const blip_parts *parts = model->parts;
    out->vision = &parts->vision, out->wordpiece = parts->wordpiece;
    if (model->family == &family_blip_retrieval)
        out->text_encoder = &parts->text_encoder, out->itm = &parts->itm;
    else
        out->text_decoder = &parts->text_decoder;
}

static glimpse_status run_blocks(glimpse_context *ctx, family_run_blocks *out) {
    blip_run *run;
    glimpse_status status =
        vit_run_of(ctx, &parts_of(ctx->model)->vision, true, sizeof *run, free_run, (void **)&run);
    if (status) return status;
    vit_run_blocks(&run->vision, out);
    out->bert = &run->bert;
    return GLIMPSE_STATUS_OK;
}

static glimpse_status tower_twins(glimpse_model *model, kernel_twin_add add, void *set) {
    return vit_run_tower_twins(&parts_of(model)->vision, add, set);
}

static glimpse_status quantize(glimpse_model *model, q8_set *set) {
    bert_model *bert = model->family == &family_blip_retrieval ? &parts_of(model)->text_encoder
                                                                : &parts_of(model)->text_decoder;
    return bert_model_quantize(bert, set);
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
    .blocks = blocks,
    .run_blocks = run_blocks,
    .tower_twins = tower_twins,
    .quantize = quantize,
    .free_parts = free_parts,
    .free_run = free_run,
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
    .blocks = blocks,
    .run_blocks = run_blocks,
    .tower_twins = tower_twins,
    .quantize = quantize,
    .free_parts = free_parts,
    .free_run = free_run,
    .text_info = text_info,
};
