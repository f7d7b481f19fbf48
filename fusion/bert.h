/* bert.h — the BERT-style text transformer of BLIP with cross-attention to
 * the image: word and position embeddings with LayerNorm, then per layer
 * self-attention, cross-attention (queries from the text, keys and values
 * from the image tokens) and the feed-forward block, each with a residual
 * and a post-LayerNorm; and the language-model head. Runs as BLIP's caption
 * decoder (causal, with a key/value cache) and as its ITM text encoder
 * (bidirectional). Config, weights and run state apart. */
#ifndef GLIMPSE_FUSION_BERT_H
#define GLIMPSE_FUSION_BERT_H

#include <cjson/cJSON.h>
#include <stdint.h>

#include "weights/names.h"
#include "weights/store.h"
#include "core/quantize.h"
#include "core/encoder_layer.h"
#include "fusion/generate.h"

typedef struct bert_config {
    int hidden_size, layers, heads, intermediate_size;
    int vocab_size, max_positions;
    int encoder_hidden_size; /* image token width; the vision hidden size when the config leaves it out */
    float layer_norm_eps;
    activation act;
    const char *act_name;
} bert_config;

typedef struct bert_layer {
    /* the projections (kernel_weight: stored type, int8 twin after bert_model_quantize) */
    kernel_weight query_weight, key_weight, value_weight, self_out_weight;  /* [h, h] */
    kernel_weight cross_query_weight, cross_out_weight;                      /* [h, h] */
    kernel_weight cross_key_weight, cross_value_weight;                      /* [h, encoder_h] */
    kernel_weight intermediate_weight;                                       /* [intermediate, h] */
    kernel_weight output_weight;                                             /* [h, intermediate] */
    const float *query_bias, *key_bias, *value_bias, *self_out_bias;         /* [h] */
    const float *cross_query_bias, *cross_key_bias, *cross_value_bias, *cross_out_bias;
    const float *intermediate_bias, *output_bias;
    const float *self_norm_weight, *self_norm_bias, *cross_norm_weight, *cross_norm_bias;
    const float *output_norm_weight, *output_norm_bias;
} bert_layer;

typedef struct bert_model {
    bert_config config;
    kernel_weight word_embeddings;    /* [vocab, h] (16-bit where the checkpoint is: the tied LM head reads it too) */
    const float *position_embeddings; /* [max_positions, h] */
    const float *embedding_norm_weight, *embedding_norm_bias;
    bert_layer *layers;
    /* language-model head (caption decoder only; NULL otherwise) */
    kernel_weight head_dense_weight; /* [h, h] */
    const float *head_dense_bias;
    const float *head_norm_weight, *head_norm_bias;
    kernel_weight head_decoder_weight; /* [vocab, h]: tied to word_embeddings when the checkpoint omits it */
    const float *head_decoder_bias;    /* [vocab] */
} bert_model;

/* Reads text_config. vision_hidden fills encoder_hidden_size when absent. */
glimpse_status bert_config_read(const cJSON *json, const char *where, int vision_hidden, bert_config *config);

/* Loads the tensors `names` gives: names_blip.text_decoder (with the LM
 * head) or names_blip.text_encoder (without: names->head NULL). Caller
 * frees with bert_model_free (the tensors stay owned by the store). */
glimpse_status bert_model_load(bert_model *model, const bert_config *config,
                               const bert_names *names, weight_store *store);
void bert_model_free(bert_model *model);
/* One layer named `layer` ("qformer.encoder.layer.3") by the names given: a
 * layer whose names have no cross-attention (cross_* NULL) has none, and the
 * passes below skip it there (BLIP-2's Q-Former, fusion/qformer.c). */
glimpse_status bert_layer_load(weight_store *store, const bert_layer_names *names, const char *layer,
                               const bert_config *config, bert_layer *out);
/* Makes int8 twins of every projection and of the LM head (owned by set). */
glimpse_status bert_model_quantize(bert_model *model, q8_set *set);

/* Run state: a key/value cache for up to max_sequences sequences of up to
 * max_length tokens, the image's cross-attention keys and values, and scratch
 * for steps of up to max_sequences × max_step rows. */
