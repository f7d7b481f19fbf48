/* test_siglip_parity.c — SigLIP against the reference: siglip-tiny's
 * pixel_values (exactly), token ids (every one), vision and text hidden
 * states, pooled outputs, embeddings, logits and sigmoid probabilities
 * within 1e-4 of what transformers 4.37.2 computed. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/pool.h"
#include "fusion/retrieval.h"
#include "text/clip_text.h"
#include "text/siglip_tokenizer.h"
#include "vision/preprocess.h"
#include "vision/vit.h"
#include "weights/config.h"
#include "weights/names.h"
#include "tests/support.h"

#define TOLERANCE 1e-4

typedef struct siglip_fixture {
    parity_fixture *parity; /* expected.json, reference.safetensors */
    weight_store *store;
    cJSON *config;
    vit_model vision;
    clip_text_model text;
    siglip_tokenizer *tokenizer;
    preprocess_config preprocess;
    float logit_scale, logit_bias;
    pool *threads;
} siglip_fixture;

/* The snapshot's towers, tokenizer and preprocessing, read as a loader reads them. */
static glimpse_status load_snapshot(siglip_fixture *f, const char *folder) {
    glimpse_status status = config_read_json(folder, "config.json", &f->config);
    if (!status) status = weight_store_open(folder, &f->store);
    const cJSON *vision_json = cJSON_GetObjectItem(f->config, "vision_config");
    const cJSON *text_json = cJSON_GetObjectItem(f->config, "text_config");
    vit_config vision;
    clip_text_config text;
    if (!status) status = vit_config_read(vision_json, "vision_config", VIT_VARIANT_SIGLIP, &vision);
    if (!status) status = vit_model_load(&f->vision, &vision, &names_siglip.vision, f->store);
    if (!status) status = clip_text_config_read(text_json, "text_config", CLIP_TEXT_VARIANT_SIGLIP, 0, &text);
    if (!status) status = clip_text_model_load(&f->text, &text, &names_siglip.text, f->store);
    if (!status) status = siglip_tokenizer_load(folder, &f->tokenizer);
    if (!status) status = pool_create(2, &f->threads);
    const float *scale, *bias;
    size_t scalar[1] = {1};
    if (!status) status = weight_store_get(f->store, &scale, 1, scalar, names_siglip.logit_scale);
    if (!status) status = weight_store_get(f->store, &bias, 1, scalar, names_siglip.logit_bias);
    if (status) return status;
    f->logit_scale = expf(*scale), f->logit_bias = *bias;
    f->preprocess = preprocess_default_siglip(vision.image_size);
    cJSON *preprocessor;
    if ((status = config_read_json(folder, "preprocessor_config.json", &preprocessor))) return status;
    status = preprocess_config_read(preprocessor, "preprocessor_config.json", 1, &f->preprocess);
    cJSON_Delete(preprocessor);
    return status;
}

static int setup(void **state) {
    void *parity;
    if (parity_setup(&parity, "siglip-tiny", 0)) return -1;
    *state = NULL;
    if (!parity) return 0;
    siglip_fixture *f = calloc(1, sizeof *f);
    f->parity = parity;
    *state = f;
    char *folder = fixture_path("siglip-tiny");
    glimpse_status status = load_snapshot(f, folder);
    free(folder);
    if (status) fprintf(stderr, "load failed: %s\n", glimpse_last_error());
    return status ? -1 : 0;
}

static int teardown(void **state) {
    siglip_fixture *f = *state;
    if (!f) return 0;
    vit_model_free(&f->vision);
    clip_text_model_free(&f->text);
    siglip_tokenizer_free(f->tokenizer);
    weight_store_free(f->store);
    cJSON_Delete(f->config);
    pool_free(f->threads);
    void *parity = f->parity;
    free(f);
    return parity_teardown(&parity);
}

/* The group's fixture; the test is skipped without fixtures. */
static const siglip_fixture *fixture_of(void **state) {
    if (!*state) skip();
    return *state;
}

/* Holds actual to expected within TOLERANCE × max(1, |expected|), noting the
 * largest relative and absolute differences under `what`. */
static void expect_close(const char *what, const float *actual, const float *expected, size_t n) {
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)actual[i] - expected[i]);
        if (!(d <= worst)) worst = d;
    }
    char absolute[64];
    snprintf(absolute, sizeof absolute, "%s (abs)", what);
    note_difference(absolute, worst);
    double relative = relative_difference(actual, expected, n);
    note_difference(what, relative);
    if (!(relative <= TOLERANCE)) fail_msg("%s differs by %g", what, relative);
}

static float *all_pixel_values(const siglip_fixture *f) {
    return parity_pixel_values(f->parity, &f->preprocess, (size_t)f->vision.config.image_size);
}

