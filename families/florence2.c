/* florence2.c — the Florence-2 family (Florence2ForConditionalGeneration: microsoft/Florence-2-base, -large and
 * their fine-tunes): its loader (DaViT, the image projection, BART, the processor's tokenizer and preprocessing),
 * its line of the family table, and its tasks as the model card runs them: the picture's rows and the task's
 * prompt through BART's encoder, the decoder's search with the settings generate takes from text_config
 * (no-repeat 3-grams, forced <s> and </s>, 3 beams with early stopping), the ids decoded with their special tokens
 * and post-processed into the task's result. Captions are the caption tasks; Florence-2 does not answer questions.
 * A caption is explained by one recorded pass over its ids (the decoder's cross-attention to the image rows).
 * Its parts and run state are its own (model->parts, ctx->run). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/context.h"
#include "api/model.h"
#include "core/error.h"
#include "core/memory.h"
#include "explain/records.h"
#include "families/family.h"
#include "families/florence2_post.h"
#include "families/florence2_text.h"
#include "families/florence2_vision.h"
#include "families/loader_steps.h"
#include "fusion/bart.h"
#include "weights/config.h"

/* The model card's max_new_tokens (its examples' generate calls), within the decoder's positions. */
#define FLORENCE2_MAX_NEW_TOKENS 1024
/* The processor's image size where a snapshot lacks preprocessor_config.json (the published checkpoints'). */
#define FLORENCE2_IMAGE_SIZE 768

typedef struct florence2_parts {
    florence2_vision vision;
    bart_config config;
    bart_model language;
    gpt2_tokenizer *tokenizer;
} florence2_parts;

typedef struct florence2_run {
    florence2_vision_state vision;
    float *pixels, *rows;      /* [3, size, size]; the encoder's input [positions, d] */
    bert_state *encoder, *decoder;
    size_t decoder_beams, decoder_length, decoder_image_rows;
} florence2_run;

static const florence2_parts *parts_of(const glimpse_model *model) { return model->parts; }

static void free_parts(void *p) {
    florence2_parts *parts = p;
    if (!parts) return;
    florence2_vision_free(&parts->vision);
    bart_model_free(&parts->language);
    gpt2_tokenizer_free(parts->tokenizer);
    free(parts);
}

static void free_run(void *r) {
    florence2_run *run = r;
    if (!run) return;
    florence2_vision_state_free(&run->vision);
    bert_state_free(run->encoder), bert_state_free(run->decoder);
    free(run->pixels), free(run->rows);
    free(run);
}

/* The settings generate takes (text_config's, with the model card's 1,024 new tokens) as model->generation, which
 * glimpse_caption_model_params and the captions' defaults read. */
static glimpse_status generation_settings(glimpse_model *model, const bart_config *c) {
    int max_length = 1 + FLORENCE2_MAX_NEW_TOKENS;
    if (max_length > c->decoder.max_positions + 1) max_length = c->decoder.max_positions + 1;
    cJSON *g = cJSON_CreateObject();
    model->generation = g;
    if (!g || !cJSON_AddNumberToObject(g, "num_beams", c->generation.beams) ||
        !cJSON_AddNumberToObject(g, "max_length", max_length) ||
        !cJSON_AddNumberToObject(g, "min_length", c->generation.min_length) ||
        !cJSON_AddNumberToObject(g, "length_penalty", c->generation.length_penalty))
        return ERROR_OOM();
    return GLIMPSE_STATUS_OK;
}

