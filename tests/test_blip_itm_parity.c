/* test_blip_itm_parity.c — BLIP image-text retrieval against the reference:
 * blip-itm-tiny's token ids, pixel_values, ITM logits and match
 * probabilities and ITC cosines for every (image, text) pair; and two-stage
 * re-ranking order on a small set. */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "api/context.h"
#include "api/model.h"
#include "tests/support.h"

#define TOLERANCE 1e-4

typedef struct itm_fixture {
    glimpse_model *model;
    cJSON *expected;
    safetensors *reference;
    glimpse_image *images[8];
    const char *texts[8];
    size_t image_count, text_count;
} itm_fixture;

static int setup(void **state) {
    *state = NULL;
    if (!fixtures_folder()) return 0;
    itm_fixture *f = calloc(1, sizeof *f);
    if (fixture_open("blip-itm-tiny", "expected.json", "reference.safetensors", &f->model, &f->expected, &f->reference))
        return -1;
    const cJSON *item;
    cJSON_ArrayForEach(item, cJSON_GetObjectItem(f->expected, "images")) f->images[f->image_count++] = fixture_image(item->valuestring);
    cJSON_ArrayForEach(item, cJSON_GetObjectItem(f->expected, "texts")) f->texts[f->text_count++] = item->valuestring;
    *state = f;
    return 0;
}

static int teardown(void **state) {
    itm_fixture *f = *state;
    if (!f) return 0;
    for (size_t i = 0; i < f->image_count; i++) glimpse_image_free(f->images[i]);
    fixture_close(f->model, f->expected, f->reference);
    free(f);
    return 0;
}

static void test_token_ids_and_pixels(void **state) {
    itm_fixture *f = *state;
    if (!f) skip();
    assert_int_equal(glimpse_model_get_kind(f->model), GLIMPSE_MODEL_KIND_BLIP_RETRIEVAL);
    const cJSON *all = cJSON_GetObjectItem(f->expected, "input_ids");
    for (size_t t = 0; t < f->text_count; t++) {
        int32_t ids[64];
        size_t count;
        assert_int_equal(glimpse_tokenize(f->model, f->texts[t], ids, 64, &count), GLIMPSE_STATUS_OK);
        const cJSON *expected = cJSON_GetArrayItem(all, (int)t);
        assert_int_equal(count, cJSON_GetArraySize(expected));
        for (size_t i = 0; i < count; i++) assert_int_equal(ids[i], cJSON_GetArrayItem(expected, (int)i)->valueint);
    }
    size_t size = (size_t)test_blocks(f->model).vision->config.image_size, plane = 3 * size * size;
    float *pixels = malloc(plane * sizeof(float));
    for (size_t i = 0; i < f->image_count; i++) {
        assert_int_equal(preprocess_image(pixels, f->images[i], &f->model->preprocess), GLIMPSE_STATUS_OK);
        char name[64];
        snprintf(name, sizeof name, "pixel_values.%zu", i);
        double d = relative_difference(pixels, fixture_tensor(f->reference, name, plane), plane);
        note_difference("itm pixel_values", d);
        assert_true(d <= 1e-6);
    }
    free(pixels);
}

static void compare_matrix(itm_fixture *f, glimpse_match_mode mode, const char *key) {
    glimpse_context *ctx;
    assert_int_equal(glimpse_context_create(f->model, NULL, &ctx), GLIMPSE_STATUS_OK);
    float scores[64];
    assert_int_equal(glimpse_match(ctx, f->images, f->image_count, f->texts,
                                   f->text_count, mode, scores),
                     GLIMPSE_STATUS_OK);
    const cJSON *rows = cJSON_GetObjectItem(f->expected, key);
    for (size_t i = 0; i < f->image_count; i++)
        for (size_t t = 0; t < f->text_count; t++) {
            float want = (float)cJSON_GetArrayItem(cJSON_GetArrayItem(rows, (int)i), (int)t)->valuedouble;
            double d = relative_difference(&scores[i * f->text_count + t], &want, 1);
            note_difference(key, d);
            if (d > TOLERANCE) fail_msg("%s[%zu][%zu] = %g, reference %g", key, i, t, scores[i * f->text_count + t], want);
        }
    glimpse_context_free(ctx);
}

static void test_itm_probabilities(void **state) {
    itm_fixture *f = *state;
    if (!f) skip();
    compare_matrix(f, GLIMPSE_MATCH_MODE_ITM, "itm_match_probability");
}

static void test_itc_cosines(void **state) {
    itm_fixture *f = *state;
    if (!f) skip();
    compare_matrix(f, GLIMPSE_MATCH_MODE_ITC, "itc_cosine");
}

