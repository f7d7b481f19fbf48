/* test_attention_parity.c — recorded attention probabilities against the
 * reference's (each fixture model's attention.safetensors, read at run time):
 * CLIP's vision self-attention, BLIP's caption decoder (one forward over a
 * case's ids, and the same rows step by step as greedy generation makes
 * them), BLIP ITM's encoder; and that recording changes no output. */
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

#define TOLERANCE ATTENTION_TOLERANCE


/* ------------------------------------------------------------------ CLIP */

static void test_clip_vision_self_attention(void **state) {
    (void)state;
    attention_fixture f = attention_fixture_open("clip-tiny", "expected.json");
    const glimpse_model *model = f.model;
    const safetensors *attention = f.attention;
    const vit_model *vision = test_blocks(model).vision;
    const cJSON *images = cJSON_GetObjectItem(f.json, "images");
    size_t n = (size_t)cJSON_GetArraySize(images), tokens = vision->tokens, hidden = (size_t)vision->config.hidden_size;
    size_t layers = (size_t)vision->config.layers, heads = (size_t)vision->config.heads;
    size_t size = (size_t)vision->config.image_size, plane = 3 * size * size;
    float *pixels = malloc(n * plane * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        glimpse_image *image = fixture_image(cJSON_GetArrayItem(images, (int)i)->valuestring);
        assert_int_equal(preprocess_image(pixels + i * plane, image, &model->preprocess), GLIMPSE_STATUS_OK);
        glimpse_image_free(image);
    }
    pool *threads;
    assert_int_equal(pool_create(2, &threads), GLIMPSE_STATUS_OK);
    vit_state *run;
    assert_int_equal(vit_state_create(vision, n, &run), GLIMPSE_STATUS_OK);
    vit_forward(vision, run, pixels, n, ENCODER_OUTPUT_ALL_ROWS, threads);
    float *unrecorded = malloc(n * tokens * hidden * sizeof(float));
    memcpy(unrecorded, run->hidden, n * tokens * hidden * sizeof(float));

    /* every layer, asked for with the pooled output: recording runs every row */
    attention_record r = record_every_layer(1, 0, layers, n, heads, tokens, tokens, 0);
    run->record = &r;
    vit_forward(vision, run, pixels, n, ENCODER_OUTPUT_POOLED_ROWS, threads);
    assert_memory_equal(run->hidden, unrecorded, n * tokens * hidden * sizeof(float));
    size_t per_layer = n * heads * tokens * tokens;
    for (size_t l = 0; l < layers; l++) {
        char name[64];
        snprintf(name, sizeof name, "vision_attentions.%zu", l);
        const float *want = fixture_tensor(attention, name, per_layer);
        for (size_t b = 0; b < n; b++)
            compare_rows(r.probabilities[ATTENTION_KIND_SELF] + l * per_layer + b * heads * tokens * tokens,
                         want + b * heads * tokens * tokens, heads, tokens, tokens, tokens, name);
    }
    record_free(&r);

    /* one layer alone: the record holds that layer only */
    attention_record one = {.layers = {(uint64_t)1 << (layers - 1), 0}, .sequences = n, .heads = heads,
                            .rows = tokens, .columns = {tokens, 0}};
    assert_int_equal(attention_record_floats(&one, ATTENTION_KIND_SELF), per_layer);
    assert_int_equal(attention_record_floats(&one, ATTENTION_KIND_CROSS), 0);
    one.probabilities[ATTENTION_KIND_SELF] = malloc(per_layer * sizeof(float));
    run->record = &one;
    vit_forward(vision, run, pixels, n, ENCODER_OUTPUT_ALL_ROWS, threads);
    assert_memory_equal(run->hidden, unrecorded, n * tokens * hidden * sizeof(float));
    char last[64];
    snprintf(last, sizeof last, "vision_attentions.%zu", layers - 1);
    double d = relative_difference(one.probabilities[ATTENTION_KIND_SELF], fixture_tensor(attention, last, per_layer),
                                   per_layer);
    assert_true(d <= TOLERANCE);
    free(one.probabilities[ATTENTION_KIND_SELF]);

    vit_state_free(run);
    pool_free(threads);
    free(pixels), free(unrecorded);
    attention_fixture_close(&f);
}

/* ---------------------------------------------------------- BLIP caption */

