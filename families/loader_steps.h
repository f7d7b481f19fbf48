/* loader_steps.h — the steps the families' loaders share: the snapshot's preprocessor and generation settings,
 * a tokenizer checked against the embedding table, a token id from the config, and the text side of the model
 * info. Not any family's own reading: that is in its file. */
#ifndef GLIMPSE_FAMILIES_LOADER_STEPS_H
#define GLIMPSE_FAMILIES_LOADER_STEPS_H

#include <cjson/cJSON.h>
#include <stddef.h>

#include "glimpse.h"

/* The snapshot's preprocessor_config.json over model->preprocess (square_default: a bare "size" number means
 * size x size); without the file, the family's defaults stay, said in a warning. */
glimpse_status read_preprocessor(glimpse_model *model, int square_default);
/* A tokenizer of `tokens` ids (read from `file`) checked against the model's embedding table of vocab_size. */
glimpse_status check_vocabulary(const glimpse_model *model, const char *file, size_t tokens, int vocab_size);
/* The snapshot's generation_config.json into model->generation, when it has one (else left NULL). */
glimpse_status read_generation_config(glimpse_model *model);
/* The first of the config objects (NULL where absent) that names token `key` (an id in [0, vocab)): *id, or
 * fallback when none does. */
glimpse_status loader_token_id(const cJSON *const *objects, size_t count, const char *key, int vocab, int fallback,
                               int *id);
/* The text side of glimpse_model_info, whichever text tower the model has. */
void loader_text_info(glimpse_model_info *out, int hidden_size, int layers, int heads, int max_tokens,
                      int vocab_size, const char *activation);
#endif
