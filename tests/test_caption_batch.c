/* test_caption_batch.c — continuous batching of captions (fusion/caption_batch.c through api/caption.c): every
 * generation case of blip-caption-tiny, vit-gpt2-tiny and blip2-opt-tiny, mixed in one batch (different
 * lengths, beams and prompts), gives the reference's ids and the same ids as one picture at a time, with room
 * for every picture at once and with so few rows that pictures wait, join and leave; sampling with seeds,
 * repetition penalty and minimum lengths mixed likewise; the demo model over examples/pictures, streamed. */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "api/context.h"
#include "api/model.h"
#include "core/file.h"
#include "fusion/generate.h"
#include "tests/support.h"

#define MAX_CASES 32

/* The params of each case of a fixture's expected.json, as its parity test sets them. */
typedef struct batch_cases {
    size_t count;
    glimpse_caption_params params[MAX_CASES];
    glimpse_image *images[MAX_CASES];
    const cJSON *items[MAX_CASES];
} batch_cases;

static size_t wordpiece_prompt_length(const glimpse_model *model, const char *prompt) {
    size_t length = 0;
    assert_int_equal(bert_tokenizer_encode(test_blocks(model).wordpiece, prompt, NULL, 0, &length), GLIMPSE_STATUS_OK);
    return length + 1;
}

static void read_cases(const parity_fixture *f, batch_cases *c) {
    const glimpse_model *model = f->model;
    const cJSON *item;
    c->count = 0;
    cJSON_ArrayForEach(item, cJSON_GetObjectItem(f->expected, "cases")) {
        assert_true(c->count < MAX_CASES);
        const cJSON *params = cJSON_GetObjectItem(item, "params");
        const cJSON *beams = cJSON_GetObjectItem(params, "num_beams"), *min = cJSON_GetObjectItem(params, "min_length");
        const cJSON *max_length = cJSON_GetObjectItem(params, "max_length");
        const cJSON *max_new = cJSON_GetObjectItem(params, "max_new_tokens");
        const char *prompt = cJSON_GetObjectItem(item, "prompt")->valuestring;
        glimpse_caption_params p = glimpse_caption_default_params();
        p.beams = beams ? beams->valueint : 1;
        if (model->kind == GLIMPSE_MODEL_KIND_BLIP2) {
            p.max_tokens = max_new ? max_new->valueint : max_length->valueint - 1;
            p.min_tokens = 0;
        } else {
            const cJSON *given = cJSON_GetObjectItem(item, "decoder_input_ids");
            size_t prompt_length = model->kind == GLIMPSE_MODEL_KIND_VIT_GPT2
                                       ? (cJSON_IsArray(given) ? (size_t)cJSON_GetArraySize(given) : 1)
                                       : wordpiece_prompt_length(model, prompt);
            p.max_tokens = max_length->valueint - (int)prompt_length;
            int min_tokens = min ? min->valueint - (int)prompt_length : 0;
            p.min_tokens = min_tokens > 0 ? min_tokens : 0;
        }
        p.prompt = prompt[0] ? prompt : NULL;
        c->params[c->count] = p;
        c->images[c->count] = fixture_image(cJSON_GetObjectItem(item, "image")->valuestring);
        c->items[c->count++] = item;
    }
}

static void free_cases(batch_cases *c) {
    for (size_t i = 0; i < c->count; i++) glimpse_image_free(c->images[i]);
}

/* Each case alone, through glimpse_caption_images. */
static void caption_alone(glimpse_context *ctx, batch_cases *c, glimpse_caption *out) {
    for (size_t i = 0; i < c->count; i++)
        if (glimpse_caption_images(ctx, &c->images[i], 1, &c->params[i], &out[i]))
            fail_msg("case %zu alone: %s", i, glimpse_last_error());
}

static void expect_same(const glimpse_caption *batched, const glimpse_caption *alone, size_t count, size_t rows) {
    for (size_t i = 0; i < count; i++) {
        if (batched[i].id_count != alone[i].id_count ||
            memcmp(batched[i].ids, alone[i].ids, alone[i].id_count * sizeof(int32_t)))
            fail_msg("case %zu with %zu rows: \"%s\" batched, \"%s\" alone", i, rows, batched[i].text, alone[i].text);
        assert_string_equal(batched[i].text, alone[i].text);
    }
}

static void free_captions(glimpse_caption *captions, size_t count) {
    for (size_t i = 0; i < count; i++) glimpse_caption_free(&captions[i]);
}

/* Every case of the fixture in one batch: the reference's ids, and one picture at a time's; with room for all,
 * and with 4 rows (pictures wait for slots, beams of 3 and 4 alone in them). */
