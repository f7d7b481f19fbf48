/* family.h — the table of operations through which the generic layers (api/, tools/, serve/, search/) use a
 * model family without naming it: how config.json names it, the public kind and capabilities it reports, and
 * its loader and model-info hook. Each family's own file (families/clip.c, ...) fills one model_family;
 * families/registry.c lists them. An operation a family lacks is NULL and the caller reports it unsupported. */
#ifndef GLIMPSE_FAMILIES_FAMILY_H
#define GLIMPSE_FAMILIES_FAMILY_H

#include <cjson/cJSON.h>
#include <stdbool.h>

#include "core/attention_record.h"
#include "core/kernels.h"
#include "core/quantize.h"
#include "fusion/bert.h"
#include "fusion/generate.h"
#include "fusion/gpt2.h"
#include "fusion/itm.h"
#include "fusion/opt.h"
#include "fusion/qformer.h"
#include "glimpse.h"
#include "text/bert_tokenizer.h"
#include "text/clip_text.h"
#include "text/clip_tokenizer.h"
#include "text/gpt2_tokenizer.h"
#include "text/siglip_tokenizer.h"
#include "vision/vit.h"

/* A capability's bit in model_family.capabilities. */
#define FAMILY_CAN(capability) (1u << (capability))

/* A family's decode(ids, skip_special_tokens=True) into a new string. */
typedef glimpse_status (*family_decode_fn)(const glimpse_model *model, const int32_t *ids, size_t count,
                                           char **text);

/* A continuous-batching run's decoder state as a family makes it (fusion/caption_batch.h). */
typedef struct family_batch {
    caption_batch_decoder decoder;
    void *state; /* the family's; its batch_free frees it */
} family_batch;

/* The sizes a batched run's state is made for: sequences in flight, positions of the longest, rows of the
 * largest step, image slots, and the most rows a picture's first step feeds. */
typedef struct family_batch_shape {
    size_t slots, positions, rows, images, first_rows;
} family_batch_shape;

/* How a family captions: the hooks api/caption.c's generic calls (glimpse_caption_images, continuous batching)
 * and glimpse_explain_caption take. */
typedef struct family_captioner {
    /* glimpse's own search settings where the snapshot's generation settings give none */
    int max_tokens, min_tokens, beams;
    family_decode_fn decode;
    /* The prompt's ids (NULL or "": none) as the decoder takes them: what generate's output starts with, or
     * (prefix_rows) the language model's ids after the image's prefix. *ids is the caller's (free()). */
    glimpse_status (*prompt_ids)(const glimpse_model *model, const char *prompt, int32_t **ids, size_t *count);
    /* Rows of the image's prefix in the decoder's own sequence before the prompt (BLIP-2's queries); NULL: the
     * decoder reads the image through cross-attention and the prompt is what the search starts from. */
    size_t (*prefix_rows)(const glimpse_model *model);
    size_t (*max_positions)(const glimpse_model *model); /* the decoder's positions */
    /* transformers' name of the vision tower's attentions, as glimpse_explain_caption's raw tensors give it
     * (BLIP's vision_outputs.attentions: "vision_attentions"; VisionEncoderDecoderModel's "encoder_attentions") */
    const char *vision_attentions;
    /* Captions images[0..count) one at a time with p (resolved and checked), streaming and recording as
     * ctx asks. */
    glimpse_status (*caption_images)(glimpse_context *ctx, glimpse_image *const *images, size_t count,
                                     const glimpse_caption_params *p, glimpse_caption *out);
    /* Continuous batching: the state for `shape`; the image whose vision tokens are in ctx->vision_output into
     * image slot `slot`, with its prompt ids; the state freed (also after a failed batch_create). NULL: the
     * family captions one picture at a time, however many a call gives. */
    glimpse_status (*batch_create)(glimpse_context *ctx, const family_batch_shape *shape, family_batch *out);
    glimpse_status (*batch_admit)(glimpse_context *ctx, family_batch *batch, size_t slot, const int32_t *prompt,
                                  size_t prompt_length);
    void (*batch_free)(family_batch *batch);
    /* The prompt that asks `question` as the family's model card asks it (BLIP-2: "Question: {q} Answer:"), a
     * new string into *prompt; NULL: the family does not answer questions. */
    glimpse_status (*question_prompt)(const glimpse_model *model, const char *question, char **prompt);
    /* One answer about images[0..count) together (count may be 0): `question` in the chat template after the
     * pictures, or p->prompt verbatim (question NULL); NULL: the family answers one picture at a time. */
    glimpse_status (*answer_together)(glimpse_context *ctx, glimpse_image *const *images, size_t count,
                                      const char *question, const glimpse_caption_params *p, glimpse_caption *out);
    /* glimpse_chat with its arguments checked and p resolved: the assistant's next message after
     * messages[0..count); NULL: the family does not converse. */
    glimpse_status (*chat)(glimpse_context *ctx, const glimpse_chat_message *messages, size_t count,
                           const glimpse_caption_params *p, glimpse_caption *out);
} family_captioner;