static glimpse_status load_florence2(glimpse_model *model, const glimpse_load_params *params, const cJSON *vision_json,
                                     const cJSON *text_json) {
    (void)params; /* tasks need both sides, whatever load_* say; int8 is quantize's */
    florence2_parts *parts = calloc(1, sizeof *parts);
    if (!parts) return ERROR_OOM();
    model->parts = parts;
    /* CLIPImageProcessor as the processor configures it: straight to a square, bicubic, ImageNet's mean and std */
    model->preprocess = preprocess_default_blip(FLORENCE2_IMAGE_SIZE);
    const float mean[3] = {0.485f, 0.456f, 0.406f}, std[3] = {0.229f, 0.224f, 0.225f};
    memcpy(model->preprocess.mean, mean, sizeof mean), memcpy(model->preprocess.std, std, sizeof std);
    glimpse_status status = read_preprocessor(model, 1);
    const preprocess_config *p = &model->preprocess;
    if (!status && (!p->do_resize || p->resize_height != p->resize_width || p->shortest_edge > 0 || p->do_center_crop))
        return error_set(GLIMPSE_STATUS_UNSUPPORTED, "%s/preprocessor_config.json: Florence-2 takes pictures resized "
                         "to a square without cropping", model->folder);
    if (!status)
        status = florence2_vision_load(&parts->vision, model->config, vision_json, p->resize_height, &names_florence2,
                                       model->store);
    if (!status) status = bart_config_read(text_json, "config.json: text_config", &parts->config);
    if (!status && (size_t)parts->config.encoder.hidden_size != parts->vision.projection_dim)
        return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s/config.json: the image rows are %zu wide but BART's d_model "
                         "is %d", model->folder, parts->vision.projection_dim, parts->config.encoder.hidden_size);
    if (!status) status = bart_model_load(&parts->language, &parts->config, &names_florence2.language, model->store);
    if (!status) status = florence2_tokenizer_load(model->folder, &parts->tokenizer);
    if (!status && parts->config.encoder.vocab_size < FLORENCE2_ADDED_FIRST_ID + FLORENCE2_ADDED_TOKENS)
        return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s/config.json: a vocabulary of %d rows has no room for the "
                         "processor's %d tokens", model->folder, parts->config.encoder.vocab_size,
                         FLORENCE2_ADDED_FIRST_ID + FLORENCE2_ADDED_TOKENS);
    if (status) return status;
    const bart_generation *g = &parts->config.generation;
    model->start_id = g->start_id, model->end_id = g->eos_id, model->pad_id = g->pad_id;
    return generation_settings(model, &parts->config);
}

/* int8: DaViT's blocks, the image projection, BART's encoder and decoder (its head too). */
static glimpse_status quantize(glimpse_model *model, q8_set *set) {
    florence2_parts *parts = model->parts;
    glimpse_status status = davit_model_add_twins(&parts->vision.davit, q8_set_add_twin, set);
    if (!status)
        status = q8_set_add(set, &parts->vision.projection, parts->vision.projection_dim, parts->vision.dim);
    if (!status) status = bert_model_quantize(&parts->language.encoder, set);
    if (!status) status = bert_model_quantize(&parts->language.decoder, set);
    return status;
}

/* ------------------------------------------------------------------ run state */

static glimpse_status run_of(glimpse_context *ctx, florence2_run **out) {
    const florence2_parts *parts = parts_of(ctx->model);
    if (!ctx->run) {
        florence2_run *run = calloc(1, sizeof *run);
        if (!run) return ERROR_OOM();
        ctx->run = run;
        size_t side = (size_t)ctx->model->preprocess.resize_height;
        size_t positions = (size_t)parts->config.encoder.max_positions, d = (size_t)parts->config.encoder.hidden_size;
        run->pixels = memory_large(3 * side * side * sizeof(float)); /* (written whole: on huge pages when large) */
        run->rows = memory_large(positions * d * sizeof(float));
        glimpse_status status = run->pixels && run->rows ? GLIMPSE_STATUS_OK : ERROR_OOM();
        if (!status) status = florence2_vision_state_create(&parts->vision, &run->vision);
        if (!status) status = bart_encoder_state_create(&parts->language, positions, &run->encoder);
        if (status) return status;
    }
    *out = ctx->run;
    return GLIMPSE_STATUS_OK;
}