typedef struct bert_state {
    size_t max_sequences, max_length, max_step, max_image_tokens;
    size_t length;        /* tokens already in the self-attention cache */
    size_t image_tokens;  /* tokens of the current image (image slot 0) */
    float *self_keys, *self_values;     /* [sequences][layers][max_length][h] */
    float *spare_keys, *spare_values;   /* same, for reordering */
    /* [images][layers][max_image_tokens][h]; with keys_transposed the keys are
     * [images][layers][h][max_image_tokens] instead (kernel_attention_keys_transposed) */
    float *cross_keys, *cross_values;
    size_t max_images;     /* image slots (1 but in bert_state_create_batched's) */
    size_t *slot_image_tokens; /* [max_images]: tokens of each image slot's image */
    size_t max_rows;       /* rows of a step: max_sequences × max_step, or bert_state_create_batched's */
    caption_sequence *table; /* [max_sequences]: bert_decode_step's sequences */
    int keys_transposed;                /* where the AVX-512 kernels run */
    float *x, *normed, *q, *context, *mlp; /* [rows, h] ... [rows, intermediate] */
    float *scores;                      /* [heads, max_step, max(max_length, max_image_tokens)] */
    float *logits;                      /* [max_sequences, vocab] */
    /* NULL as created; else bert_decode_step and bert_encode record the layers it asks for: sequence s of a
     * step is its sequence s (as the cache holds them: bert_reorder does not move recorded rows), the rows
     * at the tokens' positions (a step's rows after the cached ones), cross keys in image-token order. */
    const attention_record *record;
} bert_state;

glimpse_status bert_state_create(const bert_model *model, size_t max_sequences, size_t max_length, size_t max_step,
                                 size_t max_image_tokens, bert_state **out);
/* A state for batched captioning (caption_batch.h): `slots` cache slots of max_length positions, steps of up to
 * max_rows rows in all, `images` image slots of up to max_image_tokens tokens. */
glimpse_status bert_state_create_batched(const bert_model *model, size_t slots, size_t max_length, size_t max_rows,
                                         size_t max_image_tokens, size_t images, bert_state **out);
void bert_state_free(bert_state *state);

/* Computes every layer's cross-attention keys and values from the image
 * tokens [image_tokens, encoder_hidden]; done once per image. Empties the
 * self-attention cache. */
glimpse_status bert_set_image(const bert_model *model, bert_state *state, const float *image_tokens,
                              size_t image_token_count, pool *threads);
/* The same into image slot `image` of a batched state, the caches left as they are. */
glimpse_status bert_set_image_slot(const bert_model *model, bert_state *state, size_t image, const float *image_tokens,
                                   size_t image_token_count, pool *threads);

/* Decoder step: `step` new tokens for each of `sequences` sequences
 * (ids[s × step + j]), appended at positions length .. length+step-1 with a
 * causal mask, attending to the image. Adds them to the cache and, with the
 * LM head, writes each sequence's next-token logits to state->logits. */
glimpse_status bert_decode_step(const bert_model *model, bert_state *state, const int32_t *ids, size_t sequences,
                                size_t step, pool *threads);

/* Reorders the cached sequences: sequence s becomes old sequence from[s]. */
void bert_reorder(const bert_model *model, bert_state *state, const size_t *from, size_t sequences);

/* The decoder as caption_generate drives it: self points at a bert_decoder
 * the caller keeps alive while generating. */
typedef struct bert_decoder {
    const bert_model *model;
    bert_state *state;
} bert_decoder;
caption_decoder bert_caption_decoder(bert_decoder *self);
/* The decoder as caption_batch drives it (a state from bert_state_create_batched; image slots set with
 * bert_set_image_slot). */
caption_batch_decoder bert_caption_batch_decoder(bert_decoder *self);

/* Encoder pass (ITM/ITC): one sequence of `length` ids, bidirectional,
 * with cross-attention to the image set by bert_set_image when
 * with_image, without it otherwise. Leaves the last hidden state of every
 * token in state->x [length, h]. */
glimpse_status bert_encode(const bert_model *model, bert_state *state, const int32_t *ids, size_t length,
                           int with_image, pool *threads);

/* Encoder pass over embeddings already made [length, h] (BLIP-2's query
 * tokens): the embedding LayerNorm, then the layers, bidirectional, with
 * cross-attention to the image where with_image and the layer has it. Leaves
 * the last hidden state in state->x [length, h]. */
glimpse_status bert_encode_embedded(const bert_model *model, bert_state *state, const float *embeddings,
                                    size_t length, int with_image, pool *threads);

#endif
