/* test_bart.c — BART (fusion/bart.h) against the florence2-tiny fixture's reference: the encoder over each
 * prompt's encoder_inputs_embeds gives encoder_last_hidden_state, the decoder over each greedy case's ids gives
 * decoder_last_hidden_state and (t = 1 of the <CAPTION> cases) caption_step1_logits, and every generation case
 * — greedy and 3 beams, with text_config's no-repeat 3-grams, forced <s> and </s> and early stopping — gives
 * the reference's ids from its encoder output (beam cases: its sequences_score too). Then the processors
 * of fusion/generate.c that transformers 4.40 added, on a toy decoder whose logits are written here. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "fusion/bart.h"
#include "tests/support.h"
#include "weights/config.h"

#define HIDDEN_TOLERANCE 1e-4

typedef struct bart_fixture {
    weight_store *store;
    cJSON *config, *expected;
    safetensors *reference;
    bart_config bart;
    bart_model model;
} bart_fixture;

static int setup(void **state) {
    *state = NULL;
    if (!fixtures_folder()) return 0;
    bart_fixture *f = calloc(1, sizeof *f);
    char *folder = fixture_path("florence2-tiny");
    int failed = !f || !folder || weight_store_open(folder, &f->store) ||
                 config_read_json(folder, "config.json", &f->config) ||
                 !(f->expected = fixture_json("florence2-tiny/expected.json")) ||
                 !(f->reference = fixture_tensors("florence2-tiny/reference.safetensors")) ||
                 bart_config_read(cJSON_GetObjectItem(f->config, "text_config"), "config.json: text_config",
                                  &f->bart) ||
                 bart_model_load(&f->model, &f->bart, &names_florence2.language, f->store);
    free(folder);
    if (failed) fprintf(stderr, "florence2-tiny: %s\n", glimpse_last_error());
    *state = f;
    return failed ? -1 : 0;
}

static int teardown(void **state) {
    bart_fixture *f = *state;
    if (!f) return 0;
    bart_model_free(&f->model);
    weight_store_free(f->store);
    cJSON_Delete(f->config), cJSON_Delete(f->expected);
    safetensors_close(f->reference);
    free(f);
    return 0;
}

static bart_fixture *fixture_or_skip(void **state) {
    if (!*state) skip();
    return *state;
}

/* The reference encoder output of prompt k and its length (caller does not free). */
static const float *reference_encoder_output(const bart_fixture *f, int k, size_t *length) {
    const cJSON *prompt = cJSON_GetArrayItem(cJSON_GetObjectItem(f->expected, "prompts"), k);
    *length = (size_t)cJSON_GetObjectItem(prompt, "num_encoder_tokens")->valueint;
    char name[64];
    snprintf(name, sizeof name, "encoder_last_hidden_state.%d", k);
    return fixture_tensor(f->reference, name, *length * (size_t)f->bart.encoder.hidden_size);
}

static void test_encoder(void **state) {
    bart_fixture *f = fixture_or_skip(state);
    size_t h = (size_t)f->bart.encoder.hidden_size;
    int prompts = cJSON_GetArraySize(cJSON_GetObjectItem(f->expected, "prompts"));
    for (int k = 0; k < prompts; k++) {
        size_t length;
        reference_encoder_output(f, k, &length);
        char name[64];
        snprintf(name, sizeof name, "encoder_inputs_embeds.%d", k);
        const float *inputs = fixture_tensor(f->reference, name, length * h);
        bert_state *s;
        assert_int_equal(bart_encoder_state_create(&f->model, length, &s), GLIMPSE_STATUS_OK);
        assert_int_equal(bart_encode(&f->model, s, inputs, length, NULL), GLIMPSE_STATUS_OK);
        snprintf(name, sizeof name, "encoder_last_hidden_state.%d", k);
        expect_reference_close(s->x, f->reference, name, length * h, "encoder_last_hidden_state", HIDDEN_TOLERANCE);
        bert_state_free(s);
    }
}

/* The ids of a case as int32. */
static size_t case_ids(const cJSON *item, int32_t *ids, size_t capacity) {
    const cJSON *list = cJSON_GetObjectItem(item, "ids");
    size_t n = (size_t)cJSON_GetArraySize(list);
    assert_true(n <= capacity);
    for (size_t i = 0; i < n; i++) ids[i] = (int32_t)cJSON_GetArrayItem(list, (int)i)->valueint;
    return n;
}