/* The raw ITM logits of every pair, through the internal encoder. */
static void test_itm_logits(void **state) {
    itm_fixture *f = *state;
    if (!f) skip();
    const glimpse_model *m = f->model;
    glimpse_context *ctx;
    assert_int_equal(glimpse_context_create(m, NULL, &ctx), GLIMPSE_STATUS_OK);
    bert_state *encoder;
    assert_int_equal(bert_state_create(test_blocks(m).text_encoder, 1, 64, 64, test_blocks(m).vision->tokens, &encoder), GLIMPSE_STATUS_OK);
    for (size_t i = 0; i < f->image_count; i++) {
        assert_int_equal(context_preprocess(ctx, &f->images[i], 1, 0), GLIMPSE_STATUS_OK);
        vit_forward(test_blocks(m).vision, test_run_blocks(ctx).vision, test_run_blocks(ctx).pixel_values, 1, ENCODER_OUTPUT_ALL_ROWS, NULL);
        vit_post_norm_all(test_blocks(m).vision, test_run_blocks(ctx).vision, 0, test_run_blocks(ctx).vision_output);
        assert_int_equal(bert_set_image(test_blocks(m).text_encoder, encoder, test_run_blocks(ctx).vision_output, test_blocks(m).vision->tokens, NULL), GLIMPSE_STATUS_OK);
        for (size_t t = 0; t < f->text_count; t++) {
            int32_t ids[64];
            size_t count;
            assert_int_equal(glimpse_tokenize(m, f->texts[t], ids, 64, &count), GLIMPSE_STATUS_OK);
            assert_int_equal(bert_encode(test_blocks(m).text_encoder, encoder, ids, count, 1, NULL), GLIMPSE_STATUS_OK);
            float logits[2];
            itm_match_probability(test_blocks(m).itm, encoder->x, logits);
            char name[64];
            snprintf(name, sizeof name, "itm_logits.%zu.%zu", i, t);
            double d = relative_difference(logits, fixture_tensor(f->reference, name, 2), 2);
            note_difference("itm_logits", d);
            assert_true(d <= TOLERANCE);
        }
    }
    bert_state_free(encoder);
    glimpse_context_free(ctx);
}

/* Re-ranking: the shortlist is the top K by the first-stage scores, and the
 * result is that shortlist ordered by ITM probability. */
static void test_rerank_order(void **state) {
    itm_fixture *f = *state;
    if (!f) skip();
    glimpse_context *ctx;
    assert_int_equal(glimpse_context_create(f->model, NULL, &ctx), GLIMPSE_STATUS_OK);
    const char *text = f->texts[1];
    float first[3] = {0.1f, 0.9f, 0.5f}; /* shortlist of 2: images 1 and 2 */
    glimpse_ranked ranked[3];
    size_t count;
    assert_int_equal(glimpse_rerank(ctx, text, f->images, 3, first, 2, ranked, &count),
                     GLIMPSE_STATUS_OK);
    assert_int_equal(count, 2);
    const cJSON *rows = cJSON_GetObjectItem(f->expected, "itm_match_probability");
    double p1 = cJSON_GetArrayItem(cJSON_GetArrayItem(rows, 1), 1)->valuedouble;
    double p2 = cJSON_GetArrayItem(cJSON_GetArrayItem(rows, 2), 1)->valuedouble;
    size_t best = p2 > p1 ? 2 : 1, second = best == 1 ? 2 : 1;
    assert_int_equal(ranked[0].index, best);
    assert_int_equal(ranked[1].index, second);
    assert_float_equal(ranked[0].score, best == 1 ? p1 : p2, 1e-4);
    assert_float_equal(ranked[0].first_score, first[best], 0);
    assert_true(ranked[0].score >= ranked[1].score);
    /* with all three, image 0 joins the competition */
    assert_int_equal(glimpse_rerank(ctx, text, f->images, 3, first, 10, ranked, &count),
                     GLIMPSE_STATUS_OK);
    assert_int_equal(count, 3);
    assert_true(ranked[0].score >= ranked[1].score && ranked[1].score >= ranked[2].score);
    glimpse_context_free(ctx);
    /* a captioning or CLIP model cannot match */
    char *clip_folder = fixture_path("clip-tiny");
    glimpse_model *clip;
    assert_int_equal(glimpse_model_load(clip_folder, NULL, &clip), GLIMPSE_STATUS_OK);
    assert_int_equal(glimpse_context_create(clip, NULL, &ctx), GLIMPSE_STATUS_OK);
    float score;
    assert_int_equal(glimpse_match(ctx, f->images, 1, &text, 1, GLIMPSE_MATCH_MODE_ITM, &score),
                     GLIMPSE_STATUS_WRONG_MODEL);
    assert_non_null(strstr(glimpse_last_error(), "BlipForImageTextRetrieval"));
    glimpse_context_free(ctx);
    glimpse_model_free(clip);
    free(clip_folder);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_token_ids_and_pixels), cmocka_unit_test(test_itm_probabilities),
        cmocka_unit_test(test_itc_cosines),          cmocka_unit_test(test_itm_logits),
        cmocka_unit_test(test_rerank_order),
    };
    return report_differences(cmocka_run_group_tests_name("blip itm parity", tests, setup, teardown));
}
