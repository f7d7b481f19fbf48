/* model.c — loading a snapshot folder into a glimpse_model: finds the folder, reads config.json, detects the
 * family through the family table (families/registry.c) and has the family load its parts; then the int8 or
 * AMX twins of the towers, the model's info and identity. Names no family: their code is in families/. */
#include "api/model.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cpu.h"
#include "api/identity.h"
#include "core/error.h"
#include "core/file.h"
#include "core/log.h"
#include "families/family.h"
#include "weights/config.h"
#include "weights/snapshot.h"

glimpse_load_params glimpse_load_default_params(void) {
    return (glimpse_load_params){.load_vision = true, .load_text = true, .precision = GLIMPSE_PRECISION_FLOAT32};
}

/* config.json's vision_config and text_config: objects, or (unless required) absent, NULL: all defaults. */
static glimpse_status config_sections(const glimpse_model *model, const cJSON **vision, const cJSON **text) {
    const model_family *family = model->family;
    bool required = family->sections_required;
    *vision = cJSON_GetObjectItemCaseSensitive(model->config, family->vision_section);
    *text = cJSON_GetObjectItemCaseSensitive(model->config, family->text_section);
    bool vision_read = cJSON_IsObject(*vision) || (!required && !*vision);
    bool text_read = cJSON_IsObject(*text) || (!required && !*text);
    if (!vision_read || !text_read)
        return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s/config.json: %s needs %s and %s objects", model->folder,
                         model->architecture, family->vision_section, family->text_section);
    return GLIMPSE_STATUS_OK;
}

static void release_stored(void *store, const void *data, size_t bytes) { weight_store_release_pages(store, data, bytes); }

/* int8 twins of every tower's projections (each tower that was loaded). The stored values of each weight
 * quantized leave the process's memory once its twin is made (BLIP-2 OPT-2.7B --int8: 11.3 GB resident at the
 * peak for a 7.6 GB mapped checkpoint when they stayed). */
