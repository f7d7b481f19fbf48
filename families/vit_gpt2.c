/* vit_gpt2.c — the ViT-GPT2 family (VisionEncoderDecoderModel of a ViT encoder and a GPT-2 decoder): its
 * config reading and loader (the encoder and decoder sections, the byte-level BPE tokenizer, the generation
 * settings and token ids) and its line of the family table. The layers are the shared vision/vit and
 * fusion/gpt2 blocks. */
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

/* What load makes (model->parts): the ViT encoder, the GPT-2 decoder that cross-attends to it, and GPT-2's
 * byte-level BPE. The token ids and generation settings are model->start_id, ... (every captioner's). */
typedef struct vit_gpt2_parts {
    vit_model vision;
    gpt2_model gpt2;
    gpt2_tokenizer *byte_bpe;
} vit_gpt2_parts;

/* A context's run state (ctx->run): the ViT's, and the GPT-2 decoder's, made on first use and grown to the
 * largest request (families/cross_caption.c). */
typedef struct vit_gpt2_run {
    vit_run vision;
    gpt2_state *gpt2;
} vit_gpt2_run;

static void free_parts(void *parts_pointer) {
    vit_gpt2_parts *parts = parts_pointer;
    vit_model_free(&parts->vision);
    gpt2_model_free(&parts->gpt2);
    gpt2_tokenizer_free(parts->byte_bpe);
    free(parts);
}

static void free_run(void *run_pointer) {
    vit_gpt2_run *run = run_pointer;
    vit_run_free(&run->vision);
    gpt2_state_free(run->gpt2);
    free(run);
}

/* VisionEncoderDecoderModel with a ViT encoder and a GPT-2 decoder
 * (nlpconnect/vit-gpt2-image-captioning): the encoder and decoder sections,
 * the GPT-2 tokenizer, ViTImageProcessor, and the generation settings of
 * generation_config.json, or of config.json's top level where the snapshot
 * has none (as transformers' GenerationConfig.from_model_config). */
static glimpse_status load_vit_gpt2(glimpse_model *model, const glimpse_load_params *params,
                                    const cJSON *encoder_json, const cJSON *decoder_json) {
    (void)params; /* captioning needs both towers */
    vit_gpt2_parts *parts = calloc(1, sizeof *parts);
    if (!parts) return ERROR_OOM();
    model->parts = parts;
    glimpse_status status;
    const char *encoder_type, *decoder_type;
    if ((status = config_string_or(encoder_json, "config.json: encoder", "model_type", "vit", &encoder_type)) ||
        (status = config_string_or(decoder_json, "config.json: decoder", "model_type", "gpt2", &decoder_type)))
        return status;
    const cJSON *qkv_bias = cJSON_GetObjectItemCaseSensitive(encoder_json, "qkv_bias");
    if (strcmp(encoder_type, "vit") != 0 || strcmp(decoder_type, "gpt2") != 0 || cJSON_IsFalse(qkv_bias))
        return error_set(GLIMPSE_STATUS_UNSUPPORTED, "%s/config.json: a VisionEncoderDecoderModel of %s and %s%s; "
                         "glimpse runs ViT (with qkv_bias) and GPT-2", model->folder, encoder_type, decoder_type,
                         cJSON_IsFalse(qkv_bias) ? " without qkv_bias" : "");
    vit_config vision;
    gpt2_config text;
    if ((status = vit_config_read(encoder_json, "config.json: encoder", VIT_VARIANT_VIT, &vision)) ||
        (status = vit_model_load(&parts->vision, &vision, &names_vit_gpt2.encoder, model->store)))
        return status;
    model->has_vision = true;
    model->preprocess = preprocess_default_vit(vision.image_size);
    if ((status = read_preprocessor(model, 1))) return status;
    if ((status = gpt2_config_read(decoder_json, "config.json: decoder", vision.hidden_size, &text)) ||
        (status = gpt2_model_load(&parts->gpt2, &text, &names_vit_gpt2.decoder, names_vit_gpt2.encoder_to_decoder,
                                  model->store)))
        return status;
    model->has_text = true;
    if ((status = read_generation_config(model))) return status;
    if (!model->generation && !(model->generation = cJSON_Duplicate(model->config, 1))) return ERROR_OOM();
    /* transformers' _get_decoder_start_token_id (the generation settings' start token, the decoder's, the
     * generation settings' bos, the decoder's); the end and pad tokens as generate takes them */
    const cJSON *start_sources[] = {model->generation, decoder_json, model->generation, decoder_json};
    const char *start_keys[] = {"decoder_start_token_id", "decoder_start_token_id", "bos_token_id", "bos_token_id"};
    int start = -1, end, pad;
    for (size_t i = 0; i < 4 && start < 0 && !status; i++)
        status = loader_token_id(start_sources + i, 1, start_keys[i], text.vocab_size, -1, &start);
    if (!status && start < 0)
        status = error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s/config.json: no decoder_start_token_id or bos_token_id",
                           model->folder);
    const cJSON *sources[] = {model->generation, model->config};
    if (!status) status = loader_token_id(sources, 2, "eos_token_id", text.vocab_size, -1, &end);
    if (!status) status = loader_token_id(sources, 2, "pad_token_id", text.vocab_size, end, &pad);
    if (status) return status;
    model->start_id = start, model->end_id = end, model->pad_id = pad;
    if ((status = gpt2_tokenizer_load(model->folder, &parts->byte_bpe))) return status;
    return check_vocabulary(model, "vocab.json", gpt2_tokenizer_vocab_size(parts->byte_bpe), text.vocab_size);
}

