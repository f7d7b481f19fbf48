/* test_vit_gpt2_parity.c — ViT-GPT2 (VisionEncoderDecoderModel) against the
 * reference: vit-gpt2-tiny's pixel_values bit for bit, the encoder's last
 * hidden state and the first step's logits within tolerance, every generation
 * case (greedy and beam search, with and without a prompt) with identical ids
 * and caption, the attention probabilities of attention.safetensors (encoder,
 * decoder self- and cross-attention, one forward and step by step), and the
 * generation defaults, streaming and sampling of the public call. */
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

static int setup(void **state) { return parity_setup(state, "vit-gpt2-tiny", 1); }
static int teardown(void **state) { return parity_teardown(state); }

static void test_model_kind_and_settings(void **state) {
    parity_fixture *f = *state;
    if (!f) skip();
    const glimpse_model *m = f->model;
    assert_int_equal(glimpse_model_get_kind(m), GLIMPSE_MODEL_KIND_VIT_GPT2);
    assert_int_equal(m->start_id, cJSON_GetObjectItem(f->expected, "decoder_start_token_id")->valueint);
    assert_int_equal(m->end_id, cJSON_GetObjectItem(f->expected, "eos_token_id")->valueint);
    assert_int_equal(m->pad_id, cJSON_GetObjectItem(f->expected, "pad_token_id")->valueint);
    /* the decoder section's tie_word_embeddings: the head is wte (the file has no lm_head) */
    assert_ptr_equal(test_blocks(m).gpt2->head.data, test_blocks(m).gpt2->token_embedding.data);
    assert_null(test_blocks(m).gpt2->projection_weight.data); /* equal widths: no enc_to_dec_proj */
    /* ViTFeatureExtractor's old form: "size": 60, resample 2 (bilinear), no rescale keys */
    assert_int_equal(m->preprocess.resize_height, 60);
    assert_int_equal(m->preprocess.resize_width, 60);
    assert_int_equal(m->preprocess.resample, 2);
    assert_int_equal(m->preprocess.do_center_crop, 0);
    /* generation_config.json gives token ids only: transformers' defaults (max_length 20, greedy) */
    glimpse_caption_params p = glimpse_caption_model_params(m);
    assert_int_equal(p.beams, 1);
    assert_int_equal(p.max_tokens, 19);
    assert_int_equal(p.min_tokens, 0);
    glimpse_model_info info;
    assert_int_equal(glimpse_model_get_info(m, &info), GLIMPSE_STATUS_OK);
    assert_int_equal(info.text_layers, 2);
    assert_int_equal(info.text_max_tokens, 40);
    assert_int_equal(info.vocab_size, 50257);
    assert_string_equal(info.text_activation, "gelu_new");
}

/* ViTImageProcessor's newer form of the same settings ("size" as height and width, do_rescale and rescale_factor,
 * resample left to its default, bilinear) gives the reference's pixel_values too. */
static void test_processor_forms(void **state) {
    parity_fixture *f = *state;
    if (!f) skip();
    cJSON *json = cJSON_Parse("{\"do_normalize\": true, \"do_rescale\": true, \"do_resize\": true, "
                              "\"image_mean\": [0.5, 0.5, 0.5], \"image_std\": [0.5, 0.5, 0.5], "
                              "\"image_processor_type\": \"ViTImageProcessor\", "
                              "\"rescale_factor\": 0.00392156862745098, "
                              "\"size\": {\"height\": 60, \"width\": 60}}");
    preprocess_config config = preprocess_default_vit(224);
    assert_int_equal(preprocess_config_read(json, "ViTImageProcessor", 1, &config), GLIMPSE_STATUS_OK);
    cJSON_Delete(json);
    size_t plane = 3 * 60 * 60;
    float *pixels = parity_pixel_values(f, &config, 60);
    for (size_t i = 0; i < f->image_count; i++) {
        char name[64];
        snprintf(name, sizeof name, "pixel_values.%zu", i);
        if (memcmp(pixels + i * plane, fixture_tensor(f->reference, name, plane), plane * sizeof(float)) != 0)
            fail_msg("%s: the {height, width} form gives other pixel_values", parity_image(f, i));
    }
    free(pixels);
}

