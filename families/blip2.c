/* blip2.c — the BLIP-2 family (Blip2ForConditionalGeneration with OPT): its config reading and loader, its
 * line of the family table, captioning as transformers 4.27's
 * Blip2ForConditionalGeneration.generate does (the image side — vision
 * tower, Q-Former, projection — once per image, then OPT continuing from
 * those vectors and the prompt), and glimpse_ask_images, its visual
 * question answering with BLIP-2's prompt. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/bench_stages.h"
#include "api/context.h"
#include "api/model.h"
#include "core/error.h"
#include "families/family.h"
#include "families/loader_steps.h"
#include "families/vit_run.h"
#include "fusion/generate.h"
#include "weights/config.h"
#include "weights/names.h"

/* What load makes (model->parts): the ViT, the Q-Former with its language projection, OPT, and OPT's byte-level
 * BPE. The token ids and generation settings are model->start_id, ... (every captioner's). */
typedef struct blip2_parts {
    vit_model vision;
    blip2_qformer qformer;
    opt_model language_model;
    gpt2_tokenizer *byte_bpe;
} blip2_parts;

/* A context's run state (ctx->run): the ViT's; the Q-Former's, made on first use; OPT's, grown to the largest
 * request (beams x positions); the picture's prefix vectors [queries, text hidden]. */
typedef struct blip2_run {
    vit_run vision;
    bert_state *qformer;
    opt_state *language;
    float *prefix;
} blip2_run;

static blip2_parts *parts_of(const glimpse_model *model) { return model->parts; }
/* (made by glimpse_context_create, through run_blocks) */
static blip2_run *run_of(const glimpse_context *ctx) { return ctx->run; }

static void free_parts(void *parts_pointer) {
    blip2_parts *parts = parts_pointer;
    vit_model_free(&parts->vision);
    blip2_qformer_free(&parts->qformer);
    opt_model_free(&parts->language_model);
    gpt2_tokenizer_free(parts->byte_bpe);
    free(parts);
}

static void free_run(void *run_pointer) {
    blip2_run *run = run_pointer;
    vit_run_free(&run->vision);
    bert_state_free(run->qformer);
    opt_state_free(run->language);
    free(run->prefix);
    free(run);
}

/* The prompt BLIP-2's model card and paper ask questions with. */
#define BLIP2_QUESTION_FORMAT "Question: %s Answer:"

static glimpse_status load_blip2(glimpse_model *model, const glimpse_load_params *params, const cJSON *vision_json,
                                 const cJSON *text_json) {
    (void)params; /* captioning needs both towers */
    const char *folder = model->folder;
    blip2_parts *parts = calloc(1, sizeof *parts);
    if (!(model->parts = parts)) return ERROR_OOM();
    const cJSON *qformer_json = cJSON_GetObjectItemCaseSensitive(model->config, "qformer_config");
    if (!cJSON_IsObject(qformer_json))
        return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s/config.json: %s needs a qformer_config object", folder,
                         model->architecture);
    glimpse_status status;
    vit_config vision;
    opt_config text;
    if ((status = vit_config_read(vision_json, "config.json: vision_config", VIT_VARIANT_BLIP, &vision)) ||
        (status = opt_config_read(text_json, "config.json: text_config", &text)) ||
        (status = blip2_qformer_config_read(model->config, qformer_json, vision.hidden_size, text.hidden_size,
                                            &parts->qformer)))
        return status;
    if (text.word_embed_proj_dim != text.hidden_size) /* transformers concatenates the two: they must agree */
        return error_set(GLIMPSE_STATUS_UNSUPPORTED, "%s/config.json: the language projection gives %d values but "
                         "OPT's word embeddings have %d", folder, text.hidden_size, text.word_embed_proj_dim);
    if (parts->qformer.config.encoder_hidden_size != vision.hidden_size)
        return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s/config.json: the Q-Former reads image tokens of %d values, "
                         "the vision tower makes %d", folder, parts->qformer.config.encoder_hidden_size,
                         vision.hidden_size);
    if ((status = vit_model_load(&parts->vision, &vision, names_blip2.vision, model->store))) return status;
    model->has_vision = true;
    model->preprocess = preprocess_default_blip(vision.image_size); /* BlipImageProcessor */
    if ((status = read_preprocessor(model, 1)) ||
        (status = blip2_qformer_load(&parts->qformer, &names_blip2, model->store)) ||
        (status = opt_model_load(&parts->language_model, &text, &names_blip2.language_model, model->store)))
        return status;
    model->has_text = true;
    model->start_id = text.bos_id, model->end_id = text.eos_id, model->pad_id = text.pad_id;
    if ((status = gpt2_tokenizer_load(folder, &parts->byte_bpe)) ||
        (status = check_vocabulary(model, "vocab.json", gpt2_tokenizer_vocab_size(parts->byte_bpe),
                                   text.vocab_size)))
        return status;
    /* generate's settings: generation_config.json (later hub revisions have one), else (4.27 writes none for
     * this class) the language model's config, as the language model's generate takes them */
    if ((status = read_generation_config(model))) return status;
    if (!model->generation && !(model->generation = cJSON_Duplicate(text_json, 1))) return ERROR_OOM();
    if (!cJSON_IsObject(model->generation))
        return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s/generation_config.json is not a JSON object", folder);
    /* what GenerationConfig and PretrainedConfig give where the file leaves them out (not BLIP's own) */
    const char *keys[] = {"num_beams", "max_length", "min_length"};
    const double defaults[] = {1, 20, 0};
    for (size_t i = 0; i < 3; i++)
        if (!cJSON_GetObjectItemCaseSensitive(model->generation, keys[i]) &&
            !cJSON_AddNumberToObject(model->generation, keys[i], defaults[i]))
            return ERROR_OOM();
    return GLIMPSE_STATUS_OK;
}

