/* gpt2.h — GPT-2 as the decoder of a VisionEncoderDecoderModel (ViT-GPT2):
 * token and learned position embeddings, then per block pre-LN causal
 * self-attention, pre-LN cross-attention to the image tokens and a pre-LN
 * feed-forward block (gelu_new), each added to the residual stream; the final
 * LayerNorm and the head (tied to the token embeddings). Runs cached, step by
 * step, for caption_generate. Config, weights and run state apart. */
#ifndef GLIMPSE_FUSION_GPT2_H
#define GLIMPSE_FUSION_GPT2_H

#include <cjson/cJSON.h>
#include <stdint.h>

#include "core/quantize.h"
#include "core/encoder_layer.h"
#include "fusion/generate.h"
#include "weights/names.h"
#include "weights/store.h"

typedef struct gpt2_config {
    int hidden_size, layers, heads, intermediate_size; /* n_embd, n_layer, n_head, n_inner (null: 4·n_embd) */
    int vocab_size, max_positions;                     /* vocab_size, n_positions */
    int encoder_hidden_size; /* the image tokens' width; != hidden_size: enc_to_dec_proj maps them */
    float layer_norm_eps;    /* layer_norm_epsilon */
    activation act;          /* activation_function */
    const char *act_name;
    int scale_attention;           /* scale_attn_weights: scores / √head_dim */
    int scale_by_inverse_layer;    /* scale_attn_by_inverse_layer_idx: and / (layer + 1) */
    int tie_word_embeddings;       /* the head is the token table */
} gpt2_config;

/* One block; projections as Linear layers [out, in] (the Conv1D weights turned at load). */
typedef struct gpt2_layer {
    const float *norm1_weight, *norm1_bias, *cross_norm_weight, *cross_norm_bias; /* [h] */
    const float *norm2_weight, *norm2_bias;                                       /* [h] */
    kernel_weight qkv_weight;         /* [3h, h]: q | k | v */
    kernel_weight out_weight;         /* [h, h] */
    kernel_weight cross_query_weight; /* [h, h] */
    kernel_weight cross_kv_weight;    /* [2h, h]: k | v of the image tokens */
    kernel_weight cross_out_weight;   /* [h, h] */
    kernel_weight fc1_weight;         /* [inner, h] */
    kernel_weight fc2_weight;         /* [h, inner] */
    const float *qkv_bias, *out_bias, *cross_query_bias, *cross_kv_bias, *cross_out_bias, *fc1_bias, *fc2_bias;
} gpt2_layer;

typedef struct gpt2_model {
    gpt2_config config;
    kernel_weight token_embedding;   /* [vocab, h] (kept 16-bit where the checkpoint is: the head reads it too) */
    const float *position_embedding; /* [max_positions, h] */
    gpt2_layer *layers;
    const float *final_norm_weight, *final_norm_bias; /* [h] */
    kernel_weight head;                               /* [vocab, h]: token_embedding when tied */
    kernel_weight projection_weight; /* enc_to_dec_proj [h, encoder h], data NULL when the widths agree */
    const float *projection_bias;
} gpt2_model;

/* Reads the decoder section of config.json (GPT2Config's defaults where a
 * field is left out); encoder_hidden is the image tokens' width. Refuses a
 * config without add_cross_attention. */
glimpse_status gpt2_config_read(const cJSON *json, const char *where, int encoder_hidden, gpt2_config *config);

/* Loads the tensors `names` gives, and enc_to_dec_proj (named by
 * encoder_to_decoder) when the widths differ. Caller frees with
 * gpt2_model_free (the tensors stay owned by the store). */
glimpse_status gpt2_model_load(gpt2_model *model, const gpt2_config *config, const gpt2_names *names,
                               const char *encoder_to_decoder, weight_store *store);
void gpt2_model_free(gpt2_model *model);
/* Makes int8 twins of every projection and of the head (owned by set). */
glimpse_status gpt2_model_quantize(gpt2_model *model, q8_set *set);