static void every_case_batched(const char *fixture) {
    void *state = NULL;
    assert_int_equal(parity_setup(&state, fixture, 1), 0);
    parity_fixture *f = state;
    if (!f) skip();
    glimpse_context_params context_params = glimpse_context_default_params();
    context_params.threads = 2;
    glimpse_context *ctx;
    assert_int_equal(glimpse_context_create(f->model, &context_params, &ctx), GLIMPSE_STATUS_OK);
    batch_cases c;
    read_cases(f, &c);
    glimpse_caption alone[MAX_CASES], batched[MAX_CASES];
    caption_alone(ctx, &c, alone);
    const size_t rows[] = {0, 4};
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        if (caption_images_each(ctx, c.images, c.count, c.params, rows[r], batched))
            fail_msg("%s batched: %s", fixture, glimpse_last_error());
        for (size_t i = 0; i < c.count; i++) expect_caption_matches(&batched[i], c.items[i]);
        expect_same(batched, alone, c.count, rows[r]);
        free_captions(batched, c.count);
    }
    /* sampling with each its seed, a repetition penalty, a minimum length: the same as alone */
    for (size_t i = 0; i < c.count; i++) {
        glimpse_caption_params *p = &c.params[i];
        if (i % 3 == 0) p->sample = true, p->beams = 1, p->seed = i, p->top_k = 20, p->temperature = 0.8f;
        if (i % 3 == 1) p->repetition_penalty = 1.3f;
        if (i % 4 == 2) p->min_tokens = p->max_tokens - 1;
        if (i % 5 == 3) p->max_tokens = 2 + (int)(i % 3), p->min_tokens = 0;
    }
    free_captions(alone, c.count);
    caption_alone(ctx, &c, alone);
    if (caption_images_each(ctx, c.images, c.count, c.params, 5, batched))
        fail_msg("%s sampled batched: %s", fixture, glimpse_last_error());
    expect_same(batched, alone, c.count, 5);
    free_captions(batched, c.count);
    free_captions(alone, c.count);
    free_cases(&c);
    glimpse_context_free(ctx);
    parity_teardown(&state);
}

static void test_blip_cases(void **state) {
    (void)state;
    every_case_batched("blip-caption-tiny");
}

static void test_vit_gpt2_cases(void **state) {
    (void)state;
    every_case_batched("vit-gpt2-tiny");
}

static void test_blip2_cases(void **state) {
    (void)state;
    every_case_batched("blip2-opt-tiny");
}

/* Streaming: each picture's tokens arrive in order, for the picture they belong to. */
typedef struct streams {
    int32_t ids[MAX_CASES][64];
    size_t counts[MAX_CASES];
} streams;

static bool record_stream(void *user, size_t image, int32_t id, const char *text) {
    (void)text;
    streams *s = user;
    if (image < MAX_CASES && s->counts[image] < 64) s->ids[image][s->counts[image]++] = id;
    return false;
}

/* The demo model over examples/pictures: glimpse_caption_images with all of them at once (its default rows, then
 * 2 rows: one beam-3 picture at a time) gives each picture's caption alone; streamed tokens are each picture's. */
static void test_demo_pictures(void **state) {
    (void)state;
    char *path = file_join(GLIMPSE_SOURCE_DIR "/examples/models", "demo-blip-caption");
    glimpse_model *model = NULL;
    if (glimpse_model_load(path, NULL, &model)) fail_msg("%s: %s", path, glimpse_last_error());
    free(path);
    glimpse_context *ctx;
    assert_int_equal(glimpse_context_create(model, NULL, &ctx), GLIMPSE_STATUS_OK);
    glimpse_image *images[6];
    for (int i = 0; i < 6; i++) {
        char name[64];
        snprintf(name, sizeof name, GLIMPSE_SOURCE_DIR "/examples/pictures/%05d.png", i);
        assert_int_equal(glimpse_image_load_file(name, NULL, &images[i]), GLIMPSE_STATUS_OK);
    }
    glimpse_caption alone[6], batched[6];
    glimpse_caption_params p = glimpse_caption_default_params();
    for (int i = 0; i < 6; i++) assert_int_equal(glimpse_caption_images(ctx, &images[i], 1, &p, &alone[i]), 0);
    const int rows[] = {0, 2, 1};
    for (size_t r = 0; r < 3; r++) {
        streams s = {0};
        p.batch_rows = rows[r], p.on_token = record_stream, p.user = &s;
        if (glimpse_caption_images(ctx, images, 6, &p, batched)) fail_msg("%s", glimpse_last_error());
        expect_same(batched, alone, 6, (size_t)rows[r]);
        for (int i = 0; i < 6; i++) { /* beams: the winner's tokens after the start token */
            assert_int_equal(s.counts[i], batched[i].id_count - 1);
            assert_memory_equal(s.ids[i], batched[i].ids + 1, s.counts[i] * sizeof(int32_t));
        }
        free_captions(batched, 6);
    }
    /* greedy, streamed token by token */
    p.beams = 1, p.batch_rows = 0;
    p.on_token = NULL, p.user = NULL; /* (the loop's streams are out of scope) */
    free_captions(alone, 6);
    for (int i = 0; i < 6; i++) assert_int_equal(glimpse_caption_images(ctx, &images[i], 1, &p, &alone[i]), 0);
    streams s = {0};
    p.on_token = record_stream, p.user = &s;
    assert_int_equal(glimpse_caption_images(ctx, images, 6, &p, batched), GLIMPSE_STATUS_OK);
    expect_same(batched, alone, 6, 0);
    for (int i = 0; i < 6; i++) assert_int_equal(s.counts[i], batched[i].id_count - 1);
    free_captions(batched, 6);
    free_captions(alone, 6);
    for (int i = 0; i < 6; i++) glimpse_image_free(images[i]);
    glimpse_context_free(ctx);
    glimpse_model_free(model);
}