/* Bit for bit: the same Pillow resize, the same float64 rescale and float32 normalisation. */
static void test_pixel_values(void **state) {
    const siglip_fixture *f = fixture_of(state);
    size_t size = (size_t)f->vision.config.image_size, plane = 3 * size * size;
    assert_int_equal(size, 64);
    float *pixels = all_pixel_values(f);
    const float *expected = fixture_tensor(f->parity->reference, "pixel_values", f->parity->image_count * plane);
    for (size_t i = 0; i < f->parity->image_count; i++) {
        note_difference("pixel_values", relative_difference(pixels + i * plane, expected + i * plane, plane));
        if (memcmp(pixels + i * plane, expected + i * plane, plane * sizeof(float)) != 0)
            fail_msg("pixel_values of %s differ from the reference's", parity_image(f->parity, i));
    }
    free(pixels);
}

/* The config's absent keys took SigLIP's defaults. */
static void test_config_defaults(void **state) {
    const siglip_fixture *f = fixture_of(state);
    const vit_config *v = &f->vision.config;
    const clip_text_config *t = &f->text.config;
    assert_int_equal(v->patch_size, 16);
    assert_int_equal(v->act, ACTIVATION_GELU_TANH);
    assert_true(v->layer_norm_eps == 1e-6f);
    assert_int_equal(f->vision.tokens, 16); /* 4 × 4 patches, no class token */
    assert_int_equal(v->projection_dim, 40);
    assert_int_equal(t->max_positions, 64);
    assert_int_equal(t->act, ACTIVATION_GELU_TANH);
    assert_true(t->layer_norm_eps == 1e-6f);
    assert_int_equal(t->projection_dim, 40);
    assert_int_equal(t->vocab_size, 1000);
    double scale = cJSON_GetObjectItem(f->parity->expected, "logit_scale")->valuedouble;
    double bias = cJSON_GetObjectItem(f->parity->expected, "logit_bias")->valuedouble;
    assert_true(fabs(f->logit_scale - scale) <= 1e-6 * scale);
    assert_true(fabs(f->logit_bias - bias) <= 1e-6);
}

static void test_token_ids(void **state) {
    const siglip_fixture *f = fixture_of(state);
    const cJSON *all_ids = cJSON_GetObjectItem(f->parity->expected, "input_ids");
    const cJSON *counts = cJSON_GetObjectItem(f->parity->expected, "num_tokens");
    for (size_t t = 0; t < f->parity->text_count; t++) {
        const cJSON *expected = cJSON_GetArrayItem(all_ids, (int)t);
        int32_t ids[SIGLIP_TOKENIZER_DEFAULT_LENGTH];
        size_t unpadded;
        glimpse_status status = siglip_tokenizer_encode(f->tokenizer, parity_text(f->parity, t), ids,
                                                        SIGLIP_TOKENIZER_DEFAULT_LENGTH, &unpadded);
        assert_int_equal(status, GLIMPSE_STATUS_OK);
        assert_int_equal(cJSON_GetArraySize(expected), SIGLIP_TOKENIZER_DEFAULT_LENGTH);
        assert_int_equal(unpadded, cJSON_GetArrayItem(counts, (int)t)->valueint);
        for (size_t i = 0; i < SIGLIP_TOKENIZER_DEFAULT_LENGTH; i++)
            if (ids[i] != cJSON_GetArrayItem(expected, (int)i)->valueint)
                fail_msg("text %zu (\"%.30s\"): id %zu is %d, expected %d", t, parity_text(f->parity, t), i, ids[i],
                         cJSON_GetArrayItem(expected, (int)i)->valueint);
    }
}

static void test_vision_tower(void **state) {
    const siglip_fixture *f = fixture_of(state);
    const vit_model *vision = &f->vision;
    size_t n = f->parity->image_count, hidden = (size_t)vision->config.hidden_size, tokens = vision->tokens;
    size_t dim = (size_t)vision->config.projection_dim;
    float *pixels = all_pixel_values(f);
    vit_state *run;
    assert_int_equal(vit_state_create(vision, n, &run), GLIMPSE_STATUS_OK);
    const safetensors *reference = f->parity->reference;
    const float *hidden_expected = fixture_tensor(reference, "vision_last_hidden_state", n * tokens * hidden);
    const float *pooled_expected = fixture_tensor(reference, "vision_pooled", n * hidden);
    const float *embeds_expected = fixture_tensor(reference, "image_embeds", n * dim);
    float *all = malloc(tokens * hidden * sizeof(float)), pooled[hidden], embed[dim];
    /* every token asked for, then the pooled rows only: SigLIP's head needs every token either way */
    for (int pass = 0; pass < 2; pass++) {
        memset(run->hidden, 0, n * tokens * hidden * sizeof(float));
        vit_forward(vision, run, pixels, n, pass ? ENCODER_OUTPUT_POOLED_ROWS : ENCODER_OUTPUT_ALL_ROWS, f->threads);
        for (size_t b = 0; b < n; b++) {
            vit_post_norm_all(vision, run, b, all);
            expect_close("vision_last_hidden_state", all, hidden_expected + b * tokens * hidden, tokens * hidden);
            vit_pooled(vision, run, b, pooled);
            expect_close("vision_pooled", pooled, pooled_expected + b * hidden, hidden);
            vit_embed(vision, run, b, embed);
            expect_close("image_embeds", embed, embeds_expected + b * dim, dim);
        }
    }
    free(all);
    vit_state_free(run);
    free(pixels);
}