/* A decoder state for `beams` sequences of max_length tokens over `image_rows` encoder rows. */
static glimpse_status decoder_for(glimpse_context *ctx, florence2_run *run, size_t beams, size_t max_length,
                                  size_t image_rows) {
    if (run->decoder && run->decoder_beams >= beams && run->decoder_length >= max_length &&
        run->decoder_image_rows >= image_rows)
        return GLIMPSE_STATUS_OK;
    bert_state_free(run->decoder);
    run->decoder = NULL;
    const bart_model *m = &parts_of(ctx->model)->language;
    glimpse_status status = bert_state_create(&m->decoder, beams, max_length, 1, image_rows, &run->decoder);
    if (!status) run->decoder_beams = beams, run->decoder_length = max_length, run->decoder_image_rows = image_rows;
    return status;
}

/* ------------------------------------------------------------------ one task on one picture */

typedef struct task_stream {
    const glimpse_model *model;
    const glimpse_caption_params *params;
    const florence2_task *caption; /* what the text so far is read as */
    size_t image, count;
    int32_t *ids; /* [max_length]: the ids so far, the start token first */
} task_stream;

/* The text so far, as a caption reads (decoded with the special tokens, <s> and </s> left out). */
static int stream_token(void *user, int32_t id) {
    task_stream *s = user;
    s->ids[s->count++] = id;
    char *text = NULL;
    if (florence2_decode(parts_of(s->model)->tokenizer, s->ids, s->count, &text)) return 1;
    florence2_parsed parsed;
    int stop = 1;
    if (!florence2_post_process(text, s->caption, 1, 1, &parsed)) {
        stop = s->params->on_token(s->params->user, s->image, id, parsed.answer);
        florence2_parsed_free(&parsed);
    }
    free(text);
    return stop;
}

/* The encoder's input: the picture's rows, then the prompt's token embeddings; its length in *rows. */
static glimpse_status encoder_input(glimpse_context *ctx, florence2_run *run, const glimpse_image *image,
                                    const int32_t *prompt, size_t prompt_length, size_t *rows) {
    const florence2_parts *parts = parts_of(ctx->model);
    size_t image_rows = florence2_image_rows(&parts->vision), d = (size_t)parts->config.encoder.hidden_size;
    size_t positions = (size_t)parts->config.encoder.max_positions;
    if (image_rows + prompt_length > positions)
        return error_set(GLIMPSE_STATUS_TOO_LARGE, "the picture's %zu rows and the prompt's %zu tokens are more than "
                         "BART's %zu positions", image_rows, prompt_length, positions);
    glimpse_status status = preprocess_image(run->pixels, image, &ctx->model->preprocess);
    if (!status)
        status = florence2_image_features(&parts->vision, &run->vision, run->pixels, run->rows, NULL, NULL,
                                          ctx->threads);
    if (!status) status = bart_embed_tokens(&parts->language, prompt, prompt_length, run->rows + image_rows * d);
    *rows = image_rows + prompt_length;
    return status;
}

/* generate's ids for one picture: the encoder over its rows and the prompt, then the decoder's search. */
static glimpse_status generate_ids(glimpse_context *ctx, const glimpse_image *image, size_t index,
                                   const int32_t *prompt, size_t prompt_length, const glimpse_caption_params *p,
                                   int32_t **ids, size_t *count) {
    const florence2_parts *parts = parts_of(ctx->model);
    florence2_run *run = NULL;
    size_t rows = 0, max_length = 1 + (size_t)p->max_tokens, got = 0;
    glimpse_status status = run_of(ctx, &run);
    if (!status && max_length > (size_t)parts->config.decoder.max_positions + 1)
        status = error_set(GLIMPSE_STATUS_TOO_LARGE, "%d new tokens are more than the decoder's %d positions hold",
                           p->max_tokens, parts->config.decoder.max_positions);
    if (!status) status = encoder_input(ctx, run, image, prompt, prompt_length, &rows);
    if (!status) status = bart_encode(&parts->language, run->encoder, run->rows, rows, ctx->threads);
    if (!status) status = decoder_for(ctx, run, (size_t)p->beams, max_length, rows);
    if (!status) status = bert_set_image(&parts->language.decoder, run->decoder, run->encoder->x, rows, ctx->threads);
    *ids = status ? NULL : malloc(max_length * sizeof **ids);
    if (!status && !*ids) status = ERROR_OOM();
    if (status) return status;
    bert_decoder self = {&parts->language.decoder, run->decoder};
    caption_decoder decoder = bert_caption_decoder(&self);
    caption_settings settings = bart_caption_settings(&parts->config.generation, max_length, 1 + (size_t)p->min_tokens,
                                                      p->beams, p->length_penalty);
    settings.repetition_penalty = p->repetition_penalty;
    settings.sample = p->sample, settings.temperature = p->temperature, settings.top_k = p->top_k;
    settings.top_p = p->top_p, settings.seed = p->seed;
    int32_t start = parts->config.generation.start_id;
    task_stream stream = {ctx->model, p, florence2_task_find("<CAPTION>"), index, 1,
                          p->on_token ? malloc(max_length * sizeof(int32_t)) : NULL};
    if (p->on_token && !stream.ids) status = ERROR_OOM();
    if (stream.ids) stream.ids[0] = start;
    if (!status)
        status = caption_generate(&decoder, &start, 1, &settings, p->on_token ? stream_token : NULL, &stream, *ids,
                                  &got, ctx->threads);
    free(stream.ids);
    if (status) free(*ids), *ids = NULL;
    *count = got;
    return status;
}