/* One decoder forward over the case's whole ids: every row against the reference. */
static void caption_one_forward(const glimpse_model *model, const safetensors *attention, const cJSON *item,
                                const int32_t *ids, size_t n) {
    const bert_model *decoder = test_blocks(model).text_decoder;
    size_t layers = (size_t)decoder->config.layers, heads = (size_t)decoder->config.heads;
    size_t image_tokens = test_blocks(model).vision->tokens;
    float *embeds = image_embeds(model, cJSON_GetObjectItem(item, "image")->valuestring);
    bert_state *s;
    assert_int_equal(bert_state_create(decoder, 1, n, n, image_tokens, &s), GLIMPSE_STATUS_OK);
    assert_int_equal(bert_set_image(decoder, s, embeds, image_tokens, NULL), GLIMPSE_STATUS_OK);
    attention_record r = record_every_layer(1, 1, layers, 1, heads, n, n, image_tokens);
    s->record = &r;
    assert_int_equal(bert_decode_step(decoder, s, ids, 1, n, NULL), GLIMPSE_STATUS_OK);
    const char *self = cJSON_GetObjectItem(item, "self")->valuestring;
    const char *cross = cJSON_GetObjectItem(item, "cross")->valuestring;
    const float *want_self = fixture_tensor(attention, self, layers * heads * n * n);
    const float *want_cross = fixture_tensor(attention, cross, layers * heads * n * image_tokens);
    for (size_t l = 0; l < layers; l++) {
        compare_rows(r.probabilities[ATTENTION_KIND_SELF] + l * heads * n * n, want_self + l * heads * n * n, heads,
                     n, n, n, self);
        compare_rows(r.probabilities[ATTENTION_KIND_CROSS] + l * heads * n * image_tokens,
                     want_cross + l * heads * n * image_tokens, heads, n, image_tokens, n, cross);
    }
    /* a record too small for the pass is refused, not overrun */
    bert_state *small;
    attention_record tiny = {.layers = {1, 1}, .sequences = 1, .heads = heads, .rows = n - 1,
                             .columns = {n, image_tokens}};
    assert_int_equal(bert_state_create(decoder, 1, n, n, image_tokens, &small), GLIMPSE_STATUS_OK);
    assert_int_equal(bert_set_image(decoder, small, embeds, image_tokens, NULL), GLIMPSE_STATUS_OK);
    small->record = &tiny;
    assert_int_equal(bert_decode_step(decoder, small, ids, 1, n, NULL), GLIMPSE_STATUS_INVALID_ARGUMENT);
    bert_state_free(small);
    record_free(&r);
    bert_state_free(s);
    free(embeds);
}

/* Greedy generation through the public call, the context's decoder recording: its cached steps make rows
 * 0 .. n-2 (the prompt's in the first step), and the same caption as without recording. */
static void caption_step_by_step(const glimpse_model *model, const safetensors *attention, const cJSON *item,
                                 const int32_t *ids, size_t n) {
    const bert_model *decoder = test_blocks(model).text_decoder;
    size_t layers = (size_t)decoder->config.layers, heads = (size_t)decoder->config.heads;
    size_t image_tokens = test_blocks(model).vision->tokens;
    const char *prompt = cJSON_GetObjectItem(item, "prompt")->valuestring;
    size_t prompt_length = 0;
    assert_int_equal(bert_tokenizer_encode(test_blocks(model).wordpiece, prompt, NULL, 0, &prompt_length), GLIMPSE_STATUS_OK);
    prompt_length += 1; /* [DEC] */
    glimpse_caption_params p = glimpse_caption_default_params();
    p.prompt = prompt;
    p.max_tokens = (int)(n - prompt_length);
    p.beams = 1; /* greedy */
    glimpse_context *ctx;
    assert_int_equal(glimpse_context_create(model, NULL, &ctx), GLIMPSE_STATUS_OK);
    glimpse_image *image = fixture_image(cJSON_GetObjectItem(item, "image")->valuestring);
    glimpse_caption plain, recorded;
    assert_int_equal(glimpse_caption_images(ctx, &image, 1, &p, &plain), GLIMPSE_STATUS_OK);
    attention_record r = record_every_layer(1, 1, layers, 1, heads, n, n, image_tokens);
    (*test_run_blocks(ctx).bert)->record = &r; /* the state the first call made, reused by the second */
    if (glimpse_caption_images(ctx, &image, 1, &p, &recorded)) fail_msg("%s", glimpse_last_error());
    assert_int_equal(recorded.id_count, n);
    assert_int_equal(plain.id_count, n);
    assert_memory_equal(recorded.ids, ids, n * sizeof(int32_t));
    assert_memory_equal(plain.ids, ids, n * sizeof(int32_t));
    assert_string_equal(recorded.text, plain.text);
    char self[80], cross[80];
    snprintf(self, sizeof self, "%s (steps)", cJSON_GetObjectItem(item, "self")->valuestring);
    snprintf(cross, sizeof cross, "%s (steps)", cJSON_GetObjectItem(item, "cross")->valuestring);
    const float *reference_self = fixture_tensor(attention, cJSON_GetObjectItem(item, "self")->valuestring,
                                                 layers * heads * n * n);
    const float *reference_cross = fixture_tensor(attention, cJSON_GetObjectItem(item, "cross")->valuestring,
                                                  layers * heads * n * image_tokens);
    for (size_t l = 0; l < layers; l++) {
        compare_rows(r.probabilities[ATTENTION_KIND_SELF] + l * heads * n * n, reference_self + l * heads * n * n,
                     heads, n, n, n - 1, self);
        compare_rows(r.probabilities[ATTENTION_KIND_CROSS] + l * heads * n * image_tokens,
                     reference_cross + l * heads * n * image_tokens, heads, n, image_tokens, n - 1, cross);
    }
    glimpse_caption_free(&plain);
    glimpse_caption_free(&recorded);
    glimpse_image_free(image);
    glimpse_context_free(ctx);
    record_free(&r);
}

