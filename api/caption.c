/* caption.c — glimpse_caption_images through the family table (families/family.h): resolving and checking the
 * search settings, the loops every captioning family shares (images through the vision tower in batches, then
 * each caption searched token by token and streamed; continuous batching of many captions), calling the
 * family's hooks for its prompt, decoder and text. Names no family. */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "api/context.h"
#include "api/model.h"
#include "core/error.h"
#include "families/family.h"
#include "fusion/generate.h"
#include "fusion/caption_batch.h"
#include "weights/config.h"

glimpse_caption_params glimpse_caption_default_params(void) {
    return (glimpse_caption_params){.prompt = NULL,
                                    .max_tokens = GLIMPSE_CAPTION_MODEL_DEFAULT,
                                    .min_tokens = GLIMPSE_CAPTION_MODEL_DEFAULT,
                                    .beams = GLIMPSE_CAPTION_MODEL_DEFAULT,
                                    .length_penalty = GLIMPSE_CAPTION_MODEL_DEFAULT_PENALTY,
                                    .repetition_penalty = GLIMPSE_CAPTION_MODEL_DEFAULT_PENALTY,
                                    .sample = false,
                                    .temperature = 1.0f,
                                    .top_k = 50,
                                    .top_p = 1.0f,
                                    .seed = 0,
                                    .on_token = NULL,
                                    .user = NULL,
                                    .batch_rows = 0};
}

/* glimpse's own search settings for a model without a captioner (glimpse_caption_model_params answers for
 * any model): BLIP's, from its paper and code. Captioners give their own. */
#define CAPTION_BEAMS 3
#define CAPTION_MAX_TOKENS 20
#define CAPTION_MIN_TOKENS 5
/* generation_config.json lengths above this are taken as malformed. */
#define CAPTION_LENGTH_LIMIT 100000

/* The search settings of the model: the snapshot's generation_config.json
 * over glimpse's own; fields missing or malformed keep glimpse's. */
static glimpse_caption_params model_settings(const glimpse_model *model) {
    glimpse_caption_params params = {.max_tokens = CAPTION_MAX_TOKENS,
                                     .min_tokens = CAPTION_MIN_TOKENS,
                                     .beams = CAPTION_BEAMS,
                                     .length_penalty = 1.0f,
                                     .repetition_penalty = 1.0f};
    const family_captioner *captioner = model ? model->family->caption : NULL;
    if (captioner)
        params.max_tokens = captioner->max_tokens, params.min_tokens = captioner->min_tokens,
        params.beams = captioner->beams;
    const cJSON *g = model ? model->generation : NULL;
    if (!g) return params;
    const char *where = "generation_config.json";
    int value;
    double number;
    if (!config_int_or(g, where, "num_beams", 1, GLIMPSE_CAPTION_MAX_BEAMS, params.beams, &value)) params.beams = value;
    if (!config_int_or(g, where, "max_length", 2, CAPTION_LENGTH_LIMIT, params.max_tokens + 1, &value))
        params.max_tokens = value - 1;
    if (!config_int_or(g, where, "min_length", 0, CAPTION_LENGTH_LIMIT, params.min_tokens + 1, &value))
        params.min_tokens = value > 1 ? value - 1 : 0;
    if (!config_double_or(g, where, "repetition_penalty", params.repetition_penalty, &number) && number > 0)
        params.repetition_penalty = (float)number;
    if (!config_double_or(g, where, "length_penalty", params.length_penalty, &number))
        params.length_penalty = (float)number;
    return params;
}

/* params with each field left to the model given the model's value. */
static glimpse_caption_params resolve_params(const glimpse_model *model, const glimpse_caption_params *params) {
    glimpse_caption_params resolved = *params, model_params = model_settings(model);
    if (params->max_tokens == GLIMPSE_CAPTION_MODEL_DEFAULT) resolved.max_tokens = model_params.max_tokens;
    if (params->min_tokens == GLIMPSE_CAPTION_MODEL_DEFAULT)
        resolved.min_tokens =
            model_params.min_tokens < resolved.max_tokens ? model_params.min_tokens : resolved.max_tokens;
    if (params->beams == GLIMPSE_CAPTION_MODEL_DEFAULT) resolved.beams = params->sample ? 1 : model_params.beams;
    if (isnan(params->length_penalty)) resolved.length_penalty = model_params.length_penalty;
    if (isnan(params->repetition_penalty)) resolved.repetition_penalty = model_params.repetition_penalty;
    return resolved;
}

