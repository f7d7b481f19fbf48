/* explain.c — the explanation calls of the public API: what a caption's words, an ITM text's words or a CLIP /
 * SigLIP match looked at. Attention is recorded (core/attention_record.h) only inside these calls, in one
 * forward pass over what is explained, and turned into maps on the patch grid by explain/maps.h; pictures and
 * raw tensors are written by the render and safetensors calls below. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/context.h"
#include "api/model.h"
#include "core/error.h"
#include "explain/maps.h"
#include "explain/records.h"
#include "explain/render.h"
#include "families/family.h"
#include "fusion/retrieval.h"
#include "vision/image.h"
#include "vision/resize.h"

glimpse_explain_params glimpse_explain_default_params(void) {
    return (glimpse_explain_params){
        .layer = -1, .head = -1, .want_raw = false, .occlusion = true, .on_map = NULL, .user = NULL,
        .want_vision = false};
}

void glimpse_explanation_free(glimpse_explanation *e) {
    if (!e) return;
    for (size_t i = 0; i < e->map_count; i++) free(e->maps[i].label), free(e->maps[i].grid), free(e->maps[i].queries);
    for (size_t i = 0; i < e->raw_count; i++) free(e->raw[i].data);
    free(e->maps), free(e->raw), free(e->text), free(e->ids);
    free(e);
}

/* ------------------------------------------------------------ building one */

/* A new explanation of image by a grid of grid_width × grid_height patches spanning `covered` pixels of the model's
 * input from its top left, with the region its preprocessing keeps. */
static glimpse_status explanation_on_grid(const glimpse_model *model, const glimpse_image *image, int grid_width,
                                          int grid_height, int covered, glimpse_explanation **out) {
    glimpse_explanation *e = calloc(1, sizeof *e);
    if (!e) return ERROR_OOM();
    int resized_width, resized_height, left, top;
    preprocess_geometry(&model->preprocess, image->width, image->height, &resized_width, &resized_height, &left,
                        &top);
    float scale_x = (float)image->width / (float)resized_width, scale_y = (float)image->height / (float)resized_height;
    e->grid_width = grid_width, e->grid_height = grid_height;
    e->image_width = image->width;
    e->image_height = image->height;
    e->region[0] = (float)left * scale_x;
    e->region[1] = (float)top * scale_y;
    e->region[2] = (float)(left + covered) * scale_x;
    e->region[3] = (float)(top + covered) * scale_y;
    e->score = NAN;
    *out = e;
    return GLIMPSE_STATUS_OK;
}

/* The same on the model's ViT's patch grid. */
static glimpse_status explanation_new(const glimpse_model *model, const glimpse_image *image,
                                      glimpse_explanation **out) {
    family_blocks blocks;
    family_blocks_of(model, &blocks);
    const vit_model *vision = blocks.vision;
    int side = (int)vision->patches_per_side;
    return explanation_on_grid(model, image, side, side, side * vision->config.patch_size, out);
}

/* Appends a map (its grid zeroed) and returns it, or NULL when memory runs out. */
static glimpse_explain_map *add_map(glimpse_explanation *e, glimpse_explain_map_kind kind, const char *label,
                                    size_t first_token, size_t token_count) {
    glimpse_explain_map *maps = realloc(e->maps, (e->map_count + 1) * sizeof *maps);
    if (!maps) return NULL;
    e->maps = maps;
    glimpse_explain_map *map = &maps[e->map_count];
    *map = (glimpse_explain_map){.kind = kind,
                                 .label = strdup(label),
                                 .first_token = first_token,
                                 .token_count = token_count,
                                 .grid = calloc((size_t)e->grid_width * (size_t)e->grid_height, sizeof(float))};
    if (!map->label || !map->grid) {
        free(map->label), free(map->grid);
        return NULL;
    }
    e->map_count++;
    return map;
}

/* Tells the caller the last map is done; GLIMPSE_STATUS_CANCELLED if it says stop. */
static glimpse_status map_done(const glimpse_explain_params *p, const glimpse_explanation *e) {
    if (p->on_map && p->on_map(p->user, e, e->map_count - 1))
        return error_set(GLIMPSE_STATUS_CANCELLED, "cancelled after %zu maps", e->map_count);
    return GLIMPSE_STATUS_OK;
}

/* Appends a raw tensor owning data (which it frees on failure). */
static glimpse_status add_raw(glimpse_explanation *e, const char *name, size_t rank, const size_t *shape,
                              float *data) {
    glimpse_explain_tensor *raw = realloc(e->raw, (e->raw_count + 1) * sizeof *raw);
    if (!raw) {
        free(data);
        return ERROR_OOM();
    }
    e->raw = raw;
    glimpse_explain_tensor *t = &raw[e->raw_count++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->rank = rank;
    memcpy(t->shape, shape, rank * sizeof *shape);
    t->data = data;
    return GLIMPSE_STATUS_OK;
}

static glimpse_status check_params(const glimpse_explain_params *p, size_t layers, size_t heads) {
    if (p->layer < -1 || p->layer >= (int)layers)
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "layer %d: the model has layers 0 to %zu (-1: all)",
                         p->layer, layers - 1);
    if (p->head < -1 || p->head >= (int)heads)
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "head %d: the model has heads 0 to %zu (-1: all)", p->head,
                         heads - 1);
    return GLIMPSE_STATUS_OK;
}

static explain_range heads_of(const glimpse_explain_params *p, size_t heads) {
    return p->head < 0 ? (explain_range){0, heads} : (explain_range){(size_t)p->head, (size_t)p->head + 1};
}

/* The image's vision tokens after the post-LayerNorm, as BLIP's text side and GPT-2's cross-attention read them,
 * into the family's vision output (run.vision_output). */
static glimpse_status encode_image(glimpse_context *ctx, const glimpse_image *image) {
    glimpse_image *const images[1] = {(glimpse_image *)image};
    family_blocks blocks;
    family_run_blocks run;
    family_blocks_of(ctx->model, &blocks);
    glimpse_status status = family_run_blocks_of(ctx, &run);
    if (!status) status = context_preprocess(ctx, images, 1, 0);
    if (status) return status;
    vit_forward(blocks.vision, run.vision, run.pixel_values, 1, ENCODER_OUTPUT_ALL_ROWS, ctx->threads);
    vit_post_norm_all(blocks.vision, run.vision, 0, run.vision_output);
    return GLIMPSE_STATUS_OK;
}

/* ------------------------------------------------------- recorded passes */

/* The layers a word map reads: every one (layer -1) or the one asked for; with want_raw every one is recorded. */
static uint64_t mapped_layers(const glimpse_explain_params *p, size_t layers) {
    return p->want_raw || p->layer < 0 ? explain_all_layers(layers) : (uint64_t)1 << p->layer;
}

/* The recorded slots the maps average (mapped_layers' slots of the layers asked for). */
static explain_range averaged_slots(const glimpse_explain_params *p, size_t layers) {
    return p->layer < 0 ? (explain_range){0, layers}
           : p->want_raw ? (explain_range){(size_t)p->layer, (size_t)p->layer + 1}
                         : (explain_range){0, 1};
}

/* Hands the record's probabilities of `kind` to the explanation as raw tensor `name` [recorded layers, heads,
 * rows, columns] (the record of one sequence); the record no longer holds them. */
static glimpse_status keep_record(glimpse_explanation *e, const char *name, attention_record *r,
                                  attention_kind kind) {
    size_t layers = (size_t)__builtin_popcountll(r->layers[kind]);
    size_t shape[4] = {layers, r->heads, r->rows, r->columns[kind]};
    float *data = r->probabilities[kind];
    r->probabilities[kind] = NULL;
    return add_raw(e, name, 4, shape, data); /* takes the memory, or frees it when it fails */
}

