/* llama.h — the decoder of Llama (LlamaForCausalLM) and Qwen2 (Qwen2ForCausalLM) as one block, the language
 * model of LLaVA: token embeddings, pre-RMSNorm layers with rotary self-attention (grouped-query: several query
 * heads share a key/value head; Qwen2 with q/k/v biases) and a SwiGLU feed-forward block, the final RMSNorm and
 * the head (tied to the embeddings when the checkpoint has none); a key/value cache for several sequences
 * (beams). Takes embeddings as floats, so a caller can put image rows among the text's. Config, weights and
 * run state apart. No tokenizer and no image side here. */
#ifndef GLIMPSE_FUSION_LLAMA_H
#define GLIMPSE_FUSION_LLAMA_H

#include <cjson/cJSON.h>
#include <stdint.h>

#include "core/attention_record.h"
#include "core/quantize.h"
#include "fusion/generate.h"
#include "weights/names.h"
#include "weights/store.h"

typedef enum llama_kind {
    LLAMA_KIND_LLAMA = 0, /* model_type "llama" (LlamaConfig's defaults) */
    LLAMA_KIND_QWEN2 = 1  /* model_type "qwen2" (Qwen2Config's defaults; q/k/v always biased) */
} llama_kind;

typedef struct llama_config {
    llama_kind kind;
    int hidden_size, layers, heads, kv_heads, head_dim, intermediate_size;
    int vocab_size, max_positions;
    float rms_norm_eps;
    double rope_theta;
    int qkv_bias;            /* q_proj, k_proj, v_proj with bias (Qwen2; Llama's attention_bias) */
    int output_bias;         /* o_proj with bias (Llama's attention_bias) */
    int tie_word_embeddings; /* the head is embed_tokens whatever the file holds */
} llama_config;

/* One decoder layer; every matrix [out, in] in its stored type. */
typedef struct llama_layer {
    const float *input_norm;                              /* [hidden] input_layernorm.weight */
    kernel_weight q_weight, k_weight, v_weight, o_weight; /* [heads·d, h], [kv·d, h] twice, [h, heads·d] */
    const float *q_bias, *k_bias, *v_bias, *o_bias;       /* or NULL */
    const float *post_attention_norm;                     /* [hidden] */
    kernel_weight gate_weight, up_weight, down_weight;    /* [inter, h], [inter, h], [h, inter] */
} llama_layer;

typedef struct llama_model {
    llama_config config;
    kernel_weight embed_tokens; /* [vocab, hidden] */
    llama_layer *layers;        /* [layers] */
    const float *final_norm;    /* [hidden] */
    kernel_weight lm_head;      /* [vocab, hidden]: embed_tokens when tied or absent */
    float *inverse_frequencies; /* [head_dim / 2]: θ^(−2i/d), as transformers computes them in float32 */
} llama_model;

/* Reads text_config (`where` names it in errors): model_type "llama" or "qwen2" decides the defaults that the
 * published configs leave out (LlamaConfig: 32000/4096/11008/32 layers/32 heads, kv heads = heads, eps 1e-6,
 * θ 10000, 2048 positions, no biases; Qwen2Config: 151936/4096/22016/32/32, kv heads 32, eps 1e-6, θ 10000,
 * 32768 positions, q/k/v biases). hidden_act must be silu; rope_scaling must be absent. */
glimpse_status llama_config_read(const cJSON *json, const char *where, llama_config *config);

/* Loads the tensors names gives, below model_prefix ("language_model.model." or "model.language_model.") and,
 * for the head, head_prefix ("language_model." or ""). Caller frees with llama_model_free. */
glimpse_status llama_model_load(llama_model *model, const llama_config *config, const llama_names *names,
                                const char *model_prefix, const char *head_prefix, weight_store *store);
void llama_model_free(llama_model *model);
/* int8 twins (core/quantize.h) of every layer's projections and of the head, owned by set. */
glimpse_status llama_model_quantize(llama_model *model, q8_set *set);

/* The prompt's chunk: rows a state holds scratch for when its prompt runs in chunks. A multiple of the AVX-512
 * kernels' 48-row panel, so every row meets the same kernel and sums as in one pass of the whole prompt. One pass
 * holds a picture of llava-1.5 (576 rows) or llava-interleave (729) with its question; several pictures run in
 * chunks, their scratch bounded (llava-1.5-7b: 204 MB for 1,008 rows, beside 13.5 GB of weights). Smaller chunks read
 * the weights once per chunk: 192 rows made llava-1.5-7b's 608-row prompt 10.7% slower (AMD EPYC, 2 threads,
 * medians of 5 alternating processes) for 26 MiB less on llava-interleave-0.5b. */
