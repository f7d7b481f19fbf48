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
#include "explain/render.h"
#include "fusion/retrieval.h"
#include "vision/image.h"
#include "vision/resize.h"

glimpse_explain_params glimpse_explain_default_params(void) {
    return (glimpse_explain_params){
        .layer = -1, .head = -1, .want_raw = false, .occlusion = true, .on_map = NULL, .user = NULL};
}

void glimpse_explanation_free(glimpse_explanation *e) {
    if (!e) return;
    for (size_t i = 0; i < e->map_count; i++) free(e->maps[i].label), free(e->maps[i].grid);
    for (size_t i = 0; i < e->raw_count; i++) free(e->raw[i].data);
    free(e->maps), free(e->raw), free(e->text), free(e->ids);
    free(e);
}

/* ------------------------------------------------------------ building one */

/* A new explanation of image by the model's vision grid, with the region its preprocessing keeps. */
static glimpse_status explanation_new(const glimpse_model *model, const glimpse_image *image,
                                      glimpse_explanation **out) {
    glimpse_explanation *e = calloc(1, sizeof *e);
    if (!e) return ERROR_OOM();
    const vit_model *vision = &model->vision;
    int side = (int)vision->patches_per_side, covered = side * vision->config.patch_size;
    int resized_width, resized_height, left, top;
    preprocess_geometry(&model->preprocess, image->width, image->height, &resized_width, &resized_height, &left,
                        &top);
    float scale_x = (float)image->width / (float)resized_width, scale_y = (float)image->height / (float)resized_height;
    e->grid_width = e->grid_height = side;
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

/* Appends a map (its grid zeroed) and returns it, or NULL when memory runs out. */
static glimpse_explain_map *add_map(glimpse_explanation *e, glimpse_explain_map_kind kind, const char *label,
                                    size_t first_token, size_t token_count) {
    glimpse_explain_map *maps = realloc(e->maps, (e->map_count + 1) * sizeof *maps);
    if (!maps) return NULL;
    e->maps = maps;
    glimpse_explain_map *map = &maps[e->map_count];
    *map = (glimpse_explain_map){kind, strdup(label), first_token, token_count,
                                 calloc((size_t)e->grid_width * (size_t)e->grid_height, sizeof(float))};
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

/* The image's vision tokens after the post-LayerNorm, as BLIP's text side reads them, into ctx->vision_output. */
static glimpse_status encode_image(glimpse_context *ctx, const glimpse_image *image) {
    glimpse_image *const images[1] = {(glimpse_image *)image};
    glimpse_status status = context_preprocess(ctx, images, 1, 0);
    if (status) return status;
    vit_forward(&ctx->model->vision, ctx->vision, ctx->pixel_values, 1, ENCODER_OUTPUT_ALL_ROWS, ctx->threads);
    vit_post_norm_all(&ctx->model->vision, ctx->vision, 0, ctx->vision_output);
    return GLIMPSE_STATUS_OK;
}

/* --------------------------------------------------- BLIP: text over image */

/* A BERT pass that records: its state (one sequence of `length` tokens over the image) and its record of every
 * layer's cross-attention, or only the asked layer's, and with want_raw every layer's self-attention too. */
typedef struct recorded_pass {
    bert_state *state;
    attention_record record;
    explain_range layers; /* the recorded slots the maps average */
} recorded_pass;

/* Frees what the pass holds and leaves it empty (freeing it again does nothing). */
static void recorded_pass_free(recorded_pass *pass) {
    bert_state_free(pass->state);
    free(pass->record.probabilities[ATTENTION_KIND_SELF]);
    free(pass->record.probabilities[ATTENTION_KIND_CROSS]);
    memset(pass, 0, sizeof *pass);
}

/* The record alone, rows for `length` tokens. */
static glimpse_status recorded_pass_record(const glimpse_context *ctx, const bert_model *bert, size_t length,
                                           const glimpse_explain_params *p, recorded_pass *pass) {
    memset(pass, 0, sizeof *pass);
    size_t layers = (size_t)bert->config.layers, image_tokens = ctx->model->vision.tokens;
    uint64_t all = layers >= 64 ? UINT64_MAX : ((uint64_t)1 << layers) - 1;
    uint64_t cross = p->want_raw || p->layer < 0 ? all : (uint64_t)1 << p->layer;
    pass->record = (attention_record){.layers = {p->want_raw ? all : 0, cross},
                                      .sequences = 1,
                                      .heads = (size_t)bert->config.heads,
                                      .rows = length,
                                      .columns = {length, image_tokens}};
    pass->layers = p->layer < 0 ? (explain_range){0, layers}
                   : p->want_raw ? (explain_range){(size_t)p->layer, (size_t)p->layer + 1}
                                 : (explain_range){0, 1};
    for (int kind = 0; kind < ATTENTION_KINDS; kind++) {
        size_t floats = attention_record_floats(&pass->record, (attention_kind)kind);
        if (floats && !(pass->record.probabilities[kind] = calloc(floats, sizeof(float)))) return ERROR_OOM();
    }
    return GLIMPSE_STATUS_OK;
}

/* The record and a state for one pass of `length` tokens over the image in ctx->vision_output. */
static glimpse_status recorded_pass_create(const glimpse_context *ctx, const bert_model *bert, size_t length,
                                           const glimpse_explain_params *p, recorded_pass *pass) {
    size_t image_tokens = ctx->model->vision.tokens;
    glimpse_status status = recorded_pass_record(ctx, bert, length, p, pass);
    if (!status) status = bert_state_create(bert, 1, length, length, image_tokens, &pass->state);
    if (!status) status = bert_set_image(bert, pass->state, ctx->vision_output, image_tokens, ctx->threads);
    if (!status) pass->state->record = &pass->record;
    return status;
}

/* Hands the recorded tensors to the explanation as raw outputs [layers, heads, rows, columns]. */
static glimpse_status keep_raw(glimpse_explanation *e, recorded_pass *pass, size_t layers, bool with_self) {
    const attention_record *r = &pass->record;
    size_t cross_shape[4] = {layers, r->heads, r->rows, r->columns[ATTENTION_KIND_CROSS]};
    size_t self_shape[4] = {layers, r->heads, r->rows, r->columns[ATTENTION_KIND_SELF]};
    /* add_raw takes the memory, or frees it when it fails */
    glimpse_status status = add_raw(e, "cross_attentions", 4, cross_shape, r->probabilities[ATTENTION_KIND_CROSS]);
    pass->record.probabilities[ATTENTION_KIND_CROSS] = NULL;
    if (!status && with_self) {
        status = add_raw(e, "self_attentions", 4, self_shape, r->probabilities[ATTENTION_KIND_SELF]);
        pass->record.probabilities[ATTENTION_KIND_SELF] = NULL;
    }
    return status;
}

/* Appends the map of the word at ids[first .. first + count): the mean of its tokens' maps, the token at
 * position t read from cross-attention row t + row_shift of record, layers and heads as asked; then tells the
 * caller. piece: room for one grid. */
static glimpse_status add_word_map(glimpse_explanation *e, const glimpse_model *model, const attention_record *r,
                                   explain_range layers, size_t first, size_t count, int row_shift,
                                   const glimpse_explain_params *p, float *piece) {
    size_t patches = (size_t)e->grid_width * (size_t)e->grid_height;
    char *label = NULL;
    glimpse_status status = bert_tokenizer_decode(model->wordpiece, e->ids + first, count, &label);
    if (status) return status;
    glimpse_explain_map *map = add_map(e, GLIMPSE_EXPLAIN_MAP_CROSS_ATTENTION, label, first, count);
    free(label);
    if (!map) return ERROR_OOM();
    for (size_t i = 0; i < count; i++) {
        explain_average_row(piece, r->probabilities[ATTENTION_KIND_CROSS], r->heads, r->rows,
                            r->columns[ATTENTION_KIND_CROSS], layers, heads_of(p, r->heads),
                            (size_t)((long)(first + i) + row_shift), 1);
        for (size_t j = 0; j < patches; j++) map->grid[j] += piece[j] / (float)count;
    }
    return map_done(p, e);
}

/* Whether ids[t] continues the word before it: a "##" word piece. */
static bool continues_word(const glimpse_model *model, int32_t id) {
    const char *token = bert_tokenizer_token(model->wordpiece, id);
    return !bert_tokenizer_is_special(model->wordpiece, id) && token && strncmp(token, "##", 2) == 0;
}

/* One map per word of ids[begin .. end) (special tokens skipped; a "##" piece joins the word before it), read
 * from the pass's record. */
static glimpse_status word_maps(glimpse_explanation *e, const glimpse_model *model, const recorded_pass *pass,
                                size_t begin, size_t end, int row_shift, const glimpse_explain_params *p) {
    float *piece = malloc((size_t)e->grid_width * (size_t)e->grid_height * sizeof(float));
    if (!piece) return ERROR_OOM();
    glimpse_status status = GLIMPSE_STATUS_OK;
    for (size_t t = begin; t < end && !status;) {
        if (bert_tokenizer_is_special(model->wordpiece, e->ids[t])) {
            t++;
            continue;
        }
        size_t count = 1;
        while (t + count < end && continues_word(model, e->ids[t + count])) count++;
        status = add_word_map(e, model, &pass->record, pass->layers, t, count, row_shift, p, piece);
        t += count;
    }
    free(piece);
    return status;
}

/* The checks every BLIP explanation starts with; *resolved = params, or the defaults for NULL. */
static glimpse_status start_blip(glimpse_context *ctx, const glimpse_image *image, glimpse_explanation **out,
                                 glimpse_model_kind kind, const char *what, const glimpse_explain_params *params,
                                 glimpse_explain_params *resolved) {
    if (!ctx || !image || !out) return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "%s: NULL argument", what);
    *out = NULL;
    *resolved = params ? *params : glimpse_explain_default_params();
    if (ctx->model->kind != kind)
        return error_set(GLIMPSE_STATUS_WRONG_MODEL, "%s needs a %s model, this is %s", what,
                         kind == GLIMPSE_MODEL_KIND_BLIP_CAPTION ? "BLIP captioning (BlipForConditionalGeneration)"
                                                                 : "BLIP retrieval (BlipForImageTextRetrieval)",
                         ctx->model->architecture);
    const bert_model *bert =
        kind == GLIMPSE_MODEL_KIND_BLIP_CAPTION ? &ctx->model->text_decoder : &ctx->model->text_encoder;
    return check_params(resolved, (size_t)bert->config.layers, (size_t)bert->config.heads);
}

/* Greedy and sampled captions are explained as they are generated: the decoder records its steps (each step's
 * rows are the rows one pass over the sequence computes, within rounding: test_attention_parity), and a word's
 * map is made as soon as the token after it shows it is complete. */
typedef struct caption_stream {
    glimpse_explanation *e;
    const glimpse_model *model;
    const glimpse_explain_params *p;
    const glimpse_caption_params *caller; /* its on_token is still called */
    recorded_pass *pass;
    int32_t *ids; /* the sequence so far: [DEC], the prompt, the tokens generated */
    size_t count, capacity, word_start, word_length;
    float *piece;
    glimpse_status status;
} caption_stream;

/* The word being gathered, finished. */
static void stream_word_done(caption_stream *s) {
    if (!s->word_length || s->status) return;
    s->e->ids = s->ids, s->e->id_count = s->count;
    s->status = add_word_map(s->e, s->model, &s->pass->record, s->pass->layers, s->word_start, s->word_length, -1,
                             s->p, s->piece);
    s->word_length = 0;
}

static bool stream_token(void *user, size_t image, int32_t id, const char *text) {
    caption_stream *s = user;
    if (s->count >= s->capacity) return true; /* cannot happen: the record holds max_length rows */
    bool continues = s->word_length && continues_word(s->model, id);
    if (!continues) stream_word_done(s);
    s->ids[s->count] = id;
    if (!bert_tokenizer_is_special(s->model->wordpiece, id)) {
        if (!continues) s->word_start = s->count;
        s->word_length++;
    }
    s->count++;
    bool stop = s->caller && s->caller->on_token && s->caller->on_token(s->caller->user, image, id, text);
    return stop || s->status != GLIMPSE_STATUS_OK;
}

glimpse_status glimpse_explain_caption(glimpse_context *ctx, const glimpse_image *image,
                                       const glimpse_caption_params *caption_params,
                                       const glimpse_explain_params *params, glimpse_explanation **out) {
    glimpse_explain_params resolved;
    glimpse_status status =
        start_blip(ctx, image, out, GLIMPSE_MODEL_KIND_BLIP_CAPTION, "glimpse_explain_caption", params, &resolved);
    if (status) return status;
    const glimpse_explain_params *p = &resolved;
    const glimpse_model *model = ctx->model;
    const bert_model *decoder = &model->text_decoder;
    glimpse_caption_params search = caption_params ? *caption_params : glimpse_caption_default_params();
    glimpse_caption_params model_search = glimpse_caption_model_params(model);
    int beams = search.beams != GLIMPSE_CAPTION_MODEL_DEFAULT ? search.beams : search.sample ? 1 : model_search.beams;
    int max_tokens = search.max_tokens != GLIMPSE_CAPTION_MODEL_DEFAULT ? search.max_tokens : model_search.max_tokens;
    size_t prompt_length = 0; /* [DEC] and the prompt's tokens: the words explained come after them */
    status = bert_tokenizer_encode(model->wordpiece, search.prompt ? search.prompt : "", NULL, 0, &prompt_length);
    prompt_length += 1;
    glimpse_explanation *e = NULL;
    glimpse_caption caption = {0};
    recorded_pass pass = {0};
    caption_stream stream = {0};
    bool streamed = beams == 1 && max_tokens > 0; /* beam search reorders its sequences: one pass afterwards */
    if (!status) status = explanation_new(model, image, &e);
    if (!status && streamed) {
        size_t capacity = prompt_length + (size_t)max_tokens;
        size_t patches = (size_t)e->grid_width * (size_t)e->grid_height;
        stream = (caption_stream){e,        model, p, caption_params, &pass, malloc(capacity * sizeof(int32_t)), 0,
                                  capacity, 0,     0, malloc(patches * sizeof(float)), GLIMPSE_STATUS_OK};
        if (!stream.ids || !stream.piece) status = ERROR_OOM();
        if (!status) { /* [DEC] and the prompt: the sequence the tokens continue */
            stream.ids[0] = model->start_id;
            status = bert_tokenizer_encode(model->wordpiece, search.prompt ? search.prompt : "", stream.ids + 1,
                                           capacity - 1, &stream.count);
            stream.count += 1;
        }
        if (!status) status = recorded_pass_record(ctx, decoder, capacity, p, &pass);
        if (!status) {
            ctx->caption_record = &pass.record;
            search.on_token = stream_token;
            search.user = &stream;
        }
    }
    glimpse_image *const images[1] = {(glimpse_image *)image};
    if (!status) status = glimpse_caption_images(ctx, images, 1, &search, &caption);
    ctx->caption_record = NULL;
    if (ctx->bert) ctx->bert->record = NULL;
    if (status == GLIMPSE_STATUS_CANCELLED && stream.status) status = stream.status;
    if (!status && streamed) stream_word_done(&stream); /* a caption that ran to its length ends on a word */
    if (!status && streamed) status = stream.status;
    if (!status) {
        e->text = caption.text, e->ids = caption.ids, e->id_count = caption.id_count;
        caption = (glimpse_caption){0};
    }
    /* beam search, or the raw tensors' every row: one forward over the chosen sequence, as the reference's */
    if (!status && (!streamed || p->want_raw)) {
        recorded_pass_free(&pass);
        status = encode_image(ctx, image);
        if (!status) status = recorded_pass_create(ctx, decoder, e->id_count, p, &pass);
        if (!status) status = bert_decode_step(decoder, pass.state, e->ids, 1, e->id_count, ctx->threads);
        if (!status && !streamed) status = word_maps(e, model, &pass, prompt_length, e->id_count, -1, p);
        if (!status && p->want_raw) status = keep_raw(e, &pass, (size_t)decoder->config.layers, true);
    }
    recorded_pass_free(&pass);
    glimpse_caption_free(&caption);
    if (e && e->ids == stream.ids) e->ids = NULL; /* a failure before the caption was kept */
    free(stream.ids), free(stream.piece);
    if (status) {
        glimpse_explanation_free(e);
        return status;
    }
    *out = e;
    return GLIMPSE_STATUS_OK;
}

glimpse_status glimpse_explain_match(glimpse_context *ctx, const glimpse_image *image, const char *text,
                                     const glimpse_explain_params *params, glimpse_explanation **out) {
    glimpse_explain_params resolved;
    glimpse_status status =
        start_blip(ctx, image, out, GLIMPSE_MODEL_KIND_BLIP_RETRIEVAL, "glimpse_explain_match", params, &resolved);
    if (status) return status;
    if (!text) return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_explain_match: text is NULL");
    const glimpse_explain_params *p = &resolved;
    const glimpse_model *model = ctx->model;
    const bert_model *encoder = &model->text_encoder;
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
    if (!status) {
        e->score = itm_match_probability(&model->itm, pass.state->x, NULL);
        status = word_maps(e, model, &pass, 0, count, 0, p);
    }
    glimpse_explain_map *whole = status ? NULL : add_map(e, GLIMPSE_EXPLAIN_MAP_CROSS_ATTENTION, "[text]", 0, count);
    if (!status && !whole) status = ERROR_OOM();
    if (!status) { /* the [CLS] row: what the match head reads */
        const attention_record *r = &pass.record;
        explain_average_row(whole->grid, r->probabilities[ATTENTION_KIND_CROSS], r->heads, r->rows,
                            r->columns[ATTENTION_KIND_CROSS], pass.layers, heads_of(p, r->heads), 0, 1);
        status = map_done(p, e);
    }
    if (!status && p->want_raw) status = keep_raw(e, &pass, (size_t)encoder->config.layers, false);
    recorded_pass_free(&pass);
    if (status) {
        glimpse_explanation_free(e);
        return status;
    }
    *out = e;
    return GLIMPSE_STATUS_OK;
}

/* ------------------------------------------------------ CLIP and SigLIP */

/* The logit of the image whose pixel_values are ctx->pixel_values[b] (after vit_forward) against text. */
static float clip_logit(const glimpse_context *ctx, size_t b, const float *text_embedding, float *image_embedding) {
    const glimpse_model *model = ctx->model;
    float logit;
    vit_embed(&model->vision, ctx->vision, b, image_embedding);
    retrieval_logits(&logit, image_embedding, 1, text_embedding, 1, glimpse_model_embedding_dim(model),
                     model->logit_scale, model->logit_bias);
    return logit;
}

/* The occlusion map: pixel_values (one image's plane) with patch i replaced by the plane's mean colour, for
 * every patch, through the tower in batches; grid[i] = base logit - occluded logit. */
static glimpse_status occlusion_map(glimpse_context *ctx, const float *pixel_values, const float *text_embedding,
                                    float base, float *grid) {
    const vit_model *vision = &ctx->model->vision;
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
            float *copy = ctx->pixel_values + b * 3 * plane;
            memcpy(copy, pixel_values, 3 * plane * sizeof(float));
            size_t row = (first + b) / side, column = (first + b) % side;
            for (size_t c = 0; c < 3; c++)
                for (size_t y = row * patch; y < (row + 1) * patch; y++)
                    for (size_t x = column * patch; x < (column + 1) * patch; x++)
                        copy[c * plane + y * size + x] = mean[c];
        }
        vit_forward(vision, ctx->vision, ctx->pixel_values, batch, ENCODER_OUTPUT_POOLED_ROWS, ctx->threads);
        for (size_t b = 0; b < batch; b++) grid[first + b] = base - clip_logit(ctx, b, text_embedding, embedding);
        status = context_progress(ctx, first + batch, patches);
    }
    free(embedding);
    return status;
}