/* The language model's prompt: the tokenizer's ids of the text (OPT's "</s>" first), or that start token alone. */
static glimpse_status blip2_prompt_ids(const glimpse_model *model, const char *prompt, int32_t **ids,
                                       size_t *count) {
    const blip2_parts *parts = parts_of(model);
    *ids = NULL;
    if (!prompt || !prompt[0]) {
        *ids = malloc(sizeof **ids);
        if (!*ids) return ERROR_OOM();
        (*ids)[0] = model->start_id;
        *count = 1;
        return GLIMPSE_STATUS_OK;
    }
    size_t n = 0;
    glimpse_status status = gpt2_tokenizer_encode(parts->byte_bpe, prompt, 1, NULL, 0, &n);
    if (status && status != GLIMPSE_STATUS_TOO_LARGE) return status;
    *ids = malloc((n ? n : 1) * sizeof **ids);
    if (!*ids) return ERROR_OOM();
    status = gpt2_tokenizer_encode(parts->byte_bpe, prompt, 1, *ids, n, count);
    if (!status && !*count) { /* a tokenizer without a start token and a prompt of nothing */
        (*ids)[0] = model->start_id;
        *count = 1;
    }
    return status;
}

/* decode(ids, skip_special_tokens=True). Ids the model has but vocab.json lacks (OPT's embedding rows past the
 * tokenizer's 50,265, padding) stand for no text and are left out, where transformers' decode fails on them. */
static glimpse_status blip2_decode(const glimpse_model *model, const int32_t *ids, size_t count, char **text) {
    const blip2_parts *parts = parts_of(model);
    int32_t *known = malloc((count ? count : 1) * sizeof *known);
    if (!known) return ERROR_OOM();
    size_t kept = 0, vocab = gpt2_tokenizer_vocab_size(parts->byte_bpe);
    for (size_t i = 0; i < count; i++)
        if (ids[i] >= 0 && (size_t)ids[i] < vocab) known[kept++] = ids[i];
    glimpse_status status = gpt2_tokenizer_decode(parts->byte_bpe, known, kept, 1, 1, text, NULL);
    free(known);
    return status;
}

static glimpse_status blip2_prepare_image_side(glimpse_context *ctx) {
    blip2_run *run = run_of(ctx);
    const glimpse_model *model = ctx->model;
    const blip2_parts *parts = parts_of(model);
    glimpse_status status = GLIMPSE_STATUS_OK;
    if (!run->qformer) status = blip2_qformer_state_create(&parts->qformer, parts->vision.tokens, &run->qformer);
    if (!status && !run->prefix) {
        run->prefix = malloc((size_t)parts->qformer.queries * (size_t)parts->qformer.projection_dim * sizeof(float));
        if (!run->prefix) status = ERROR_OOM();
    }
    return status;
}

