/* llava_model.c — LLaVA's parts: config reading over LlavaConfig's defaults, loading in either layout of names,
 * the vision features (tower to the feature layer, selection, projector) and the merge of features into the
 * prompt's embeddings. */
#include "families/llava_model.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "weights/config.h"
#include "weights/layers.h"

/* vision_config: which ViT (model_type), its config, and how many of its layers the features need. */
static glimpse_status read_vision(const cJSON *json, llava_config *config) {
    const char *where = "config.json: vision_config", *type;
    const cJSON *vision = cJSON_GetObjectItemCaseSensitive(json, "vision_config");
    if (!cJSON_IsObject(vision)) return error_set(GLIMPSE_STATUS_BAD_FORMAT, "config.json: no vision_config object");
    glimpse_status status = config_string_or(vision, where, "model_type", "clip_vision_model", &type);
    if (status) return status;
    vit_variant variant;
    if (strcmp(type, "clip_vision_model") == 0) variant = VIT_VARIANT_CLIP;
    else if (strcmp(type, "siglip_vision_model") == 0) variant = VIT_VARIANT_SIGLIP;
    else return error_set(GLIMPSE_STATUS_UNSUPPORTED, "%s: model_type \"%s\" is not CLIP's or SigLIP's", where, type);
    if ((status = vit_config_read(vision, where, variant, &config->vision))) return status;
    const cJSON *layer = cJSON_GetObjectItemCaseSensitive(json, "vision_feature_layer");
    if (layer && !cJSON_IsNull(layer) && !cJSON_IsNumber(layer))
        return error_set(GLIMPSE_STATUS_UNSUPPORTED, "config.json: vision_feature_layer must be one layer");
    int layers = config->vision.layers;
    if ((status = config_int_or(json, "config.json", "vision_feature_layer", -layers - 1, layers, -2,
                                &config->feature_layer)))
        return status;
    config->vision_layers = layers;
    config->vision.layers = config->feature_layer < 0 ? layers + 1 + config->feature_layer : config->feature_layer;
    if (config->vision.layers < 1)
        return error_set(GLIMPSE_STATUS_UNSUPPORTED, "config.json: vision_feature_layer %d runs no encoder layer",
                         config->feature_layer);
    return GLIMPSE_STATUS_OK;
}

/* The select strategy and the rows it leaves, checked against image_seq_length when the config gives it. */
static glimpse_status read_selection(const cJSON *json, llava_config *config) {
    const char *strategy;
    glimpse_status status = config_string_or(json, "config.json", "vision_feature_select_strategy", "default",
                                             &strategy);
    if (status) return status;
    if (strcmp(strategy, "default") == 0) config->select = LLAVA_SELECT_DEFAULT;
    else if (strcmp(strategy, "full") == 0) config->select = LLAVA_SELECT_FULL;
    else return error_set(GLIMPSE_STATUS_UNSUPPORTED, "config.json: vision_feature_select_strategy \"%s\" is not "
                          "supported (default or full)", strategy);
    size_t side = (size_t)(config->vision.image_size / config->vision.patch_size);
    size_t tokens = side * side + (config->vision.variant == VIT_VARIANT_CLIP ? 1 : 0);
    if (config->select == LLAVA_SELECT_DEFAULT && tokens < 2)
        return error_set(GLIMPSE_STATUS_UNSUPPORTED, "config.json: \"default\" selection of a single row");
    config->image_rows = tokens - (config->select == LLAVA_SELECT_DEFAULT ? 1 : 0);
    int given;
    if ((status = config_int_or(json, "config.json", "image_seq_length", 1, 1 << 20, (int)config->image_rows,
                                &given)))
        return status;
    if ((size_t)given != config->image_rows)
        return error_set(GLIMPSE_STATUS_BAD_FORMAT, "config.json: image_seq_length %d, but the vision tower gives "
                         "%zu rows per image", given, config->image_rows);
    return GLIMPSE_STATUS_OK;
}

