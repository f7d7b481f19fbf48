/* vit_gpt2.c — the ViT-GPT2 family (VisionEncoderDecoderModel of a ViT encoder and a GPT-2 decoder): its
 * config reading and loader (the encoder and decoder sections, the byte-level BPE tokenizer, the generation
 * settings and token ids) and its line of the family table. The layers are the shared vision/vit and
 * fusion/gpt2 blocks. */
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

/* VisionEncoderDecoderModel with a ViT encoder and a GPT-2 decoder
 * (nlpconnect/vit-gpt2-image-captioning): the encoder and decoder sections,
 * the GPT-2 tokenizer, ViTImageProcessor, and the generation settings of
 * generation_config.json, or of config.json's top level where the snapshot
 * has none (as transformers' GenerationConfig.from_model_config). */
static glimpse_status load_vit_gpt2(glimpse_model *model, const glimpse_load_params *params,
                                    const cJSON *encoder_json, const cJSON *decoder_json) {
    (void)params; /* captioning needs both towers */
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
        (status = vit_model_load(&model->vision, &vision, &names_vit_gpt2.encoder, model->store)))
        return status;
    model->has_vision = true;
    model->preprocess = preprocess_default_vit(vision.image_size);
    if ((status = read_preprocessor(model, 1))) return status;
    if ((status = gpt2_config_read(decoder_json, "config.json: decoder", vision.hidden_size, &text)) ||
        (status = gpt2_model_load(&model->gpt2, &text, &names_vit_gpt2.decoder, names_vit_gpt2.encoder_to_decoder,
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
    if ((status = gpt2_tokenizer_load(model->folder, &model->byte_bpe))) return status;
    return check_vocabulary(model, "vocab.json", gpt2_tokenizer_vocab_size(model->byte_bpe), text.vocab_size);
}

static void text_info(const glimpse_model *model, glimpse_model_info *out) {
    if (!model->has_text) return;
    const gpt2_config *t = &model->gpt2.config;
    loader_text_info(out, t->hidden_size, t->layers, t->heads, t->max_positions, t->vocab_size, t->act_name);
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
    .blocks = legacy_blocks,
    .run_blocks = legacy_run_blocks,
    .tower_twins = legacy_tower_twins,
    .quantize = legacy_quantize,
    .text_info = text_info,
    .caption = &cross_caption_gpt2,
};