/* The prompts' GPT-2 ids through glimpse_tokenize, with no start token added by the tokenizer. */
static void test_prompt_ids(void **state) {
    parity_fixture *f = *state;
    if (!f) skip();
    const cJSON *prompt;
    cJSON_ArrayForEach(prompt, cJSON_GetObjectItem(f->expected, "prompts")) {
        int32_t ids[16];
        size_t n = 0;
        assert_int_equal(glimpse_tokenize(f->model, prompt->string, ids, 16, &n), GLIMPSE_STATUS_OK);
        assert_int_equal(n, (size_t)cJSON_GetArraySize(prompt));
        for (size_t i = 0; i < n; i++) assert_int_equal(ids[i], cJSON_GetArrayItem(prompt, (int)i)->valueint);
    }
}

static void test_pixels_encoder_and_first_logits(void **state) {
    parity_fixture *f = *state;
    if (!f) skip();
    const glimpse_model *m = f->model;
    size_t size = (size_t)test_blocks(m).vision->config.image_size, plane = 3 * size * size;
    size_t tokens = test_blocks(m).vision->tokens, hidden = (size_t)test_blocks(m).vision->config.hidden_size;
    size_t vocab = (size_t)test_blocks(m).gpt2->config.vocab_size;
    assert_int_equal(tokens, 26);
    float *pixels = parity_pixel_values(f, &m->preprocess, size), *encoded = malloc(tokens * hidden * sizeof(float));
    vit_state *vision;
    gpt2_state *decoder;
    assert_int_equal(vit_state_create(test_blocks(m).vision, 1, &vision), GLIMPSE_STATUS_OK);
    assert_int_equal(gpt2_state_create(test_blocks(m).gpt2, 1, 8, 8, tokens, &decoder), GLIMPSE_STATUS_OK);
    for (size_t i = 0; i < f->image_count; i++) {
        char name[64];
        snprintf(name, sizeof name, "pixel_values.%zu", i);
        const float *want = fixture_tensor(f->reference, name, plane);
        note_difference("vit-gpt2 pixel_values", relative_difference(pixels + i * plane, want, plane));
        if (memcmp(pixels + i * plane, want, plane * sizeof(float)) != 0)
            fail_msg("%s: pixel_values differ from the reference's", parity_image(f, i));
        vit_forward(test_blocks(m).vision, vision, pixels + i * plane, 1, ENCODER_OUTPUT_ALL_ROWS, NULL);
        vit_post_norm_all(test_blocks(m).vision, vision, 0, encoded);
        snprintf(name, sizeof name, "encoder_last_hidden_state.%zu", i);
        expect_reference_close(encoded, f->reference, name, tokens * hidden, "vit-gpt2 encoder_last_hidden_state",
                               TOLERANCE);
        /* the first step: the start token alone */
        assert_int_equal(gpt2_set_image(test_blocks(m).gpt2, decoder, encoded, tokens, NULL), GLIMPSE_STATUS_OK);
        assert_int_equal(gpt2_decode_step(test_blocks(m).gpt2, decoder, &m->start_id, 1, 1, NULL), GLIMPSE_STATUS_OK);
        snprintf(name, sizeof name, "first_step_logits.%zu", i);
        expect_reference_close(decoder->logits, f->reference, name, vocab, "vit-gpt2 first_step_logits", TOLERANCE);
    }
    /* a token outside the vocabulary and a step past the state's room are refused */
    int32_t outside = (int32_t)vocab, many[9] = {0};
    assert_int_equal(gpt2_decode_step(test_blocks(m).gpt2, decoder, &outside, 1, 1, NULL), GLIMPSE_STATUS_INVALID_ARGUMENT);
    assert_int_equal(gpt2_decode_step(test_blocks(m).gpt2, decoder, many, 1, 9, NULL), GLIMPSE_STATUS_TOO_LARGE);
    vit_state_free(vision);
    gpt2_state_free(decoder);
    free(pixels), free(encoded);
}