/* Run state: a key/value cache for up to max_sequences sequences of up to
 * max_length tokens, every block's keys and values of the image, and scratch
 * for steps of up to max_sequences × max_step rows. */
typedef struct gpt2_state {
    size_t max_sequences, max_length, max_step, max_image_tokens;
    size_t length;       /* tokens already in the cache */
    size_t image_tokens; /* tokens of the current image */
    float *cache, *spare; /* [sequences][layers][max_length][2h]: each row a key then its value */
    float *image_kv;      /* [images][layers][max_image_tokens][2h] likewise, from gpt2_set_image(_slot) */
    size_t max_images;    /* image slots (1 but in gpt2_state_create_batched's) */
    size_t *slot_image_tokens; /* [max_images] */
    size_t max_rows;      /* rows of a step */
    caption_sequence *table; /* [max_sequences]: gpt2_decode_step's sequences */
    float *image;         /* [max_image_tokens, h]: the image tokens after enc_to_dec_proj, if the model has one */
    float *x, *normed, *context; /* [rows, h] */
    float *work;                 /* [rows, max(3h, inner)]: q | k | v, then the cross query, then the MLP */
    float *scores;               /* [heads, max_step, max(max_length, max_image_tokens)] */
    float *logits;               /* [max_sequences, vocab] */
    /* NULL as created; else gpt2_decode_step records the layers it asks for: sequence s of a step is its
     * sequence s (gpt2_reorder does not move recorded rows), rows at the tokens' positions, cross-attention
     * keys in image-token order. */
    const attention_record *record;
} gpt2_state;

glimpse_status gpt2_state_create(const gpt2_model *model, size_t max_sequences, size_t max_length, size_t max_step,
                                 size_t max_image_tokens, gpt2_state **out);
/* A state for batched captioning (caption_batch.h): `slots` cache slots of max_length positions, steps of up to
 * max_rows rows in all, `images` image slots. */
glimpse_status gpt2_state_create_batched(const gpt2_model *model, size_t slots, size_t max_length, size_t max_rows,
                                         size_t max_image_tokens, size_t images, gpt2_state **out);
void gpt2_state_free(gpt2_state *state);

/* Computes every block's cross-attention keys and values from the image
 * tokens [image_tokens, encoder_hidden] (the ViT's last hidden state); done
 * once per image. Empties the cache. */
glimpse_status gpt2_set_image(const gpt2_model *model, gpt2_state *state, const float *image_tokens,
                              size_t image_token_count, pool *threads);
/* The same into image slot `image` of a batched state, the caches left as they are. */
glimpse_status gpt2_set_image_slot(const gpt2_model *model, gpt2_state *state, size_t image, const float *image_tokens,
                                   size_t image_token_count, pool *threads);

/* `step` new tokens for each of `sequences` sequences (ids[s × step + j]) at
 * positions length .. length+step-1, causal, attending to the image; adds
 * them to the cache and writes each sequence's next-token logits to
 * state->logits [sequences, vocab]. */
glimpse_status gpt2_decode_step(const gpt2_model *model, gpt2_state *state, const int32_t *ids, size_t sequences,
                                size_t step, pool *threads);

/* Reorders the cached sequences: sequence s becomes old sequence from[s]. */
void gpt2_reorder(const gpt2_model *model, gpt2_state *state, const size_t *from, size_t sequences);

/* The decoder as caption_generate drives it: self points at a gpt2_decoder
 * the caller keeps alive while generating. */
typedef struct gpt2_decoder {
    const gpt2_model *model;
    gpt2_state *state;
} gpt2_decoder;
caption_decoder gpt2_caption_decoder(gpt2_decoder *self);
/* The decoder as caption_batch drives it (a state from gpt2_state_create_batched). */
caption_batch_decoder gpt2_caption_batch_decoder(gpt2_decoder *self);

#endif