/* One picture's task: its ids, text and the post-processed result into out. */
static glimpse_status run_one(glimpse_context *ctx, glimpse_image *image, size_t index, const florence2_task *task,
                              const int32_t *prompt, size_t prompt_length, const glimpse_caption_params *p,
                              glimpse_task_result *out) {
    const florence2_parts *parts = parts_of(ctx->model);
    florence2_parsed parsed = {0};
    glimpse_status status = generate_ids(ctx, image, index, prompt, prompt_length, p, &out->ids, &out->id_count);
    if (!status) status = florence2_decode(parts->tokenizer, out->ids, out->id_count, &out->text);
    if (!status)
        status = florence2_post_process(out->text, task, glimpse_image_width(image), glimpse_image_height(image),
                                        &parsed);
    if (status) return status;
    out->task = strdup(task->name);
    out->json = cJSON_PrintUnformatted(parsed.json);
    out->answer = parsed.answer, parsed.answer = NULL;
    out->regions = parsed.regions, out->region_count = parsed.region_count;
    parsed.regions = NULL, parsed.region_count = 0;
    florence2_parsed_free(&parsed);
    return out->task && out->json ? GLIMPSE_STATUS_OK : ERROR_OOM();
}

static glimpse_status run_task(glimpse_context *ctx, glimpse_image *const *images, size_t count, const char *name,
                               const char *input, const glimpse_caption_params *p, glimpse_task_result *out) {
    const florence2_task *task = florence2_task_find(name);
    if (!task) return GLIMPSE_STATUS_INVALID_ARGUMENT;
    char *prompt = NULL;
    int32_t *ids = NULL;
    size_t length = 0;
    glimpse_status status = florence2_task_prompt(task, input, &prompt);
    if (!status) status = florence2_encode(parts_of(ctx->model)->tokenizer, prompt, &ids, &length);
    for (size_t i = 0; i < count && !status; i++) {
        status = run_one(ctx, images[i], i, task, ids, length, p, &out[i]);
        if (!status) status = context_progress(ctx, i + 1, count);
    }
    if (status)
        for (size_t i = 0; i < count; i++) glimpse_task_result_free(&out[i]);
    free(prompt), free(ids);
    return status;
}

/* ------------------------------------------------------------------ captions */