/* glimpse caption over many pictures, a file that is no image among them: named on stderr, the others captioned
 * in input order, the same output batched (the default) and with --batch-rows 1. */
static void test_cli_batched(void **state) {
    (void)state;
    char bad[] = "/tmp/glimpse-caption-batch-XXXXXX";
    int fd = mkstemp(bad);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "not an image", 12), 12);
    close(fd);
    const char *model = GLIMPSE_SOURCE_DIR "/examples/models/demo-blip-caption";
    const char *p0 = GLIMPSE_SOURCE_DIR "/examples/pictures/00000.png", *p2 = GLIMPSE_SOURCE_DIR "/examples/pictures/00002.png";
    const char *p3 = GLIMPSE_SOURCE_DIR "/examples/pictures/00003.png", *p4 = GLIMPSE_SOURCE_DIR "/examples/pictures/00004.png";
    const char *batched[] = {GLIMPSE_BINARY, "caption", "-m", model, "--json", p0, bad, p2, p3, p4, NULL};
    const char *alone[] = {GLIMPSE_BINARY, "caption", "-m", model, "--json", "--batch-rows", "1", p0, bad, p2, p3, p4,
                           NULL};
    char *out_batched, *err_batched, *out_alone, *err_alone;
    assert_int_equal(run_program(batched, &out_batched, &err_batched), 1);
    assert_int_equal(run_program(alone, &out_alone, &err_alone), 1);
    assert_string_equal(out_batched, out_alone);
    assert_non_null(strstr(err_batched, bad));
    assert_non_null(strstr(out_batched, "00000.png"));
    assert_true(strstr(out_batched, "00000.png") < strstr(out_batched, "00002.png"));
    assert_true(strstr(out_batched, "00003.png") < strstr(out_batched, "00004.png"));
    unlink(bad);
    free(out_batched), free(err_batched), free(out_alone), free(err_alone);
}

static int descending(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* Top-k sampling's threshold (fusion/generate.c, by radix passes) is the value a descending sort puts at k - 1:
 * over random scores, scores with many ties (a few values repeated), both signs of zero and the infinities,
 * for every k of small arrays and chosen k of a vocabulary-sized one. */
static void test_kth_largest_as_sorted(void **state) {
    (void)state;
    const int32_t sizes[] = {1, 2, 3, 17, 100, 30524};
    const float specials[] = {0.0f, -0.0f, INFINITY, -INFINITY, 1e-38f, -1e-38f, 3.4e38f, -3.4e38f, 1.0f, -1.0f};
    for (int kind = 0; kind < 3; kind++)
        for (size_t z = 0; z < sizeof sizes / sizeof *sizes; z++) {
            int32_t n = sizes[z];
            float *x = malloc((size_t)n * sizeof *x), *sorted = malloc((size_t)n * sizeof *sorted);
            assert_non_null(x), assert_non_null(sorted);
            for (int32_t i = 0; i < n; i++) {
                uint32_t r = test_random_bits();
                x[i] = kind == 0   ? (test_random_float() - 0.5f) * 40.0f
                       : kind == 1 ? (float)(int)(r % 7) - 3.0f
                                   : specials[r % (sizeof specials / sizeof *specials)];
            }
            memcpy(sorted, x, (size_t)n * sizeof *x);
            qsort(sorted, (size_t)n, sizeof *sorted, descending);
            for (int32_t k = 1; k <= n; k += n > 200 ? 997 : 1) {
                float got = generate_kth_largest(x, n, k);
                if (!(got == sorted[k - 1]))
                    fail_msg("kind %d, n %d, k %d: %g, the sort gives %g", kind, n, k, got, sorted[k - 1]);
            }
            assert_true(generate_kth_largest(x, n, n) == sorted[n - 1]);
            free(x), free(sorted);
        }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kth_largest_as_sorted),
        cmocka_unit_test(test_blip_cases),
        cmocka_unit_test(test_vit_gpt2_cases),
        cmocka_unit_test(test_blip2_cases),
        cmocka_unit_test(test_demo_pictures),
        cmocka_unit_test(test_cli_batched),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
