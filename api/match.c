/* match.c — glimpse_match and glimpse_rerank: BLIP image-text matching.
 * Each image goes through the vision tower once and its cross-attention
 * keys and values are computed once; every text is then one text-encoder
 * pass (ITM), or texts and images are projected once each (ITC). */
#include <stdlib.h>
#include <string.h>

#include "api/context.h"
#include "api/model.h"
#include "core/error.h"
#include "families/family.h"
#include "fusion/retrieval.h"

/* [CLS] text [SEP] for every text, packed; lengths[t], starts[t]. */
static glimpse_status tokenize_all(const family_blocks *model, const char *const *texts, size_t count, int32_t **ids,
                                   size_t *lengths, size_t *starts, size_t *longest) {
    size_t positions = (size_t)model->text_encoder->config.max_positions, total = 0;
    *longest = 0;
    for (size_t t = 0; t < count; t++) {
        size_t n = 0;
        glimpse_status status = bert_tokenizer_encode(model->wordpiece, texts[t], NULL, 0, &n);
        if (status) return status;
        lengths[t] = n + 2 > positions ? positions : n + 2; /* longer texts keep their start, and [SEP] */
        starts[t] = total;
        total += lengths[t];
        if (lengths[t] > *longest) *longest = lengths[t];
    }
    *ids = malloc((total ? total : 1) * sizeof **ids);
    if (!*ids) return ERROR_OOM();
    int32_t cls = bert_tokenizer_id(model->wordpiece, "[CLS]"), sep = bert_tokenizer_id(model->wordpiece, "[SEP]");
    for (size_t t = 0; t < count; t++) {
        int32_t *row = *ids + starts[t];
        size_t n;
        row[0] = cls;
        glimpse_status status = bert_tokenizer_encode(model->wordpiece, texts[t], row + 1, lengths[t] - 2, &n);
        if (status) return status;
        row[lengths[t] - 1] = sep;
    }
    return GLIMPSE_STATUS_OK;
}

/* The context's text-encoder state (*bert), grown to hold `length` tokens. */
static glimpse_status ensure_state(const family_blocks *model, bert_state **bert, size_t length) {
    if (*bert && (*bert)->max_length >= length) return GLIMPSE_STATUS_OK;
    bert_state_free(*bert);
    *bert = NULL;
    size_t room = length < 64 ? 64 : length;
    return bert_state_create(model->text_encoder, 1, room, room, model->vision->tokens, bert);
}

static glimpse_status check_retrieval(glimpse_context *ctx, const char *what) {
    if (!ctx) return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "%s: context is NULL", what);
    if (!(ctx->model->family->capabilities & FAMILY_CAN(GLIMPSE_CAPABILITY_MATCH)))
        return error_set(GLIMPSE_STATUS_WRONG_MODEL,
                         "%s needs a BLIP retrieval model (BlipForImageTextRetrieval), this is %s", what,
                         ctx->model->architecture);
    return GLIMPSE_STATUS_OK;
}

