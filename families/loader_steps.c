/* loader_steps.c — the steps the families' loaders share (loader_steps.h): reading the snapshot's
 * preprocessor and generation settings, checking a tokenizer against the embedding table, reading token ids,
 * and filling the model info's text side. */
#include "families/loader_steps.h"

#include <stdbool.h>
#include <stdlib.h>

#include "api/model.h"
#include "core/error.h"
#include "core/file.h"
#include "core/log.h"
#include "weights/config.h"

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

glimpse_status check_vocabulary(const glimpse_model *model, const char *file, size_t tokens, int vocab_size) {
    if (tokens > (size_t)vocab_size)
        return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: %s has %zu tokens but the model only %d", model->folder, file,
                         tokens, vocab_size);
    return GLIMPSE_STATUS_OK;
}

glimpse_status loader_token_id(const cJSON *const *objects, size_t count, const char *key, int vocab, int fallback,
                               int *id) {
    *id = fallback;
    for (size_t i = 0; i < count; i++) {
        const cJSON *item = objects[i] ? cJSON_GetObjectItemCaseSensitive(objects[i], key) : NULL;
        if (item && !cJSON_IsNull(item)) return config_int(objects[i], "config.json", key, 0, vocab - 1, id);
    }
    return GLIMPSE_STATUS_OK;
}

void loader_text_info(glimpse_model_info *out, int hidden_size, int layers, int heads, int max_tokens,
                      int vocab_size, const char *activation) {
    out->text_hidden_size = hidden_size;
    out->text_layers = layers;
    out->text_heads = heads;
    out->text_max_tokens = max_tokens;
    out->vocab_size = vocab_size;
    out->text_activation = activation;
}

