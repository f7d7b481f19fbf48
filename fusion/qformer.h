/* qformer.h — BLIP-2's image side after the vision tower: the Q-Former (a
 * BERT without word embeddings whose learned query tokens attend to each
 * other and, every cross_attention_frequency-th layer, to the image tokens;
 * post-LayerNorm, the queries' own feed-forward) and the language projection
 * that turns its output into the vectors OPT continues from (fusion/opt.h).
 * Takes the image tokens as floats (vision/vit.c's output); run once per
 * image. */
#ifndef GLIMPSE_FUSION_QFORMER_H
#define GLIMPSE_FUSION_QFORMER_H

#include <cjson/cJSON.h>

#include "fusion/bert.h"
#include "weights/names.h"
#include "weights/store.h"

typedef struct blip2_qformer {
    bert_config config;            /* qformer_config (word embeddings unused) */
    int queries;                   /* num_query_tokens */
    int cross_attention_frequency; /* layers 0, f, 2f, ... cross-attend */
    int projection_dim;            /* text_config.hidden_size: language_projection's output */
    bert_model bert;               /* layers (cross-attention where the frequency says), embedding norm = layernorm */
    const float *query_tokens;     /* [queries, hidden] */
    kernel_weight projection;      /* [projection_dim, hidden] */
    const float *projection_bias;  /* [projection_dim] */
} blip2_qformer;

/* Reads qformer_config (`json`) and config.json's num_query_tokens (`root`); vision_hidden fills
 * encoder_hidden_size when absent; projection_dim is the language model's width. */
glimpse_status blip2_qformer_config_read(const cJSON *root, const cJSON *json, int vision_hidden, int projection_dim,
                                         blip2_qformer *qformer);
/* Loads the tensors names gives (after blip2_qformer_config_read). Free with blip2_qformer_free. */
glimpse_status blip2_qformer_load(blip2_qformer *qformer, const blip2_names *names, weight_store *store);
void blip2_qformer_free(blip2_qformer *qformer);
glimpse_status blip2_qformer_quantize(blip2_qformer *qformer, q8_set *set);

/* Run state of the Q-Former over images of up to image_tokens tokens. */
glimpse_status blip2_qformer_state_create(const blip2_qformer *qformer, size_t image_tokens, bert_state **out);

/* The image side: out[queries, projection_dim] = language_projection(Q-Former(image_tokens [count, encoder
 * hidden])). The Q-Former's last hidden state stays in state->x [queries, hidden]; with state->record, its
 * self-attention (every layer) and cross-attention (the layers that have it, in order) are recorded. */
glimpse_status blip2_qformer_forward(const blip2_qformer *qformer, bert_state *state, const float *image_tokens,
                                     size_t count, float *out, pool *threads);

#endif
