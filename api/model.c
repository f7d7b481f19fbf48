/* model.c — loading a snapshot folder into a glimpse_model: finds the
 * folder, reads config.json to learn the architecture, and loads the parts
 * that architecture needs. */
#include "api/model.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cpu.h"
#include "weights/names.h"
#include "api/identity.h"
#include "core/error.h"
#include "core/file.h"
#include "core/log.h"
#include "weights/config.h"
#include "weights/snapshot.h"

glimpse_load_params glimpse_load_default_params(void) {
    return (glimpse_load_params){.load_vision = true, .load_text = true, .precision = GLIMPSE_PRECISION_FLOAT32};
}

/* The architecture named by config.json: "architectures"[0], or else
 * model_type. */
static glimpse_status detect_kind(const cJSON *config, const char *folder, glimpse_model *model) {
    const cJSON *architectures = cJSON_GetObjectItemCaseSensitive(config, "architectures");
    const cJSON *first = cJSON_IsArray(architectures) ? cJSON_GetArrayItem(architectures, 0) : NULL;
    const cJSON *model_type = cJSON_GetObjectItemCaseSensitive(config, "model_type");
    const char *name = cJSON_IsString(first) ? first->valuestring : NULL;
    const char *type = cJSON_IsString(model_type) ? model_type->valuestring : "";
    if ((name && strcmp(name, "CLIPModel") == 0) || (!name && strcmp(type, "clip") == 0)) {
        model->kind = GLIMPSE_MODEL_KIND_CLIP;
        snprintf(model->architecture, sizeof model->architecture, "CLIPModel");
        return GLIMPSE_STATUS_OK;
    }
    if ((name && strcmp(name, "BlipForConditionalGeneration") == 0) || (!name && strcmp(type, "blip") == 0)) {
        /* Without "architectures", BLIP's two heads are told apart by their tensors (done at load). */
        model->kind = GLIMPSE_MODEL_KIND_BLIP_CAPTION;
        snprintf(model->architecture, sizeof model->architecture, "BlipForConditionalGeneration");
        return GLIMPSE_STATUS_OK;
    }
    if (name && strcmp(name, "BlipForImageTextRetrieval") == 0) {
        model->kind = GLIMPSE_MODEL_KIND_BLIP_RETRIEVAL;
        snprintf(model->architecture, sizeof model->architecture, "BlipForImageTextRetrieval");
        return GLIMPSE_STATUS_OK;
    }
    if ((name && strcmp(name, "Blip2ForConditionalGeneration") == 0) || (!name && strcmp(type, "blip-2") == 0)) {
        model->kind = GLIMPSE_MODEL_KIND_BLIP2;
        snprintf(model->architecture, sizeof model->architecture, "Blip2ForConditionalGeneration");
        return GLIMPSE_STATUS_OK;
    }
    if ((name && strcmp(name, "SiglipModel") == 0) || (!name && strcmp(type, "siglip") == 0)) {
        model->kind = GLIMPSE_MODEL_KIND_SIGLIP;
        snprintf(model->architecture, sizeof model->architecture, "SiglipModel");
        return GLIMPSE_STATUS_OK;
    }
    if ((name && strcmp(name, "VisionEncoderDecoderModel") == 0) ||
        (!name && strcmp(type, "vision-encoder-decoder") == 0)) { /* which encoder and decoder: load_vit_gpt2 */
        model->kind = GLIMPSE_MODEL_KIND_VIT_GPT2;
        snprintf(model->architecture, sizeof model->architecture, "VisionEncoderDecoderModel");
        return GLIMPSE_STATUS_OK;
    }
    return error_set(GLIMPSE_STATUS_UNSUPPORTED,
                     "%s/config.json: architecture \"%s\" (model_type \"%s\") is not one glimpse runs; "
                     "supported: CLIPModel, BlipForConditionalGeneration, BlipForImageTextRetrieval, SiglipModel, "
                     "VisionEncoderDecoderModel (ViT + GPT-2), Blip2ForConditionalGeneration",
                     folder, name ? name : "?", type);
}

