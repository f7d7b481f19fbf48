/* opt.h — OPT's decoder (OPTForCausalLM), the language model of BLIP-2:
 * token embeddings (optionally projected in), learned positions looked up
 * with OPT's offset of 2, pre-LN (or post-LN) layers with causal
 * self-attention and ReLU, the final LayerNorm, the projection out and the
 * head tied to the embeddings; a key/value cache for generation with beams.
 * Takes embeddings as floats, so a caller can put its own vectors (BLIP-2's
 * query tokens) before the text. Config, weights and run state apart. */
#ifndef GLIMPSE_FUSION_OPT_H
#define GLIMPSE_FUSION_OPT_H

#include <cjson/cJSON.h>
#include <stdint.h>

#include "core/attention_record.h"
#include "core/quantize.h"
#include "core/encoder_layer.h"
#include "fusion/generate.h"
#include "weights/names.h"
#include "weights/store.h"

typedef struct opt_config {
    int hidden_size, layers, heads, ffn_dim;
    int vocab_size, max_positions, word_embed_proj_dim;
    int layer_norm_before;   /* do_layer_norm_before: pre-LN (every OPT but 350m) */
    int final_layer_norm;    /* do_layer_norm_before and not _remove_final_layer_norm */
    int bos_id, eos_id, pad_id;
    activation act;
    const char *act_name;
} opt_config;

typedef struct opt_model {
    opt_config config;
    kernel_weight embed_tokens;      /* [vocab, word_embed_proj_dim] (16-bit where the checkpoint is) */
    const float *embed_positions;    /* [max_positions + 2, hidden] */
    kernel_weight project_in;        /* [hidden, word_embed_proj_dim], or data NULL when the widths agree */
    kernel_weight project_out;       /* [word_embed_proj_dim, hidden], or data NULL */
    encoder_layer *layers;           /* norm1 = self_attn_layer_norm, norm2 = final_layer_norm */
    const float *final_norm_weight, *final_norm_bias; /* [hidden], or NULL */
    kernel_weight lm_head;           /* [vocab, word_embed_proj_dim]: embed_tokens when tied */
} opt_model;

/* Reads text_config (OPTConfig of transformers 4.27: its defaults where a field is absent). */
glimpse_status opt_config_read(const cJSON *json, const char *where, opt_config *config);
/* Loads the tensors `names` gives. Caller frees with opt_model_free. */
glimpse_status opt_model_load(opt_model *model, const opt_config *config, const opt_names *names,
                              weight_store *store);
void opt_model_free(opt_model *model);
/* int8 twins of the layers' projections and of the head (owned by set). */
glimpse_status opt_model_quantize(opt_model *model, q8_set *set);

/* Run state: a key/value cache for max_sequences sequences of max_length
 * positions, scratch for steps of up to max_sequences × max_step rows. */
typedef struct opt_state {
    size_t max_sequences, max_length, max_step;
    size_t length;                     /* positions already in the cache */
    float *keys, *values;              /* [sequences][layers][max_length][hidden] */
    float *spare_keys, *spare_values;  /* the same, for reordering */
    float *x, *normed, *q, *k, *v, *context, *mlp; /* [rows, hidden] ... [rows, ffn_dim] */
    float *embedded;                   /* [rows, word_embed_proj_dim] */
    float *last;                       /* [max_sequences, word_embed_proj_dim] */
    float *scores;                     /* [heads, max_step, max_length] */
    float *logits;                     /* [max_sequences, vocab] */
    size_t max_rows;                   /* rows of a step */
    caption_sequence *table;           /* [max_sequences]: opt_forward's sequences */
    /* batched states (opt_state_create_batched): each image slot's first rows, the prefix and the prompt's
     * embeddings [max_images][max_first_rows][word_embed_proj_dim], and how many each has */
    float *first_rows;
    size_t *slot_first_rows;
    size_t max_images, max_first_rows;
    /* NULL as created; else opt_forward records the self-attention layers it asks for (sequence s of a step
     * as the cache holds it, rows at the tokens' positions). */
    const attention_record *record;
} opt_state;

glimpse_status opt_state_create(const opt_model *model, size_t max_sequences, size_t max_length, size_t max_step,
                                opt_state **out);
/* A state for batched captioning (caption_batch.h): `slots` cache slots of max_length positions, steps of up to
 * max_rows rows in all, `images` image slots of up to max_first_rows first rows (opt_set_first_rows). */
glimpse_status opt_state_create_batched(const opt_model *model, size_t slots, size_t max_length, size_t max_rows,
                                        size_t images, size_t max_first_rows, opt_state **out);
/* Image slot `image` of a batched state: its sequences start from prefix [prefix_rows, word_embed_proj_dim]
 * followed by the embeddings of prompt[0..prompt_length) (opt_decoder's first step). */
glimpse_status opt_set_first_rows(const opt_model *model, opt_state *state, size_t image, const float *prefix,
                                  size_t prefix_rows, const int32_t *prompt, size_t prompt_length);
void opt_state_free(opt_state *state);

/* embeddings[s × step + j] (rows of word_embed_proj_dim) of `step` new
 * positions for each of `sequences` sequences, appended at length ..; writes
 * each sequence's next-token logits (at its last row) to state->logits. */
glimpse_status opt_forward(const opt_model *model, opt_state *state, const float *embeddings, size_t sequences,
                           size_t step, pool *threads);
/* out[count, word_embed_proj_dim] = embed_tokens rows of ids (each checked against the vocabulary). */
glimpse_status opt_embed(const opt_model *model, const int32_t *ids, size_t count, float *out);
/* Sequence s becomes old sequence from[s]. */
void opt_reorder(const opt_model *model, opt_state *state, const size_t *from, size_t sequences);

/* OPT as caption_generate drives it, continuing from a prefix of vectors
 * and a prompt, as transformers' generate(inputs_embeds=...) does: the first
 * step's ids (generate's placeholder start token, one per sequence) are not
 * embedded; each sequence gets prefix [prefix_rows, word_embed_proj_dim]
 * followed by the embeddings of prompt[0..prompt_length) instead, at
 * positions 0 ..; later steps embed their ids. That first pass is the same
 * for every sequence (beams): it runs once and is copied (unless
 * state->record asks for each sequence's rows). self points at an opt_decoder
 * the caller keeps alive while generating. */
typedef struct opt_decoder {
    const opt_model *model;
    opt_state *state;
    const float *prefix;
    size_t prefix_rows;
    const int32_t *prompt;
    size_t prompt_length;
} opt_decoder;
caption_decoder opt_caption_decoder(opt_decoder *self);
/* OPT as caption_batch drives it: a sequence at length 0 takes its image slot's first rows (its ids unread),
 * later ones their ids; self->state from opt_state_create_batched (the other fields unused). */
caption_batch_decoder opt_caption_batch_decoder(opt_decoder *self);

#endif