/* A BERT pass that records: its state (one sequence of `length` tokens over the image) and its record of the
 * cross-attention layers the maps read, with want_raw every layer's self-attention too. */
typedef struct recorded_pass {
    bert_state *state;
    attention_record record;
} recorded_pass;

static void recorded_pass_free(recorded_pass *pass) {
    bert_state_free(pass->state);
    explain_record_release(&pass->record);
    pass->state = NULL;
}

/* The record and a state for one pass of `length` tokens over the image in the family's vision output. */
static glimpse_status recorded_pass_create(glimpse_context *ctx, const bert_model *bert, size_t length,
                                           const glimpse_explain_params *p, recorded_pass *pass) {
    memset(pass, 0, sizeof *pass);
    family_blocks blocks;
    family_run_blocks run;
    family_blocks_of(ctx->model, &blocks);
    if (family_run_blocks_of(ctx, &run)) return ERROR_OOM(); /* (made with the context: cannot fail here) */
    size_t layers = (size_t)bert->config.layers, image_tokens = blocks.vision->tokens;
    glimpse_status status =
        explain_record_make(&pass->record, p->want_raw ? explain_all_layers(layers) : 0, mapped_layers(p, layers),
                            (size_t)bert->config.heads, length, length, image_tokens);
    if (!status) status = bert_state_create(bert, 1, length, length, image_tokens, &pass->state);
    if (!status) status = bert_set_image(bert, pass->state, run.vision_output, image_tokens, ctx->threads);
    if (!status) pass->state->record = &pass->record;
    return status;
}

/* ------------------------------------------------------------ word maps */