/* The preprocessor settings of the snapshot over the defaults, if the file is there. */
glimpse_status read_preprocessor(glimpse_model *model, int square_default) {
    char *path = file_join(model->folder, "preprocessor_config.json");
    if (!path) return ERROR_OOM();
    bool present = file_is_regular(path);
    free(path);
    if (!present) {
        /* said loudly: the family's defaults may not be the checkpoint's, and give other scores silently */
        const preprocess_config *p = &model->preprocess;
        model->preprocessor_defaults = true;
        log_message(GLIMPSE_LOG_LEVEL_WARNING,
                    "%s has no preprocessor_config.json: images are preprocessed with %s's defaults (resize %d, "
                    "crop %dx%d, mean %.4g %.4g %.4g, std %.4g %.4g %.4g), which may not be the checkpoint's",
                    model->folder, model->architecture, p->shortest_edge > 0 ? p->shortest_edge : p->resize_height,
                    p->crop_height, p->crop_width, p->mean[0], p->mean[1], p->mean[2], p->std[0], p->std[1],
                    p->std[2]);
        return GLIMPSE_STATUS_OK;
    }
    cJSON *preprocessor = NULL;
    glimpse_status status = config_read_json(model->folder, "preprocessor_config.json", &preprocessor);
    if (!status)
        status = preprocess_config_read(preprocessor, "preprocessor_config.json", square_default, &model->preprocess);
    cJSON_Delete(preprocessor);
    return status;
}

glimpse_status read_generation_config(glimpse_model *model) {
    char *generation = file_join(model->folder, "generation_config.json");
    if (!generation) return ERROR_OOM();
    bool has_generation = file_is_regular(generation);
    free(generation);
    return has_generation ? config_read_json(model->folder, "generation_config.json", &model->generation)
                          : GLIMPSE_STATUS_OK;
}

/* config.json's vision_config and text_config: objects, or (unless required) absent, NULL: all defaults. */
static glimpse_status config_sections(const glimpse_model *model, bool required, const cJSON **vision,
                                      const cJSON **text) {
    bool encoder_decoder = model->kind == GLIMPSE_MODEL_KIND_VIT_GPT2; /* VisionEncoderDecoderConfig's sections */
    *vision = cJSON_GetObjectItemCaseSensitive(model->config, encoder_decoder ? "encoder" : "vision_config");
    *text = cJSON_GetObjectItemCaseSensitive(model->config, encoder_decoder ? "decoder" : "text_config");
    bool vision_read = cJSON_IsObject(*vision) || (!required && !*vision);
    bool text_read = cJSON_IsObject(*text) || (!required && !*text);
    if (!vision_read || !text_read)
        return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s/config.json: %s needs %s objects", model->folder,
                         model->architecture,
                         encoder_decoder ? "encoder and decoder" : "vision_config and text_config");
    return GLIMPSE_STATUS_OK;
}

/* A tokenizer whose ids (tokens of them, read from `file`) the model's embedding table holds. */
glimpse_status check_vocabulary(const glimpse_model *model, const char *file, size_t tokens, int vocab_size) {
    if (tokens > (size_t)vocab_size)
        return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: %s has %zu tokens but the model only %d", model->folder, file,
                         tokens, vocab_size);
    return GLIMPSE_STATUS_OK;
}