glimpse_caption_params glimpse_caption_model_params(const glimpse_model *model) {
    glimpse_caption_params defaults = glimpse_caption_default_params();
    return resolve_params(model, &defaults);
}

void glimpse_caption_free(glimpse_caption *caption) {
    if (!caption) return;
    free(caption->text);
    free(caption->ids);
    free(caption->prompt);
    free(caption->prompt_ids);
    memset(caption, 0, sizeof *caption);
}

static glimpse_status check_params(const glimpse_caption_params *p) {
    if (p->max_tokens < 1) return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "max_tokens must be at least 1");
    if (p->min_tokens < 0 || p->min_tokens > p->max_tokens)
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "min_tokens must be 0 to max_tokens (%d)", p->max_tokens);
    if (p->beams < 1 || p->beams > GLIMPSE_CAPTION_MAX_BEAMS)
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "beams must be 1 to %d", GLIMPSE_CAPTION_MAX_BEAMS);
    if (p->sample && p->beams != 1)
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "sampling draws one caption: use beams = 1");
    if (!(p->temperature > 0)) return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "temperature must be above 0");
    if (!(p->top_p > 0 && p->top_p <= 1)) return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "top_p must be in (0, 1]");
    if (p->top_k < 0) return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "top_k must not be negative");
    if (!(p->repetition_penalty > 0))
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "repetition_penalty must be above 0");
    if (p->batch_rows < 0) return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "batch_rows must not be negative");
    return GLIMPSE_STATUS_OK;
}

glimpse_status caption_params_resolve(const glimpse_model *model, const glimpse_caption_params *params,
                                      glimpse_caption_params *out) {
    glimpse_caption_params defaults = glimpse_caption_default_params();
    *out = resolve_params(model, params ? params : &defaults);
    return check_params(out);
}

glimpse_status caption_prompt_ids(const glimpse_model *model, const char *prompt, caption_encode_fn encode,
                                  int32_t **ids, size_t *count) {
    size_t n = 0;
    glimpse_status status = encode(model, prompt ? prompt : "", NULL, 0, &n);
    if (status) return status;
    *ids = malloc((n + 1) * sizeof **ids);
    if (!*ids) return ERROR_OOM();
    (*ids)[0] = model->start_id;
    status = encode(model, prompt ? prompt : "", *ids + 1, n, &n);
    *count = n + 1;
    return status;
}

/* 1 if the bytes GPT-2's tokens ids[0..count) stand for end inside a character: decoding then ends in the
 * U+FFFD that the rest of the character, still to come, will replace. */
static bool ends_inside_character(const gpt2_tokenizer *tokenizer, const int32_t *ids, size_t count) {
    uint8_t tail[4];
    size_t have = 0; /* the last bytes, at most 4, backwards */
    for (size_t i = count; i-- > 0 && have < 4;) {
        size_t length = 0;
        const uint8_t *bytes = gpt2_tokenizer_is_special(tokenizer, ids[i])
                                   ? NULL
                                   : gpt2_tokenizer_token_bytes(tokenizer, ids[i], &length);
        while (bytes && length > 0 && have < 4) tail[have++] = bytes[--length];
    }
    size_t continuation = 0;
    while (continuation < have && (tail[continuation] & 0xC0) == 0x80) continuation++;
    if (continuation == have) return false;
    uint8_t lead = tail[continuation];
    size_t needs = (lead & 0xE0) == 0xC0 ? 1 : (lead & 0xF0) == 0xE0 ? 2 : (lead & 0xF8) == 0xF0 ? 3 : 0;
    return continuation < needs;
}

typedef struct stream {
    const glimpse_model *model;
    const gpt2_tokenizer *byte_bpe; /* the model's byte-level BPE, if its ids are in one */
    const glimpse_caption_params *params;
    caption_decode_fn decode;
    size_t image;
    int32_t *ids; /* generated so far */
    size_t count, capacity;
} stream;