/* The fixture's input_ids, packed: every text is 64 ids. */
static int32_t *fixture_ids(const siglip_fixture *f, size_t *lengths) {
    size_t positions = (size_t)f->text.config.max_positions;
    const cJSON *all_ids = cJSON_GetObjectItem(f->parity->expected, "input_ids");
    int32_t *ids = malloc(f->parity->text_count * positions * sizeof *ids);
    for (size_t t = 0; t < f->parity->text_count; t++) {
        const cJSON *list = cJSON_GetArrayItem(all_ids, (int)t);
        assert_int_equal(cJSON_GetArraySize(list), positions);
        lengths[t] = positions;
        for (size_t i = 0; i < positions; i++) ids[t * positions + i] = cJSON_GetArrayItem(list, (int)i)->valueint;
    }
    return ids;
}

static void test_text_tower(void **state) {
    const siglip_fixture *f = fixture_of(state);
    const clip_text_model *text = &f->text;
    size_t n = f->parity->text_count, hidden = (size_t)text->config.hidden_size;
    size_t dim = (size_t)text->config.projection_dim;
    size_t positions = (size_t)text->config.max_positions, lengths[16];
    assert_true(n <= 16);
    int32_t *ids = fixture_ids(f, lengths);
    clip_text_state *run;
    assert_int_equal(clip_text_state_create(text, n, &run), GLIMPSE_STATUS_OK);
    assert_int_equal(clip_text_forward(text, run, ids, lengths, n, ENCODER_OUTPUT_ALL_ROWS, f->threads),
                     GLIMPSE_STATUS_OK);
    const safetensors *reference = f->parity->reference;
    const float *hidden_expected = fixture_tensor(reference, "text_last_hidden_state", n * positions * hidden);
    const float *pooled_expected = fixture_tensor(reference, "text_pooled", n * dim);
    const float *embeds_expected = fixture_tensor(reference, "text_embeds", n * dim);
    /* no mask: every position, padding included, is the reference's */
    expect_close("text_last_hidden_state", run->hidden, hidden_expected, n * positions * hidden);
    float pooled[dim], embed[dim];
    for (size_t t = 0; t < n; t++) {
        clip_text_pooled(text, run, t * positions, ids + t * positions, positions, pooled);
        expect_close("text_pooled", pooled, pooled_expected + t * dim, dim);
        clip_text_embed(text, run, t * positions, ids + t * positions, positions, embed);
        expect_close("text_embeds", embed, embeds_expected + t * dim, dim);
    }
    /* the embeddings again from the last position's last layer alone */
    memset(run->hidden, 0, n * positions * hidden * sizeof(float));
    assert_int_equal(clip_text_forward(text, run, ids, lengths, n, ENCODER_OUTPUT_POOLED_ROWS, f->threads),
                     GLIMPSE_STATUS_OK);
    for (size_t t = 0; t < n; t++) {
        clip_text_embed(text, run, t * positions, ids + t * positions, positions, embed);
        expect_close("text_embeds (pooled rows only)", embed, embeds_expected + t * dim, dim);
    }
    clip_text_state_free(run);
    free(ids);
}

/* logits = exp(logit_scale) · cosine + logit_bias and their per-pair sigmoids,
 * from the reference's own embeddings (the towers are held to those above). */
static void test_scores(void **state) {
    const siglip_fixture *f = fixture_of(state);
    size_t ni = f->parity->image_count, nt = f->parity->text_count, dim = (size_t)f->vision.config.projection_dim;
    const safetensors *reference = f->parity->reference;
    const float *images = fixture_tensor(reference, "image_embeds", ni * dim);
    const float *texts = fixture_tensor(reference, "text_embeds", nt * dim);
    float *logits = malloc(ni * nt * sizeof(float)), *probabilities = malloc(ni * nt * sizeof(float));
    retrieval_logits(logits, images, ni, texts, nt, dim, f->logit_scale, f->logit_bias);
    retrieval_sigmoid(probabilities, logits, ni * nt);
    expect_close("logits_per_image", logits, fixture_tensor(reference, "logits_per_image", ni * nt), ni * nt);
    expect_close("probs_per_image", probabilities, fixture_tensor(reference, "probs_per_image", ni * nt), ni * nt);
    const cJSON *rows = cJSON_GetObjectItem(f->parity->expected, "probs_per_image");
    for (size_t i = 0; i < ni; i++)
        for (size_t t = 0; t < nt; t++) {
            double value = cJSON_GetArrayItem(cJSON_GetArrayItem(rows, (int)i), (int)t)->valuedouble;
            assert_true(fabs(probabilities[i * nt + t] - value) <= TOLERANCE);
        }
    free(logits);
    free(probabilities);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pixel_values),
        cmocka_unit_test(test_config_defaults),
        cmocka_unit_test(test_token_ids),
        cmocka_unit_test(test_vision_tower),
        cmocka_unit_test(test_text_tower),
        cmocka_unit_test(test_scores),
    };
    return report_differences(cmocka_run_group_tests_name("siglip parity", tests, setup, teardown));
}
