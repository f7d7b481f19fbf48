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

#include "api/model.h"
#include "core/pool.h"
#include "fusion/retrieval.h"
#include "tests/support.h"

#define TOLERANCE 1e-4

typedef struct siglip_fixture {
    parity_fixture *parity; /* the snapshot loaded by glimpse_model_load, expected.json, reference.safetensors */
    const glimpse_model *model;
    pool *threads;
} siglip_fixture;

static int setup(void **state) {
    void *parity;
    int failed = parity_setup(&parity, "siglip-tiny", 1);
    *state = NULL;
    if (!parity) return failed;
    siglip_fixture *f = calloc(1, sizeof *f);
    f->parity = parity;
    f->model = f->parity->model;
    *state = f;
    return failed || pool_create(2, &f->threads) ? -1 : 0;
}

static int teardown(void **state) {
    siglip_fixture *f = *state;
    if (!f) return 0;
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
    return parity_pixel_values(f->parity, &f->model->preprocess, (size_t)test_blocks(f->model).vision->config.image_size);
}

/* Bit for bit: the same Pillow resize, the same float64 rescale and float32 normalisation. */
static void test_pixel_values(void **state) {
    const siglip_fixture *f = fixture_of(state);
    size_t size = (size_t)test_blocks(f->model).vision->config.image_size, plane = 3 * size * size;
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
    const vit_config *v = &test_blocks(f->model).vision->config;
    const clip_text_config *t = &test_blocks(f->model).text->config;
    assert_int_equal(v->patch_size, 16);
    assert_int_equal(v->act, ACTIVATION_GELU_TANH);
    assert_true(v->layer_norm_eps == 1e-6f);
    assert_int_equal(test_blocks(f->model).vision->tokens, 16); /* 4 × 4 patches, no class token */
    assert_int_equal(v->projection_dim, 40);
    assert_int_equal(t->max_positions, 64);
    assert_int_equal(t->act, ACTIVATION_GELU_TANH);
    assert_true(t->layer_norm_eps == 1e-6f);
    assert_int_equal(t->projection_dim, 40);
    assert_int_equal(t->vocab_size, 1000);
    double scale = cJSON_GetObjectItem(f->parity->expected, "logit_scale")->valuedouble;
    double bias = cJSON_GetObjectItem(f->parity->expected, "logit_bias")->valuedouble;
    assert_true(fabs(test_blocks(f->model).logit_scale - scale) <= 1e-6 * scale);
    assert_true(fabs(test_blocks(f->model).logit_bias - bias) <= 1e-6);
}

/* ids[0 .. count) against a JSON list of ids, then padding with </s> (1) up to count. */
static void expect_ids(const char *text, const int32_t *ids, size_t count, const cJSON *expected) {
    size_t given = (size_t)cJSON_GetArraySize(expected);
    assert_true(given <= count);
    for (size_t i = 0; i < count; i++) {
        int want = i < given ? cJSON_GetArrayItem(expected, (int)i)->valueint : 1;
        if (ids[i] != want) fail_msg("\"%.30s\": id %zu is %d, expected %d", text, i, ids[i], want);
    }
}

/* Every text's 64 ids and unpadded count, then every tokenizer case, through glimpse_tokenize. */
static void test_token_ids(void **state) {
    const siglip_fixture *f = fixture_of(state);
    const cJSON *all_ids = cJSON_GetObjectItem(f->parity->expected, "input_ids");
    const cJSON *counts = cJSON_GetObjectItem(f->parity->expected, "num_tokens");
    int32_t ids[SIGLIP_TOKENIZER_DEFAULT_LENGTH];
    size_t count, unpadded;
    for (size_t t = 0; t < f->parity->text_count; t++) {
        const char *text = parity_text(f->parity, t);
        assert_int_equal(glimpse_tokenize(f->model, text, ids, SIGLIP_TOKENIZER_DEFAULT_LENGTH, &count),
                         GLIMPSE_STATUS_OK);
        assert_int_equal(count, SIGLIP_TOKENIZER_DEFAULT_LENGTH);
        assert_int_equal(cJSON_GetArraySize(cJSON_GetArrayItem(all_ids, (int)t)), SIGLIP_TOKENIZER_DEFAULT_LENGTH);
        expect_ids(text, ids, count, cJSON_GetArrayItem(all_ids, (int)t));
        assert_int_equal(siglip_tokenizer_encode(test_blocks(f->model).sentencepiece, text, ids, count, &unpadded),
                         GLIMPSE_STATUS_OK);
        assert_int_equal(unpadded, cJSON_GetArrayItem(counts, (int)t)->valueint);
    }
    const char *lists[] = {"tokenizer_cases", "tokenizer_cases_special"};
    for (size_t l = 0; l < 2; l++) {
        const cJSON *item;
        cJSON_ArrayForEach(item, cJSON_GetObjectItem(f->parity->expected, lists[l])) {
            const char *text = cJSON_GetObjectItem(item, "text")->valuestring;
            assert_int_equal(glimpse_tokenize(f->model, text, ids, SIGLIP_TOKENIZER_DEFAULT_LENGTH, &count),
                             GLIMPSE_STATUS_OK);
            expect_ids(text, ids, count, cJSON_GetObjectItem(item, "input_ids"));
        }
    }
    /* too small a buffer: the full count and TOO_LARGE, the ids that fit written */
    assert_int_equal(glimpse_tokenize(f->model, "a cat", ids, 3, &count), GLIMPSE_STATUS_TOO_LARGE);
    assert_int_equal(count, SIGLIP_TOKENIZER_DEFAULT_LENGTH);
}