/* The start token and the prompt: decoder_input_ids, or null for the start token alone. */
static size_t prompt_length(const glimpse_model *model, const cJSON *item) {
    (void)model;
    const cJSON *given = cJSON_GetObjectItem(item, "decoder_input_ids");
    return cJSON_IsArray(given) ? (size_t)cJSON_GetArraySize(given) : 1;
}

static void test_every_generation_case(void **state) {
    parity_fixture *f = *state;
    if (!f) skip();
    assert_int_equal(expect_caption_cases(f->model, f->expected, prompt_length), 11);
}

/* ------------------------------------------------------------- attention */

/* The ViT's self-attention of every image, recorded in one batch. */
static void test_encoder_attention(void **state) {
    parity_fixture *f = *state;
    if (!f) skip();
    safetensors *attention = fixture_tensors("vit-gpt2-tiny/attention.safetensors");
    assert_non_null(attention);
    const vit_model *vision = test_blocks(f->model).vision;
    size_t n = f->image_count, tokens = vision->tokens, size = (size_t)vision->config.image_size;
    size_t layers = (size_t)vision->config.layers, heads = (size_t)vision->config.heads;
    float *pixels = parity_pixel_values(f, &f->model->preprocess, size);
    vit_state *run;
    assert_int_equal(vit_state_create(vision, n, &run), GLIMPSE_STATUS_OK);
    attention_record r = record_every_layer(1, 0, layers, n, heads, tokens, tokens, 0);
    run->record = &r;
    vit_forward(vision, run, pixels, n, ENCODER_OUTPUT_ALL_ROWS, NULL);
    size_t per_image = heads * tokens * tokens;
    for (size_t i = 0; i < n; i++) {
        char name[64];
        snprintf(name, sizeof name, "encoder_attentions.%zu", i);
        const float *want = fixture_tensor(attention, name, layers * per_image);
        for (size_t l = 0; l < layers; l++)
            compare_rows(r.probabilities[ATTENTION_KIND_SELF] + (l * n + i) * per_image, want + l * per_image, heads,
                         tokens, tokens, tokens, "encoder_attentions");
    }
    record_free(&r);
    vit_state_free(run);
    free(pixels);
    safetensors_close(attention);
}

/* Compares every layer's recorded rows 0 .. compared-1, self and cross, with the case's reference tensors. */
static void compare_case(const attention_record *r, const safetensors *attention, const cJSON *item, size_t layers,
                         size_t heads, size_t n, size_t image_tokens, size_t compared, const char *how) {
    char self[80], cross[80];
    const char *self_name = cJSON_GetObjectItem(item, "self")->valuestring;
    const char *cross_name = cJSON_GetObjectItem(item, "cross")->valuestring;
    snprintf(self, sizeof self, "%s (%s)", self_name, how);
    snprintf(cross, sizeof cross, "%s (%s)", cross_name, how);
    const float *want_self = fixture_tensor(attention, self_name, layers * heads * n * n);
    const float *want_cross = fixture_tensor(attention, cross_name, layers * heads * n * image_tokens);
    for (size_t l = 0; l < layers; l++) {
        compare_rows(r->probabilities[ATTENTION_KIND_SELF] + l * heads * n * n, want_self + l * heads * n * n, heads,
                     n, n, compared, self);
        compare_rows(r->probabilities[ATTENTION_KIND_CROSS] + l * heads * n * image_tokens,
                     want_cross + l * heads * n * image_tokens, heads, n, image_tokens, compared, cross);
    }
}

/* Every greedy case: one decoder forward over its whole ids, then greedy generation through the public call with
 * the context's decoder recording (its cached steps make rows 0 .. n-2), with the same caption as without. */