glimpse_status glimpse_match(glimpse_context *ctx, glimpse_image *const *images, size_t image_count,
                             const char *const *texts, size_t text_count, glimpse_match_mode mode, float *scores) {
    glimpse_status status = check_retrieval(ctx, "image-text matching");
    if (status) return status;
    if (!images || !texts || !scores) return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_match: NULL argument");
    if (!image_count || !text_count)
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_match: %zu images and %zu texts: nothing to match",
                         image_count, text_count);
    if (mode != GLIMPSE_MATCH_MODE_ITM && mode != GLIMPSE_MATCH_MODE_ITC)
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_match: unknown mode %d", (int)mode);
    for (size_t t = 0; t < text_count; t++)
        if (!texts[t]) return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_match: text %zu is NULL", t);
    family_blocks blocks, *model = &blocks;
    family_run_blocks run;
    family_blocks_of(ctx->model, &blocks);
    if ((status = family_run_blocks_of(ctx, &run))) return status;
    const bert_model *encoder = model->text_encoder;
    size_t shared = model->itm->shared;
    size_t *lengths = malloc((text_count + 1) * sizeof *lengths), *starts = malloc((text_count + 1) * sizeof *starts);
    float *text_features = malloc((text_count * shared + 1) * sizeof(float));
    float *image_feature = malloc(shared * sizeof(float));
    int32_t *ids = NULL;
    size_t longest = 0;
    if (!lengths || !starts || !text_features || !image_feature) status = ERROR_OOM();
    if (!status) status = tokenize_all(model, texts, text_count, &ids, lengths, starts, &longest);
    if (!status) status = ensure_state(model, run.bert, longest);
    /* ITC: each text once, without the image */
    for (size_t t = 0; !status && mode == GLIMPSE_MATCH_MODE_ITC && t < text_count; t++) {
        status = bert_encode(encoder, *run.bert, ids + starts[t], lengths[t], 0, ctx->threads);
        if (!status) itm_text_feature(model->itm, (*run.bert)->x, text_features + t * shared);
    }
    for (size_t first = 0; !status && first < image_count; first += CONTEXT_IMAGE_BATCH) {
        size_t batch = image_count - first < CONTEXT_IMAGE_BATCH ? image_count - first : CONTEXT_IMAGE_BATCH;
        if ((status = context_preprocess(ctx, images + first, batch, first))) break;
        /* ITC reads the class token alone; ITM cross-attends to every token */
        vit_forward(model->vision, run.vision, run.pixel_values, batch,
                    mode == GLIMPSE_MATCH_MODE_ITC ? ENCODER_OUTPUT_POOLED_ROWS : ENCODER_OUTPUT_ALL_ROWS,
                    ctx->threads);
        for (size_t b = 0; b < batch && !status; b++) {
            float *row = scores + (first + b) * text_count;
            if (mode == GLIMPSE_MATCH_MODE_ITC) {
                vit_pooled(model->vision, run.vision, b, run.vision_output);
                itm_image_feature(model->itm, run.vision_output, image_feature);
                retrieval_logits(row, image_feature, 1, text_features, text_count, shared, 1.0f, 0.0f); /* cosine */
                continue;
            }
            vit_post_norm_all(model->vision, run.vision, b, run.vision_output);
            status = bert_set_image(encoder, *run.bert, run.vision_output, model->vision->tokens, ctx->threads);
            for (size_t t = 0; t < text_count && !status; t++) {
                status = bert_encode(encoder, *run.bert, ids + starts[t], lengths[t], 1, ctx->threads);
                if (!status) row[t] = itm_match_probability(model->itm, (*run.bert)->x, NULL);
            }
        }
        if (!status) status = context_progress(ctx, first + batch, image_count);
    }
    free(lengths), free(starts), free(text_features), free(image_feature), free(ids);
    return status;
}

static int compare_ranked(const void *a, const void *b) {
    const glimpse_ranked *x = a, *y = b;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    if (x->first_score != y->first_score) return x->first_score > y->first_score ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

static int compare_first(const void *a, const void *b) {
    const glimpse_ranked *x = a, *y = b;
    if (x->first_score != y->first_score) return x->first_score > y->first_score ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

glimpse_status glimpse_rerank(glimpse_context *ctx, const char *text, glimpse_image *const *images, size_t count,
                              const float *first_scores, size_t top_k, glimpse_ranked *out, size_t *out_count) {
    glimpse_status status = check_retrieval(ctx, "re-ranking");
    if (status) return status;
    if (!text || (count && (!images || !first_scores)) || !out_count || (top_k && !out))
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_rerank: NULL argument");
    *out_count = 0;
    glimpse_ranked *all = malloc((count ? count : 1) * sizeof *all);
    if (!all) return ERROR_OOM();
    for (size_t i = 0; i < count; i++) all[i] = (glimpse_ranked){i, first_scores[i], 0};
    qsort(all, count, sizeof *all, compare_first);
    size_t keep = top_k < count ? top_k : count;
    glimpse_image **shortlist = malloc((keep ? keep : 1) * sizeof *shortlist);
    float *scores = malloc((keep ? keep : 1) * sizeof *scores);
    if (!shortlist || !scores) status = ERROR_OOM();
    for (size_t i = 0; !status && i < keep; i++) shortlist[i] = images[all[i].index];
    if (!status && keep) status = glimpse_match(ctx, shortlist, keep, &text, 1, GLIMPSE_MATCH_MODE_ITM, scores);
    if (!status) {
        for (size_t i = 0; i < keep; i++) all[i].score = scores[i];
        qsort(all, keep, sizeof *all, compare_ranked);
        memcpy(out, all, keep * sizeof *out);
        *out_count = keep;
    }
    free(all), free(shortlist), free(scores);
    return status;
}