static void test_vision_tower(void **state) {
    const siglip_fixture *f = fixture_of(state);
    const vit_model *vision = test_blocks(f->model).vision;
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
    size_t positions = (size_t)test_blocks(f->model).text->config.max_positions;
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
    const clip_text_model *text = test_blocks(f->model).text;
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
    size_t ni = f->parity->image_count, nt = f->parity->text_count, dim = (size_t)test_blocks(f->model).vision->config.projection_dim;
    const safetensors *reference = f->parity->reference;
    const float *images = fixture_tensor(reference, "image_embeds", ni * dim);
    const float *texts = fixture_tensor(reference, "text_embeds", nt * dim);
    float *logits = malloc(ni * nt * sizeof(float)), *probabilities = malloc(ni * nt * sizeof(float));
    retrieval_logits(logits, images, ni, texts, nt, dim, test_blocks(f->model).logit_scale, test_blocks(f->model).logit_bias);
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

/* Through the public API end to end: files in, logits and probabilities out. */
static void test_public_api_scores(void **state) {
    const siglip_fixture *f = fixture_of(state);
    size_t dim = glimpse_model_embedding_dim(f->model), ni = f->parity->image_count, nt = f->parity->text_count;
    assert_int_equal(glimpse_model_get_kind(f->model), GLIMPSE_MODEL_KIND_SIGLIP);
    assert_int_equal(dim, 40);
    float *image_embeds, *text_embeds, *logits;
    parity_embed_and_score(f->parity, &image_embeds, &text_embeds, &logits); /* images in batches of 8 and 1 */
    const safetensors *reference = f->parity->reference;
    expect_close("image_embeds (public API)", image_embeds, fixture_tensor(reference, "image_embeds", ni * dim),
                 ni * dim);
    expect_close("text_embeds (public API)", text_embeds, fixture_tensor(reference, "text_embeds", nt * dim), nt * dim);
    expect_close("logits_per_image (public API)", logits, fixture_tensor(reference, "logits_per_image", ni * nt),
                 ni * nt);
    const cJSON *rows = cJSON_GetObjectItem(f->parity->expected, "probs_per_image");
    for (size_t i = 0; i < ni; i++)
        for (size_t t = 0; t < nt; t++) {
            double probability = 1.0 / (1.0 + exp(-logits[i * nt + t]));
            double want = cJSON_GetArrayItem(cJSON_GetArrayItem(rows, (int)i), (int)t)->valuedouble;
            if (!(fabs(probability - want) <= TOLERANCE))
                fail_msg("image %zu, text %zu: probability %g, reference %g", i, t, probability, want);
        }
    glimpse_model_info info;
    assert_int_equal(glimpse_model_get_info(f->model, &info), GLIMPSE_STATUS_OK);
    assert_string_equal(info.architecture, "SiglipModel");
    assert_float_equal(info.logit_bias, test_blocks(f->model).logit_bias, 0);
    assert_int_equal(info.text_max_tokens, 64);
    assert_int_equal(info.embedding_dim, 40);
    free(image_embeds), free(text_embeds), free(logits);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pixel_values),
        cmocka_unit_test(test_config_defaults),
        cmocka_unit_test(test_token_ids),
        cmocka_unit_test(test_vision_tower),
        cmocka_unit_test(test_text_tower),
        cmocka_unit_test(test_scores),
        cmocka_unit_test(test_public_api_scores),
    };
    return report_differences(cmocka_run_group_tests_name("siglip parity", tests, setup, teardown));
}
