/* bench_stages.c — the stages `glimpse bench` times (api/bench_stages.h), each run as the
 * public calls run it, beside the count of its work. Developer tooling: no
 * public call goes through here. */
#include "api/bench_stages.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "api/context.h"
#include "api/model.h"
#include "core/error.h"
#include "core/profile.h"
#include "families/family.h"
#include "vision/image.h"
#include "vision/preprocess.h"

_Static_assert(BENCH_MAX_BATCH == CONTEXT_IMAGE_BATCH, "the bench's batches are the context's");

int bench_threads(const glimpse_context *ctx) { return pool_threads(ctx->threads); }

glimpse_status bench_decode(const glimpse_context *ctx, const uint8_t *bytes, size_t size, bool fast,
                            glimpse_image **out) {
    int side = fast ? preprocess_decode_side(&ctx->model->preprocess) : 0;
    return image_decode_scaled(bytes, size, "picture", IMAGE_DEFAULT_MAX_PIXELS, 1, side, out);
}

glimpse_status bench_preprocess(glimpse_context *ctx, glimpse_image *const *images, size_t count) {
    return context_preprocess(ctx, images, count, 0);
}

/* The FLOPs of the attention (its two products: the scores and the values' sums) of `layers` encoder layers over
 * t tokens; with `pooled`, the last layer's for one query. */
static double encoder_attention_flops(double layers, double t, double h, bool pooled) {
    return pooled ? (layers - 1) * 4 * t * t * h + 4 * t * h : layers * 4 * t * t * h;
}

/* FLOPs of `layers` encoder layers over t tokens (products and attention); with `pooled`, the last layer makes
 * keys and values for every token and the rest for one. */
static double encoder_flops(double layers, double t, double h, double inter, bool pooled) {
    double products = 2 * t * (4 * h * h + 2 * h * inter), attention = encoder_attention_flops(layers, t, h, pooled);
    if (!pooled) return layers * products + attention;
    return (layers - 1) * products + 2 * t * 2 * h * h + 2 * (2 * h * h + 2 * h * inter) + attention;
}

bool bench_family_has(const glimpse_model *model) { return model->family->bench != NULL; }

glimpse_status bench_family_image(glimpse_context *ctx, glimpse_image *const *images, size_t count, double *flops) {
    return ctx->model->family->bench->image(ctx, images, count, flops);
}

glimpse_status bench_family_decode(glimpse_context *ctx, size_t position, size_t rows, double *flops) {
    return ctx->model->family->bench->decode(ctx, position, rows, flops);
}

double bench_family_step_bytes(const glimpse_model *model) { return model->family->bench->step_bytes(model); }

size_t bench_family_image_rows(const glimpse_model *model) { return model->family->bench->image_rows(model); }

/* The family's blocks (and its run blocks, which glimpse_context_create made). */
static family_blocks blocks_of(const glimpse_model *model) {
    family_blocks blocks;
    family_blocks_of(model, &blocks);
    return blocks;
}

static family_run_blocks run_of(glimpse_context *ctx) {
    family_run_blocks run;
    if (family_run_blocks_of(ctx, &run)) memset(&run, 0, sizeof run);
    return run;
}

bool bench_has_vision(const glimpse_model *model) {
    family_blocks blocks = blocks_of(model);
    return blocks.vision && blocks.vision->weights.layers != NULL;
}

unsigned bench_stages_of(const glimpse_model *model) {
    unsigned stages = glimpse_model_kind_can(model->kind, GLIMPSE_CAPABILITY_CAPTION) ? BENCH_STAGE_CAPTIONS : 0;
    family_blocks blocks = blocks_of(model);
    if (blocks.qformer && blocks.qformer->bert.layers) stages |= BENCH_STAGE_PREFIX_DECODER;
    else if (blocks.text_decoder && blocks.text_decoder->layers) stages |= BENCH_STAGE_CROSS_DECODER;
    if (blocks.text_encoder && blocks.text_encoder->layers && blocks.itm->itm_weight) stages |= BENCH_STAGE_ITM;
    return stages;
}

const char *bench_vision_detail(const glimpse_model *model) {
    if (!model_embeds(model)) return NULL;
    return blocks_of(model).vision->weights.head_probe ? "attention pooling" : "class tokens' last layer";
}

void bench_vision(glimpse_context *ctx, size_t batch, double *flops, double *attention_flops) {
    family_blocks blocks = blocks_of(ctx->model);
    family_run_blocks run = run_of(ctx);
    const vit_model *vision = blocks.vision;
    /* an embedding tower reads the class token alone, but for an attention-pooling head (SigLIP's), which reads
     * every token */
    bool pooled = model_embeds(ctx->model) && !vision->weights.head_probe;
    vit_forward(vision, run.vision, run.pixel_values, batch,
                pooled ? ENCODER_OUTPUT_POOLED_ROWS : ENCODER_OUTPUT_ALL_ROWS, ctx->threads);
    const vit_config *c = &vision->config;
    double h = c->hidden_size, inter = c->intermediate_size, t = (double)vision->tokens;
    double patches = (double)(vision->patches_per_side * vision->patches_per_side);
    double patch = 3.0 * c->patch_size * c->patch_size;
    /* SigLIP's attention-pooling head: keys and values of every token, then one query's layer */
    double head_attention = vision->weights.head_probe ? 4 * t * h : 0;
    double head = vision->weights.head_probe ? 2 * t * 2 * h * h + 2 * (2 * h * h + 2 * h * inter) + head_attention
                                             : 0;
    *flops = (double)batch * (encoder_flops(c->layers, t, h, inter, pooled) + 2 * patches * patch * h + head);
    if (attention_flops)
        *attention_flops = (double)batch * (encoder_attention_flops(c->layers, t, h, pooled) + head_attention);
}