static void text_info(const glimpse_model *model, glimpse_model_info *out) {
    if (!model->has_text) return;
    const gpt2_config *t = &((const vit_gpt2_parts *)model->parts)->gpt2.config;
    loader_text_info(out, t->hidden_size, t->layers, t->heads, t->max_positions, t->vocab_size, t->act_name);
}

static void blocks(const glimpse_model *model, family_blocks *out) {
    const vit_gpt2_parts *parts = model->parts;
    out->vision = &parts->vision, out->gpt2 = &parts->gpt2, out->byte_bpe = parts->byte_bpe;
}

static glimpse_status run_blocks(glimpse_context *ctx, family_run_blocks *out) {
    vit_gpt2_run *run;
    const vit_gpt2_parts *parts = ctx->model->parts;
    glimpse_status status = vit_run_of(ctx, &parts->vision, true, sizeof *run, free_run, (void **)&run);
    if (status) return status;
    vit_run_blocks(&run->vision, out);
    out->gpt2 = &run->gpt2;
    return GLIMPSE_STATUS_OK;
}

static glimpse_status tower_twins(glimpse_model *model, kernel_twin_add add, void *set) {
    return vit_run_tower_twins(&((vit_gpt2_parts *)model->parts)->vision, add, set);
}

static glimpse_status quantize(glimpse_model *model, q8_set *set) {
    return gpt2_model_quantize(&((vit_gpt2_parts *)model->parts)->gpt2, set);
}

const model_family family_vit_gpt2 = {
    .architecture = "VisionEncoderDecoderModel",
    .model_type = "vision-encoder-decoder",
    .summary = "VisionEncoderDecoderModel (ViT + GPT-2)",
    .description = "ViT-GPT2: a ViT encoder and a GPT-2 decoder that cross-attends to it (caption)",
    .kind = GLIMPSE_MODEL_KIND_VIT_GPT2,
    .capabilities = FAMILY_CAN(GLIMPSE_CAPABILITY_CAPTION) | FAMILY_CAN(GLIMPSE_CAPABILITY_EXPLAIN),
    .vision_section = "encoder",
    .text_section = "decoder",
    .sections_required = true,
    .load = load_vit_gpt2,
    .blocks = blocks,
    .run_blocks = run_blocks,
    .tower_twins = tower_twins,
    .quantize = quantize,
    .free_parts = free_parts,
    .free_run = free_run,
    .text_info = text_info,
    .caption = &cross_caption_gpt2,
};
