/* test_blip_caption_parity.c — BLIP captioning against the reference:
 * blip-caption-tiny's pixel_values, image_embeds and first-step logits
 * within tolerance, and every generation case of expected.json (greedy and
 * beam search, with and without a prompt) with identical ids and caption. */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "api/model.h"
#include "tests/support.h"

#define TOLERANCE 1e-4

typedef parity_fixture blip_fixture;

static int setup(void **state) { return parity_setup(state, "blip-caption-tiny", 1); }
static int teardown(void **state) { return parity_teardown(state); }

static void test_model_kind(void **state) {
    blip_fixture *f = *state;
    if (!f) skip();
    assert_int_equal(glimpse_model_get_kind(f->model), GLIMPSE_MODEL_KIND_BLIP_CAPTION);
    assert_int_equal(f->model->start_id, 30522);
    assert_int_equal(f->model->end_id, 102);
}

static void test_image_embeds_and_first_logits(void **state) {
    blip_fixture *f = *state;
    if (!f) skip();
    const glimpse_model *m = f->model;
    size_t size = (size_t)test_blocks(m).vision->config.image_size, plane = 3 * size * size;
    size_t tokens = test_blocks(m).vision->tokens, hidden = (size_t)test_blocks(m).vision->config.hidden_size;
    size_t vocab = (size_t)test_blocks(m).text_decoder->config.vocab_size;
    const cJSON *images = cJSON_GetObjectItem(f->expected, "images");
    float *pixels = malloc(plane * sizeof(float)), *embeds = malloc(tokens * hidden * sizeof(float));
    vit_state *vision;
    bert_state *decoder;
    assert_int_equal(vit_state_create(test_blocks(m).vision, 1, &vision), GLIMPSE_STATUS_OK);
    assert_int_equal(bert_state_create(test_blocks(m).text_decoder, 1, 8, 8, tokens, &decoder), GLIMPSE_STATUS_OK);
    for (int i = 0; i < cJSON_GetArraySize(images); i++) {
        glimpse_image *image = fixture_image(cJSON_GetArrayItem(images, i)->valuestring);
        assert_int_equal(preprocess_image(pixels, image, &m->preprocess), GLIMPSE_STATUS_OK);
        glimpse_image_free(image);
        char name[64];
        snprintf(name, sizeof name, "pixel_values.%d", i);
        double d = relative_difference(pixels, fixture_tensor(f->reference, name, plane), plane);
        note_difference("blip pixel_values", d);
        assert_true(d <= 1e-6);
        vit_forward(test_blocks(m).vision, vision, pixels, 1, ENCODER_OUTPUT_ALL_ROWS, NULL);
        vit_post_norm_all(test_blocks(m).vision, vision, 0, embeds);
        snprintf(name, sizeof name, "image_embeds.%d", i);
        d = relative_difference(embeds, fixture_tensor(f->reference, name, tokens * hidden), tokens * hidden);
        note_difference("blip image_embeds", d);
        assert_true(d <= TOLERANCE);
        assert_int_equal(bert_set_image(test_blocks(m).text_decoder, decoder, embeds, tokens, NULL), GLIMPSE_STATUS_OK);
        int32_t start = m->start_id;
        assert_int_equal(bert_decode_step(test_blocks(m).text_decoder, decoder, &start, 1, 1, NULL), GLIMPSE_STATUS_OK);
        snprintf(name, sizeof name, "first_step_logits.%d", i);
        d = relative_difference(decoder->logits, fixture_tensor(f->reference, name, vocab), vocab);
        note_difference("blip first_step_logits", d);
        assert_true(d <= TOLERANCE);
    }
    vit_state_free(vision);
    bert_state_free(decoder);
    free(pixels), free(embeds);
}

/* The prompt's length with the start token, to turn max_length into new tokens. */
static size_t prompt_length(const glimpse_model *model, const cJSON *item) {
    size_t length = 0;
    assert_int_equal(bert_tokenizer_encode(test_blocks(model).wordpiece, cJSON_GetObjectItem(item, "prompt")->valuestring, NULL,
                                           0, &length),
                     GLIMPSE_STATUS_OK);
    return length + 1;
}

static void test_every_generation_case(void **state) {
    blip_fixture *f = *state;
    if (!f) skip();
    assert_true(expect_caption_cases(f->model, f->expected, prompt_length) >= 16);
}

/* Streaming sees every generated token and the text so far; a callback can
 * cancel; sampling is reproducible from its seed; bad parameters and a
 * CLIP model are refused with clear errors. */