static int stream_token(void *user, int32_t id) {
    stream *s = user;
    if (s->count < s->capacity) s->ids[s->count++] = id;
    char *text = NULL;
    if (s->decode(s->model, s->ids, s->count, &text)) return 1;
    size_t length = strlen(text);
    if (s->byte_bpe && ends_inside_character(s->byte_bpe, s->ids, s->count) && length >= 3 &&
        memcmp(text + length - 3, "\xEF\xBF\xBD", 3) == 0)
        text[length - 3] = '\0'; /* words stream whole: a character split over tokens waits for its last byte */
    bool stop = s->params->on_token(s->params->user, s->image, id, text);
    free(text);
    return stop;
}

/* The search settings of params after a prompt of prompt_length ids (start token first). */
static caption_settings settings_of(const glimpse_model *model, const glimpse_caption_params *p, size_t prompt_length) {
    return caption_settings_of(p, prompt_length, model->end_id, model->pad_id);
}

glimpse_status caption_decode_text(glimpse_context *ctx, size_t image, const glimpse_caption_params *p,
                                   const caption_decoder *decoder, const int32_t *prompt, size_t prompt_length,
                                   caption_decode_fn decode, glimpse_caption *out) {
    const glimpse_model *model = ctx->model;
    size_t max_length = prompt_length + (size_t)p->max_tokens;
    caption_settings settings = settings_of(model, p, prompt_length);
    int32_t *ids = malloc(max_length * sizeof *ids);
    int32_t *generated = malloc(max_length * sizeof *generated);
    if (!ids || !generated) {
        free(ids), free(generated);
        return ERROR_OOM();
    }
    family_blocks blocks;
    family_blocks_of(model, &blocks);
    stream s = {model, blocks.byte_bpe, p, decode, image, generated, 0, max_length};
    size_t length = 0;
    glimpse_status status = caption_generate(decoder, prompt, prompt_length, &settings,
                                             p->on_token ? stream_token : NULL, &s, ids, &length, ctx->threads);
    free(generated);
    if (!status) status = decode(model, ids, length, &out->text);
    if (status) {
        free(ids);
        return status;
    }
    out->ids = ids;
    out->id_count = length;
    return GLIMPSE_STATUS_OK;
}

glimpse_status caption_prompt_within(const glimpse_model *model, const glimpse_caption_params *p, int32_t **prompt,
                                     size_t *prompt_length) {
    const family_captioner *captioner = model->family->caption;
    *prompt = NULL;
    glimpse_status status = captioner->prompt_ids(model, p->prompt, prompt, prompt_length);
    if (status) return status;
    size_t positions = captioner->max_positions(model);
    if (*prompt_length + (size_t)p->max_tokens > positions) {
        free(*prompt);
        *prompt = NULL;
        return error_set(GLIMPSE_STATUS_TOO_LARGE, "the prompt (%zu tokens) and %d new tokens exceed the model's %zu "
                                                   "positions",
                         *prompt_length, p->max_tokens, positions);
    }
    return GLIMPSE_STATUS_OK;
}

glimpse_status glimpse_caption_images(glimpse_context *ctx, glimpse_image *const *images, size_t count,
                                      const glimpse_caption_params *params, glimpse_caption *out) {
    if (!ctx || !images || !out)
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_caption_images: NULL argument");
    if (!count) return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_caption_images: no images");
    for (size_t i = 0; i < count; i++) memset(&out[i], 0, sizeof out[i]);
    const glimpse_model *model = ctx->model;
    if (!model->family->caption) {
        char captioners[256];
        family_names(FAMILY_CAN(GLIMPSE_CAPABILITY_CAPTION), false, captioners, sizeof captioners);
        return error_set(GLIMPSE_STATUS_WRONG_MODEL, "captioning needs a captioning model (%s), this is %s",
                         captioners, model->architecture);
    }
    glimpse_caption_params resolved;
    const glimpse_caption_params *p = &resolved;
    glimpse_status status = caption_params_resolve(model, params, &resolved);
    if (status) return status;
    if (count > 1 && p->batch_rows != 1 && !ctx->caption_record && model->family->caption->batch_create) {
        const glimpse_caption_params **each = malloc(count * sizeof *each);
        if (!each) return ERROR_OOM();
        for (size_t i = 0; i < count; i++) each[i] = p;
        status = caption_images_batched(ctx, images, count, each, (size_t)p->batch_rows, out);
        free(each);
        return status;
    }
    return model->family->caption->caption_images(ctx, images, count, p, out);
}