/* What glimpse_explain_caption needs of a family whose captions it explains by one recorded pass after the
 * search (LLaVA, Florence-2), the pass made by the family's own parts: */
typedef struct family_explain_shape {
    size_t layers, heads;        /* of the attention a word's map reads (what explain params' layer and head index) */
    int grid_width, grid_height; /* the patches the image's columns stand for, row by row from the top left */
    int covered;                 /* pixels of the model's square input the grid spans (from its top left) */
} family_explain_shape;

#define FAMILY_EXPLAIN_RECORDS 2
/* One recorded pass: asked for map_layers (layers of the maps' kind; with everything, every layer of every kind
 * the family records, as want_raw keeps them); the family makes the records (explain/records.h: the caller
 * releases them, also after a failure) and says where words' maps are read. */
typedef struct family_explain_pass {
    uint64_t map_layers;
    bool everything;
    attention_record records[FAMILY_EXPLAIN_RECORDS];
    /* each record's kinds' raw tensors as transformers names them (NULL: not kept) */
    const char *names[FAMILY_EXPLAIN_RECORDS][ATTENTION_KINDS];
    size_t map_record;       /* the record a word's map reads, */
    attention_kind map_kind; /* its kind, */
    long row_shift;          /* the row that chose ids[t]: t + row_shift, */
    size_t first_column;     /* the first of grid_width × grid_height columns of the picture's patches, */
    size_t first_word;       /* and ids before this one are no words of the caption (its start token) */
} family_explain_pass;

typedef struct family_explainer {
    void (*shape)(const glimpse_model *model, family_explain_shape *out);
    /* One forward pass over the merged sequence: images[0..count) with `prompt` as the family's caption_images
     * reads params' prompt (NULL: its caption) or, where the caption kept it (glimpse_caption.prompt; else NULL),
     * `tokenized`, the text it tokenized; then ids[0..id_count) as its captions carry them (LLaVA: the new ids;
     * Florence-2: the start token on), recording as pass asks. */
    glimpse_status (*record)(glimpse_context *ctx, glimpse_image *const *images, size_t count, const char *prompt,
                             const char *tokenized, const int32_t *ids, size_t id_count, family_explain_pass *pass);
} family_explainer;

/* The stages `glimpse bench` times for a family whose parts are its own (api/bench_stages.h), each run once as its
 * captions run it, its work in *flops: the image side of `count` pictures (preprocessing, the tower, and what
 * turns its rows into the decoder's input); the language model reading `rows` new positions of one sequence after
 * `position` it holds (a prompt, or one decoding step: rows 1), its cache's contents whatever they are; and the
 * bytes of weights such a step reads. */
typedef struct family_bench {
    glimpse_status (*image)(glimpse_context *ctx, glimpse_image *const *images, size_t count, double *flops);
    glimpse_status (*decode)(glimpse_context *ctx, size_t position, size_t rows, double *flops);
    double (*step_bytes)(const glimpse_model *model);
    size_t (*image_rows)(const glimpse_model *model); /* the rows one picture gives the decoder */
} family_bench;

/* The shared blocks a family's parts hold (model->parts) that the generic calls run themselves: preprocessing
 * and the ViT's batches (context.c, caption.c), the embedding and matching calls (embed.c, match.c), explain's
 * rollout and recorded passes (explain.c, which has a case per shared decoder, not per family), the bench stages
 * and the model info. Read-only views into the family's own struct; NULL where the family has no such block
 * (a tower its load params left out is there, unloaded, as has_vision and has_text say). */
typedef struct family_blocks {
    const vit_model *vision;              /* the ViT every family but Florence-2 and LLaVA reads pictures with */
    const clip_text_model *text;          /* CLIP's or SigLIP's text tower */
    const clip_tokenizer *clip_tokenizer; /* CLIP's BPE */
    const siglip_tokenizer *sentencepiece; /* SigLIP's */
    float logit_scale, logit_bias;        /* exponentiated; the bias SigLIP's (0 for the rest) */
    const bert_model *text_decoder;       /* BLIP captioning's BERT decoder */
    const bert_model *text_encoder;       /* BLIP retrieval's bidirectional text encoder, */
    const itm_heads *itm;                 /* and its ITM and ITC heads */
    const bert_tokenizer *wordpiece;      /* BLIP's */
    const gpt2_model *gpt2;               /* ViT-GPT2's decoder */
    const gpt2_tokenizer *byte_bpe;       /* GPT-2's byte-level BPE: ViT-GPT2's, and BLIP-2's OPT tokenizer */
    const blip2_qformer *qformer;         /* BLIP-2's Q-Former with its language projection, */
    const opt_model *language_model;      /* and its OPT */
} family_blocks;

/* Those blocks' run state in one context (the family's struct behind ctx->run): the ViT's for
 * CONTEXT_IMAGE_BATCH pictures, the batch context_preprocess makes ([CONTEXT_IMAGE_BATCH, 3, size, size]), one
 * picture's vision output as the text side reads it (every token after the post-LayerNorm, or BLIP's ITC pooled
 * class token), the text tower's for CONTEXT_TEXT_BATCH texts; and, by address, since the calls make them on
 * first use and grow them to the largest request (freed by the family's free_run): BLIP's BERT (its caption
 * decoder's or its retrieval text encoder's), ViT-GPT2's GPT-2, BLIP-2's Q-Former, OPT and prefix vectors
 * [queries, text hidden]. NULL where the family has none. */