glimpse_status llava_config_read(const cJSON *json, llava_config *config) {
    *config = (llava_config){0};
    const char *act;
    glimpse_status status = read_vision(json, config);
    if (!status) status = read_selection(json, config);
    if (!status) status = config_string_or(json, "config.json", "projector_hidden_act", "gelu", &act);
    if (!status && strcmp(act, "gelu") != 0)
        status = error_set(GLIMPSE_STATUS_UNSUPPORTED, "config.json: projector_hidden_act \"%s\" is not supported "
                           "(gelu only)", act);
    if (status) return status;
    const cJSON *text = cJSON_GetObjectItemCaseSensitive(json, "text_config");
    if (!cJSON_IsObject(text)) return error_set(GLIMPSE_STATUS_BAD_FORMAT, "config.json: no text_config object");
    if ((status = llama_config_read(text, "config.json: text_config", &config->text))) return status;
    return config_int_or(json, "config.json", "image_token_index", 0, config->text.vocab_size - 1, 32000,
                         &config->image_token_id);
}

/* The layout whose vision tower the store holds, or NULL. */
static const llava_names *find_layout(const llava_config *config, const weight_store *store) {
    for (size_t i = 0; i < sizeof names_llava / sizeof names_llava[0]; i++) {
        const llava_names *n = &names_llava[i];
        const vit_names *vision = config->vision.variant == VIT_VARIANT_CLIP ? &n->clip_vision : &n->siglip_vision;
        if (weight_store_find(store, vision->patch_weight)) return n;
    }
    return NULL;
}

glimpse_status llava_model_load(llava_model *model, const llava_config *config, weight_store *store) {
    memset(model, 0, sizeof *model);
    model->config = *config;
    const llava_names *n = find_layout(config, store);
    if (!n)
        return error_set(GLIMPSE_STATUS_NOT_FOUND, "no LLaVA vision tower in the weights (looked for %s)",
                         names_llava[0].clip_vision.patch_weight);
    size_t vision_hidden = (size_t)config->vision.hidden_size, text_hidden = (size_t)config->text.hidden_size;
    model->vision_names = n->vision;
    glimpse_status status = vit_model_load(
        &model->vision, &config->vision, config->vision.variant == VIT_VARIANT_CLIP ? &n->clip_vision : &n->siglip_vision,
        store);
    if (!status)
        status = layers_load_projection(store, n->projector_1, text_hidden, vision_hidden, &model->projector_1,
                                        &model->projector_1_bias);
    if (!status)
        status = layers_load_projection(store, n->projector_2, text_hidden, text_hidden, &model->projector_2,
                                        &model->projector_2_bias);
    if (!status) status = llama_model_load(&model->text, &config->text, n->text, n->language_model, n->head, store);
    if (status) llava_model_free(model);
    return status;
}

void llava_model_free(llava_model *model) {
    vit_model_free(&model->vision);
    llama_model_free(&model->text);
}

glimpse_status llava_model_quantize(llava_model *model, q8_set *set) {
    size_t vision = (size_t)model->config.vision.hidden_size, text = (size_t)model->config.text.hidden_size;
    glimpse_status status = vit_model_add_twins(&model->vision, q8_set_add_twin, set);
    if (!status) status = q8_set_add(set, &model->projector_1, text, vision);
    if (!status) status = q8_set_add(set, &model->projector_2, text, text);
    if (!status) status = llama_model_quantize(&model->text, set);
    return status;
}

glimpse_status llava_vision_state_create(const llava_model *model, size_t max_images, llava_vision_state **out) {
    *out = NULL;
    llava_vision_state *s = calloc(1, sizeof *s);
    if (!s) return ERROR_OOM();
    size_t rows = max_images * model->config.image_rows;
    s->max_images = max_images;
    s->selected = malloc(rows * (size_t)model->config.vision.hidden_size * sizeof(float));
    s->middle = malloc(rows * (size_t)model->config.text.hidden_size * sizeof(float));
    glimpse_status status = s->selected && s->middle ? vit_state_create(&model->vision, max_images, &s->tower)
                                                     : ERROR_OOM();
    if (status) {
        llava_vision_state_free(s);
        return status;
    }
    *out = s;
    return GLIMPSE_STATUS_OK;
}