glimpse_status caption_question_params(const glimpse_model *model, const glimpse_caption_params *params,
                                       const char *question, const char *what, glimpse_caption_params *asked,
                                       char **prompt) {
    *prompt = NULL;
    const family_captioner *captioner = model->family->caption;
    if (!captioner || !captioner->question_prompt) {
        char names[256];
        family_names(FAMILY_CAN(GLIMPSE_CAPABILITY_ASK), true, names, sizeof names);
        return error_set(GLIMPSE_STATUS_WRONG_MODEL, "answering questions needs a model that answers (%s), this "
                         "is %s", names, model->architecture);
    }
    *asked = params ? *params : glimpse_caption_default_params();
    if (asked->prompt)
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "%s makes the prompt from the question: leave the "
                                                          "params' prompt NULL (or caption with the prompt)", what);
    glimpse_status status = captioner->question_prompt(model, question, prompt);
    asked->prompt = *prompt;
    return status;
}

glimpse_status glimpse_ask_images(glimpse_context *ctx, glimpse_image *const *images, size_t count,
                                  const char *question, const glimpse_caption_params *params, glimpse_caption *out) {
    if (!ctx || !images || !question || !out)
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_ask_images: NULL argument");
    for (size_t i = 0; i < count; i++) memset(&out[i], 0, sizeof out[i]);
    glimpse_caption_params asked;
    char *prompt = NULL;
    glimpse_status status =
        caption_question_params(ctx->model, params, question, "glimpse_ask_images", &asked, &prompt);
    if (!status) status = glimpse_caption_images(ctx, images, count, &asked, out);
    free(prompt);
    return status;
}

glimpse_status glimpse_ask_together(glimpse_context *ctx, glimpse_image *const *images, size_t count,
                                    const char *question, const glimpse_caption_params *params, glimpse_caption *out) {
    if (!ctx || (count && !images) || !out)
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_ask_together: NULL argument");
    memset(out, 0, sizeof *out);
    const glimpse_model *model = ctx->model;
    const family_captioner *captioner = model->family->caption;
    if (!captioner || !captioner->answer_together)
        return error_set(GLIMPSE_STATUS_WRONG_MODEL, "%s answers about one picture at a time (glimpse_ask_images); "
                         "several pictures in one question need a model that takes them (LLaVA)", model->architecture);
    glimpse_caption_params resolved;
    glimpse_status status = caption_params_resolve(model, params, &resolved);
    if (!status && !question && !resolved.prompt)
        status = error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_ask_together: give a question or a prompt");
    if (!status && question && resolved.prompt)
        status = error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_ask_together: a question or a prompt, not both");
    return status ? status : captioner->answer_together(ctx, images, count, question, &resolved, out);
}

glimpse_status caption_each_image(glimpse_context *ctx, glimpse_image *const *images, size_t count,
                                  caption_image_fn caption, const caption_request *request, glimpse_caption *out) {
    family_blocks blocks;
    family_run_blocks run;
    family_blocks_of(ctx->model, &blocks);
    glimpse_status status = family_run_blocks_of(ctx, &run);
    for (size_t first = 0; first < count && !status; first += CONTEXT_IMAGE_BATCH) {
        size_t batch = count - first < CONTEXT_IMAGE_BATCH ? count - first : CONTEXT_IMAGE_BATCH;
        if ((status = context_preprocess(ctx, images + first, batch, first))) break;
        vit_forward(blocks.vision, run.vision, run.pixel_values, batch, ENCODER_OUTPUT_ALL_ROWS, ctx->threads);
        for (size_t b = 0; b < batch && !status; b++) {
            vit_post_norm_all(blocks.vision, run.vision, b, run.vision_output);
            status = caption(ctx, first + b, request, &out[first + b]);
            if (!status) status = context_progress(ctx, first + b + 1, count);
        }
    }
    if (status)
        for (size_t i = 0; i < count; i++) glimpse_caption_free(&out[i]);
    return status;
}

/* ------------------------------------------------------------ continuous batching (fusion/caption_batch.h) */

/* One image of a batched call: its request's prompt and its stream of tokens. */
typedef struct batch_picture {
    int32_t *prompt;    /* the family's prompt ids (BLIP-2: the language model's, after the prefix) */
    size_t prompt_length;
    int32_t start;      /* BLIP-2's search starts from its start token alone */
    stream stream;
} batch_picture;