/* Captions are the caption tasks: params->prompt NULL (<CAPTION>) or one of the three caption tasks' names. */
static glimpse_status caption_images(glimpse_context *ctx, glimpse_image *const *images, size_t count,
                                     const glimpse_caption_params *p, glimpse_caption *out) {
    const char *name = p->prompt ? p->prompt : "<CAPTION>";
    if (strcmp(name, "<CAPTION>") && strcmp(name, "<DETAILED_CAPTION>") && strcmp(name, "<MORE_DETAILED_CAPTION>"))
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "Florence-2 captions with a task, not a free prompt: "
                         "<CAPTION>, <DETAILED_CAPTION> or <MORE_DETAILED_CAPTION> (glimpse caption --detail 1|2|3)");
    glimpse_task_result *results = calloc(count ? count : 1, sizeof *results);
    if (!results) return ERROR_OOM();
    glimpse_status status = run_task(ctx, images, count, name, NULL, p, results);
    for (size_t i = 0; i < count && !status; i++) {
        out[i].text = results[i].answer, results[i].answer = NULL;
        out[i].ids = results[i].ids, out[i].id_count = results[i].id_count;
        results[i].ids = NULL, results[i].id_count = 0;
    }
    for (size_t i = 0; i < count; i++) glimpse_task_result_free(&results[i]);
    free(results);
    return status;
}

/* decode(ids, skip_special_tokens=True). */
static glimpse_status decode(const glimpse_model *model, const int32_t *ids, size_t count, char **text) {
    return gpt2_tokenizer_decode(parts_of(model)->tokenizer, ids, count, 1, 1, text, NULL);
}

/* What generate's output starts with: the decoder's start token. */
static glimpse_status prompt_ids(const glimpse_model *model, const char *prompt, int32_t **ids, size_t *count) {
    (void)prompt;
    *ids = malloc(sizeof **ids);
    if (!*ids) return ERROR_OOM();
    (*ids)[0] = model->start_id;
    *count = 1;
    return GLIMPSE_STATUS_OK;
}

static size_t max_positions(const glimpse_model *model) {
    return (size_t)parts_of(model)->config.decoder.max_positions + 1;
}

/* The model card's settings where model->generation (made at load) says nothing. */
static const family_captioner captioner = {
    .max_tokens = FLORENCE2_MAX_NEW_TOKENS,
    .min_tokens = 0,
    .beams = 3,
    .decode = decode,
    .prompt_ids = prompt_ids,
    .max_positions = max_positions,
    .vision_attentions = "encoder_attentions",
    .caption_images = caption_images,
};

/* ------------------------------------------------------------------ explain */

/* A word's map reads the decoder's cross-attention to the encoder's image rows: after the first (the tokens'
 * mean), DaViT's last grid row by row over the whole square input. */
static void explain_shape(const glimpse_model *model, family_explain_shape *out) {
    const florence2_parts *parts = parts_of(model);
    int side = (int)parts->vision.grid;
    *out = (family_explain_shape){(size_t)parts->config.decoder.layers, (size_t)parts->config.decoder.heads, side,
                                  side, model->preprocess.resize_height};
}

/* The encoder over the picture's rows and the caption task's prompt, then the decoder over ids (the start token
 * on) in one pass, recorded: encoder self-attention with everything, the decoder's cross-attention (and with
 * everything its self-attention). */
