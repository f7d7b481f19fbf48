/* test_clip_parity.c — CLIP against the reference: clip-tiny's pixel_values,
 * token ids, vision and text hidden states, embeddings and logits must match
 * what transformers computed, within the fixtures' tolerances. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/file.h"
#include "api/model.h"
#include "tests/support.h"

#define TOLERANCE 1e-4

typedef parity_fixture clip_fixture;

static int setup(void **state) { return parity_setup(state, "clip-tiny", 1); }
static int teardown(void **state) { return parity_teardown(state); }

#define REQUIRE_FIXTURES(f)                                                                                            \
    do {                                                                                                               \
        if (!(f)) skip();                                                                                              \
    } while (0)

static float *all_pixel_values(clip_fixture *f) {
    return parity_pixel_values(f, &f->model->preprocess, (size_t)test_blocks(f->model).vision->config.image_size);
}

static void test_pixel_values(void **state) {
    clip_fixture *f = *state;
    REQUIRE_FIXTURES(f);
    size_t size = (size_t)test_blocks(f->model).vision->config.image_size, plane = 3 * size * size;
    float *pixels = all_pixel_values(f);
    const float *expected = fixture_tensor(f->reference, "pixel_values", f->image_count * plane);
    for (size_t i = 0; i < f->image_count; i++) {
        const char *name = parity_image(f, i);
        double difference = relative_difference(pixels + i * plane, expected + i * plane, plane);
        char what[64];
        snprintf(what, sizeof what, "pixel_values %s", name);
        note_difference(what, difference);
        if (difference > 1e-6) fail_msg("pixel_values of %s differ by %g", name, difference);
    }
    free(pixels);
}

static void test_vision_tower(void **state) {
    clip_fixture *f = *state;
    REQUIRE_FIXTURES(f);
    const vit_model *vision = test_blocks(f->model).vision;
    size_t n = f->image_count, hidden = (size_t)vision->config.hidden_size, tokens = vision->tokens;
    size_t dim = (size_t)vision->config.projection_dim;
    float *pixels = all_pixel_values(f);
    vit_state *run;
    pool *threads;
    assert_int_equal(pool_create(2, &threads), GLIMPSE_STATUS_OK);
    assert_int_equal(vit_state_create(vision, n, &run), GLIMPSE_STATUS_OK);
    vit_forward(vision, run, pixels, n, ENCODER_OUTPUT_ALL_ROWS, threads);
    const float *hidden_expected = fixture_tensor(f->reference, "vision_last_hidden_state", n * tokens * hidden);
    double d = relative_difference(run->hidden, hidden_expected, n * tokens * hidden);
    note_difference("vision_last_hidden_state", d);
    assert_true(d <= TOLERANCE);
    const float *pooled_expected = fixture_tensor(f->reference, "vision_pooled", n * hidden);
    const float *embeds_expected = fixture_tensor(f->reference, "image_embeds", n * dim);
    float pooled[hidden], embed[dim];
    /* the pooled output from every token's last layer, then from the class tokens' alone */
    for (int pass = 0; pass < 2; pass++) {
        if (pass) {
            memset(run->hidden, 0, n * tokens * hidden * sizeof(float));
            vit_forward(vision, run, pixels, n, ENCODER_OUTPUT_POOLED_ROWS, threads);
        }
        for (size_t b = 0; b < n; b++) {
            vit_pooled(vision, run, b, pooled);
            d = relative_difference(pooled, pooled_expected + b * hidden, hidden);
            note_difference(pass ? "vision_pooled (class rows only)" : "vision_pooled", d);
            assert_true(d <= TOLERANCE);
            vit_embed(vision, run, b, embed);
            d = relative_difference(embed, embeds_expected + b * dim, dim);
            note_difference(pass ? "image_embeds (class rows only)" : "image_embeds", d);
            assert_true(d <= TOLERANCE);
        }
    }
    vit_state_free(run);
    pool_free(threads);
    free(pixels);
}