typedef struct batch_run {
    glimpse_context *ctx;
    glimpse_image *const *images;
    size_t count, done;
    caption_batch_request *requests;
    batch_picture *pictures;
    glimpse_caption *out;
    caption_decode_fn decode;
    size_t vision_first, vision_count; /* the images in the family's ViT state */
    family_batch batch;
} batch_run;

/* caption_batch_hooks.admit: the image through the vision tower (with the next few, in one batch) and into the
 * decoder's image slot. */
static glimpse_status batch_admit(void *user, size_t picture, size_t image) {
    batch_run *r = user;
    glimpse_context *ctx = r->ctx;
    const glimpse_model *model = ctx->model;
    family_blocks blocks;
    family_run_blocks run;
    family_blocks_of(model, &blocks);
    glimpse_status status = family_run_blocks_of(ctx, &run);
    if (status) return status;
    if (picture < r->vision_first || picture >= r->vision_first + r->vision_count) {
        size_t batch = r->count - picture < CONTEXT_IMAGE_BATCH ? r->count - picture : CONTEXT_IMAGE_BATCH;
        r->vision_count = 0;
        if ((status = context_preprocess(ctx, r->images + picture, batch, picture))) return status;
        vit_forward(blocks.vision, run.vision, run.pixel_values, batch, ENCODER_OUTPUT_ALL_ROWS, ctx->threads);
        r->vision_first = picture, r->vision_count = batch;
    }
    vit_post_norm_all(blocks.vision, run.vision, picture - r->vision_first, run.vision_output);
    const batch_picture *p = &r->pictures[picture];
    return model->family->caption->batch_admit(ctx, &r->batch, image, p->prompt, p->prompt_length);
}

/* caption_batch_hooks.finished: the ids decoded into the image's glimpse_caption, and progress. */
static glimpse_status batch_finished(void *user, size_t picture) {
    batch_run *r = user;
    caption_batch_request *q = &r->requests[picture];
    glimpse_caption *out = &r->out[picture];
    glimpse_status status = r->decode(r->ctx->model, q->out, q->out_length, &out->text);
    if (status) return status;
    out->ids = q->out, out->id_count = q->out_length;
    q->out = NULL; /* now the caption's */
    return context_progress(r->ctx, ++r->done, r->count);
}

/* The family's prompt of each image, and what its request's search and first step take. */
static glimpse_status batch_prompts(batch_run *r, const glimpse_caption_params *const *params) {
    const glimpse_model *model = r->ctx->model;
    const family_captioner *captioner = model->family->caption;
    size_t prefix_rows = captioner->prefix_rows ? captioner->prefix_rows(model) : 0;
    family_blocks blocks;
    family_blocks_of(model, &blocks);
    bool prefixed = captioner->prefix_rows != NULL; /* the prompt follows the image's prefix */
    for (size_t i = 0; i < r->count; i++) {
        batch_picture *p = &r->pictures[i];
        caption_batch_request *q = &r->requests[i];
        glimpse_status status = captioner->prompt_ids(model, params[i]->prompt, &p->prompt, &p->prompt_length);
        if (status) return status;
        p->start = model->start_id;
        q->prompt = prefixed ? &p->start : p->prompt;
        q->prompt_length = prefixed ? 1 : p->prompt_length;
        q->first_rows = prefix_rows + p->prompt_length;
        q->settings = settings_of(model, params[i], q->prompt_length);
        q->out = malloc(q->settings.max_length * sizeof *q->out);
        p->stream = (stream){model, blocks.byte_bpe, params[i], r->decode, i,
                             malloc(q->settings.max_length * sizeof(int32_t)), 0, q->settings.max_length};
        if (!q->out || !p->stream.ids) return ERROR_OOM();
        q->callback = params[i]->on_token ? stream_token : NULL;
        q->user = &p->stream;
        size_t positions = captioner->max_positions(model);
        size_t needed = q->first_rows + (size_t)params[i]->max_tokens;
        if (needed > positions)
            return error_set(GLIMPSE_STATUS_TOO_LARGE, "the prompt (%zu tokens) and %d new tokens exceed the model's "
                             "%zu positions", p->prompt_length, params[i]->max_tokens, positions);
    }
    return GLIMPSE_STATUS_OK;
}