static void test_decoder_hidden_states_and_logits(void **state) {
    bart_fixture *f = fixture_or_skip(state);
    size_t h = (size_t)f->bart.decoder.hidden_size, vocab = (size_t)f->bart.decoder.vocab_size;
    const cJSON *cases = cJSON_GetObjectItem(f->expected, "cases");
    int checked = 0, logits_checked = 0;
    for (int c = 0; c < cJSON_GetArraySize(cases); c++) {
        const cJSON *item = cJSON_GetArrayItem(cases, c);
        if (strcmp(cJSON_GetObjectItem(item, "setting")->valuestring, "greedy") != 0) continue;
        int k = cJSON_GetObjectItem(item, "prompt_index")->valueint;
        int32_t ids[64];
        size_t n = case_ids(item, ids, 64), length;
        const float *encoded = reference_encoder_output(f, k, &length);
        bert_state *s;
        assert_int_equal(bert_state_create(&f->model.decoder, 1, n, n, length, &s), GLIMPSE_STATUS_OK);
        assert_int_equal(bert_set_image(&f->model.decoder, s, encoded, length, NULL), GLIMPSE_STATUS_OK);
        assert_int_equal(bert_decode_step(&f->model.decoder, s, ids, 1, n, NULL), GLIMPSE_STATUS_OK);
        char name[64];
        snprintf(name, sizeof name, "decoder_last_hidden_state.%d", c);
        expect_reference_close(s->x, f->reference, name, n * h, "decoder_last_hidden_state", HIDDEN_TOLERANCE);
        checked++;
        const cJSON *prompt = cJSON_GetArrayItem(cJSON_GetObjectItem(f->expected, "prompts"), k);
        if (!strcmp(cJSON_GetObjectItem(prompt, "task")->valuestring, "<CAPTION>")) {
            /* t = 1: the logits after </s> <s> */
            int image = cJSON_GetObjectItem(prompt, "image")->valueint;
            assert_int_equal(bert_set_image(&f->model.decoder, s, encoded, length, NULL), GLIMPSE_STATUS_OK);
            assert_int_equal(bert_decode_step(&f->model.decoder, s, ids, 1, 2, NULL), GLIMPSE_STATUS_OK);
            snprintf(name, sizeof name, "caption_step1_logits.%d", image);
            expect_reference_close(s->logits, f->reference, name, vocab, "caption_step1_logits", HIDDEN_TOLERANCE);
            logits_checked++;
        }
        bert_state_free(s);
    }
    assert_true(checked == 44 && logits_checked == 4);
}

static void test_generation_cases(void **state) {
    bart_fixture *f = fixture_or_skip(state);
    const cJSON *cases = cJSON_GetObjectItem(f->expected, "cases");
    int max_new = cJSON_GetObjectItem(f->expected, "max_new_tokens")->valueint, ran = 0;
    for (int c = 0; c < cJSON_GetArraySize(cases); c++) {
        const cJSON *item = cJSON_GetArrayItem(cases, c);
        int k = cJSON_GetObjectItem(item, "prompt_index")->valueint;
        int beams = cJSON_GetObjectItem(cJSON_GetObjectItem(item, "params"), "num_beams")->valueint;
        int32_t expected[64], out[64];
        size_t n = case_ids(item, expected, 64), length, got = 0;
        const float *encoded = reference_encoder_output(f, k, &length);
        size_t max_length = 1 + (size_t)max_new;
        bert_state *s;
        assert_int_equal(bert_state_create(&f->model.decoder, (size_t)beams, max_length, 1, length, &s), 0);
        assert_int_equal(bert_set_image(&f->model.decoder, s, encoded, length, NULL), GLIMPSE_STATUS_OK);
        bert_decoder decoder_self = {&f->model.decoder, s};
        caption_decoder decoder = bert_caption_decoder(&decoder_self);
        caption_settings settings = bart_caption_settings(&f->bart.generation, max_length, 0, beams, 1.0f);
        int32_t start = f->bart.generation.start_id;
        assert_int_equal(caption_generate(&decoder, &start, 1, &settings, NULL, NULL, out, &got, NULL), 0);
        if (got != n || memcmp(out, expected, n * sizeof *out) != 0) {
            size_t first = 0;
            while (first < n && first < got && out[first] == expected[first]) first++;
            fail_msg("case %d (%s, prompt %d): %zu ids, expected %zu; first difference at %zu", c,
                     cJSON_GetObjectItem(item, "setting")->valuestring, k, got, n, first);
        }
        bert_state_free(s);
        ran++;
    }
    assert_int_equal(ran, 88);
}