static void test_decoder_attention(void **state) {
    parity_fixture *f = *state;
    if (!f) skip();
    cJSON *cases = fixture_json("vit-gpt2-tiny/attention.json");
    safetensors *attention = fixture_tensors("vit-gpt2-tiny/attention.safetensors");
    assert_non_null(cases);
    assert_non_null(attention);
    const glimpse_model *m = f->model;
    size_t layers = (size_t)test_blocks(m).gpt2->config.layers, heads = (size_t)test_blocks(m).gpt2->config.heads, tokens = test_blocks(m).vision->tokens;
    glimpse_context *ctx;
    assert_int_equal(glimpse_context_create(m, NULL, &ctx), GLIMPSE_STATUS_OK);
    const cJSON *item;
    int count = 0;
    cJSON_ArrayForEach(item, cJSON_GetObjectItem(cases, "cases")) {
        const cJSON *list = cJSON_GetObjectItem(item, "ids");
        size_t n = (size_t)cJSON_GetArraySize(list);
        int32_t ids[64];
        assert_true(n <= 64);
        for (size_t t = 0; t < n; t++) ids[t] = cJSON_GetArrayItem(list, (int)t)->valueint;
        const char *image_name = cJSON_GetObjectItem(item, "image")->valuestring;
        /* one forward */
        float *encoded = image_embeds(m, image_name);
        gpt2_state *s;
        assert_int_equal(gpt2_state_create(test_blocks(m).gpt2, 1, n, n, tokens, &s), GLIMPSE_STATUS_OK);
        assert_int_equal(gpt2_set_image(test_blocks(m).gpt2, s, encoded, tokens, NULL), GLIMPSE_STATUS_OK);
        attention_record r = record_every_layer(1, 1, layers, 1, heads, n, n, tokens);
        s->record = &r;
        assert_int_equal(gpt2_decode_step(test_blocks(m).gpt2, s, ids, 1, n, NULL), GLIMPSE_STATUS_OK);
        compare_case(&r, attention, item, layers, heads, n, tokens, n, "one forward");
        /* a record too small for the pass is refused, not overrun */
        attention_record tiny = {.layers = {1, 1}, .sequences = 1, .heads = heads, .rows = n - 1,
                                 .columns = {n, tokens}};
        assert_int_equal(gpt2_set_image(test_blocks(m).gpt2, s, encoded, tokens, NULL), GLIMPSE_STATUS_OK);
        s->record = &tiny;
        assert_int_equal(gpt2_decode_step(test_blocks(m).gpt2, s, ids, 1, n, NULL), GLIMPSE_STATUS_INVALID_ARGUMENT);
        record_free(&r);
        gpt2_state_free(s);
        free(encoded);
        /* step by step */
        glimpse_caption_params p = glimpse_caption_default_params();
        p.prompt = cJSON_GetObjectItem(item, "prompt")->valuestring;
        int32_t prompt_ids[16];
        size_t prompt_length = 0;
        assert_int_equal(gpt2_tokenizer_encode(test_blocks(m).byte_bpe, p.prompt, 0, prompt_ids, 16, &prompt_length),
                         GLIMPSE_STATUS_OK);
        p.max_tokens = (int)(n - 1 - prompt_length);
        glimpse_image *image = fixture_image(image_name);
        glimpse_caption plain, recorded;
        assert_int_equal(glimpse_caption_images(ctx, &image, 1, &p, &plain), GLIMPSE_STATUS_OK);
        attention_record steps = record_every_layer(1, 1, layers, 1, heads, n, n, tokens);
        (*test_run_blocks(ctx).gpt2)->record = &steps; /* the state the first call made, reused by the second */
        if (glimpse_caption_images(ctx, &image, 1, &p, &recorded)) fail_msg("%s", glimpse_last_error());
        (*test_run_blocks(ctx).gpt2)->record = NULL;
        assert_int_equal(recorded.id_count, n);
        assert_memory_equal(recorded.ids, ids, n * sizeof(int32_t));
        assert_memory_equal(plain.ids, ids, n * sizeof(int32_t));
        assert_string_equal(recorded.text, plain.text);
        compare_case(&steps, attention, item, layers, heads, n, tokens, n - 1, "steps");
        glimpse_caption_free(&plain), glimpse_caption_free(&recorded);
        glimpse_image_free(image);
        record_free(&steps);
        count++;
    }
    assert_int_equal(count, 6); /* the greedy cases: four without a prompt, two with */
    glimpse_context_free(ctx);
    safetensors_close(attention);
    cJSON_Delete(cases);
}