static bool is_space_byte(uint8_t c) {
    return c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

/* Whether id stands for (part of) a word: no special token ([DEC], [SEP], <|endoftext|>, </s>), no id past the
 * tokenizer's vocabulary (OPT's spare rows), and for byte-level BPE not whitespace alone (a newline: OPT's end). */
static bool token_is_word(const glimpse_model *family_model, int32_t id) {
    family_blocks blocks, *model = &blocks;
    family_blocks_of(family_model, &blocks);
    if (!model->byte_bpe) return !bert_tokenizer_is_special(model->wordpiece, id);
    size_t length = 0;
    const uint8_t *bytes = gpt2_tokenizer_is_special(model->byte_bpe, id)
                               ? NULL
                               : gpt2_tokenizer_token_bytes(model->byte_bpe, id, &length);
    for (size_t i = 0; bytes && i < length; i++)
        if (!is_space_byte(bytes[i])) return true;
    return false;
}

/* Whether the word token id continues the word before it: a "##" word piece; a byte-level BPE token that does
 * not start with a space ("Ġ") or other whitespace. */
static bool continues_word(const glimpse_model *family_model, int32_t id) {
    if (!token_is_word(family_model, id)) return false;
    family_blocks blocks, *model = &blocks;
    family_blocks_of(family_model, &blocks);
    if (!model->byte_bpe) return strncmp(bert_tokenizer_token(model->wordpiece, id), "##", 2) == 0;
    size_t length = 0;
    const uint8_t *bytes = gpt2_tokenizer_token_bytes(model->byte_bpe, id, &length);
    return length && !is_space_byte(bytes[0]);
}

/* The word's text: its tokens decoded (by the family's decode where the model holds neither tokenizer), without
 * the whitespace around it. */
static glimpse_status word_label(const glimpse_model *model, const int32_t *ids, size_t count, char **label) {
    family_blocks blocks;
    family_blocks_of(model, &blocks);
    if (blocks.wordpiece && !blocks.byte_bpe) return bert_tokenizer_decode(blocks.wordpiece, ids, count, label);
    glimpse_status status = blocks.byte_bpe ? gpt2_tokenizer_decode(blocks.byte_bpe, ids, count, 1, 0, label, NULL)
                                            : model->family->caption->decode(model, ids, count, label);
    if (status) return status;
    char *text = *label, *start = text;
    while (*start && is_space_byte((uint8_t)*start)) start++;
    size_t length = strlen(start);
    while (length && is_space_byte((uint8_t)start[length - 1])) length--;
    memmove(text, start, length);
    text[length] = '\0';
    return GLIMPSE_STATUS_OK;
}

/* Where words' maps are read: the token at position t reads row t + row_shift of the record's `kind` attention,
 * the slots `layers` and the heads asked for averaged over the columns `kept` (renormalised). That row is the
 * word's map (the patches after the class token); or, with query_maps (BLIP-2: the row over the query
 * positions), it weighs the queries' maps [kept columns][patches]. */
typedef struct word_source {
    const attention_record *record;
    attention_kind kind;
    explain_range layers, kept;
    long row_shift;
    const float *query_maps;
} word_source;

/* Appends the map of the word at ids[first .. first + count): the mean of its tokens' rows (BLIP-2: of their
 * weights over the queries, then the queries' maps weighed), then tells the caller. piece: room for a grid and
 * for a row. */
static glimpse_status add_word_map(glimpse_explanation *e, const glimpse_model *model, const word_source *source,
                                   size_t first, size_t count, const glimpse_explain_params *p, float *piece) {
    size_t patches = (size_t)e->grid_width * (size_t)e->grid_height, width = source->kept.end - source->kept.first;
    char *label = NULL;
    glimpse_status status = word_label(model, e->ids + first, count, &label);
    if (status) return status;
    glimpse_explain_map *map = add_map(e, GLIMPSE_EXPLAIN_MAP_CROSS_ATTENTION, label, first, count);
    free(label);
    if (!map) return ERROR_OOM();
    float *sum = map->grid;
    if (source->query_maps) {
        if (!(map->queries = calloc(width, sizeof(float)))) return ERROR_OOM();
        map->query_count = width;
        sum = map->queries;
    }
    const attention_record *r = source->record;
    for (size_t i = 0; i < count; i++) {
        explain_average_span(piece, r->probabilities[source->kind], r->heads, r->rows, r->columns[source->kind],
                             source->layers, heads_of(p, r->heads), (size_t)((long)(first + i) + source->row_shift),
                             source->kept);
        for (size_t j = 0; j < width; j++) sum[j] += piece[j] / (float)count;
    }
    if (source->query_maps) {
        for (size_t q = 0; q < width; q++)
            for (size_t j = 0; j < patches; j++) map->grid[j] += map->queries[q] * source->query_maps[q * patches + j];
        explain_normalize(map->grid, patches);
    }
    return map_done(p, e);
}

/* One map per word of ids[begin .. end) (tokens that are no word skipped; a continuing token joins the word
 * before it). */
static glimpse_status word_maps(glimpse_explanation *e, const glimpse_model *model, const word_source *source,
                                size_t begin, size_t end, const glimpse_explain_params *p) {
    size_t patches = (size_t)e->grid_width * (size_t)e->grid_height, width = source->kept.end - source->kept.first;
    float *piece = malloc((patches > width ? patches : width) * sizeof(float));
    if (!piece) return ERROR_OOM();
    glimpse_status status = GLIMPSE_STATUS_OK;
    for (size_t t = begin; t < end && !status;) {
        if (!token_is_word(model, e->ids[t])) {
            t++;
            continue;
        }
        size_t count = 1;
        while (t + count < end && continues_word(model, e->ids[t + count])) count++;
        status = add_word_map(e, model, source, t, count, p, piece);
        t += count;
    }
    free(piece);
    return status;
}

/* ------------------------------------------------- captions and answers */

/* One caption's explanation in the making: the family's shapes, the records its passes fill, the maps' source. */
typedef struct caption_job {
    glimpse_context *ctx;
    const glimpse_model *model;
    const glimpse_explain_params *p;
    family_blocks blocks;  /* the model's */
    family_run_blocks run; /* the context's */
    glimpse_explanation *e;
    size_t layers, heads;    /* of the attention the words read: the decoder's (BLIP-2: the language model's) */
    int32_t *prefix;         /* what the returned ids start with: the start token (and BLIP's, ViT-GPT2's prompt) */
    size_t prefix_length;
    int32_t *lm_prompt;      /* BLIP-2: the language model's prompt ("</s>" first), after the query positions */
    size_t lm_prompt_length, queries;
    attention_record decoder, qformer, vision;
    float *query_maps;       /* BLIP-2: [queries][patches], from the Q-Former's record once it has run */
    word_source source;
} caption_job;

/* The captioning decoder a model has decides the job's shapes, records and passes: a language model reading
 * the Q-Former's query vectors as a prefix (self-attention over them), or a decoder with cross-attention over
 * the image tokens, GPT-2's or BERT's. */
static bool reads_query_prefix(const family_blocks *model) { return model->qformer && model->qformer->bert.layers; }
static bool decodes_with_gpt2(const family_blocks *model) { return model->gpt2 && model->gpt2->layers; }

static void caption_job_free(caption_job *job) {
    free(job->prefix), free(job->lm_prompt), free(job->query_maps);
    explain_record_release(&job->decoder), explain_record_release(&job->qformer), explain_record_release(&job->vision);
}

/* The decoder's record for `rows` positions: the layers the maps read (cross-attention; BLIP-2's language model:
 * self-attention), with want_raw every layer of both kinds it has. */
static glimpse_status caption_job_record(caption_job *job, size_t rows) {
    const glimpse_explain_params *p = job->p;
    explain_record_release(&job->decoder);
    if (reads_query_prefix(&job->blocks))
        return explain_record_make(&job->decoder, mapped_layers(p, job->layers), 0, job->heads, rows, rows, 0);
    return explain_record_make(&job->decoder, p->want_raw ? explain_all_layers(job->layers) : 0,
                               mapped_layers(p, job->layers), job->heads, rows, rows, job->blocks.vision->tokens);
}

/* The family's shapes, prompt and records (but the decoder's, made per pass); *resolved = params or defaults. */
static glimpse_status caption_job_start(caption_job *job, glimpse_context *ctx, const glimpse_explain_params *p,
                                        const char *prompt) {
    const glimpse_model *model = ctx->model;
    memset(job, 0, sizeof *job);
    job->ctx = ctx, job->model = model, job->p = p;
    const family_blocks *blocks = &job->blocks;
    family_blocks_of(model, &job->blocks);
    glimpse_status status = family_run_blocks_of(ctx, &job->run);
    if (status) return status;
    if (blocks->text_decoder && blocks->text_decoder->layers) {
        job->layers = (size_t)blocks->text_decoder->config.layers;
        job->heads = (size_t)blocks->text_decoder->config.heads;
    } else if (decodes_with_gpt2(blocks)) {
        job->layers = (size_t)blocks->gpt2->config.layers, job->heads = (size_t)blocks->gpt2->config.heads;
    } else {
        job->layers = (size_t)blocks->language_model->config.layers;
        job->heads = (size_t)blocks->language_model->config.heads;
    }
    if ((status = check_params(p, job->layers, job->heads))) return status;
    if (reads_query_prefix(blocks)) {
        const blip2_qformer *q = blocks->qformer;
        size_t layers = (size_t)q->config.layers;
        uint64_t cross = 0;
        for (size_t l = 0; l < layers; l++)
            if (q->bert.layers[l].cross_key_weight.data) cross |= (uint64_t)1 << l;
        job->queries = (size_t)q->queries;
        if (!(job->prefix = malloc(sizeof *job->prefix))) return ERROR_OOM();
        job->prefix[0] = model->start_id, job->prefix_length = 1; /* generate's placeholder */
        status = model->family->caption->prompt_ids(model, prompt, &job->lm_prompt, &job->lm_prompt_length);
        if (!status)
            status = explain_record_make(&job->qformer, p->want_raw ? explain_all_layers(layers) : 0, cross,
                                         (size_t)q->config.heads, job->queries, job->queries, blocks->vision->tokens);
    } else {
        status = model->family->caption->prompt_ids(model, prompt, &job->prefix, &job->prefix_length);
    }
    if (!status && p->want_raw && p->want_vision) {
        const vit_model *v = blocks->vision;
        status = explain_record_make(&job->vision, explain_all_layers((size_t)v->config.layers), 0,
                                     (size_t)v->config.heads, v->tokens, v->tokens, 0);
    }
    return status;
}

/* The word source over the decoder's record. */
static void caption_job_source(caption_job *job) {
    bool blip2 = reads_query_prefix(&job->blocks);
    job->source = (word_source){
        .record = &job->decoder,
        .kind = blip2 ? ATTENTION_KIND_SELF : ATTENTION_KIND_CROSS,
        .layers = averaged_slots(job->p, job->layers),
        /* the class token's column dropped; BLIP-2: the query positions, first in the language model's sequence */
        .kept = blip2 ? (explain_range){0, job->queries} : (explain_range){1, job->blocks.vision->tokens},
        /* the row whose logits chose the token: the position before it (BLIP-2: ids[k], k >= 1, came from the
         * last prompt position + k - 1, after the queries) */
        .row_shift = blip2 ? (long)(job->queries + job->lm_prompt_length) - 2 : -1,
        .query_maps = job->query_maps};
}

/* BLIP-2: each query's map over the patches from the Q-Former's record (every cross-attention layer and head
 * averaged, class column dropped), once. */
static glimpse_status caption_job_query_maps(caption_job *job) {
    if (!reads_query_prefix(&job->blocks) || job->query_maps) return GLIMPSE_STATUS_OK;
    const attention_record *r = &job->qformer;
    size_t patches = (size_t)job->e->grid_width * (size_t)job->e->grid_height;
    size_t slots = (size_t)__builtin_popcountll(r->layers[ATTENTION_KIND_CROSS]);
    if (!(job->query_maps = malloc(job->queries * patches * sizeof(float)))) return ERROR_OOM();
    for (size_t q = 0; q < job->queries; q++)
        explain_average_row(job->query_maps + q * patches, r->probabilities[ATTENTION_KIND_CROSS], r->heads, r->rows,
                            r->columns[ATTENTION_KIND_CROSS], (explain_range){0, slots}, (explain_range){0, r->heads},
                            q, 1);
    job->source.query_maps = job->query_maps;
    return GLIMPSE_STATUS_OK;
}

/* One decoder pass over the chosen sequence e->ids, recording every row (beam search; want_raw's tensors). */
static glimpse_status caption_job_pass(caption_job *job, const glimpse_image *image) {
    glimpse_context *ctx = job->ctx;
    const family_blocks *model = &job->blocks;
    glimpse_explanation *e = job->e;
    size_t n = e->id_count, tokens = model->vision->tokens;
    glimpse_status status = GLIMPSE_STATUS_OK;
    if (reads_query_prefix(model)) { /* the queries' vectors are still in the family's prefix */
        size_t rows = job->queries + job->lm_prompt_length + (n - 1);
        size_t width = (size_t)model->language_model->config.word_embed_proj_dim;
        float *embedded = malloc(rows * width * sizeof(float));
        opt_state *state = NULL;
        if (!embedded) return ERROR_OOM();
        memcpy(embedded, *job->run.prefix, job->queries * width * sizeof(float));
        status = opt_embed(model->language_model, job->lm_prompt, job->lm_prompt_length,
                           embedded + job->queries * width);
        if (!status)
            status = opt_embed(model->language_model, e->ids + 1, n - 1,
                               embedded + (job->queries + job->lm_prompt_length) * width);
        if (!status) status = caption_job_record(job, rows);
        if (!status) status = opt_state_create(model->language_model, 1, rows, rows, &state);
        if (!status) {
            state->record = &job->decoder;
            status = opt_forward(model->language_model, state, embedded, 1, rows, ctx->threads);
        }
        opt_state_free(state);
        free(embedded);
        return status;
    }
    status = encode_image(ctx, image);
    if (!status) status = caption_job_record(job, n);
    if (status) return status;
    if (decodes_with_gpt2(model)) {
        gpt2_state *state = NULL;
        status = gpt2_state_create(model->gpt2, 1, n, n, tokens, &state);
        if (!status) status = gpt2_set_image(model->gpt2, state, job->run.vision_output, tokens, ctx->threads);
        if (!status) {
            state->record = &job->decoder;
            status = gpt2_decode_step(model->gpt2, state, e->ids, 1, n, ctx->threads);
        }
        gpt2_state_free(state);
        return status;
    }
    bert_state *state = NULL;
    const bert_model *decoder = model->text_decoder;
    status = bert_state_create(decoder, 1, n, n, tokens, &state);
    if (!status) status = bert_set_image(decoder, state, job->run.vision_output, tokens, ctx->threads);
    if (!status) {
        state->record = &job->decoder;
        status = bert_decode_step(decoder, state, e->ids, 1, n, ctx->threads);
    }
    bert_state_free(state);
    return status;
}

/* The raw tensors of a caption: the decoder's, BLIP-2's Q-Former's, the vision tower's when asked. */
static glimpse_status caption_job_keep_raw(caption_job *job) {
    glimpse_explanation *e = job->e;
    glimpse_status status;
    if (reads_query_prefix(&job->blocks)) {
        status = keep_record(e, "self_attentions", &job->decoder, ATTENTION_KIND_SELF);
        if (!status) status = keep_record(e, "qformer_cross_attentions", &job->qformer, ATTENTION_KIND_CROSS);
        if (!status) status = keep_record(e, "qformer_self_attentions", &job->qformer, ATTENTION_KIND_SELF);
    } else {
        status = keep_record(e, "cross_attentions", &job->decoder, ATTENTION_KIND_CROSS);
        if (!status) status = keep_record(e, "self_attentions", &job->decoder, ATTENTION_KIND_SELF);
    }
    /* transformers' name of the family's vision attentions (family_captioner.vision_attentions) */
    const char *vision = job->model->family->caption->vision_attentions;
    if (!status && job->vision.probabilities[ATTENTION_KIND_SELF])
        status = keep_record(e, vision, &job->vision, ATTENTION_KIND_SELF);
    return status;
}

/* BLIP-2's last map: what the queries looked at, their maps averaged. */
static glimpse_status caption_job_queries_map(caption_job *job) {
    if (!reads_query_prefix(&job->blocks)) return GLIMPSE_STATUS_OK;
    glimpse_status status = caption_job_query_maps(job);
    size_t patches = (size_t)job->e->grid_width * (size_t)job->e->grid_height;
    glimpse_explain_map *map = status ? NULL : add_map(job->e, GLIMPSE_EXPLAIN_MAP_QUERIES, "queries", 0, 0);
    if (status || !map) return status ? status : ERROR_OOM();
    for (size_t q = 0; q < job->queries; q++)
        for (size_t j = 0; j < patches; j++) map->grid[j] += job->query_maps[q * patches + j];
    explain_normalize(map->grid, patches);
    return map_done(job->p, job->e);
}

/* Greedy and sampled captions are explained as they are generated: the decoder records its steps (each step's
 * rows are the rows one pass over the sequence computes, within rounding: test_attention_parity), and a word's
 * map is made as soon as the token after it shows it is complete. */
typedef struct caption_stream {
    caption_job *job;
    const glimpse_caption_params *caller; /* its on_token is still called */
    int32_t *ids; /* the sequence so far: the returned ids' prefix, then the tokens generated */
    size_t count, capacity, word_start, word_length;
    float *piece;
    glimpse_status status;
} caption_stream;

/* The word being gathered, finished. */
static void stream_word_done(caption_stream *s) {
    if (!s->word_length || s->status) return;
    caption_job *job = s->job;
    job->e->ids = s->ids, job->e->id_count = s->count;
    s->status = caption_job_query_maps(job); /* BLIP-2's Q-Former has run by the first word */
    if (!s->status) s->status = add_word_map(job->e, job->model, &job->source, s->word_start, s->word_length, job->p,
                                             s->piece);
    s->word_length = 0;
}

static bool stream_token(void *user, size_t image, int32_t id, const char *text) {
    caption_stream *s = user;
    if (s->count >= s->capacity) return true; /* cannot happen: the record holds max_length rows */
    bool continues = s->word_length && continues_word(s->job->model, id);
    if (!continues) stream_word_done(s);
    s->ids[s->count] = id;
    if (token_is_word(s->job->model, id)) {
        if (!continues) s->word_start = s->count;
        s->word_length++;
    }
    s->count++;
    bool stop = s->caller && s->caller->on_token && s->caller->on_token(s->caller->user, image, id, text);
    return stop || s->status != GLIMPSE_STATUS_OK;
}

/* Detaches the records explain attached to the context's states. */
static void detach_records(glimpse_context *ctx, const family_run_blocks *run) {
    ctx->caption_record = ctx->qformer_record = NULL;
    if (run->vision) run->vision->record = NULL;
    if (run->bert && *run->bert) (*run->bert)->record = NULL;
    if (run->gpt2 && *run->gpt2) (*run->gpt2)->record = NULL;
    if (run->qformer && *run->qformer) (*run->qformer)->record = NULL;
    if (run->language && *run->language) (*run->language)->record = NULL;
}

/* --------------------------------------- families that explain by their own recorded pass */

/* Whether the text after `before` in `after` (the ids' decoding with one token more) holds more than whitespace,
 * and whether it starts with whitespace; a token that rewrote the end (a character's later bytes) writes. */
static void added_text(const char *before, const char *after, bool *writes, bool *spaced) {
    size_t length = strlen(before);
    *writes = true, *spaced = false;
    if (strncmp(before, after, length) != 0) return;
    const char *added = after + length;
    *spaced = is_space_byte((uint8_t)added[0]);
    while (*added && is_space_byte((uint8_t)*added)) added++;
    *writes = *added != '\0';
}

/* Visible tokens before a token that its text is read after (enough for a character's bytes, a piece's space). */
#define WORD_WINDOW 3

/* Whether ids[t] writes visible text and whether that text starts with a space, by the family's decode: the token
 * alone (nothing: a special token, no word), then after the visible tokens before it (window[held]), whose
 * decoding the text it adds is read against. */
static glimpse_status token_text(const glimpse_model *model, int32_t *window, size_t *held, int32_t id, bool *writes,
                                 bool *spaced) {
    family_decode_fn decode = model->family->caption->decode;
    char *alone = NULL, *before = NULL, *after = NULL;
    *writes = *spaced = false;
    glimpse_status status = decode(model, &id, 1, &alone);
    bool visible = !status && alone[0];
    free(alone);
    if (status || !visible) return status;
    window[*held] = id;
    if (!(status = decode(model, window, *held, &before)) && !(status = decode(model, window, *held + 1, &after)))
        added_text(before, after, writes, spaced);
    free(before), free(after);
    if (*held == WORD_WINDOW) memmove(window, window + 1, WORD_WINDOW * sizeof *window);
    else ++*held;
    return status;
}

/* One map per word of ids[begin .. end) as the family's decode writes them: a token that writes nothing but
 * whitespace (or nothing: a special token) is no word, one whose text starts with whitespace or follows no word
 * starts one, any other continues the word before it (a piece, punctuation, a character's later bytes). */
static glimpse_status decoded_word_maps(glimpse_explanation *e, const glimpse_model *model, const word_source *source,
                                        size_t begin, size_t end, const glimpse_explain_params *p) {
    size_t patches = (size_t)e->grid_width * (size_t)e->grid_height, first = 0, count = 0, held = 0;
    int32_t window[WORD_WINDOW + 1];
    float *piece = malloc(patches * sizeof(float));
    glimpse_status status = piece ? GLIMPSE_STATUS_OK : ERROR_OOM();
    for (size_t t = begin; t <= end && !status; t++) {
        bool writes = false, spaced = false;
        if (t < end && (status = token_text(model, window, &held, e->ids[t], &writes, &spaced))) break;
        if (count && (!writes || spaced)) { /* the word before ends */
            status = add_word_map(e, model, source, first, count, p, piece);
            count = 0;
        }
        if (writes && !count++) first = t;
    }
    free(piece);
    return status;
}

/* The caption (the family's search, as glimpse_caption_images gives it), then the family's one recorded pass over
 * its ids, and a map per word from where the pass says; with want_raw the pass's records as raw tensors. */
static glimpse_status explain_by_family(glimpse_context *ctx, const glimpse_image *image,
                                        const glimpse_caption_params *search, const glimpse_explain_params *p,
                                        glimpse_explanation **out) {
    const glimpse_model *model = ctx->model;
    const family_explainer *explainer = model->family->explain;
    family_explain_shape shape;
    explainer->shape(model, &shape);
    glimpse_status status = check_params(p, shape.layers, shape.heads);
    glimpse_explanation *e = NULL;
    glimpse_caption caption = {0};
    family_explain_pass pass = {.map_layers = mapped_layers(p, shape.layers), .everything = p->want_raw};
    glimpse_image *const images[1] = {(glimpse_image *)image};
    if (!status) status = explanation_on_grid(model, image, shape.grid_width, shape.grid_height, shape.covered, &e);
    if (!status) status = glimpse_caption_images(ctx, images, 1, search, &caption);
    if (!status) {
        e->text = caption.text, e->ids = caption.ids, e->id_count = caption.id_count;
        caption.text = NULL, caption.ids = NULL;
        status = explainer->record(ctx, images, 1, search->prompt, caption.prompt, e->ids, e->id_count, &pass);
    }
    size_t patches = (size_t)shape.grid_width * (size_t)shape.grid_height;
    word_source source = {&pass.records[pass.map_record], pass.map_kind, averaged_slots(p, shape.layers),
                          (explain_range){pass.first_column, pass.first_column + patches}, pass.row_shift, NULL};
    if (!status) status = decoded_word_maps(e, model, &source, pass.first_word, e->id_count, p);
    for (size_t r = 0; r < FAMILY_EXPLAIN_RECORDS; r++)
        for (int kind = 0; kind < ATTENTION_KINDS && !status && p->want_raw; kind++)
            if (pass.names[r][kind] && pass.records[r].probabilities[kind])
                status = keep_record(e, pass.names[r][kind], &pass.records[r], (attention_kind)kind);
    for (size_t r = 0; r < FAMILY_EXPLAIN_RECORDS; r++) explain_record_release(&pass.records[r]);
    glimpse_caption_free(&caption);
    if (status) {
        glimpse_explanation_free(e);
        return status;
    }
    *out = e;
    return GLIMPSE_STATUS_OK;
}

glimpse_status glimpse_explain_caption(glimpse_context *ctx, const glimpse_image *image,
                                       const glimpse_caption_params *caption_params,
                                       const glimpse_explain_params *params, glimpse_explanation **out) {
    if (!ctx || !image || !out)
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_explain_caption: NULL argument");
    *out = NULL;
    const glimpse_model *model = ctx->model;
    if (!glimpse_model_kind_can(model->kind, GLIMPSE_CAPABILITY_CAPTION)) {
        char names[512];
        family_names(FAMILY_CAN(GLIMPSE_CAPABILITY_CAPTION), false, names, sizeof names);
        return error_set(GLIMPSE_STATUS_WRONG_MODEL, "glimpse_explain_caption needs a captioning model (%s), this "
                         "is %s", names, model->architecture);
    }
    if (!glimpse_model_kind_can(model->kind, GLIMPSE_CAPABILITY_EXPLAIN))
        return error_set(GLIMPSE_STATUS_UNSUPPORTED, "explaining %s's captions is not supported yet",
                         model->architecture);
    glimpse_explain_params resolved = params ? *params : glimpse_explain_default_params();
    const glimpse_explain_params *p = &resolved;
    glimpse_caption_params search = caption_params ? *caption_params : glimpse_caption_default_params();
    if (model->family->explain) return explain_by_family(ctx, image, &search, p, out);
    glimpse_caption_params model_search = glimpse_caption_model_params(model);
    int beams = search.beams != GLIMPSE_CAPTION_MODEL_DEFAULT ? search.beams : search.sample ? 1 : model_search.beams;
    int max_tokens = search.max_tokens != GLIMPSE_CAPTION_MODEL_DEFAULT ? search.max_tokens : model_search.max_tokens;
    caption_job job;
    glimpse_status status = caption_job_start(&job, ctx, p, search.prompt);
    glimpse_caption caption = {0};
    caption_stream stream = {0};
    bool streamed = beams == 1 && max_tokens > 0; /* beam search reorders its sequences: one pass afterwards */
    if (!status) status = explanation_new(model, image, &job.e);
    glimpse_explanation *e = job.e;
    caption_job_source(&job);
    if (!status && streamed) {
        size_t capacity = job.prefix_length + (size_t)max_tokens;
        size_t patches = (size_t)e->grid_width * (size_t)e->grid_height;
        size_t piece = patches > job.queries ? patches : job.queries;
        stream = (caption_stream){&job, caption_params, malloc(capacity * sizeof(int32_t)), job.prefix_length,
                                  capacity, 0,          0, malloc(piece * sizeof(float)), GLIMPSE_STATUS_OK};
        if (!stream.ids || !stream.piece) status = ERROR_OOM();
        if (!status) memcpy(stream.ids, job.prefix, job.prefix_length * sizeof(int32_t));
        /* the decoder's rows: the sequence (BLIP-2: the queries and the language model's prompt, then the tokens) */
        size_t rows = reads_query_prefix(&job.blocks)
                          ? job.queries + job.lm_prompt_length + (size_t)max_tokens
                          : capacity;
        if (!status) status = caption_job_record(&job, rows);
        if (!status) {
            ctx->caption_record = &job.decoder;
            search.on_token = stream_token;
            search.user = &stream;
        }
    }
    if (!status) {
        if (job.qformer.probabilities[ATTENTION_KIND_CROSS]) ctx->qformer_record = &job.qformer;
        if (job.vision.probabilities[ATTENTION_KIND_SELF]) job.run.vision->record = &job.vision;
    }
    glimpse_image *const images[1] = {(glimpse_image *)image};
    if (!status) status = glimpse_caption_images(ctx, images, 1, &search, &caption);
    detach_records(ctx, &job.run);
    if (status == GLIMPSE_STATUS_CANCELLED && stream.status) status = stream.status;
    if (!status && streamed) stream_word_done(&stream); /* a caption that ran to its length ends on a word */
    if (!status && streamed) status = stream.status;
    if (!status) {
        e->text = caption.text, e->ids = caption.ids, e->id_count = caption.id_count;
        caption = (glimpse_caption){0};
    }
    /* beam search, or the raw tensors' every row: one forward over the chosen sequence, as the reference's */
    if (!status && (!streamed || p->want_raw)) {
        status = caption_job_pass(&job, image);
        if (!status && !streamed) status = caption_job_query_maps(&job);
        if (!status && !streamed) status = word_maps(e, model, &job.source, job.prefix_length, e->id_count, p);
    }
    if (!status) status = caption_job_queries_map(&job);
    if (!status && p->want_raw) status = caption_job_keep_raw(&job);
    glimpse_caption_free(&caption);
    if (e && e->ids == stream.ids) e->ids = NULL; /* a failure before the caption was kept */
    free(stream.ids), free(stream.piece);
    caption_job_free(&job);
    if (status) {
        glimpse_explanation_free(e);
        return status;
    }
    *out = e;
    return GLIMPSE_STATUS_OK;
}

glimpse_status glimpse_explain_answer(glimpse_context *ctx, const glimpse_image *image, const char *question,
                                      const glimpse_caption_params *caption_params,
                                      const glimpse_explain_params *params, glimpse_explanation **out) {
    if (!ctx || !image || !question || !out)
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_explain_answer: NULL argument");
    *out = NULL;
    glimpse_caption_params asked;
    char *prompt = NULL;
    glimpse_status status =
        caption_question_params(ctx->model, caption_params, question, "glimpse_explain_answer", &asked, &prompt);
    if (!status) status = glimpse_explain_caption(ctx, image, &asked, params, out);
    free(prompt);
    return status;
}

/* ------------------------------------------------------- BLIP ITM: text over image */

glimpse_status glimpse_explain_match(glimpse_context *ctx, const glimpse_image *image, const char *text,
                                     const glimpse_explain_params *params, glimpse_explanation **out) {
    if (!ctx || !image || !out || !text)
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_explain_match: NULL argument");
    *out = NULL;
    const glimpse_model *model = ctx->model;
    if (!(model->family->capabilities & FAMILY_CAN(GLIMPSE_CAPABILITY_MATCH)))
        return error_set(GLIMPSE_STATUS_WRONG_MODEL, "glimpse_explain_match needs a BLIP retrieval model "
                         "(BlipForImageTextRetrieval), this is %s", model->architecture);
    glimpse_explain_params resolved = params ? *params : glimpse_explain_default_params();
    const glimpse_explain_params *p = &resolved;
    family_blocks blocks;
    family_blocks_of(model, &blocks);
    const bert_model *encoder = blocks.text_encoder;
    glimpse_status status = check_params(p, (size_t)encoder->config.layers, (size_t)encoder->config.heads);
    if (status) return status;
    size_t positions = (size_t)encoder->config.max_positions, count = 0;
    glimpse_explanation *e = NULL;
    recorded_pass pass = {0};
    status = explanation_new(model, image, &e);
    if (!status && (!(e->ids = malloc(positions * sizeof *e->ids)) || !(e->text = strdup(text))))
        status = ERROR_OOM();
    if (!status) status = glimpse_tokenize(model, text, e->ids, positions, &count);
    if (status == GLIMPSE_STATUS_TOO_LARGE)
        status = error_set(status, "the text has %zu tokens; the model takes %zu", count, positions);
    if (!status) {
        e->id_count = count;
        status = encode_image(ctx, image);
    }
    if (!status) status = recorded_pass_create(ctx, encoder, count, p, &pass);
    if (!status) status = bert_encode(encoder, pass.state, e->ids, count, 1, ctx->threads);
    word_source source = {&pass.record, ATTENTION_KIND_CROSS, averaged_slots(p, (size_t)encoder->config.layers),
                          (explain_range){1, blocks.vision->tokens}, 0, NULL};
    if (!status) {
        e->score = itm_match_probability(blocks.itm, pass.state->x, NULL);
        status = word_maps(e, model, &source, 0, count, p);
    }
    glimpse_explain_map *whole = status ? NULL : add_map(e, GLIMPSE_EXPLAIN_MAP_CROSS_ATTENTION, "[text]", 0, count);
    if (!status && !whole) status = ERROR_OOM();
    if (!status) { /* the [CLS] row: what the match head reads */
        const attention_record *r = &pass.record;
        explain_average_row(whole->grid, r->probabilities[ATTENTION_KIND_CROSS], r->heads, r->rows,
                            r->columns[ATTENTION_KIND_CROSS], source.layers, heads_of(p, r->heads), 0, 1);
        status = map_done(p, e);
    }
    if (!status && p->want_raw) status = keep_record(e, "cross_attentions", &pass.record, ATTENTION_KIND_CROSS);
    recorded_pass_free(&pass);
    if (status) {
        glimpse_explanation_free(e);
        return status;
    }
    *out = e;
    return GLIMPSE_STATUS_OK;
}

/* ------------------------------------------------------ CLIP and SigLIP */

/* The logit of the image whose pixel_values are run.pixel_values[b] (after vit_forward) against text. */
static float clip_logit(const glimpse_context *ctx, const family_run_blocks *run, size_t b,
                        const float *text_embedding, float *image_embedding) {
    const glimpse_model *model = ctx->model;
    family_blocks blocks;
    family_blocks_of(model, &blocks);
    float logit;
    vit_embed(blocks.vision, run->vision, b, image_embedding);
    retrieval_logits(&logit, image_embedding, 1, text_embedding, 1, glimpse_model_embedding_dim(model),
                     blocks.logit_scale, blocks.logit_bias);
    return logit;
}

/* The occlusion map: pixel_values (one image's plane) with patch i replaced by the plane's mean colour, for
 * every patch, through the tower in batches; grid[i] = base logit - occluded logit. */
static glimpse_status occlusion_map(glimpse_context *ctx, const family_run_blocks *run, const float *pixel_values,
                                    const float *text_embedding, float base, float *grid) {
    family_blocks blocks;
    family_blocks_of(ctx->model, &blocks);
    const vit_model *vision = blocks.vision;
    size_t size = (size_t)vision->config.image_size, plane = size * size, side = vision->patches_per_side;
    size_t patch = (size_t)vision->config.patch_size, patches = side * side;
    float mean[3], *embedding = malloc(glimpse_model_embedding_dim(ctx->model) * sizeof(float));
    if (!embedding) return ERROR_OOM();
    for (size_t c = 0; c < 3; c++) {
        double sum = 0;
        for (size_t i = 0; i < plane; i++) sum += pixel_values[c * plane + i];
        mean[c] = (float)(sum / (double)plane);
    }
    glimpse_status status = GLIMPSE_STATUS_OK;
    for (size_t first = 0; first < patches && !status; first += CONTEXT_IMAGE_BATCH) {
        size_t batch = patches - first < CONTEXT_IMAGE_BATCH ? patches - first : CONTEXT_IMAGE_BATCH;
        for (size_t b = 0; b < batch; b++) {
            float *copy = run->pixel_values + b * 3 * plane;
            memcpy(copy, pixel_values, 3 * plane * sizeof(float));
            size_t row = (first + b) / side, column = (first + b) % side;
            for (size_t c = 0; c < 3; c++)
                for (size_t y = row * patch; y < (row + 1) * patch; y++)
                    for (size_t x = column * patch; x < (column + 1) * patch; x++)
                        copy[c * plane + y * size + x] = mean[c];
        }
        vit_forward(vision, run->vision, run->pixel_values, batch, ENCODER_OUTPUT_POOLED_ROWS, ctx->threads);
        for (size_t b = 0; b < batch; b++) grid[first + b] = base - clip_logit(ctx, run, b, text_embedding, embedding);
        status = context_progress(ctx, first + batch, patches);
    }
    free(embedding);
    return status;
}

/* Vision self-attention recorded in groups of layers from the last asked for down to layer 0, rolled out into
 * vector[tokens] (which starts as the pooled output's attention over the last layer's outputs). pixel_values
 * are the family's pixel_values[0]. SigLIP's pooling head is recorded with the first group (slot after its layers),
 * its rows into pool[heads × tokens] when pool is not NULL. With raw (every layer in one pass), *raw receives
 * the whole record [layers (+ the head's), heads, tokens, tokens]. */
typedef struct rollout_job {
    explain_range heads_used;
    size_t last_layer;   /* rolled out from this layer down */
    bool start_at_class; /* CLIP: start from the class token's row; SigLIP: from the pooling head's */
    bool keep_everything;
} rollout_job;

static glimpse_status vision_rollout(glimpse_context *ctx, const family_run_blocks *run, const rollout_job *job,
                                     float *vector, float *pool, float **raw) {
    family_blocks blocks;
    family_blocks_of(ctx->model, &blocks);
    const vit_model *vision = blocks.vision;
    size_t tokens = vision->tokens, heads = (size_t)vision->config.heads, layers = (size_t)vision->config.layers;
    size_t per_layer = heads * tokens * tokens;
    size_t group = job->keep_everything ? layers : ctx->rollout_budget / per_layer;
    if (group < 1) group = 1;
    float *scratch = malloc(tokens * sizeof(float));
    if (!scratch) return ERROR_OOM();
    bool pooled_head = vision->weights.head_probe != NULL;
    glimpse_status status = GLIMPSE_STATUS_OK;
    for (size_t k = 0; k < tokens; k++) vector[k] = job->start_at_class && k == 0 ? 1.0f : 0.0f;
    size_t end = job->keep_everything ? layers : job->last_layer + 1;
    bool first_group = true;
    while (end > 0 && !status) {
        size_t begin = end > group ? end - group : 0;
        attention_record record = {.sequences = 1, .heads = heads, .rows = tokens, .columns = {tokens, 0}};
        for (size_t l = begin; l < end; l++) record.layers[ATTENTION_KIND_SELF] |= (uint64_t)1 << l;
        bool with_head = first_group && pooled_head;
        if (with_head) record.layers[ATTENTION_KIND_SELF] |= (uint64_t)1 << layers;
        float *probabilities = malloc(attention_record_floats(&record, ATTENTION_KIND_SELF) * sizeof(float));
        if (!probabilities) {
            status = ERROR_OOM();
            break;
        }
        record.probabilities[ATTENTION_KIND_SELF] = probabilities;
        run->vision->record = &record;
        vit_forward(vision, run->vision, run->pixel_values, 1, ENCODER_OUTPUT_POOLED_ROWS, ctx->threads);
        run->vision->record = NULL;
        if (with_head) { /* the head's slot follows the group's layers: its row 0 per head */
            const float *head = probabilities + (end - begin) * per_layer;
            for (size_t h = 0; h < heads; h++)
                memcpy(pool + h * tokens, head + h * tokens * tokens, tokens * sizeof(float));
            if (!job->start_at_class) explain_average_row(vector, head, heads, tokens, tokens,
                                                          (explain_range){0, 1}, job->heads_used, 0, 0);
        }
        size_t from = job->keep_everything ? job->last_layer + 1 : end;
        for (size_t l = from; l-- > begin;)
            explain_rollout_step(vector, scratch, probabilities + (l - begin) * per_layer, heads, tokens,
                                 job->heads_used);
        if (raw)
            *raw = probabilities;
        else
            free(probabilities);
        first_group = false;
        end = begin;
    }
    free(scratch);
    return status;
}

glimpse_status glimpse_explain_clip(glimpse_context *ctx, const glimpse_image *image, const char *text,
                                    const glimpse_explain_params *params, glimpse_explanation **out) {
    if (!ctx || !image || !out)
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_explain_clip: NULL argument");
    *out = NULL;
    const glimpse_model *model = ctx->model;
    if (!model_embeds(model))
        return error_set(GLIMPSE_STATUS_WRONG_MODEL, "glimpse_explain_clip needs a CLIP or SigLIP model, this is %s",
                         model->architecture);
    if (!model->has_vision || (text && !model->has_text))
        return error_set(GLIMPSE_STATUS_WRONG_MODEL, "this model was loaded without the tower this needs");
    glimpse_explain_params defaults = glimpse_explain_default_params();
    const glimpse_explain_params *p = params ? params : &defaults;
    family_blocks blocks;
    family_run_blocks run;
    family_blocks_of(model, &blocks);
    glimpse_status status = family_run_blocks_of(ctx, &run);
    if (status) return status;
    const vit_model *vision = blocks.vision;
    size_t tokens = vision->tokens, heads = (size_t)vision->config.heads, layers = (size_t)vision->config.layers;
    if ((status = check_params(p, layers, heads))) return status;
    bool siglip = vision->weights.head_probe != NULL;
    size_t size = (size_t)vision->config.image_size, plane = 3 * size * size, dim = glimpse_model_embedding_dim(model);
    float *pixels = malloc(plane * sizeof(float)), *vector = malloc(tokens * sizeof(float));
    float *pool = calloc(heads * tokens, sizeof(float)), *text_embedding = malloc(dim * sizeof(float));
    float *image_embedding = malloc(dim * sizeof(float)), *raw = NULL;
    glimpse_explanation *e = NULL;
    if (!pixels || !vector || !pool || !text_embedding || !image_embedding) status = ERROR_OOM();
    if (!status) status = explanation_new(model, image, &e);
    if (!status && text) {
        if (!(e->text = strdup(text))) status = ERROR_OOM();
        size_t positions = (size_t)blocks.text->config.max_positions, count = 0;
        if (!status && !(e->ids = malloc(positions * sizeof *e->ids))) status = ERROR_OOM();
        if (!status) status = glimpse_tokenize(model, text, e->ids, positions, &count);
        e->id_count = count;
        if (!status) status = glimpse_embed_texts(ctx, &text, 1, text_embedding);
    }
    glimpse_image *const images[1] = {(glimpse_image *)image};
    if (!status) status = context_preprocess(ctx, images, 1, 0);
    if (!status) {
        memcpy(pixels, run.pixel_values, plane * sizeof(float));
        if (text) {
            vit_forward(vision, run.vision, run.pixel_values, 1, ENCODER_OUTPUT_POOLED_ROWS, ctx->threads);
            e->score = clip_logit(ctx, &run, 0, text_embedding, image_embedding);
        }
        rollout_job job = {heads_of(p, heads), p->layer < 0 ? layers - 1 : (size_t)p->layer, !siglip, p->want_raw};
        status = vision_rollout(ctx, &run, &job, vector, pool, p->want_raw ? &raw : NULL);
    }
    size_t first_patch = siglip ? 0 : 1;
    glimpse_explain_map *map = status ? NULL : add_map(e, GLIMPSE_EXPLAIN_MAP_ROLLOUT, "rollout", 0, 0);
    if (!status && !map) status = ERROR_OOM();
    if (!status) {
        memcpy(map->grid, vector + first_patch, (tokens - first_patch) * sizeof(float));
        explain_normalize(map->grid, tokens - first_patch);
        status = map_done(p, e);
    }
    if (!status && text && p->occlusion) {
        map = add_map(e, GLIMPSE_EXPLAIN_MAP_OCCLUSION, "occlusion", 0, 0);
        status = map ? occlusion_map(ctx, &run, pixels, text_embedding, e->score, map->grid) : ERROR_OOM();
        if (!status) status = map_done(p, e);
    }
    if (!status && siglip) {
        map = add_map(e, GLIMPSE_EXPLAIN_MAP_ATTENTION_POOL, "attention pool", 0, 0);
        if (!map) status = ERROR_OOM();
        else {
            explain_average_row(map->grid, pool, heads, 1, tokens, (explain_range){0, 1}, heads_of(p, heads), 0, 0);
            status = map_done(p, e);
        }
    }
    if (!status && raw) {
        size_t shape[4] = {layers, heads, tokens, tokens}, pool_shape[2] = {heads, tokens};
        status = add_raw(e, "vision_attentions", 4, shape, raw);
        raw = NULL;
        if (!status && siglip) {
            float *copy = malloc(heads * tokens * sizeof(float));
            if (copy) memcpy(copy, pool, heads * tokens * sizeof(float));
            status = copy ? add_raw(e, "attention_pool", 2, pool_shape, copy) : ERROR_OOM();
        }
    }
    free(pixels), free(vector), free(pool), free(text_embedding), free(image_embedding), free(raw);
    if (status) {
        glimpse_explanation_free(e);
        return status;
    }
    *out = e;
    return GLIMPSE_STATUS_OK;
}

/* ------------------------------------------------- pictures and raw files */

glimpse_status glimpse_explain_upsample(const glimpse_explanation *e, size_t map, int width, int height,
                                        float *out) {
    if (!e || !out) return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_explain_upsample: NULL argument");
    if (map >= e->map_count || width < 1 || height < 1)
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_explain_upsample: no map %zu or size %dx%d", map,
                         width, height);
    explain_upsample(out, width, height, e->maps[map].grid, e->grid_width, e->grid_height, e->region, e->image_width,
                     e->image_height);
    return GLIMPSE_STATUS_OK;
}