#define LLAMA_PROMPT_CHUNK 1008

/* Run state: a key/value cache for max_sequences sequences of max_length positions (at most the config's
 * max_positions) and scratch for steps of up to max_step rows per sequence, max_step taken between 1 and
 * LLAMA_PROMPT_CHUNK (one sequence's longer step runs in chunks of max_step: a long prompt's activations and
 * attention scores stay small). */
typedef struct llama_state {
    size_t max_sequences, max_length, max_step, max_rows;
    size_t length;                    /* positions already in the cache */
    size_t shared_length;             /* of them, the first this many are the same in every sequence (0: none) */
    float *keys, *values;             /* [sequences][layers][max_length][kv_heads·head_dim] */
    float *spare_keys, *spare_values; /* the same, for reordering (several sequences only; else empty) */
    float *cosines, *sines;           /* [max_length, head_dim / 2]: the rotary tables */
    float *x;                         /* [rows, hidden]: after llama_forward, the last layer's rows (not normed) */
    float *normed, *q, *k, *v, *context, *gate, *up; /* [rows, hidden] .. [rows, intermediate] */
    float *embedded;                  /* [rows, hidden]: the decoder's embedding scratch */
    float *last;                      /* [max_sequences, hidden] */
    float *scores;                    /* [heads, max_step, max_length]: attention's scratch */
    float *logits;                    /* [max_sequences, vocab] */
    float *memory;                    /* the allocation the above are carved from (huge pages where Linux has them) */
    float *spare_memory;              /* the spares' own (small pages: a reordering writes a few rows of each) */
    /* NULL as created; else llama_forward records the self-attention layers it asks for (sequence s of a step
     * as the cache holds it, every query head in projection order): the record's row r is the query at position
     * record_from + r (0 as created: rows at the positions' indices); steps that start before record_from are not
     * recorded (a caller that wants only the last rows runs the positions before them as a step of their own). */
    const attention_record *record;
    size_t record_from;
} llama_state;

/* Fails (invalid argument) for no sequences or no positions. */
glimpse_status llama_state_create(const llama_model *model, size_t max_sequences, size_t max_length,
                                  size_t max_step, llama_state **out);
void llama_state_free(llama_state *state);

/* out[count, hidden] = embed_tokens rows of ids (each checked against the vocabulary). */
glimpse_status llama_embed(const llama_model *model, const int32_t *ids, size_t count, float *out);

/* embeddings[s × step + j] (rows of hidden) of `step` new positions for each of `sequences` sequences, appended
 * at positions length ..; leaves the last-layer output of every row (of the last chunk's rows where one sequence's
 * step exceeds max_step) in state->x and each sequence's next-token logits (its last row) in state->logits
 * [sequences, vocab]. Only one sequence's step may exceed max_step. */
glimpse_status llama_forward(const llama_model *model, llama_state *state, const float *embeddings,
                             size_t sequences, size_t step, pool *threads);
/* out[rows, hidden] = the final RMSNorm of in (state->x after llama_forward: last_hidden_state). */
void llama_final_norm(const llama_model *model, float *out, const float *in, size_t rows);
/* to's sequence 0 holds the first `positions` positions of from's sequence 0 (a conversation's cache kept
 * through a larger state); to->length = positions (at most both states' max_length). */
void llama_state_keep(const llama_model *model, llama_state *to, const llama_state *from, size_t positions);
/* Sequence s becomes old sequence from[s]. */
void llama_reorder(const llama_model *model, llama_state *state, const size_t *from, size_t sequences);

/* The decoder as caption_generate drives it from a merged sequence (LLaVA: text and image rows): the first
 * step's ids (the prompt, prompt_length ids as caption_generate holds them) are not embedded; each sequence
 * starts with first_rows [first_row_count, hidden] instead, at positions kept .. (the `kept` positions before
 * them are already in sequence 0's cache: a conversation's earlier turns); that pass runs once and is copied
 * to the other sequences (beams). Later steps embed their ids. self points at a llama_decoder the caller keeps
 * alive while generating. */
typedef struct llama_decoder {
    const llama_model *model;
    llama_state *state;
    const float *first_rows;
    size_t first_row_count;
    size_t prompt_length;
    size_t kept;
} llama_decoder;
caption_decoder llama_caption_decoder(llama_decoder *self);

#endif