/* Each loader reads the config sections config_sections found. */
static glimpse_status load_clip(glimpse_model *model, const glimpse_load_params *params, const cJSON *vision_json,
                                const cJSON *text_json) {
    const char *folder = model->folder;
    glimpse_status status;
    int projection_dim;
    if ((status = config_int_or(model->config, "config.json", "projection_dim", 1, 1 << 16, 512, &projection_dim)))
        return status;
    const float *logit_scale;
    size_t scalar_shape[1] = {0};
    if ((status = weight_store_get(model->store, &logit_scale, 0, scalar_shape, names_clip.logit_scale))) return status;
    model->logit_scale = expf(*logit_scale);
    if (params->load_vision) {
        vit_config config;
        if ((status = vit_config_read(vision_json, "config.json: vision_config", VIT_VARIANT_CLIP, &config)))
            return status;
        config.projection_dim = projection_dim;
        if ((status = vit_model_load(&model->vision, &config, &names_clip.vision, model->store))) return status;
        model->has_vision = true;
        model->preprocess = preprocess_default_clip(config.image_size);
        if ((status = read_preprocessor(model, 0))) return status;
    }
    if (params->load_text) {
        clip_text_config config;
        if ((status = clip_text_config_read(text_json, "config.json: text_config", CLIP_TEXT_VARIANT_CLIP,
                                            projection_dim, &config)))
            return status;
        if ((status = clip_text_model_load(&model->text, &config, &names_clip.text, model->store))) return status;
        model->has_text = true;
        if ((status = clip_tokenizer_load(folder, &model->tokenizer))) return status;
        return check_vocabulary(model, "vocab.json", clip_tokenizer_vocab_size(model->tokenizer), config.vocab_size);
    }
    return GLIMPSE_STATUS_OK;
}

/* SiglipModel: CLIP's towers in their SigLIP variants, the SentencePiece
 * tokenizer, logit_scale and logit_bias. A config section left out takes
 * every default, as SiglipConfig does. */
static glimpse_status load_siglip(glimpse_model *model, const glimpse_load_params *params, const cJSON *vision_json,
                                  const cJSON *text_json) {
    const char *folder = model->folder;
    glimpse_status status;
    const float *logit_scale, *logit_bias;
    size_t scalar_shape[1] = {1};
    if ((status = weight_store_get(model->store, &logit_scale, 1, scalar_shape, names_siglip.logit_scale)) ||
        (status = weight_store_get(model->store, &logit_bias, 1, scalar_shape, names_siglip.logit_bias)))
        return status;
    model->logit_scale = expf(*logit_scale), model->logit_bias = *logit_bias;
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
        if ((status = vit_model_load(&model->vision, &vision, &names_siglip.vision, model->store))) return status;
        model->has_vision = true;
        model->preprocess = preprocess_default_siglip(vision.image_size);
        if ((status = read_preprocessor(model, 1))) return status;
        model->preprocess.do_center_crop = 0; /* SiglipImageProcessor never crops, whatever the file says */
    }
    if (params->load_text) {
        if ((status = clip_text_model_load(&model->text, &text, &names_siglip.text, model->store))) return status;
        model->has_text = true;
        if ((status = siglip_tokenizer_load(folder, &model->sentencepiece)) ||
            (status = check_vocabulary(model, "spiece.model", siglip_tokenizer_vocab_size(model->sentencepiece),
                                       text.vocab_size)))
            return status;
        if (siglip_tokenizer_length(model->sentencepiece) > (size_t)text.max_positions)
            return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: the tokenizer pads to %zu tokens but the model has %d "
                             "positions", folder, siglip_tokenizer_length(model->sentencepiece), text.max_positions);
    }
    return GLIMPSE_STATUS_OK;
}