static void test_token_ids(void **state) {
    clip_fixture *f = *state;
    REQUIRE_FIXTURES(f);
    const cJSON *texts = cJSON_GetObjectItem(f->expected, "texts");
    const cJSON *all_ids = cJSON_GetObjectItem(f->expected, "input_ids");
    for (size_t t = 0; t < f->text_count; t++) {
        const char *text = cJSON_GetArrayItem(texts, (int)t)->valuestring;
        const cJSON *expected = cJSON_GetArrayItem(all_ids, (int)t);
        int32_t ids[77];
        size_t count;
        assert_int_equal(glimpse_tokenize(f->model, text, ids, 77, &count), GLIMPSE_STATUS_OK);
        if ((int)count != cJSON_GetArraySize(expected))
            fail_msg("text %zu (\"%.30s\"): %zu ids, expected %d", t, text, count, cJSON_GetArraySize(expected));
        for (size_t i = 0; i < count; i++)
            if (ids[i] != cJSON_GetArrayItem(expected, (int)i)->valueint)
                fail_msg("text %zu (\"%.30s\"): id %zu is %d, expected %d", t, text, i, ids[i],
                         cJSON_GetArrayItem(expected, (int)i)->valueint);
    }
}

static void test_text_tower(void **state) {
    clip_fixture *f = *state;
    REQUIRE_FIXTURES(f);
    const clip_text_model *text = test_blocks(f->model).text;
    size_t n = f->text_count, hidden = (size_t)text->config.hidden_size, dim = (size_t)text->config.projection_dim;
    size_t positions = (size_t)text->config.max_positions;
    const cJSON *all_ids = cJSON_GetObjectItem(f->expected, "input_ids");
    int32_t *ids = malloc(n * positions * sizeof *ids);
    size_t lengths[16], rows = 0;
    for (size_t t = 0; t < n; t++) {
        const cJSON *list = cJSON_GetArrayItem(all_ids, (int)t);
        lengths[t] = (size_t)cJSON_GetArraySize(list);
        for (size_t i = 0; i < lengths[t]; i++) ids[rows + i] = cJSON_GetArrayItem(list, (int)i)->valueint;
        rows += lengths[t];
    }
    clip_text_state *run;
    pool *threads;
    assert_int_equal(pool_create(2, &threads), GLIMPSE_STATUS_OK);
    assert_int_equal(clip_text_state_create(text, n, &run), GLIMPSE_STATUS_OK);
    assert_int_equal(clip_text_forward(text, run, ids, lengths, n, ENCODER_OUTPUT_ALL_ROWS, threads), GLIMPSE_STATUS_OK);
    const float *hidden_expected = fixture_tensor(f->reference, "text_last_hidden_state", n * positions * hidden);
    const float *embeds_expected = fixture_tensor(f->reference, "text_embeds", n * dim);
    rows = 0;
    float embed[dim];
    for (size_t t = 0; t < n; t++) {
        /* the reference padded the batch: compare up to the text's own end */
        double d = relative_difference(run->hidden + rows * hidden, hidden_expected + t * positions * hidden,
                                       lengths[t] * hidden);
        note_difference("text_last_hidden_state", d);
        assert_true(d <= TOLERANCE);
        clip_text_embed(text, run, rows, ids + rows, lengths[t], embed);
        d = relative_difference(embed, embeds_expected + t * dim, dim);
        note_difference("text_embeds", d);
        assert_true(d <= TOLERANCE);
        rows += lengths[t];
    }
    /* the embeddings again from the pooled rows' last layer alone */
    memset(run->hidden, 0, rows * hidden * sizeof(float));
    assert_int_equal(clip_text_forward(text, run, ids, lengths, n, ENCODER_OUTPUT_POOLED_ROWS, threads), GLIMPSE_STATUS_OK);
    rows = 0;
    for (size_t t = 0; t < n; t++) {
        clip_text_embed(text, run, rows, ids + rows, lengths[t], embed);
        double d = relative_difference(embed, embeds_expected + t * dim, dim);
        note_difference("text_embeds (pooled rows only)", d);
        assert_true(d <= TOLERANCE);
        rows += lengths[t];
    }
    clip_text_state_free(run);
    pool_free(threads);
    free(ids);
}