void llava_vision_state_free(llava_vision_state *s) {
    if (!s) return;
    vit_state_free(s->tower);
    free(s->selected), free(s->middle);
    free(s);
}

glimpse_status llava_image_features(const llava_model *model, llava_vision_state *s, const float *pixel_values,
                                    size_t images, float *features, pool *threads) {
    const llava_config *c = &model->config;
    if (images > s->max_images)
        return error_set(GLIMPSE_STATUS_TOO_LARGE, "%zu images: this state holds %zu", images, s->max_images);
    size_t vision_hidden = (size_t)c->vision.hidden_size, text_hidden = (size_t)c->text.hidden_size;
    size_t rows = c->image_rows, tokens = model->vision.tokens, skip = tokens - rows;
    vit_forward(&model->vision, s->tower, pixel_values, images, ENCODER_OUTPUT_ALL_ROWS, threads);
    for (size_t b = 0; b < images; b++) /* "default" drops each image's first row */
        memcpy(s->selected + b * rows * vision_hidden, s->tower->hidden + (b * tokens + skip) * vision_hidden,
               rows * vision_hidden * sizeof(float));
    size_t all = images * rows;
    kernel_linear(s->middle, text_hidden, s->selected, vision_hidden, &model->projector_1, model->projector_1_bias,
                  all, vision_hidden, text_hidden, false, threads);
    kernel_gelu(s->middle, all * text_hidden);
    kernel_linear(features, text_hidden, s->middle, text_hidden, &model->projector_2, model->projector_2_bias, all,
                  text_hidden, text_hidden, false, threads);
    return GLIMPSE_STATUS_OK;
}

/* How a prompt's <image> ids stand for `images` images: 1 (one id each, expanded) or image_rows (overwritten). */
static glimpse_status ids_per_image(const llava_model *model, const int32_t *ids, size_t count, size_t images,
                                    size_t *each) {
    size_t found = 0, rows = model->config.image_rows;
    for (size_t i = 0; i < count; i++) found += ids[i] == model->config.image_token_id;
    if (found == images * rows) *each = rows; /* (images 0: no image ids, nothing to merge) */
    else if (found == images) *each = 1;
    else
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "the prompt holds %zu <image> tokens (id %d) for %zu "
                         "image%s: expected one per image, or %zu per image", found, model->config.image_token_id,
                         images, images == 1 ? "" : "s", rows);
    return GLIMPSE_STATUS_OK;
}

glimpse_status llava_merged_length(const llava_model *model, const int32_t *ids, size_t count, size_t images,
                                   size_t *length) {
    size_t each;
    glimpse_status status = ids_per_image(model, ids, count, images, &each);
    if (!status) *length = each == 1 ? count + images * (model->config.image_rows - 1) : count;
    return status;
}

glimpse_status llava_merge(const llava_model *model, const int32_t *ids, size_t count, const float *features,
                           size_t images, float *out, size_t *image_starts) {
    size_t each, h = (size_t)model->config.text.hidden_size, rows = model->config.image_rows;
    glimpse_status status = ids_per_image(model, ids, count, images, &each);
    size_t at = 0, feature_row = 0; /* next output row, next feature row */
    for (size_t i = 0; i < count && !status; i++) {
        if (ids[i] != model->config.image_token_id) {
            status = llama_embed(&model->text, ids + i, 1, out + at++ * h);
            continue;
        }
        if (image_starts && feature_row % rows == 0) image_starts[feature_row / rows] = at;
        size_t take = each == 1 ? rows : 1; /* a legacy id expands to the image's rows; an expanded id takes one */
        memcpy(out + at * h, features + feature_row * h, take * h * sizeof(float));
        at += take, feature_row += take;
    }
    return status;
}