static void test_streaming_cancelling_sampling(void **state) {
    blip_fixture *f = *state;
    if (!f) skip();
    glimpse_context *ctx;
    assert_int_equal(glimpse_context_create(f->model, NULL, &ctx), GLIMPSE_STATUS_OK);
    glimpse_image *image = fixture_image("chelsea.png");
    glimpse_image *const *images = &image;
    glimpse_caption_params p = glimpse_caption_default_params();
    caption_recorder r = {.count = 0};
    p.beams = 1;
    p.on_token = record_caption_token;
    p.user = &r;
    glimpse_caption caption;
    assert_int_equal(glimpse_caption_images(ctx, images, 1, &p, &caption), GLIMPSE_STATUS_OK);
    assert_int_equal(r.count, caption.id_count - 1); /* all but the start token */
    assert_memory_equal(r.ids, caption.ids + 1, r.count * sizeof(int32_t));
    assert_string_equal(r.last_text, caption.text);
    glimpse_caption_free(&caption);
    /* cancel after three tokens */
    caption_recorder stop = {.stop_after = 3};
    p.user = &stop;
    assert_int_equal(glimpse_caption_images(ctx, images, 1, &p, &caption), GLIMPSE_STATUS_CANCELLED);
    assert_int_equal(stop.count, 3);
    assert_null(caption.text);
    /* sampling: same seed, same caption; another seed, another caption */
    p.on_token = NULL;
    p.sample = 1;
    p.seed = 42;
    p.top_k = 0;
    p.temperature = 1.5f;
    glimpse_caption first, again, other;
    assert_int_equal(glimpse_caption_images(ctx, images, 1, &p, &first), GLIMPSE_STATUS_OK);
    assert_int_equal(glimpse_caption_images(ctx, images, 1, &p, &again), GLIMPSE_STATUS_OK);
    p.seed = 43;
    assert_int_equal(glimpse_caption_images(ctx, images, 1, &p, &other), GLIMPSE_STATUS_OK);
    assert_string_equal(first.text, again.text);
    assert_string_not_equal(first.text, other.text);
    /* top_k = 1 sampling is greedy */
    p.top_k = 1;
    glimpse_caption sampled_greedy, greedy;
    assert_int_equal(glimpse_caption_images(ctx, images, 1, &p, &sampled_greedy), GLIMPSE_STATUS_OK);
    p.sample = 0;
    assert_int_equal(glimpse_caption_images(ctx, images, 1, &p, &greedy), GLIMPSE_STATUS_OK);
    assert_string_equal(sampled_greedy.text, greedy.text);
    glimpse_caption_free(&first), glimpse_caption_free(&again), glimpse_caption_free(&other);
    glimpse_caption_free(&sampled_greedy), glimpse_caption_free(&greedy);
    /* a strong repetition penalty removes repeats that greedy search makes */
    p = glimpse_caption_default_params();
    p.beams = 1;
    p.repetition_penalty = 100.0f;
    assert_int_equal(glimpse_caption_images(ctx, images, 1, &p, &caption), GLIMPSE_STATUS_OK);
    for (size_t i = 1; i < caption.id_count; i++)
        for (size_t j = 1; j < i; j++) assert_int_not_equal(caption.ids[i], caption.ids[j]);
    /* min and max tokens count generated tokens only */
    assert_int_equal(caption.id_count, 1 + 20);
    glimpse_caption_free(&caption);
    /* bad parameters */
    p = glimpse_caption_default_params();
    p.beams = 0;
    assert_int_equal(glimpse_caption_images(ctx, images, 1, &p, &caption), GLIMPSE_STATUS_INVALID_ARGUMENT);
    p = glimpse_caption_default_params();
    p.min_tokens = 30;
    assert_int_equal(glimpse_caption_images(ctx, images, 1, &p, &caption), GLIMPSE_STATUS_INVALID_ARGUMENT);
    p = glimpse_caption_default_params();
    p.max_tokens = 100; /* the tiny model has 64 positions */
    assert_int_equal(glimpse_caption_images(ctx, images, 1, &p, &caption), GLIMPSE_STATUS_TOO_LARGE);
    assert_non_null(strstr(glimpse_last_error(), "positions"));
    glimpse_image_free(image);
    glimpse_context_free(ctx);
    /* embeddings are CLIP's, captions BLIP's */
    glimpse_context *clip_ctx;
    assert_int_equal(glimpse_context_create(f->model, NULL, &clip_ctx), GLIMPSE_STATUS_OK);
    float embedding[64];
    const char *text = "a cat";
    assert_int_equal(glimpse_embed_texts(clip_ctx, &text, 1, embedding), GLIMPSE_STATUS_WRONG_MODEL);
    glimpse_context_free(clip_ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model_kind),
        cmocka_unit_test(test_image_embeds_and_first_logits),
        cmocka_unit_test(test_every_generation_case),
        cmocka_unit_test(test_streaming_cancelling_sampling),
    };
    return report_differences(cmocka_run_group_tests_name("blip caption parity", tests, setup, teardown));
}