/* Through the public API end to end: files in, logits out. */
static void test_public_api_logits(void **state) {
    clip_fixture *f = *state;
    REQUIRE_FIXTURES(f);
    size_t ni = f->image_count, nt = f->text_count;
    float *image_embeds, *text_embeds, *logits;
    parity_embed_and_score(f, &image_embeds, &text_embeds, &logits);
    const float *expected = fixture_tensor(f->reference, "logits_per_image", ni * nt);
    double d = relative_difference(logits, expected, ni * nt);
    note_difference("logits_per_image", d);
    assert_true(d <= TOLERANCE);
    /* expected.json's logit_scale and logits agree with the tensors */
    double scale = cJSON_GetObjectItem(f->expected, "logit_scale")->valuedouble;
    glimpse_model_info info;
    assert_int_equal(glimpse_model_get_info(f->model, &info), GLIMPSE_STATUS_OK);
    assert_true(fabs(info.logit_scale - scale) <= 1e-5 * scale);
    const cJSON *rows = cJSON_GetObjectItem(f->expected, "logits_per_image");
    for (size_t i = 0; i < ni; i++)
        for (size_t t = 0; t < nt; t++) {
            double value = cJSON_GetArrayItem(cJSON_GetArrayItem(rows, (int)i), (int)t)->valuedouble;
            assert_true(fabs(logits[i * nt + t] - value) <= TOLERANCE * (fabs(value) > 1 ? fabs(value) : 1));
        }
    free(image_embeds);
    free(text_embeds);
    free(logits);
}

typedef struct thread_job {
    const glimpse_model *model;
    glimpse_image **images;
    const char **texts;
    size_t image_count, text_count;
    float *image_embeds, *text_embeds;
    int status;
} thread_job;

static void *embed_everything(void *argument) {
    thread_job *job = argument;
    glimpse_context *ctx;
    glimpse_context_params params = glimpse_context_default_params();
    params.threads = 1;
    job->status = glimpse_context_create(job->model, &params, &ctx);
    for (int round = 0; round < 3 && !job->status; round++) {
        job->status = glimpse_embed_images(ctx, job->images, job->image_count,
                                           job->image_embeds);
        if (!job->status) job->status = glimpse_embed_texts(ctx, job->texts, job->text_count, job->text_embeds);
    }
    glimpse_context_free(ctx);
    return NULL;
}

/* One model shared by several threads, each with its own context, gives the
 * same embeddings as one thread. */
static void test_shared_model_across_threads(void **state) {
    clip_fixture *f = *state;
    REQUIRE_FIXTURES(f);
    size_t dim = glimpse_model_embedding_dim(f->model), ni = f->image_count, nt = f->text_count;
    glimpse_image *images[16];
    const char *texts[16];
    for (size_t i = 0; i < ni; i++)
        images[i] = fixture_image(parity_image(f, i));
    for (size_t t = 0; t < nt; t++)
        texts[t] = parity_text(f, t);
    enum { THREADS = 4 };
    thread_job jobs[THREADS + 1];
    pthread_t threads[THREADS];
    for (int j = 0; j <= THREADS; j++) {
        jobs[j] = (thread_job){f->model, images, texts, ni, nt, calloc(ni * dim, sizeof(float)),
                               calloc(nt * dim, sizeof(float)), -1};
    }
    embed_everything(&jobs[THREADS]); /* the single-threaded answer */
    assert_int_equal(jobs[THREADS].status, GLIMPSE_STATUS_OK);
    for (int j = 0; j < THREADS; j++) pthread_create(&threads[j], NULL, embed_everything, &jobs[j]);
    for (int j = 0; j < THREADS; j++) pthread_join(threads[j], NULL);
    for (int j = 0; j <= THREADS; j++) {
        assert_int_equal(jobs[j].status, GLIMPSE_STATUS_OK);
        assert_memory_equal(jobs[j].image_embeds, jobs[THREADS].image_embeds, ni * dim * sizeof(float));
        assert_memory_equal(jobs[j].text_embeds, jobs[THREADS].text_embeds, nt * dim * sizeof(float));
    }
    for (int j = 0; j <= THREADS; j++) free(jobs[j].image_embeds), free(jobs[j].text_embeds);
    for (size_t i = 0; i < ni; i++) glimpse_image_free(images[i]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pixel_values),  cmocka_unit_test(test_vision_tower),
        cmocka_unit_test(test_token_ids),     cmocka_unit_test(test_text_tower),
        cmocka_unit_test(test_public_api_logits), cmocka_unit_test(test_shared_model_across_threads),
    };
    return report_differences(cmocka_run_group_tests_name("clip parity", tests, setup, teardown));
}