static glimpse_status blip2_image_prefix(glimpse_context *ctx) {
    blip2_run *run = run_of(ctx);
    const glimpse_model *model = ctx->model;
    const blip2_parts *parts = parts_of(model);
    return blip2_qformer_forward(&parts->qformer, run->qformer, run->vision.vision_output, parts->vision.tokens,
                                 run->prefix, ctx->threads);
}

/* Makes or grows the context's run states for `sequences` of `positions`. */
static glimpse_status prepare_states(glimpse_context *ctx, size_t sequences, size_t positions) {
    blip2_run *run = run_of(ctx);
    const glimpse_model *model = ctx->model;
    const blip2_parts *parts = parts_of(model);
    glimpse_status status = blip2_prepare_image_side(ctx);
    opt_state *state = run->language;
    if (!status && (!state || state->max_sequences < sequences || state->max_length < positions)) {
        opt_state_free(run->language);
        run->language = NULL;
        status = opt_state_create(&parts->language_model, sequences, positions, positions, &run->language);
    }
    if (!status) { /* glimpse_explain_caption's records, NULL otherwise */
        run->qformer->record = ctx->qformer_record;
        run->language->record = ctx->caption_record;
    }
    return status;
}

/* One image, its vision tokens in the run's vision_output: the prefix, then generation from generate's placeholder. */
static glimpse_status caption_one(glimpse_context *ctx, size_t image, const caption_request *request,
                                  glimpse_caption *out) {
    blip2_run *run = run_of(ctx);
    const glimpse_model *model = ctx->model;
    const blip2_parts *parts = parts_of(model);
    glimpse_status status = blip2_image_prefix(ctx);
    if (status) return status;
    opt_decoder opt = {&parts->language_model, run->language,  run->prefix, (size_t)parts->qformer.queries,
                       request->prompt,        request->prompt_length};
    caption_decoder decoder = opt_caption_decoder(&opt);
    int32_t start = model->start_id;
    return caption_decode_text(ctx, image, request->params, &decoder, &start, 1, blip2_decode, out);
}

static glimpse_status blip2_caption_images(glimpse_context *ctx, glimpse_image *const *images, size_t count,
                                           const glimpse_caption_params *p, glimpse_caption *out) {
    const glimpse_model *model = ctx->model;
    const blip2_parts *parts = parts_of(model);
    int32_t *prompt = NULL;
    size_t prompt_length = 0;
    glimpse_status status = blip2_prompt_ids(model, p->prompt, &prompt, &prompt_length);
    /* the queries and the prompt, then each new token but the last is fed back: one spare position */
    size_t positions = (size_t)parts->qformer.queries + prompt_length + (size_t)p->max_tokens;
    size_t model_positions = (size_t)parts->language_model.config.max_positions;
    if (!status && positions > model_positions)
        status = error_set(GLIMPSE_STATUS_TOO_LARGE, "the %d query tokens, the prompt (%zu tokens) and %d new tokens "
                           "exceed the language model's %zu positions", parts->qformer.queries, prompt_length,
                           p->max_tokens, model_positions);
    if (!status) status = prepare_states(ctx, (size_t)p->beams, positions);
    caption_request request = {p, prompt, prompt_length};
    if (!status) status = caption_each_image(ctx, images, count, caption_one, &request, out);
    free(prompt);
    return status;
}

/* BLIP-2's question prompt, as its paper and model card ask. */
static glimpse_status question_prompt(const glimpse_model *model, const char *question, char **prompt) {
    (void)model;
    int length = snprintf(NULL, 0, BLIP2_QUESTION_FORMAT, question);
    *prompt = length >= 0 ? malloc((size_t)length + 1) : NULL;
    if (!*prompt) return ERROR_OOM();
    snprintf(*prompt, (size_t)length + 1, BLIP2_QUESTION_FORMAT, question);
    return GLIMPSE_STATUS_OK;
}

/* piece after text[0..*at), a space between. */
static void append(char *text, size_t *at, const char *piece) {
    *at += (size_t)sprintf(text + *at, "%s%s", *at ? " " : "", piece);
}

/* A conversation as BLIP-2's model card chains questions: the system texts, then "Question: Q Answer:" for each
 * user message and the assistant's answers after them, spaces between; its one picture into *image. */