/* The family's batched decoder state for the requests: `slots` sequences, `images` image slots. */
static glimpse_status batch_state(batch_run *r, size_t slots, size_t images) {
    const glimpse_model *model = r->ctx->model;
    family_batch_shape shape = {.slots = slots, .rows = 2 * slots + KERNEL_LINEAR_FEW_ROWS, .images = images};
    bool each_beam = model->family->caption->prefix_rows == NULL; /* else one first step for the beams */
    for (size_t i = 0; i < r->count; i++) {
        const caption_batch_request *q = &r->requests[i];
        size_t used = q->first_rows + q->settings.max_length - q->prompt_length;
        size_t alone = q->first_rows * (each_beam ? (size_t)q->settings.beams : 1);
        if (used > shape.positions) shape.positions = used;
        if (alone > shape.rows) shape.rows = alone;
        if (q->first_rows > shape.first_rows) shape.first_rows = q->first_rows;
    }
    return model->family->caption->batch_create(r->ctx, &shape, &r->batch);
}

glimpse_status caption_images_batched(glimpse_context *ctx, glimpse_image *const *images, size_t count,
                                      const glimpse_caption_params *const *params, size_t batch_rows,
                                      glimpse_caption *out) {
    const glimpse_model *model = ctx->model;
    for (size_t i = 0; i < count; i++) memset(&out[i], 0, sizeof out[i]);
    if (!model->family->caption->batch_create)
        return error_set(GLIMPSE_STATUS_UNSUPPORTED, "%s captions one picture at a time (batch_rows 1)",
                         model->architecture);
    batch_run r = {.ctx = ctx, .images = images, .count = count, .out = out};
    r.decode = model->family->caption->decode;
    r.requests = calloc(count, sizeof *r.requests);
    r.pictures = calloc(count, sizeof *r.pictures);
    glimpse_status status = r.requests && r.pictures ? batch_prompts(&r, params) : ERROR_OOM();
    /* sequences in flight: the rows asked for (by default GLIMPSE_CAPTION_DEFAULT_BATCH_ROWS images' beams: with
     * 3 beams, 5 images at a time left waves whose last image stepped alone), at least one image's beams; image
     * slots: as many images as fit */
    size_t slots = batch_rows, fewest_beams = SIZE_MAX, most_beams = 1;
    for (size_t i = 0; i < count; i++) {
        size_t beams = (size_t)params[i]->beams;
        if (beams > most_beams) most_beams = beams;
        if (beams < fewest_beams) fewest_beams = beams;
    }
    if (!slots) slots = GLIMPSE_CAPTION_DEFAULT_BATCH_ROWS * most_beams;
    if (most_beams > slots) slots = most_beams;
    size_t image_slots = slots / fewest_beams < count ? slots / fewest_beams : count;
    if (!status) status = batch_state(&r, slots, image_slots);
    caption_batch_hooks hooks = {batch_admit, batch_finished, &r};
    if (!status) status = caption_batch_run(&r.batch.decoder, r.requests, count, image_slots, &hooks, ctx->threads);
    for (size_t i = 0; r.requests && r.pictures && i < count; i++) {
        free(r.requests[i].out);
        free(r.pictures[i].prompt);
        free(r.pictures[i].stream.ids);
    }
    free(r.requests), free(r.pictures);
    model->family->caption->batch_free(&r.batch);
    if (status)
        for (size_t i = 0; i < count; i++) glimpse_caption_free(&out[i]);
    return status;
}

glimpse_status caption_images_each(glimpse_context *ctx, glimpse_image *const *images, size_t count,
                                   const glimpse_caption_params *params, size_t batch_rows, glimpse_caption *out) {
    const glimpse_model *model = ctx->model;
    glimpse_caption_params *resolved = malloc((count ? count : 1) * sizeof *resolved);
    const glimpse_caption_params **each = malloc((count ? count : 1) * sizeof *each);
    glimpse_status status = resolved && each ? GLIMPSE_STATUS_OK : ERROR_OOM();
    for (size_t i = 0; i < count && !status; i++) {
        resolved[i] = resolve_params(model, &params[i]);
        each[i] = &resolved[i];
        status = check_params(&resolved[i]);
    }
    if (!status) status = caption_images_batched(ctx, images, count, each, batch_rows, out);
    free(resolved), free(each);
    return status;
}