/* Vision self-attention recorded in groups of layers from the last asked for down to layer 0, rolled out into
 * vector[tokens] (which starts as the pooled output's attention over the last layer's outputs). pixel_values
 * are ctx->pixel_values[0]. SigLIP's pooling head is recorded with the first group (slot after its layers),
 * its rows into pool[heads × tokens] when pool is not NULL. With raw (every layer in one pass), *raw receives
 * the whole record [layers (+ the head's), heads, tokens, tokens]. */
typedef struct rollout_job {
    explain_range heads_used;
    size_t last_layer;   /* rolled out from this layer down */
    bool start_at_class; /* CLIP: start from the class token's row; SigLIP: from the pooling head's */
    bool keep_everything;
} rollout_job;

static glimpse_status vision_rollout(glimpse_context *ctx, const rollout_job *job, float *vector, float *pool,
                                     float **raw) {
    const vit_model *vision = &ctx->model->vision;
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
        ctx->vision->record = &record;
        vit_forward(vision, ctx->vision, ctx->pixel_values, 1, ENCODER_OUTPUT_POOLED_ROWS, ctx->threads);
        ctx->vision->record = NULL;
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
    const vit_model *vision = &model->vision;
    size_t tokens = vision->tokens, heads = (size_t)vision->config.heads, layers = (size_t)vision->config.layers;
    glimpse_status status = check_params(p, layers, heads);
    if (status) return status;
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
        size_t positions = (size_t)model->text.config.max_positions, count = 0;
        if (!status && !(e->ids = malloc(positions * sizeof *e->ids))) status = ERROR_OOM();
        if (!status) status = glimpse_tokenize(model, text, e->ids, positions, &count);
        e->id_count = count;
        if (!status) status = glimpse_embed_texts(ctx, &text, 1, text_embedding);
    }
    glimpse_image *const images[1] = {(glimpse_image *)image};
    if (!status) status = context_preprocess(ctx, images, 1, 0);
    if (!status) {
        memcpy(pixels, ctx->pixel_values, plane * sizeof(float));
        if (text) {
            vit_forward(vision, ctx->vision, ctx->pixel_values, 1, ENCODER_OUTPUT_POOLED_ROWS, ctx->threads);
            e->score = clip_logit(ctx, 0, text_embedding, image_embedding);
        }
        rollout_job job = {heads_of(p, heads), p->layer < 0 ? layers - 1 : (size_t)p->layer, !siglip, p->want_raw};
        status = vision_rollout(ctx, &job, vector, pool, p->want_raw ? &raw : NULL);
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
        status = map ? occlusion_map(ctx, pixels, text_embedding, e->score, map->grid) : ERROR_OOM();
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