typedef struct family_run_blocks {
    vit_state *vision;
    float *pixel_values;
    float *vision_output;
    clip_text_state *text;
    bert_state **bert;
    gpt2_state **gpt2;
    bert_state **qformer;
    opt_state **language;
    float **prefix;
} family_run_blocks;

typedef struct model_family {
    /* Recognised by config.json's "architectures"[0] equal to architecture, or, without "architectures", by a
     * model_type equal to model_type (NULL: never). */
    const char *architecture;
    const char *model_type;
    const char *summary; /* how the error for an unknown architecture lists it (NULL: the architecture) */
    const char *description; /* one line for `glimpse info` (glimpse_model_info.description); NULL: none */
    bool sigmoid_scores;     /* a sigmoid per image-text pair, not a softmax over texts (glimpse_model_info) */
    glimpse_model_kind kind;
    unsigned capabilities; /* FAMILY_CAN bits of glimpse_capability */
    /* config.json's two sections the loader reads (vision and text, or encoder and decoder); required: each
     * must be an object, else an absent one means all defaults */
    const char *vision_section, *text_section;
    bool sections_required;
    /* Loads the family's parts into model (its folder, config, store, family, kind and architecture set). */
    glimpse_status (*load)(glimpse_model *model, const glimpse_load_params *params, const cJSON *vision_json,
                           const cJSON *text_json);
    /* Fills the image_size, patch_size and vision_* fields of glimpse_model_info (NULL: the ViT's, when loaded). */
    void (*vision_info)(const glimpse_model *model, glimpse_model_info *out);
    /* Fills the text_* and vocab_size fields of glimpse_model_info (NULL: the model has no text side). */
    void (*text_info)(const glimpse_model *model, glimpse_model_info *out);
    const family_captioner *caption; /* NULL: the family does not caption */
    /* glimpse_run_task with its arguments checked and p resolved (NULL: the family has no tasks) */
    glimpse_status (*run_task)(glimpse_context *ctx, glimpse_image *const *images, size_t count, const char *task,
                               const char *input, const glimpse_caption_params *p, glimpse_task_result *out);
    /* int8 twins of the projections of the family's decoders into set, for GLIMPSE_PRECISION_INT8 (NULL: they
     * stay as stored); its towers' twins are tower_twins'. */
    glimpse_status (*quantize)(glimpse_model *model, q8_set *set);
    /* Twins by add into set (q8_set_add_twin for int8, bf16x3_set_add for AMX's tiles, bf16x3_twin_clear to undo)
     * of the projections of the family's encoder towers, each loaded (the ViT, CLIP's text tower; NULL: none). */
    glimpse_status (*tower_twins)(glimpse_model *model, kernel_twin_add add, void *set);
    /* The shared blocks of model->parts (family_blocks; NULL: none the generic calls run). */
    void (*blocks)(const glimpse_model *model, family_blocks *out);
    /* Their run state in ctx->run, which it makes on first use (glimpse_context_create asks for it, so a context
     * is made whole or not at all; NULL: the family makes its run state in its own calls). */
    glimpse_status (*run_blocks)(glimpse_context *ctx, family_run_blocks *out);
    /* Frees what load put in model->parts and what the family's calls put in a context's run (NULL: the
     * family keeps nothing there). */
    void (*free_parts)(void *parts);
    void (*free_run)(void *run);
    /* How glimpse_explain_caption explains the family's captions after its search (NULL: through the decoders
     * api/explain.c knows, or not at all) */
    const family_explainer *explain;
    const family_bench *bench; /* NULL: `glimpse bench` times the shared parts (or only whole captions) */
} model_family;

/* model's blocks (all NULL for a family without the hook). */
void family_blocks_of(const glimpse_model *model, family_blocks *out);
/* ctx's run blocks (all NULL for a family without the hook; made on first use). */
glimpse_status family_run_blocks_of(glimpse_context *ctx, family_run_blocks *out);

/* The family config.json names (folder in the error when none does: GLIMPSE_STATUS_UNSUPPORTED). */
glimpse_status family_detect(const cJSON *config, const char *folder, const model_family **out);
/* The architectures of the families that can do every capability in `capabilities` (FAMILY_CAN bits; 0: all
 * families), ", " between them, into out (cut to capacity); with summaries, as the unknown-architecture error
 * lists them. */
void family_names(unsigned capabilities, bool summaries, char *out, size_t capacity);
/* The family that reports `kind`; NULL for none. */
const model_family *family_of_kind(glimpse_model_kind kind);
/* Makes model one of `family` (its family, kind and architecture): detection, or a loader that tells two heads
 * of one checkpoint format apart by their tensors. */
void family_assign(glimpse_model *model, const model_family *family);

#endif