static glimpse_status load_blip(glimpse_model *model, const glimpse_load_params *params, const cJSON *vision_json,
                                const cJSON *text_json) {
    const char *folder = model->folder;
    glimpse_status status;
    if (weight_store_find(model->store, names_blip.retrieval_only)) {
        model->kind = GLIMPSE_MODEL_KIND_BLIP_RETRIEVAL;
        snprintf(model->architecture, sizeof model->architecture, "BlipForImageTextRetrieval");
    }
    bool retrieval = model->kind == GLIMPSE_MODEL_KIND_BLIP_RETRIEVAL;
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

/* The first of the config objects (NULL where absent) that names token `key` (an id in [0, vocab)): *id, or
 * fallback when none does. */
static glimpse_status token_id(const cJSON *const *objects, size_t count, const char *key, int vocab, int fallback,
                               int *id) {
    *id = fallback;
    for (size_t i = 0; i < count; i++) {
        const cJSON *item = objects[i] ? cJSON_GetObjectItemCaseSensitive(objects[i], key) : NULL;
        if (item && !cJSON_IsNull(item)) return config_int(objects[i], "config.json", key, 0, vocab - 1, id);
    }
    return GLIMPSE_STATUS_OK;
}

/* VisionEncoderDecoderModel with a ViT encoder and a GPT-2 decoder
 * (nlpconnect/vit-gpt2-image-captioning): the encoder and decoder sections,
 * the GPT-2 tokenizer, ViTImageProcessor, and the generation settings of
 * generation_config.json, or of config.json's top level where the snapshot
 * has none (as transformers' GenerationConfig.from_model_config). */
static glimpse_status load_vit_gpt2(glimpse_model *model, const glimpse_load_params *params,
                                    const cJSON *encoder_json, const cJSON *decoder_json) {
    (void)params; /* captioning needs both */
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
        status = token_id(start_sources + i, 1, start_keys[i], text.vocab_size, -1, &start);
    if (!status && start < 0)
        status = error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s/config.json: no decoder_start_token_id or bos_token_id",
                           model->folder);
    const cJSON *sources[] = {model->generation, model->config};
    if (!status) status = token_id(sources, 2, "eos_token_id", text.vocab_size, -1, &end);
    if (!status) status = token_id(sources, 2, "pad_token_id", text.vocab_size, end, &pad);
    if (status) return status;
    model->start_id = start, model->end_id = end, model->pad_id = pad;
    if ((status = gpt2_tokenizer_load(model->folder, &model->byte_bpe))) return status;
    return check_vocabulary(model, "vocab.json", gpt2_tokenizer_vocab_size(model->byte_bpe), text.vocab_size);
}

static void release_stored(void *store, const void *data, size_t bytes) { weight_store_release_pages(store, data, bytes); }

/* int8 twins of every tower's projections (each tower that was loaded). The stored values of each weight
 * quantized leave the process's memory once its twin is made (BLIP-2 OPT-2.7B --int8: 11.3 GB resident at the
 * peak for a 7.6 GB mapped checkpoint when they stayed). */
static glimpse_status quantize(glimpse_model *model, glimpse_precision precision) {
    if (precision != GLIMPSE_PRECISION_INT8)
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "unknown precision %d", (int)precision);
    model->precision = precision;
    if (!cpu_has_avx512_vnni() && !cpu_has_avx2())
        log_message(GLIMPSE_LOG_LEVEL_WARNING, "this CPU has neither AVX-512 VNNI nor AVX2: int8 products run on "
                                               "plain loops, slower than float32");
    glimpse_status status = GLIMPSE_STATUS_OK;
    model->quantized.release = release_stored, model->quantized.release_user = model->store;
    if (model->vision.weights.layers) status = vit_model_add_twins(&model->vision, q8_set_add_twin, &model->quantized);
    if (!status && model->text.weights.layers)
        status = clip_text_model_add_twins(&model->text, q8_set_add_twin, &model->quantized);
    if (!status && model->text_decoder.layers) status = bert_model_quantize(&model->text_decoder, &model->quantized);
    if (!status && model->text_encoder.layers) status = bert_model_quantize(&model->text_encoder, &model->quantized);
    if (!status && model->qformer.bert.layers) status = blip2_qformer_quantize(&model->qformer, &model->quantized);
    if (!status && model->language_model.layers)
        status = opt_model_quantize(&model->language_model, &model->quantized);
    if (!status && model->gpt2.layers) status = gpt2_model_quantize(&model->gpt2, &model->quantized);
    return status;
}