static glimpse_status conversation_prompt(const glimpse_chat_message *messages, size_t count, glimpse_image **image,
                                          char **prompt) {
    size_t pictures = 0, length = 1;
    *image = NULL, *prompt = NULL;
    for (size_t i = 0; i < count; i++)
        for (size_t j = 0; j < messages[i].part_count; j++) {
            const glimpse_chat_part *part = &messages[i].parts[j];
            if (part->image) *image = part->image, pictures++;
            else length += strlen(part->text) + 2;
        }
    if (pictures != 1)
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "BLIP-2 converses about one picture; this conversation "
                         "shows %zu", pictures);
    char *text = malloc(length + count * sizeof "Question: Answer: ");
    if (!text) return ERROR_OOM();
    size_t at = 0;
    text[0] = 0;
    for (int pass = 0; pass < 2; pass++) /* the system texts first, then the turns in order */
        for (size_t i = 0; i < count; i++) {
            bool user = strcmp(messages[i].role, "user") == 0;
            if ((strcmp(messages[i].role, "system") == 0) != (pass == 0)) continue;
            if (user) append(text, &at, "Question:");
            for (size_t j = 0; j < messages[i].part_count; j++)
                if (messages[i].parts[j].text) append(text, &at, messages[i].parts[j].text);
            if (user) append(text, &at, "Answer:");
        }
    *prompt = text;
    return GLIMPSE_STATUS_OK;
}

static glimpse_status chat(glimpse_context *ctx, const glimpse_chat_message *messages, size_t count,
                           const glimpse_caption_params *p, glimpse_caption *out) {
    glimpse_image *image = NULL;
    char *prompt = NULL;
    glimpse_status status = conversation_prompt(messages, count, &image, &prompt);
    glimpse_caption_params asked = *p;
    asked.prompt = prompt;
    if (!status) status = blip2_caption_images(ctx, &image, 1, &asked, out);
    if (!status) status = blip2_prompt_ids(ctx->model, prompt, &out->prompt_ids, &out->prompt_id_count);
    if (!status) {
        out->prompt = prompt, prompt = NULL;
        out->prompt_positions = (size_t)parts_of(ctx->model)->qformer.queries + out->prompt_id_count;
        out->ended = out->id_count > 1 && out->ids[out->id_count - 1] == ctx->model->end_id;
    }
    free(prompt);
    return status;
}

/* ------------------------------------------------------------ bench hooks (api/bench_stages.h) */

/* The bench's prompt: start tokens in place of a tokenized text (their ids do not change the time); and the
 * positions its states hold after the prefix and the prompt. */
#define BENCH_PROMPT_CAPACITY 64
#define BENCH_GENERATED 64

glimpse_status bench_blip2_qformer(glimpse_context *ctx, size_t sequences, double *flops) {
    blip2_run *run = run_of(ctx);
    const glimpse_model *model = ctx->model;
    const blip2_parts *parts = parts_of(model);
    size_t queries = (size_t)parts->qformer.queries;
    glimpse_status status = prepare_states(ctx, sequences, queries + BENCH_PROMPT_CAPACITY + BENCH_GENERATED);
    if (status) return status;
    vit_post_norm_all(&parts->vision, run->vision.vision, 0, run->vision.vision_output);
    status = blip2_qformer_forward(&parts->qformer, run->qformer, run->vision.vision_output, parts->vision.tokens,
                                   run->prefix, ctx->threads);
    const bert_config *c = &parts->qformer.config;
    double h = c->hidden_size, inter = c->intermediate_size, q = (double)queries, e = c->encoder_hidden_size;
    double image = (double)parts->vision.tokens, cross_layers = 0;
    for (int l = 0; l < c->layers; l++) cross_layers += parts->qformer.bert.layers[l].cross_key_weight.data != NULL;
    *flops = c->layers * (2 * q * (4 * h * h + 2 * h * inter) + 4 * q * q * h) +
             cross_layers * (2 * q * 2 * h * h + 2 * image * 2 * e * h + 4 * q * image * h) +
             2 * q * h * parts->qformer.projection_dim;
    return status;
}

/* FLOPs of OPT over `rows` new positions after `cached` ones, with the head on one row per sequence. */
static double opt_flops(const opt_config *t, double rows, double cached, double sequences) {
    double h = t->hidden_size, ffn = t->ffn_dim;
    return t->layers * (2 * rows * (4 * h * h + 2 * h * ffn) + 4 * rows * (cached + rows) * h) +
           sequences * 2 * (double)t->word_embed_proj_dim * t->vocab_size;
}