/* Panel layout: margins, the label's line, panels per row of a sheet. */
#define PANEL_MARGIN 6
#define PANEL_LABEL 26
#define PANEL_FONT_PIXELS 17
#define SHEET_COLUMNS 6
#define HEAT_OPACITY 0.6f

/* The largest value of a grid (what its colours are scaled to). */
static float grid_maximum(const float *grid, size_t count) {
    float maximum = 0;
    for (size_t i = 0; i < count; i++)
        if (grid[i] > maximum) maximum = grid[i];
    return maximum;
}

glimpse_status glimpse_explain_render_png(const glimpse_explanation *e, const glimpse_image *image, size_t map,
                                          int panel_size, const char *font_path, void **png, size_t *size) {
    if (!e || !image || !png || !size)
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_explain_render_png: NULL argument");
    *png = NULL;
    *size = 0;
    if (map != GLIMPSE_EXPLAIN_SHEET && map >= e->map_count)
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "the explanation has %zu maps, not %zu", e->map_count, map);
    if (image->width != e->image_width || image->height != e->image_height)
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "the picture is %dx%d, the explanation's %dx%d", image->width,
                         image->height, e->image_width, e->image_height);
    if (panel_size == 0) panel_size = 256;
    if (panel_size < 16 || panel_size > 4096)
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "panel size %d is not 16 to 4096", panel_size);
    int longest = image->width > image->height ? image->width : image->height;
    int width = (int)lround((double)panel_size * image->width / longest);
    int height = (int)lround((double)panel_size * image->height / longest);
    if (width < 1) width = 1;
    if (height < 1) height = 1;
    size_t panels = map == GLIMPSE_EXPLAIN_SHEET ? e->map_count + 1 : 1;
    int columns = panels < SHEET_COLUMNS ? (int)panels : SHEET_COLUMNS, rows = (int)((panels + columns - 1) / columns);
    int cell_width = width + 2 * PANEL_MARGIN, cell_height = height + PANEL_MARGIN + PANEL_LABEL;
    explain_canvas canvas = {NULL, columns * cell_width, rows * cell_height};
    explain_font *font = NULL;
    glimpse_image *scaled = NULL;
    float *values = malloc((size_t)width * (size_t)height * sizeof(float));
    canvas.pixels = malloc((size_t)canvas.width * (size_t)canvas.height * 3);
    glimpse_status status = values && canvas.pixels ? GLIMPSE_STATUS_OK : ERROR_OOM();
    if (!status) status = explain_font_load(font_path, &font);
    if (!status) status = image_resize(image, width, height, RESIZE_FILTER_BICUBIC, &scaled);
    if (!status) {
        memset(canvas.pixels, 255, (size_t)canvas.width * (size_t)canvas.height * 3);
        static const uint8_t ink[3] = {20, 20, 20};
        for (size_t panel = 0; panel < panels && !status; panel++) {
            int x = (int)(panel % (size_t)columns) * cell_width + PANEL_MARGIN;
            int y = (int)(panel / (size_t)columns) * cell_height + PANEL_MARGIN;
            /* the sheet's first panel is the picture alone, labelled with the text explained */
            size_t index = map != GLIMPSE_EXPLAIN_SHEET ? map : panel - 1;
            bool picture = map == GLIMPSE_EXPLAIN_SHEET && panel == 0;
            const glimpse_explain_map *m = picture ? NULL : &e->maps[index];
            float maximum = 0;
            if (m) {
                explain_upsample(values, width, height, m->grid, e->grid_width, e->grid_height, e->region,
                                 e->image_width, e->image_height);
                maximum = grid_maximum(m->grid, (size_t)e->grid_width * (size_t)e->grid_height);
            }
            explain_draw_heat(&canvas, x, y, scaled->pixels, m ? values : NULL, width, height, maximum,
                              HEAT_OPACITY);
            const char *label = m ? m->label : e->text ? e->text : "";
            status = explain_draw_text(&canvas, font, label, x, y + height + 4, width, PANEL_FONT_PIXELS, ink);
        }
        if (!status) status = explain_png_encode(&canvas, png, size);
    }
    explain_font_free(font);
    glimpse_image_free(scaled);
    free(values), free(canvas.pixels);
    return status;
}