/* float32 on AMX's bfloat16 tiles, when GLIMPSE_FLOAT32_TILES=always and the CPU has AMX-BF16: the towers'
 * float32 weights split into bfloat16 parts at load (bf16x3.h), so their products run on the tiles as exactly
 * as float32. The stored values leave the process's memory as an int8 load's do (the parts take 1.5 times
 * their bytes); the decoders' weights, read a few rows at a time, stay as they are. Measured on 2 cores of a
 * Xeon with AMX: ViT-B/32 at 8 pictures a batch 1.39x faster, at one 0.9x (a product of 50 rows is bound by
 * reading its weights, and the parts are more bytes); BLIP at 384 px 1.2x. It costs the split at load (on
 * every core, in a pool made for it) and fresh memory for the parts, which the kernel must zero: 0.15-1 s
 * for ViT-B/32 on that machine, so it is for processes that embed many pictures (glimpse serve and index
 * turn it on unless the variable says otherwise). */
static glimpse_status split_towers(glimpse_model *model) {
    const char *choice = getenv("GLIMPSE_FLOAT32_TILES");
    if (!bf16x3_available() || !choice || strcmp(choice, "always") != 0) return GLIMPSE_STATUS_OK;
    if (!model->vision.weights.layers && !model->text.weights.layers) return GLIMPSE_STATUS_OK;
    if (pool_create(0, &model->split.threads)) model->split.threads = NULL; /* (then on this thread) */
    model->split.release = release_stored, model->split.release_user = model->store;
    glimpse_status status = GLIMPSE_STATUS_OK;
    if (model->vision.weights.layers) status = vit_model_add_twins(&model->vision, bf16x3_set_add, &model->split);
    if (!status && model->text.weights.layers)
        status = clip_text_model_add_twins(&model->text, bf16x3_set_add, &model->split);
    pool_free(model->split.threads);
    model->split.threads = NULL;
    if (status) { /* (the extra memory, say): the model runs as it would without the tiles */
        log_message(GLIMPSE_LOG_LEVEL_WARNING, "float32 towers stay on the FMA kernels: %s", glimpse_last_error());
        if (model->vision.weights.layers) vit_model_add_twins(&model->vision, bf16x3_twin_clear, NULL);
        if (model->text.weights.layers) clip_text_model_add_twins(&model->text, bf16x3_twin_clear, NULL);
        bf16x3_set_free(&model->split);
    }
    return GLIMPSE_STATUS_OK;
}

glimpse_status glimpse_model_load(const char *path_or_hub_id, const glimpse_load_params *params,
                                  glimpse_model **out) {
    if (!out) return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_model_load: out is NULL");
    *out = NULL;
    glimpse_load_params defaults = glimpse_load_default_params();
    if (!params) params = &defaults;
    glimpse_model *model = calloc(1, sizeof *model);
    if (!model) return ERROR_OOM();
    glimpse_status status = snapshot_resolve(path_or_hub_id, &model->folder);
    if (!status) status = config_read_json(model->folder, "config.json", &model->config);
    if (!status) status = detect_kind(model->config, model->folder, model);
    if (!status) status = weight_store_open(model->folder, &model->store);
    const cJSON *vision_json = NULL, *text_json = NULL; /* SigLIP's may be absent: all defaults */
    if (!status) status = config_sections(model, model->kind != GLIMPSE_MODEL_KIND_SIGLIP, &vision_json, &text_json);
    if (!status) {
        if (model->kind == GLIMPSE_MODEL_KIND_CLIP)
            status = load_clip(model, params, vision_json, text_json);
        else if (model->kind == GLIMPSE_MODEL_KIND_SIGLIP)
            status = load_siglip(model, params, vision_json, text_json);
        else if (model->kind == GLIMPSE_MODEL_KIND_BLIP2)
            status = load_blip2(model, vision_json, text_json);
        else if (model->kind == GLIMPSE_MODEL_KIND_VIT_GPT2)
            status = load_vit_gpt2(model, params, vision_json, text_json);
        else
            status = load_blip(model, params, vision_json, text_json);
    }
    if (!status && params->precision != GLIMPSE_PRECISION_FLOAT32) status = quantize(model, params->precision);
    if (!status && params->precision == GLIMPSE_PRECISION_FLOAT32) status = split_towers(model);
    if (status) {
        glimpse_model_free(model);
        return status;
    }
    log_message(GLIMPSE_LOG_LEVEL_INFO, "loaded %s from %s: %zu parameters, %s weights (%.1f MB mapped, %.1f MB copied "
                "to float32)%s", model->architecture, model->folder, weight_store_parameters(model->store),
                weight_store_dtype(model->store), weight_store_bytes(model->store) / 1e6,
                weight_store_copied_bytes(model->store) / 1e6,
                model->precision == GLIMPSE_PRECISION_INT8 ? "; projections quantized to int8"
                : model->split.count                       ? "; float32 towers split for AMX's bfloat16 tiles"
                                                           : "");
    *out = model;
    return GLIMPSE_STATUS_OK;
}

