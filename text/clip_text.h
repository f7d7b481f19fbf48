/* clip_text.h — CLIP's text transformer, and SigLIP's (the same tower as a
 * variant): token and position embeddings, pre-LN encoder layers with a
 * causal mask (SigLIP: none, every position sees all 64), the final
 * LayerNorm, pooling at the end-of-text token (SigLIP: the last position)
 * and the text projection (SigLIP: its `head`, with a bias). Config, weights
 * and run state apart, as in vision/vit.h. Token ids come from
 * clip_tokenizer or siglip_tokenizer. */
#ifndef GLIMPSE_TEXT_CLIP_TEXT_H
#define GLIMPSE_TEXT_CLIP_TEXT_H

#include <cjson/cJSON.h>
#include <stdint.h>

#include "weights/names.h"
#include "weights/store.h"
#include "core/encoder_layer.h"

/* The eos_token_id the published CLIP configs give (not the real end token,
 * 49407): pooling then takes the largest id, the rule of the original code. */
#define CLIP_LEGACY_EOS_TOKEN_ID 2

typedef enum clip_text_variant {
    CLIP_TEXT_VARIANT_CLIP = 0,  /* causal mask, pooled at the end token, projection without bias */
    CLIP_TEXT_VARIANT_SIGLIP = 1 /* no mask, pooled at the last position, `head` with a bias */
} clip_text_variant;

typedef struct clip_text_config {
    clip_text_variant variant;
    int hidden_size, layers, heads, intermediate_size;
    int max_positions, vocab_size, projection_dim;
    int eos_token_id; /* from config.json; CLIP_LEGACY_EOS_TOKEN_ID means "pool at the largest id" (CLIP only) */
    float layer_norm_eps;
    activation act;
    const char *act_name;
} clip_text_config;

typedef struct clip_text_weights {
    kernel_weight token_embedding;   /* [vocab, hidden], kept in the checkpoint's type */
    const float *position_embedding; /* [max_positions, hidden] */
    encoder_layer *layers;           /* [layers] */
    const float *final_norm_weight, *final_norm_bias; /* [hidden] */
    const float *projection;                          /* [projection_dim, hidden] */
    const float *projection_bias;                     /* [projection_dim] (SigLIP) or NULL */
} clip_text_weights;

typedef struct clip_text_model {
    clip_text_config config;
    clip_text_weights weights;
} clip_text_model;

/* Reads text_config (object `json`, named `where` in errors) over the
 * variant's defaults (CLIPTextConfig's, SiglipTextConfig's). projection_dim:
 * CLIP's, from the top level of config.json; SigLIP ignores it (its head
 * maps to text_config's projection_size, by default hidden_size). */
glimpse_status clip_text_config_read(const cJSON *json, const char *where, clip_text_variant variant,
                                     int projection_dim, clip_text_config *config);
/* Fills the weights from the tensors `names` gives (names_clip.text, names_siglip.text). Caller
 * frees with clip_text_model_free (the tensors stay owned by the store). */
glimpse_status clip_text_model_load(clip_text_model *model, const clip_text_config *config,
                                    const clip_text_names *names, weight_store *store);
void clip_text_model_free(clip_text_model *model);
/* Makes twins of every layer's projections with add (encoder_layers_add_twins), owned by set. */
glimpse_status clip_text_model_add_twins(clip_text_model *model, kernel_twin_add add, void *set);
/* int8, before the twins: each layer's q, k and v as one fused twin (encoder_layers_fuse_q8). */
glimpse_status clip_text_model_fuse_q8(clip_text_model *model, q8_set *set);

typedef struct clip_text_state {
    size_t max_rows, max_sequences;
    float *hidden; /* [rows, hidden]: after the final LayerNorm */
    float *memory;
    size_t *pooled; /* [max_sequences]: each sequence's pooled position, for ENCODER_OUTPUT_POOLED_ROWS */
    encoder_scratch scratch;
} clip_text_state;

/* Room for up to max_sequences texts of max_positions tokens each. */
glimpse_status clip_text_state_create(const clip_text_model *model, size_t max_sequences, clip_text_state **out);
void clip_text_state_free(clip_text_state *state);

/* Runs `sequences` token sequences packed back to back (ids, with
 * lengths[s] each, every length in 1..max_positions). state->hidden then
 * holds the last hidden state of every token (ENCODER_OUTPUT_ALL_ROWS), or
 * only of each sequence's pooled token (ENCODER_OUTPUT_POOLED_ROWS, all
 * clip_text_embed needs; the other rows are left unfinished). */
glimpse_status clip_text_forward(const clip_text_model *model, clip_text_state *state, const int32_t *ids,
                                 const size_t *lengths, size_t sequences, encoder_output output, pool *threads);

/* The position pooled for a sequence (first end token, or the legacy argmax; SigLIP: the last). */
size_t clip_text_pool_index(const clip_text_model *model, const int32_t *ids, size_t length);

/* out[projection_dim]: the projected pooled row of the sequence whose rows
 * start at row `first` (after clip_text_forward): SigLIP's pooler_output. */
void clip_text_pooled(const clip_text_model *model, const clip_text_state *state, size_t first, const int32_t *ids,
                      size_t length, float *out);
/* out[projection_dim]: the same L2-normalised, the text embedding (text_embeds). */
void clip_text_embed(const clip_text_model *model, const clip_text_state *state, size_t first, const int32_t *ids,
                     size_t length, float *out);

#endif