glimpse_status glimpse_explain_write_safetensors(const glimpse_explanation *e, const char *path) {
    if (!e || !path)
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_explain_write_safetensors: NULL argument");
    if (!e->raw_count)
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "no raw tensors: explain with want_raw to keep them");
    cJSON *header = cJSON_CreateObject();
    cJSON *metadata = cJSON_AddObjectToObject(header, "__metadata__");
    if (e->text) cJSON_AddStringToObject(metadata, "text", e->text);
    size_t offset = 0;
    for (size_t i = 0; i < e->raw_count; i++) {
        const glimpse_explain_tensor *t = &e->raw[i];
        size_t bytes = sizeof(float);
        cJSON *entry = cJSON_AddObjectToObject(header, t->name);
        cJSON_AddStringToObject(entry, "dtype", "F32");
        cJSON *shape = cJSON_AddArrayToObject(entry, "shape");
        for (size_t d = 0; d < t->rank; d++) {
            cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)t->shape[d]));
            bytes *= t->shape[d];
        }
        cJSON *offsets = cJSON_AddArrayToObject(entry, "data_offsets");
        cJSON_AddItemToArray(offsets, cJSON_CreateNumber((double)offset));
        cJSON_AddItemToArray(offsets, cJSON_CreateNumber((double)(offset + bytes)));
        offset += bytes;
    }
    char *text = cJSON_PrintUnformatted(header);
    cJSON_Delete(header);
    if (!text) return ERROR_OOM();
    size_t length = strlen(text), padded = (length + 7) & ~(size_t)7; /* data 8-byte aligned */
    uint8_t size_bytes[8];
    for (int i = 0; i < 8; i++) size_bytes[i] = (uint8_t)((uint64_t)padded >> (8 * i));
    FILE *file = fopen(path, "wb");
    if (!file) {
        free(text);
        return error_set(GLIMPSE_STATUS_IO, "%s: cannot write: %s", path, strerror(errno));
    }
    int ok = fwrite(size_bytes, 1, 8, file) == 8 && fwrite(text, 1, length, file) == length;
    for (size_t i = length; i < padded && ok; i++) ok = fputc(' ', file) != EOF;
    free(text);
    for (size_t i = 0; i < e->raw_count && ok; i++) {
        size_t count = 1;
        for (size_t d = 0; d < e->raw[i].rank; d++) count *= e->raw[i].shape[d];
        ok = fwrite(e->raw[i].data, sizeof(float), count, file) == count; /* little-endian hosts, as safetensors */
    }
    if (fclose(file) != 0) ok = 0;
    if (!ok) return error_set(GLIMPSE_STATUS_IO, "%s: write failed", path);
    return GLIMPSE_STATUS_OK;
}