void glimpse_model_free(glimpse_model *model) {
    if (!model) return;
    vit_model_free(&model->vision);
    clip_text_model_free(&model->text);
    clip_tokenizer_free(model->tokenizer);
    siglip_tokenizer_free(model->sentencepiece);
    bert_model_free(&model->text_decoder);
    bert_model_free(&model->text_encoder);
    bert_tokenizer_free(model->wordpiece);
    blip2_qformer_free(&model->qformer);
    opt_model_free(&model->language_model);
    gpt2_model_free(&model->gpt2);
    gpt2_tokenizer_free(model->byte_bpe);
    q8_set_free(&model->quantized);
    bf16x3_set_free(&model->split);
    weight_store_free(model->store);
    cJSON_Delete(model->config);
    cJSON_Delete(model->generation);
    free(model->folder);
    free(model);
}

glimpse_model_kind glimpse_model_get_kind(const glimpse_model *model) { return model->kind; }

bool glimpse_model_kind_can(glimpse_model_kind kind, glimpse_capability capability) {
    bool embeds = kind == GLIMPSE_MODEL_KIND_CLIP || kind == GLIMPSE_MODEL_KIND_SIGLIP;
    bool captions = kind == GLIMPSE_MODEL_KIND_BLIP_CAPTION || kind == GLIMPSE_MODEL_KIND_VIT_GPT2 ||
                    kind == GLIMPSE_MODEL_KIND_BLIP2;
    switch (capability) {
    case GLIMPSE_CAPABILITY_EMBED: return embeds;
    case GLIMPSE_CAPABILITY_RANK: return embeds || kind == GLIMPSE_MODEL_KIND_BLIP_RETRIEVAL;
    case GLIMPSE_CAPABILITY_CAPTION: return captions;
    case GLIMPSE_CAPABILITY_ASK: return kind == GLIMPSE_MODEL_KIND_BLIP2;
    case GLIMPSE_CAPABILITY_EXPLAIN: return embeds || captions || kind == GLIMPSE_MODEL_KIND_BLIP_RETRIEVAL;
    }
    return false;
}

bool model_embeds(const glimpse_model *model) {
    return model->kind == GLIMPSE_MODEL_KIND_CLIP || model->kind == GLIMPSE_MODEL_KIND_SIGLIP;
}

size_t glimpse_model_embedding_dim(const glimpse_model *model) {
    if (!model || !model_embeds(model)) return 0;
    if (model->has_vision) return (size_t)model->vision.config.projection_dim;
    if (model->has_text) return (size_t)model->text.config.projection_dim;
    return 0;
}

/* The text side of glimpse_model_info, whichever text tower the model has. */
static void set_text_info(glimpse_model_info *out, int hidden_size, int layers, int heads, int max_tokens,
                          int vocab_size, const char *activation) {
    out->text_hidden_size = hidden_size;
    out->text_layers = layers;
    out->text_heads = heads;
    out->text_max_tokens = max_tokens;
    out->vocab_size = vocab_size;
    out->text_activation = activation;
}