glimpse_status bench_blip2_prefill(glimpse_context *ctx, size_t prompt_length, double *flops) {
    blip2_run *run = run_of(ctx);
    const glimpse_model *model = ctx->model;
    const blip2_parts *parts = parts_of(model);
    int32_t prompt[BENCH_PROMPT_CAPACITY];
    if (prompt_length < 1 || prompt_length > BENCH_PROMPT_CAPACITY)
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "bench_blip2_prefill: 1 to %d prompt ids",
                         BENCH_PROMPT_CAPACITY);
    for (size_t i = 0; i < prompt_length; i++) prompt[i] = model->start_id;
    opt_decoder opt = {&parts->language_model, run->language, run->prefix, (size_t)parts->qformer.queries, prompt,
                       prompt_length};
    caption_decoder decoder = opt_caption_decoder(&opt);
    float *logits;
    decoder.restart(decoder.self);
    glimpse_status status = decoder.step(decoder.self, prompt, 1, 1, &logits, ctx->threads);
    *flops = opt_flops(&parts->language_model.config, (double)(parts->qformer.queries + (int)prompt_length), 0, 1);
    return status;
}

glimpse_status bench_blip2_step(glimpse_context *ctx, size_t prompt_length, size_t generated, size_t sequences,
                                double *flops) {
    blip2_run *run = run_of(ctx);
    const glimpse_model *model = ctx->model;
    const blip2_parts *parts = parts_of(model);
    opt_state *s = run->language;
    size_t position = (size_t)parts->qformer.queries + prompt_length + generated;
    if (!s || sequences > s->max_sequences || sequences > GLIMPSE_CAPTION_MAX_BEAMS || position >= s->max_length)
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "bench_blip2_step: position %zu, %zu sequences: more "
                         "than the state bench_blip2_qformer made", position, sequences);
    int32_t ids[GLIMPSE_CAPTION_MAX_BEAMS];
    for (size_t q = 0; q < sequences; q++) ids[q] = model->start_id;
    s->length = position;
    glimpse_status status = opt_embed(&parts->language_model, ids, sequences, s->embedded);
    if (!status) status = opt_forward(&parts->language_model, s, s->embedded, sequences, 1, ctx->threads);
    *flops = opt_flops(&parts->language_model.config, (double)sequences, (double)position, (double)sequences);
    return status;
}

/* Bytes a product reads of a weight [out, in]: its int8 twin with a scale and a sum per row, or its stored values. */
static double weight_bytes(const kernel_weight *w, double out, double in) {
    if (w->q8) return out * ((double)w->q8->depth + 8);
    return out * in * (double)weight_type_bytes(w->type);
}

double bench_blip2_step_bytes(const glimpse_context *ctx) {
    const opt_model *m = &parts_of(ctx->model)->language_model;
    const opt_config *t = &m->config;
    double h = t->hidden_size, ffn = t->ffn_dim, bytes = 0;
    for (int l = 0; l < t->layers; l++) {
        const encoder_layer *layer = &m->layers[l];
        const kernel_weight *square[] = {&layer->q_weight, &layer->k_weight, &layer->v_weight, &layer->out_weight};
        for (int i = 0; i < 4; i++) bytes += weight_bytes(square[i], h, h);
        bytes += weight_bytes(&layer->fc1_weight, ffn, h) + weight_bytes(&layer->fc2_weight, h, ffn);
    }
    return bytes + weight_bytes(&m->lm_head, t->vocab_size, t->word_embed_proj_dim);
}

/* family_captioner.batch_*: the language model's batched state (and the Q-Former's, on first use); each image's
 * prefix and prompt as its slot's first rows. */
static glimpse_status batch_create(glimpse_context *ctx, const family_batch_shape *shape, family_batch *out) {
    const glimpse_model *model = ctx->model;
    const blip2_parts *parts = parts_of(model);
    opt_decoder *opt = calloc(1, sizeof *opt);
    if (!opt) return ERROR_OOM();
    out->state = opt;
    opt->model = &parts->language_model;
    glimpse_status status = blip2_prepare_image_side(ctx);
    if (!status)
        status = opt_state_create_batched(&parts->language_model, shape->slots, shape->positions, shape->rows,
                                          shape->images, shape->first_rows, &opt->state);
    if (!status) out->decoder = opt_caption_batch_decoder(opt);
    return status;
}

