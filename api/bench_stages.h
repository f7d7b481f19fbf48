/* bench_stages.h — the hooks `glimpse bench` (tools/cli_bench.c) times libglimpse's
 * stages through. The bench is a white-box developer tool: it runs one stage
 * of a public call at a time (a tower's forward pass, one decoder step),
 * which the public API does not offer, yet it sees nothing inside the
 * handles. Nothing but the bench includes this header.
 *
 * Each hook runs its stage once, as the public calls run it, and writes the
 * stage's work to *flops: a count of the products' and the attention's
 * floating-point operations (norms and activations left out). The towers'
 * hooks also give the attention's part apart (where not NULL): an int8
 * model's attention runs on bfloat16 (or float32), whose roof is not its
 * products'. */
#ifndef GLIMPSE_API_BENCH_STAGES_H
#define GLIMPSE_API_BENCH_STAGES_H

#include <stddef.h>
#include <stdint.h>

#include "glimpse.h"

/* The stages beyond the towers that `glimpse bench` times for a model, by the parts it has (its family not
 * named): a BERT caption decoder with cross-attention (BLIP captioning), ITM heads over a BERT text encoder
 * (BLIP retrieval), a Q-Former prefix before a language model (BLIP-2), and whole captions (every captioner). */
enum {
    BENCH_STAGE_CROSS_DECODER = 1u << 0,
    BENCH_STAGE_ITM = 1u << 1,
    BENCH_STAGE_PREFIX_DECODER = 1u << 2,
    BENCH_STAGE_CAPTIONS = 1u << 3,
};
unsigned bench_stages_of(const glimpse_model *model);
/* Whether the model's vision tower is the shared ViT bench_vision times (not a family's own, as Florence-2's). */
bool bench_has_vision(const glimpse_model *model);
/* What the vision tower's figure covers where it is not every token: "class tokens' last layer" (an embedding
 * tower read at its class token) or "attention pooling" (one read by an attention-pooling head); else NULL. */
const char *bench_vision_detail(const glimpse_model *model);

/* Images a context preprocesses and encodes at once. */
#define BENCH_MAX_BATCH 8

/* The worker threads of ctx's pool. */
int bench_threads(const glimpse_context *ctx);

/* Decodes an encoded picture as glimpse index and embed do (fast: a JPEG in
 * the DCT domain, --fast-decode), without resizing it: the decode stage alone. */
glimpse_status bench_decode(const glimpse_context *ctx, const uint8_t *bytes, size_t size, bool fast,
                            glimpse_image **out);

/* Preprocesses count (<= BENCH_MAX_BATCH) images into ctx, for bench_vision. */
glimpse_status bench_preprocess(glimpse_context *ctx, glimpse_image *const *images, size_t count);

/* The vision tower over the first batch images bench_preprocess left, as the
 * library runs it: for CLIP's embeddings the last layer computes the class
 * tokens alone; BLIP's captions and matching, and SigLIP's attention-pooling
 * head, take every token. */
void bench_vision(glimpse_context *ctx, size_t batch, double *flops, double *attention_flops);

/* CLIP's or SigLIP's text tower over count texts: ids holds them one after another,
 * lengths[i] ids each (with the start and end tokens), as glimpse_embed_texts
 * runs it. */
glimpse_status bench_text(glimpse_context *ctx, const int32_t *ids, const size_t *lengths, size_t count,
                          double *flops, double *attention_flops);

/* BLIP's BERT (the caption decoder, or the retrieval text encoder) with a
 * state of its own, for sequences at once up to max_length tokens, and as
 * its image the first one of the last bench_vision batch. */
typedef struct bench_bert bench_bert;

glimpse_status bench_bert_create(glimpse_context *ctx, size_t sequences, size_t max_length, bench_bert **out);
void bench_bert_free(bench_bert *bert);

/* The cross-attention keys and values of the image: once per image. */
glimpse_status bench_cross_kv(bench_bert *bert, double *flops);

/* Captioning: one decoder step of `sequences` sequences (1 for greedy, the
 * beams for beam search) at position (1 = the first token after the start
 * token); the cache's contents are whatever is there (they do not change the
 * time). */
glimpse_status bench_decoder_step(bench_bert *bert, size_t position, size_t sequences, double *flops);

/* Retrieval: one text's ITM match probability against the image (ids as
 * glimpse_tokenize gives them). */
glimpse_status bench_itm_text(bench_bert *bert, const int32_t *ids, size_t count, double *flops);

/* BLIP-2 (families/blip2.c), with run states for up to `sequences` sequences made on first use: the image side
 * after the vision tower (Q-Former and language projection) of the first image of the last bench_vision
 * batch; the language model's first step over those query vectors and prompt_length ids (everything before
 * the first token but the vision tower and the Q-Former); one later step of `sequences` sequences,
 * `generated` tokens after the query vectors and a prompt of prompt_length ids; and the bytes of weights such a step reads (every layer's and the
 * head's matrices in their stored type, or their int8 twins and scales): the step's bound is those bytes
 * over the read bandwidth. */
glimpse_status bench_blip2_qformer(glimpse_context *ctx, size_t sequences, double *flops);
glimpse_status bench_blip2_prefill(glimpse_context *ctx, size_t prompt_length, double *flops);
glimpse_status bench_blip2_step(glimpse_context *ctx, size_t prompt_length, size_t generated, size_t sequences,
                                double *flops);
double bench_blip2_step_bytes(const glimpse_context *ctx);

/* A family with parts of its own (LLaVA): whether it has the hooks, and its stages through them (families/family.h's
 * family_bench): the image side of count pictures, the language model reading `rows` positions after `position`,
 * the bytes of weights a decoding step reads, and the rows one picture gives the decoder. */
bool bench_family_has(const glimpse_model *model);
glimpse_status bench_family_image(glimpse_context *ctx, glimpse_image *const *images, size_t count, double *flops);
glimpse_status bench_family_decode(glimpse_context *ctx, size_t position, size_t rows, double *flops);
double bench_family_step_bytes(const glimpse_model *model);
size_t bench_family_image_rows(const glimpse_model *model);

/* --profile: the wall time the calling thread spent per kind of work since
 * bench_profile_start, as shares of the time since then. BENCH_PROFILE_KINDS
 * kinds, named by bench_profile_names; the last is the time waiting for the
 * pool's workers, which is inside the others. */
#define BENCH_PROFILE_KINDS 5
extern const char *const bench_profile_names[BENCH_PROFILE_KINDS];
void bench_profile_start(void);
void bench_profile_read(double seconds[BENCH_PROFILE_KINDS]);
/* Seconds spent decoding captions (decoder steps and search, not the image side) since bench_profile_start. */
double bench_profile_decoding(void);

#endif