glimpse_status glimpse_model_get_info(const glimpse_model *model, glimpse_model_info *out) {
    if (!model || !out) return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_model_get_info: NULL argument");
    memset(out, 0, sizeof *out);
    out->kind = model->kind;
    out->architecture = model->architecture;
    out->path = model->folder;
    if (model->has_vision) {
        const vit_config *v = &model->vision.config;
        out->image_size = v->image_size;
        out->patch_size = v->patch_size;
        out->vision_hidden_size = v->hidden_size;
        out->vision_layers = v->layers;
        out->vision_heads = v->heads;
        out->vision_activation = v->act_name;
    }
    if (model->kind == GLIMPSE_MODEL_KIND_BLIP2) {
        const opt_config *t = &model->language_model.config;
        set_text_info(out, t->hidden_size, t->layers, t->heads, t->max_positions, t->vocab_size, t->act_name);
    } else if (model->has_text && model->kind == GLIMPSE_MODEL_KIND_VIT_GPT2) {
        const gpt2_config *t = &model->gpt2.config;
        set_text_info(out, t->hidden_size, t->layers, t->heads, t->max_positions, t->vocab_size, t->act_name);
    } else if (model->has_text && !model_embeds(model)) {
        const bert_config *t = model->kind == GLIMPSE_MODEL_KIND_BLIP_RETRIEVAL ? &model->text_encoder.config
                                                                                : &model->text_decoder.config;
        set_text_info(out, t->hidden_size, t->layers, t->heads, t->max_positions, t->vocab_size, t->act_name);
    } else if (model->has_text) {
        const clip_text_config *t = &model->text.config;
        set_text_info(out, t->hidden_size, t->layers, t->heads, t->max_positions, t->vocab_size, t->act_name);
    }
    out->embedding_dim = (int)glimpse_model_embedding_dim(model);
    out->parameter_count = weight_store_parameters(model->store);
    out->weight_bytes = weight_store_bytes(model->store);
    out->weight_dtype = weight_store_dtype(model->store);
    out->copied_bytes = weight_store_copied_bytes(model->store);
    out->logit_scale = model->logit_scale;
    out->logit_bias = model->logit_bias;
    out->precision = model->precision;
    out->preprocessor_defaults = model->preprocessor_defaults;
    return GLIMPSE_STATUS_OK;
}

/* 64-bit FNV-1a, enough to tell models apart (not a security measure). */
static uint64_t hash_bytes(uint64_t hash, const uint8_t *bytes, size_t size) {
    for (size_t i = 0; i < size; i++) hash = (hash ^ bytes[i]) * 0x100000001b3ull;
    return hash;
}

glimpse_status glimpse_model_identity(const glimpse_model *model, char *out, size_t capacity) {
    if (!model || !out) return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_model_identity: NULL argument");
    return model_identity(model, out, capacity);
}

glimpse_status model_identity(const glimpse_model *model, char *out, size_t capacity) {
    uint64_t hash = 0xcbf29ce484222325ull;
    char *text = cJSON_PrintUnformatted(model->config);
    if (!text) return ERROR_OOM();
    hash = hash_bytes(hash, (const uint8_t *)text, strlen(text));
    free(text);
    const char *names[] = {"visual_projection.weight", "text_projection.weight", "logit_scale", "vision_proj.weight",
                           "text_proj.weight", "logit_bias", "text_model.head.weight"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const tensor_entry *entry = weight_store_find(model->store, names[i]);
        if (entry) hash = hash_bytes(hash, entry->data, entry->bytes);
    }
    int length = snprintf(out, capacity, "%s/%zu/%016llx", model->architecture, glimpse_model_embedding_dim(model),
                          (unsigned long long)hash);
    if (length < 0 || (size_t)length >= capacity)
        return error_set(GLIMPSE_STATUS_INTERNAL, "a model identity takes %d bytes, more than %zu", length, capacity);
    return GLIMPSE_STATUS_OK;
}