static glimpse_status quantize(glimpse_model *model, glimpse_precision precision, pool *threads) {
    if (precision != GLIMPSE_PRECISION_INT8)
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "unknown precision %d", (int)precision);
    model->precision = precision;
    if (!cpu_has_avx512_vnni() && !cpu_has_avx2())
        log_message(GLIMPSE_LOG_LEVEL_WARNING, "this CPU has neither AVX-512 VNNI nor AVX2: int8 products run on "
                                               "plain loops, slower than float32");
    glimpse_status status = GLIMPSE_STATUS_OK;
    model->quantized.release = release_stored, model->quantized.release_user = model->store;
    model->quantized.threads = threads; /* (on every core: ViT-B/32's 88 M weights, see docs/models.md) */
    const model_family *family = model->family;
    /* the shared towers' separate q, k and v fused into one product each, and the ViT's patch embedding on the
     * pixels' bytes (the blocks are the model's own, read-only once loaded) */
    family_blocks blocks;
    family_blocks_of(model, &blocks);
    vit_model *vision = model->has_vision && blocks.vision && blocks.vision->weights.layers
                            ? (vit_model *)blocks.vision : NULL;
    clip_text_model *text = model->has_text && blocks.text && blocks.text->weights.layers
                                ? (clip_text_model *)blocks.text : NULL;
    if (vision) status = vit_model_fuse_q8(vision, &model->quantized);
    if (!status && text) status = clip_text_model_fuse_q8(text, &model->quantized);
    if (!status && family->tower_twins) status = family->tower_twins(model, q8_set_add_twin, &model->quantized);
    if (!status && family->quantize) status = family->quantize(model, &model->quantized);
    if (!status && vision) status = vit_model_quantize_pixels(vision, &model->preprocess, &model->quantized);
    model->quantized.threads = NULL;
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
static glimpse_status split_towers(glimpse_model *model, pool *threads) {
    const char *choice = getenv("GLIMPSE_FLOAT32_TILES");
    if (!bf16x3_available() || !choice || strcmp(choice, "always") != 0) return GLIMPSE_STATUS_OK;
    glimpse_status (*tower_twins)(glimpse_model *, kernel_twin_add, void *) = model->family->tower_twins;
    if (!tower_twins || (!model->has_vision && !model->has_text)) return GLIMPSE_STATUS_OK;
    model->split.threads = threads;
    model->split.release = release_stored, model->split.release_user = model->store;
    glimpse_status status = tower_twins(model, bf16x3_set_add, &model->split);
    model->split.threads = NULL;
    if (status) { /* (the extra memory, say): the model runs as it would without the tiles */
        log_message(GLIMPSE_LOG_LEVEL_WARNING, "float32 towers stay on the FMA kernels: %s", glimpse_last_error());
        tower_twins(model, bf16x3_twin_clear, NULL);
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
    const model_family *family = NULL;
    if (!status) status = family_detect(model->config, model->folder, &family);
    if (!status) family_assign(model, family);
    if (!status) status = weight_store_open(model->folder, &model->store);
    /* the load's own work (transposed copies, int8 twins, bf16x3 parts) on every core, in a pool made for it */
    pool *threads = NULL;
    if (!status && pool_create(0, &threads) == GLIMPSE_STATUS_OUT_OF_MEMORY) status = GLIMPSE_STATUS_OUT_OF_MEMORY;
    /* (its workers start only if the load shares work out; without a pool, the work runs on this thread) */
    if (!status) weight_store_set_threads(model->store, threads);
    const cJSON *vision_json = NULL, *text_json = NULL; /* where sections are optional, absent: all defaults */
    if (!status) status = config_sections(model, &vision_json, &text_json);
    if (!status) status = family->load(model, params, vision_json, text_json); /* may assign a sibling family */
    if (!status && params->precision != GLIMPSE_PRECISION_FLOAT32)
        status = quantize(model, params->precision, threads);
    if (!status && params->precision == GLIMPSE_PRECISION_FLOAT32) status = split_towers(model, threads);
    if (model->store) weight_store_set_threads(model->store, NULL);
    pool_free(threads);
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
    if (model->parts && model->family && model->family->free_parts) model->family->free_parts(model->parts);
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
    const model_family *family = family_of_kind(kind);
    return family && (unsigned)capability < 32 && (family->capabilities & FAMILY_CAN(capability));
}

bool model_embeds(const glimpse_model *model) {
    return (model->family->capabilities & FAMILY_CAN(GLIMPSE_CAPABILITY_EMBED)) != 0;
}

size_t glimpse_model_embedding_dim(const glimpse_model *model) {
    if (!model || !model_embeds(model)) return 0;
    family_blocks blocks;
    family_blocks_of(model, &blocks);
    if (model->has_vision && blocks.vision) return (size_t)blocks.vision->config.projection_dim;
    if (model->has_text && blocks.text) return (size_t)blocks.text->config.projection_dim;
    return 0;
}

glimpse_status glimpse_model_get_info(const glimpse_model *model, glimpse_model_info *out) {
    if (!model || !out) return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_model_get_info: NULL argument");
    memset(out, 0, sizeof *out);
    out->kind = model->kind;
    out->architecture = model->architecture;
    out->path = model->folder;
    family_blocks blocks;
    family_blocks_of(model, &blocks);
    if (model->family->vision_info) {
        model->family->vision_info(model, out);
    } else if (model->has_vision && blocks.vision) {
        const vit_config *v = &blocks.vision->config;
        out->image_size = v->image_size;
        out->patch_size = v->patch_size;
        out->vision_hidden_size = v->hidden_size;
        out->vision_layers = v->layers;
        out->vision_heads = v->heads;
        out->vision_activation = v->act_name;
    }
    if (model->family->text_info) model->family->text_info(model, out);
    out->embedding_dim = (int)glimpse_model_embedding_dim(model);
    out->parameter_count = weight_store_parameters(model->store);
    out->weight_bytes = weight_store_bytes(model->store);
    out->weight_dtype = weight_store_dtype(model->store);
    out->copied_bytes = weight_store_copied_bytes(model->store);
    out->logit_scale = blocks.logit_scale;
    out->logit_bias = blocks.logit_bias;
    out->precision = model->precision;
    out->preprocessor_defaults = model->preprocessor_defaults;
    out->sigmoid_scores = model->family->sigmoid_scores;
    out->description = model->family->description;
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
