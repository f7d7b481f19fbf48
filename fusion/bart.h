/* bart.h — BART's encoder-decoder (BartForConditionalGeneration, the language model of Florence-2) as two of
 * fusion/bert.h's post-LayerNorm transformers: the encoder without cross-attention over embeddings a caller
 * gives (Florence-2's image rows, then the prompt's tokens), and the decoder with causal self-attention, a
 * key/value cache, cross-attention to the encoder's output and the head tied to the shared embeddings plus
 * final_logits_bias. Learned positions start at row 2 of each position table (BART's offset), embeddings are
 * not scaled (scale_embedding is refused), LayerNorms take eps 1e-5. Also the search settings a BART config
 * gives generate (its text config is where Florence-2's generate takes them from). */
#ifndef GLIMPSE_FUSION_BART_H
#define GLIMPSE_FUSION_BART_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/pool.h"
#include "fusion/bert.h"
#include "fusion/generate.h"
#include "weights/names.h"
#include "weights/store.h"

/* What BART's config says generate does (transformers' BartConfig and PretrainedConfig defaults where absent). */
typedef struct bart_generation {
    int start_id;               /* decoder_start_token_id: every output begins with it */
    int bos_id, eos_id, pad_id;
    int forced_bos_id, forced_eos_id; /* -1: none */
    int no_repeat_ngram;        /* 0: off */
    int beams, max_length, min_length;
    int early_stopping;
    float length_penalty;
} bart_generation;

typedef struct bart_config {
    bert_config encoder, decoder; /* hidden d_model, each side's layers, heads and feed-forward width */
    bart_generation generation;
} bart_config;

/* Reads a BartConfig section (Florence-2's text_config). */
glimpse_status bart_config_read(const cJSON *json, const char *where, bart_config *config);

typedef struct bart_model {
    bert_model encoder; /* no head; its word embeddings are the shared table */
    bert_model decoder; /* the head: lm_head (or the shared table) and final_logits_bias */
} bart_model;

glimpse_status bart_model_load(bart_model *model, const bart_config *config, const bart_names *names,
                               weight_store *store);
void bart_model_free(bart_model *model);

/* out[count, d_model] = the shared embedding rows of ids (unscaled), each id checked against the vocabulary. */
glimpse_status bart_embed_tokens(const bart_model *model, const int32_t *ids, size_t count, float *out);

/* An encoder state for inputs of up to max_length rows. */
glimpse_status bart_encoder_state_create(const bart_model *model, size_t max_length, bert_state **out);
/* The encoder over inputs [length, d_model] (inputs_embeds): + positions 0.., layernorm_embedding, the layers,
 * no mask. The last hidden state is left in state->x [length, d_model]. */
glimpse_status bart_encode(const bart_model *model, bert_state *state, const float *inputs, size_t length,
                           pool *threads);

/* The settings caption_generate takes for a search of at most max_length tokens (the start token counted), the
 * config's processors on: no-repeat n-grams, forced bos at length 1, forced eos at the last position, early
 * stopping, and transformers 4.40's scoring over generated tokens. */
caption_settings bart_caption_settings(const bart_generation *generation, size_t max_length, size_t min_length,
                                       int beams, float length_penalty);

#endif