/* ------------------------------------------------------------------ the processors on a toy decoder */

/* A decoder of 6 tokens whose logits at each length are a table written here, the same for every sequence. */
#define TOY_VOCAB 6
typedef struct toy {
    size_t length;
    float logits[4][TOY_VOCAB];
    float out[4 * TOY_VOCAB];
} toy;

static void toy_restart(void *self) { ((toy *)self)->length = 0; }
static glimpse_status toy_step(void *self, const int32_t *ids, size_t sequences, size_t step, float **logits,
                               pool *threads) {
    (void)ids, (void)threads;
    toy *t = self;
    t->length += step;
    for (size_t s = 0; s < sequences; s++) memcpy(t->out + s * TOY_VOCAB, t->logits[t->length - 1], sizeof t->logits[0]);
    *logits = t->out;
    return GLIMPSE_STATUS_OK;
}
static void toy_reorder(void *self, const size_t *from, size_t sequences) { (void)self, (void)from, (void)sequences; }

static void test_processors(void **state) {
    (void)state;
    /* token 1 always best, then 3: greedy from [5] gives 1 1 1 ... */
    toy t = {0};
    for (int l = 0; l < 4; l++) t.logits[l][1] = 5, t.logits[l][3] = 4, t.logits[l][4] = 1;
    caption_decoder d = {&t, TOY_VOCAB, 3, 8, toy_restart, toy_step, toy_reorder};
    caption_settings s = {.max_length = 5, .beams = 1, .repetition_penalty = 1, .end_id = 0, .pad_id = 2};
    int32_t start = 5, out[8];
    size_t n;
    assert_int_equal(caption_generate(&d, &start, 1, &s, NULL, NULL, out, &n, NULL), 0);
    assert_int_equal(n, 5); /* 5 1 1 1 1: nothing stops it */
    assert_int_equal(out[4], 1);
    /* no repeat of a 2-gram: after 5 1, the pair (1, 1) would repeat once 1 1 is in: 5 1 1 3 1 */
    s.no_repeat_ngram = 2;
    assert_int_equal(caption_generate(&d, &start, 1, &s, NULL, NULL, out, &n, NULL), 0);
    int32_t ngram[] = {5, 1, 1, 3, 1};
    assert_memory_equal(out, ngram, sizeof ngram);
    /* forced bos 4 at length 1 and forced eos 0 at length max_length - 1 = 4: 5 4 1 1 0 */
    s.no_repeat_ngram = 0, s.force_bos = s.force_eos = true, s.forced_bos_id = 4, s.forced_eos_id = 0;
    assert_int_equal(caption_generate(&d, &start, 1, &s, NULL, NULL, out, &n, NULL), 0);
    int32_t forced[] = {5, 4, 1, 1, 0};
    assert_int_equal(n, 5);
    assert_memory_equal(out, forced, sizeof forced);
    /* a second end token: 1 now ends the sequence at once: 5 1 */
    s.force_bos = s.force_eos = false, s.more_end_ids[0] = 1, s.more_end_count = 1;
    assert_int_equal(caption_generate(&d, &start, 1, &s, NULL, NULL, out, &n, NULL), 0);
    assert_int_equal(n, 2);
    assert_int_equal(out[1], 1);
    /* beams with two end tokens (0 and 1) and 4.40's scoring: the best candidate, 1, closes a hypothesis of one
     * generated token scored log p(1) / 1; early stopping ends the search once 2 hypotheses exist. The winner is
     * returned with end_id (0) appended, whichever end token closed it: 5 0. */
    s.beams = 2, s.score_generated = true, s.early_stopping = true;
    assert_int_equal(caption_generate(&d, &start, 1, &s, NULL, NULL, out, &n, NULL), 0);
    assert_int_equal(n, 2);
    assert_int_equal(out[0], 5);
    assert_int_equal(out[1], 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_encoder),
        cmocka_unit_test(test_decoder_hidden_states_and_logits),
        cmocka_unit_test(test_generation_cases),
        cmocka_unit_test(test_processors),
    };
    return report_differences(cmocka_run_group_tests(tests, setup, teardown));
}