/* ------------------------------------------------------------- the call */

/* Streaming sees every generated token and the text so far; sampling is
 * reproducible from its seed; the model's defaults hold; too long a request
 * is refused. */
static void test_streaming_sampling_defaults(void **state) {
    parity_fixture *f = *state;
    if (!f) skip();
    glimpse_context *ctx;
    assert_int_equal(glimpse_context_create(f->model, NULL, &ctx), GLIMPSE_STATUS_OK);
    glimpse_image *image = fixture_image("astronaut.png");
    glimpse_caption_params p = glimpse_caption_default_params();
    caption_recorder r = {.count = 0};
    p.on_token = record_caption_token;
    p.user = &r;
    glimpse_caption caption;
    assert_int_equal(glimpse_caption_images(ctx, &image, 1, &p, &caption), GLIMPSE_STATUS_OK);
    assert_int_equal(caption.id_count, 20); /* the model's defaults: greedy, max_length 20 */
    assert_int_equal(r.count, caption.id_count - 1);
    assert_memory_equal(r.ids, caption.ids + 1, r.count * sizeof(int32_t));
    assert_string_equal(r.last_text, caption.text);
    /* the greedy case of max_length 16 is this caption's beginning */
    const cJSON *greedy = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(f->expected, "cases"), 0), "ids");
    for (int i = 0; i < cJSON_GetArraySize(greedy); i++)
        assert_int_equal(caption.ids[i], cJSON_GetArrayItem(greedy, i)->valueint);
    glimpse_caption_free(&caption);
    p.on_token = NULL;
    p.sample = true;
    p.seed = 7;
    p.temperature = 2.0f;
    p.top_k = 0;
    glimpse_caption first, again, other;
    assert_int_equal(glimpse_caption_images(ctx, &image, 1, &p, &first), GLIMPSE_STATUS_OK);
    assert_int_equal(glimpse_caption_images(ctx, &image, 1, &p, &again), GLIMPSE_STATUS_OK);
    p.seed = 8;
    assert_int_equal(glimpse_caption_images(ctx, &image, 1, &p, &other), GLIMPSE_STATUS_OK);
    assert_int_equal(first.id_count, again.id_count);
    assert_memory_equal(first.ids, again.ids, first.id_count * sizeof(int32_t));
    assert_string_not_equal(first.text, other.text);
    glimpse_caption_free(&first), glimpse_caption_free(&again), glimpse_caption_free(&other);
    p = glimpse_caption_default_params();
    p.max_tokens = 40; /* 41 positions with the start token: the model has 40 */
    assert_int_equal(glimpse_caption_images(ctx, &image, 1, &p, &caption), GLIMPSE_STATUS_TOO_LARGE);
    assert_non_null(strstr(glimpse_last_error(), "positions"));
    glimpse_image_free(image);
    glimpse_context_free(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model_kind_and_settings),
        cmocka_unit_test(test_prompt_ids),
        cmocka_unit_test(test_processor_forms),
        cmocka_unit_test(test_pixels_encoder_and_first_logits),
        cmocka_unit_test(test_every_generation_case),
        cmocka_unit_test(test_encoder_attention),
        cmocka_unit_test(test_decoder_attention),
        cmocka_unit_test(test_streaming_sampling_defaults),
    };
    return report_differences(cmocka_run_group_tests_name("vit-gpt2 parity", tests, setup, teardown));
}