static glimpse_status explain_record(glimpse_context *ctx, glimpse_image *const *images, size_t count,
                                     const char *prompt, const char *tokenized, const int32_t *ids, size_t id_count,
                                     family_explain_pass *pass) {
    (void)tokenized; /* the task's prompt is made from its name again */
    const florence2_parts *parts = parts_of(ctx->model);
    const bert_model *encoder = &parts->language.encoder, *decoder = &parts->language.decoder;
    if (count != 1)
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "Florence-2 explains one picture at a time, not %zu",
                         count);
    const florence2_task *task = florence2_task_find(prompt ? prompt : "<CAPTION>");
    florence2_run *run = NULL;
    char *text = NULL;
    int32_t *prompt_ids = NULL;
    bert_state *state = NULL;
    size_t prompt_length = 0, rows = 0;
    uint64_t every_encoder = explain_all_layers((size_t)encoder->config.layers);
    uint64_t every_decoder = explain_all_layers((size_t)decoder->config.layers);
    glimpse_status status = task ? florence2_task_prompt(task, NULL, &text) : GLIMPSE_STATUS_INVALID_ARGUMENT;
    if (!status) status = florence2_encode(parts->tokenizer, text, &prompt_ids, &prompt_length);
    if (!status) status = run_of(ctx, &run);
    if (!status) status = encoder_input(ctx, run, images[0], prompt_ids, prompt_length, &rows);
    /* a caption that filled the decoder's positions: its last id chose nothing and has no position to run at */
    if (id_count > (size_t)decoder->config.max_positions) id_count = (size_t)decoder->config.max_positions;
    if (!status && pass->everything)
        status = explain_record_make(&pass->records[0], every_encoder, 0, (size_t)encoder->config.heads, rows, rows, 0);
    if (!status) {
        run->encoder->record = pass->everything ? &pass->records[0] : NULL;
        status = bart_encode(&parts->language, run->encoder, run->rows, rows, ctx->threads);
        run->encoder->record = NULL;
    }
    if (!status)
        status = explain_record_make(&pass->records[1], pass->everything ? every_decoder : 0,
                                     pass->everything ? every_decoder : pass->map_layers,
                                     (size_t)decoder->config.heads, id_count, id_count, rows);
    if (!status) status = bert_state_create(decoder, 1, id_count, id_count, rows, &state);
    if (!status) status = bert_set_image(decoder, state, run->encoder->x, rows, ctx->threads);
    if (!status) {
        state->record = &pass->records[1];
        status = bert_decode_step(decoder, state, ids, 1, id_count, ctx->threads);
    }
    pass->names[0][ATTENTION_KIND_SELF] = "encoder_attentions";
    pass->names[1][ATTENTION_KIND_SELF] = "decoder_self_attentions";
    pass->names[1][ATTENTION_KIND_CROSS] = "cross_attentions";
    pass->map_record = 1, pass->map_kind = ATTENTION_KIND_CROSS;
    pass->row_shift = -1, pass->first_column = 1, pass->first_word = 1;
    bert_state_free(state);
    free(text), free(prompt_ids);
    return status;
}

static const family_explainer explainer = {.shape = explain_shape, .record = explain_record};

/* DaViT's side: the picture's size, the stride of its token grid, its last stage's width and heads, its blocks. */
static void vision_info(const glimpse_model *model, glimpse_model_info *out) {
    const davit_config *c = &parts_of(model)->vision.davit.config;
    out->image_size = c->image_size;
    out->patch_size = c->image_size / (int)parts_of(model)->vision.grid;
    out->vision_hidden_size = c->dims[DAVIT_STAGES - 1];
    out->vision_heads = c->heads[DAVIT_STAGES - 1];
    for (int s = 0; s < DAVIT_STAGES; s++) out->vision_layers += 2 * c->depths[s]; /* a spatial and a channel block */
    out->vision_activation = "gelu";
}

static void text_info(const glimpse_model *model, glimpse_model_info *out) {
    const bert_config *d = &parts_of(model)->config.decoder;
    loader_text_info(out, d->hidden_size, d->layers, d->heads, d->max_positions, d->vocab_size, d->act_name);
}

const model_family family_florence2 = {
    .architecture = "Florence2ForConditionalGeneration",
    .summary = "Florence2ForConditionalGeneration (Florence-2: captions, OCR, objects, regions)",
    .model_type = "florence2",
    .description = "Florence-2: DaViT vision tower, BART encoder-decoder; captions, OCR, objects, grounding, regions",
    .kind = GLIMPSE_MODEL_KIND_FLORENCE2,
    .capabilities = FAMILY_CAN(GLIMPSE_CAPABILITY_CAPTION) | FAMILY_CAN(GLIMPSE_CAPABILITY_TASK) |
                    FAMILY_CAN(GLIMPSE_CAPABILITY_EXPLAIN),
    .vision_section = "vision_config",
    .text_section = "text_config",
    .sections_required = true,
    .load = load_florence2,
    .vision_info = vision_info,
    .text_info = text_info,
    .caption = &captioner,
    .run_task = run_task,
    .quantize = quantize,
    .free_parts = free_parts,
    .free_run = free_run,
    .explain = &explainer,
};