static glimpse_status batch_admit(glimpse_context *ctx, family_batch *batch, size_t slot, const int32_t *prompt,
                                  size_t prompt_length) {
    blip2_run *run = run_of(ctx);
    const glimpse_model *model = ctx->model;
    const blip2_parts *parts = parts_of(model);
    const opt_decoder *opt = batch->state;
    glimpse_status status = blip2_image_prefix(ctx);
    return status ? status
                  : opt_set_first_rows(&parts->language_model, opt->state, slot, run->prefix,
                                       (size_t)parts->qformer.queries, prompt, prompt_length);
}

static void batch_free(family_batch *batch) {
    opt_decoder *opt = batch->state;
    if (opt) opt_state_free(opt->state);
    free(opt);
    batch->state = NULL;
}

static size_t prefix_rows(const glimpse_model *model) { return (size_t)parts_of(model)->qformer.queries; }
static size_t max_positions(const glimpse_model *model) {
    return (size_t)parts_of(model)->language_model.config.max_positions;
}

/* glimpse's own search settings are BLIP's (load_blip2 gives generation settings GenerationConfig's defaults). */
static const family_captioner captioner = {
    .max_tokens = 20,
    .min_tokens = 5,
    .beams = 3,
    .decode = blip2_decode,
    .prompt_ids = blip2_prompt_ids,
    .prefix_rows = prefix_rows,
    .max_positions = max_positions,
    .vision_attentions = "vision_attentions",
    .caption_images = blip2_caption_images,
    .batch_create = batch_create,
    .batch_admit = batch_admit,
    .batch_free = batch_free,
    .question_prompt = question_prompt,
    .chat = chat,
};

static void text_info(const glimpse_model *model, glimpse_model_info *out) {
    const blip2_parts *parts = parts_of(model);
    const opt_config *t = &parts->language_model.config;
    loader_text_info(out, t->hidden_size, t->layers, t->heads, t->max_positions, t->vocab_size, t->act_name);
}

static void blocks(const glimpse_model *model, family_blocks *out) {
    const blip2_parts *parts = model->parts;
    out->vision = &parts->vision, out->qformer = &parts->qformer, out->language_model = &parts->language_model;
    out->byte_bpe = parts->byte_bpe;
}

static glimpse_status run_blocks(glimpse_context *ctx, family_run_blocks *out) {
    blip2_run *run;
    glimpse_status status =
        vit_run_of(ctx, &parts_of(ctx->model)->vision, true, sizeof *run, free_run, (void **)&run);
    if (status) return status;
    vit_run_blocks(&run->vision, out);
    out->qformer = &run->qformer, out->language = &run->language, out->prefix = &run->prefix;
    return GLIMPSE_STATUS_OK;
}

static glimpse_status tower_twins(glimpse_model *model, kernel_twin_add add, void *set) {
    return vit_run_tower_twins(&parts_of(model)->vision, add, set);
}

static glimpse_status quantize(glimpse_model *model, q8_set *set) {
    glimpse_status status = blip2_qformer_quantize(&parts_of(model)->qformer, set);
    return status ? status : opt_model_quantize(&parts_of(model)->language_model, set);
}

const model_family family_blip2 = {
    .architecture = "Blip2ForConditionalGeneration",
    .summary = "Blip2ForConditionalGeneration (BLIP-2 with OPT)",
    .model_type = "blip-2",
    .kind = GLIMPSE_MODEL_KIND_BLIP2,
    .capabilities = FAMILY_CAN(GLIMPSE_CAPABILITY_CAPTION) | FAMILY_CAN(GLIMPSE_CAPABILITY_ASK) |
                    FAMILY_CAN(GLIMPSE_CAPABILITY_EXPLAIN) | FAMILY_CAN(GLIMPSE_CAPABILITY_CHAT),
    .vision_section = "vision_config",
    .text_section = "text_config",
    .sections_required = true,
    .load = load_blip2,
    .blocks = blocks,
    .run_blocks = run_blocks,
    .tower_twins = tower_twins,
    .quantize = quantize,
    .free_parts = free_parts,
    .free_run = free_run,
    .text_info = text_info,
    .caption = &captioner,
};