static void test_blip_caption_attention(void **state) {
    (void)state;
    attention_fixture f = attention_fixture_open("blip-caption-tiny", "attention.json");
    const cJSON *item;
    int count = 0;
    cJSON_ArrayForEach(item, cJSON_GetObjectItem(f.json, "cases")) {
        const cJSON *list = cJSON_GetObjectItem(item, "ids");
        size_t n = (size_t)cJSON_GetArraySize(list);
        int32_t *ids = malloc(n * sizeof *ids);
        for (size_t t = 0; t < n; t++) ids[t] = cJSON_GetArrayItem(list, (int)t)->valueint;
        caption_one_forward(f.model, f.attention, item, ids, n);
        caption_step_by_step(f.model, f.attention, item, ids, n);
        free(ids);
        count++;
    }
    assert_int_equal(count, 5); /* four greedy cases and the prompted one */
    attention_fixture_close(&f);
}

/* --------------------------------------------------------------- BLIP ITM */

static void test_blip_itm_attention(void **state) {
    (void)state;
    attention_fixture f = attention_fixture_open("blip-itm-tiny", "attention.json");
    const bert_model *encoder = test_blocks(f.model).text_encoder;
    size_t layers = (size_t)encoder->config.layers, heads = (size_t)encoder->config.heads;
    size_t image_tokens = test_blocks(f.model).vision->tokens;
    const cJSON *images = cJSON_GetObjectItem(f.json, "images"), *texts = cJSON_GetObjectItem(f.json, "texts");
    const cJSON *input_ids = cJSON_GetObjectItem(f.json, "input_ids");
    bert_state *s;
    assert_int_equal(bert_state_create(encoder, 1, 64, 64, image_tokens, &s), GLIMPSE_STATUS_OK);
    for (int i = 0; i < cJSON_GetArraySize(images); i++) {
        float *embeds = image_embeds(f.model, cJSON_GetArrayItem(images, i)->valuestring);
        assert_int_equal(bert_set_image(encoder, s, embeds, image_tokens, NULL), GLIMPSE_STATUS_OK);
        for (int j = 0; j < cJSON_GetArraySize(texts); j++) {
            int32_t ids[64];
            size_t n;
            assert_int_equal(glimpse_tokenize(f.model, cJSON_GetArrayItem(texts, j)->valuestring, ids, 64, &n),
                             GLIMPSE_STATUS_OK);
            const cJSON *want_ids = cJSON_GetArrayItem(input_ids, j);
            assert_int_equal(n, (size_t)cJSON_GetArraySize(want_ids));
            for (size_t t = 0; t < n; t++) assert_int_equal(ids[t], cJSON_GetArrayItem(want_ids, (int)t)->valueint);
            /* the ITM pass without recording, then with: same last hidden state */
            s->record = NULL;
            assert_int_equal(bert_encode(encoder, s, ids, n, 1, NULL), GLIMPSE_STATUS_OK);
            size_t hidden = (size_t)encoder->config.hidden_size;
            float *plain = malloc(n * hidden * sizeof(float));
            memcpy(plain, s->x, n * hidden * sizeof(float));
            attention_record r = record_every_layer(1, 1, layers, 1, heads, n, n, image_tokens);
            s->record = &r;
            assert_int_equal(bert_encode(encoder, s, ids, n, 1, NULL), GLIMPSE_STATUS_OK);
            assert_memory_equal(s->x, plain, n * hidden * sizeof(float));
            char self[64], cross[64];
            snprintf(self, sizeof self, "self_attentions.%d.%d", i, j);
            snprintf(cross, sizeof cross, "cross_attentions.%d.%d", i, j);
            const float *want_self = fixture_tensor(f.attention, self, layers * heads * n * n);
            const float *want_cross = fixture_tensor(f.attention, cross, layers * heads * n * image_tokens);
            for (size_t l = 0; l < layers; l++) {
                compare_rows(r.probabilities[ATTENTION_KIND_SELF] + l * heads * n * n, want_self + l * heads * n * n,
                             heads, n, n, n, self);
                compare_rows(r.probabilities[ATTENTION_KIND_CROSS] + l * heads * n * image_tokens,
                             want_cross + l * heads * n * image_tokens, heads, n, image_tokens, n, cross);
            }
            record_free(&r);
            free(plain);
        }
        free(embeds);
    }
    s->record = NULL;
    bert_state_free(s);
    attention_fixture_close(&f);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_clip_vision_self_attention),
                                       cmocka_unit_test(test_blip_caption_attention),
                                       cmocka_unit_test(test_blip_itm_attention)};
    /* with the largest difference per reference tensor */
    return report_differences(cmocka_run_group_tests_name("attention parity", tests, NULL, NULL));
}