glimpse_status bench_text(glimpse_context *ctx, const int32_t *ids, const size_t *lengths, size_t count,
                          double *flops, double *attention_flops) {
    const clip_text_model *text = blocks_of(ctx->model).text;
    glimpse_status status =
        clip_text_forward(text, run_of(ctx).text, ids, lengths, count, ENCODER_OUTPUT_POOLED_ROWS, ctx->threads);
    const clip_text_config *c = &text->config;
    *flops = 0;
    if (attention_flops) *attention_flops = 0;
    for (size_t i = 0; i < count; i++) {
        *flops += encoder_flops(c->layers, (double)lengths[i], c->hidden_size, c->intermediate_size, true);
        if (attention_flops)
            *attention_flops += encoder_attention_flops(c->layers, (double)lengths[i], c->hidden_size, true);
    }
    return status;
}

struct bench_bert {
    glimpse_context *ctx;
    family_blocks blocks;
    family_run_blocks run;
    const bert_model *model; /* the caption decoder or the retrieval text encoder */
    bert_state *state;
    int32_t start_ids[BENCH_MAX_BATCH]; /* the start token for every sequence of a decoder step */
};

glimpse_status bench_bert_create(glimpse_context *ctx, size_t sequences, size_t max_length, bench_bert **out) {
    const glimpse_model *model = ctx->model;
    *out = NULL;
    if (model_embeds(model))
        return error_set(GLIMPSE_STATUS_WRONG_MODEL, "bench_bert_create: %s has no BERT", model->architecture);
    if (sequences > BENCH_MAX_BATCH)
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "bench_bert_create: at most %d sequences", BENCH_MAX_BATCH);
    bench_bert *bert = calloc(1, sizeof *bert);
    if (!bert) return ERROR_OOM();
    bert->ctx = ctx;
    bert->blocks = blocks_of(model), bert->run = run_of(ctx);
    const family_blocks *blocks = &bert->blocks;
    bert->model = blocks->text_decoder && blocks->text_decoder->layers ? blocks->text_decoder : blocks->text_encoder;
    for (size_t s = 0; s < BENCH_MAX_BATCH; s++) bert->start_ids[s] = model->start_id;
    vit_post_norm_all(blocks->vision, bert->run.vision, 0, bert->run.vision_output);
    glimpse_status status =
        bert_state_create(bert->model, sequences, max_length, max_length, blocks->vision->tokens, &bert->state);
    if (status)
        free(bert);
    else
        *out = bert;
    return status;
}

void bench_bert_free(bench_bert *bert) {
    if (bert) bert_state_free(bert->state);
    free(bert);
}

glimpse_status bench_cross_kv(bench_bert *bert, double *flops) {
    const glimpse_context *ctx = bert->ctx;
    size_t image_tokens = bert->blocks.vision->tokens;
    glimpse_status status = bert_set_image(bert->model, bert->state, bert->run.vision_output, image_tokens, ctx->threads);
    const bert_config *c = &bert->model->config;
    *flops = c->layers * 2 * 2 * (double)image_tokens * c->encoder_hidden_size * c->hidden_size;
    return status;
}

glimpse_status bench_decoder_step(bench_bert *bert, size_t position, size_t sequences, double *flops) {
    if (sequences > BENCH_MAX_BATCH)
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "bench_decoder_step: at most %d sequences", BENCH_MAX_BATCH);
    bert->state->length = position - 1;
    glimpse_status status =
        bert_decode_step(bert->model, bert->state, bert->start_ids, sequences, 1, bert->ctx->threads);
    const bert_config *c = &bert->model->config;
    double h = c->hidden_size, inter = c->intermediate_size, vocab = c->vocab_size;
    double cached = (double)position - 1, image_tokens = (double)bert->blocks.vision->tokens;
    double per_layer = 2 * (6 * h * h + 2 * h * inter) + 4 * h * (cached + 1) + 4 * h * image_tokens;
    *flops = (double)sequences * (per_layer * c->layers + 2 * h * h + 2 * h * vocab);
    return status;
}

glimpse_status bench_itm_text(bench_bert *bert, const int32_t *ids, size_t count, double *flops) {
    const glimpse_context *ctx = bert->ctx;
    glimpse_status status = bert_encode(bert->model, bert->state, ids, count, 1, ctx->threads);
    if (!status) itm_match_probability(bert->blocks.itm, bert->state->x, NULL);
    const bert_config *c = &bert->model->config;
    double h = c->hidden_size, inter = c->intermediate_size, t = (double)count;
    double image_tokens = (double)bert->blocks.vision->tokens;
    *flops = c->layers * (2 * t * (6 * h * h + 2 * h * inter) + 4 * t * t * h + 4 * t * h * image_tokens);
    return status;
}

_Static_assert(BENCH_PROFILE_KINDS == PROFILE_KINDS, "bench_profile_names follows profile_kind");
const char *const bench_profile_names[BENCH_PROFILE_KINDS] = {"products", "attention", "norms", "activations",
                                                             "thread_waits"};

void bench_profile_start(void) { profile_enable(true); }

void bench_profile_read(double seconds[BENCH_PROFILE_KINDS]) { profile_read(seconds); }

double bench_profile_decoding(void) { return profile_read_decoding(); }
