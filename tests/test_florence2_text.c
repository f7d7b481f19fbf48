/* test_florence2_text.c — Florence-2's processor on the text side against the florence2-tiny fixture: every
 * tokenizer case's ids (BART's tokenizer with the processor's 1,024 added tokens, merges from tokenizer.json);
 * every prompt built from its task and input and tokenized to the reference's input_ids; every generation case's
 * ids decoded to the reference's text (special tokens kept, as the fast tokenizer decodes); and every crafted
 * post-processing case and every case's parsed result equal to the processor's (labels exactly, coordinates as
 * float32 values). Also the tasks' refusals of missing, extra and malformed inputs. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "families/florence2_post.h"
#include "families/florence2_text.h"
#include "tests/support.h"

typedef struct text_fixture {
    cJSON *expected;
    gpt2_tokenizer *tokenizer;
} text_fixture;

static int setup(void **state) {
    *state = NULL;
    if (!fixtures_folder()) return 0;
    text_fixture *f = calloc(1, sizeof *f);
    char *folder = fixture_path("florence2-tiny");
    int failed = !f || !(f->expected = fixture_json("florence2-tiny/expected.json")) ||
                 florence2_tokenizer_load(folder, &f->tokenizer);
    if (failed) fprintf(stderr, "florence2-tiny: %s\n", glimpse_last_error());
    free(folder);
    *state = f;
    return failed ? -1 : 0;
}

static int teardown(void **state) {
    text_fixture *f = *state;
    if (!f) return 0;
    gpt2_tokenizer_free(f->tokenizer);
    cJSON_Delete(f->expected);
    free(f);
    return 0;
}

static void test_tokenizer_cases(void **state) {
    text_fixture *f = *state;
    if (!f) skip();
    const cJSON *item;
    int n = 0;
    cJSON_ArrayForEach(item, cJSON_GetObjectItem(f->expected, "tokenizer_cases")) {
        int32_t *ids;
        size_t count;
        const char *text = cJSON_GetObjectItem(item, "text")->valuestring;
        assert_int_equal(florence2_encode(f->tokenizer, text, &ids, &count), GLIMPSE_STATUS_OK);
        expect_ids_equal(ids, count, cJSON_GetObjectItem(item, "input_ids"), text);
        free(ids);
        n++;
    }
    assert_int_equal(n, 10);
}

static void test_prompts(void **state) {
    text_fixture *f = *state;
    if (!f) skip();
    const cJSON *item;
    int n = 0;
    cJSON_ArrayForEach(item, cJSON_GetObjectItem(f->expected, "prompts")) {
        const florence2_task *task = florence2_task_find(cJSON_GetObjectItem(item, "task")->valuestring);
        assert_non_null(task);
        const cJSON *input = cJSON_GetObjectItem(item, "text_input");
        char *prompt;
        assert_int_equal(florence2_task_prompt(task, cJSON_IsString(input) ? input->valuestring : NULL, &prompt), 0);
        assert_string_equal(prompt, cJSON_GetObjectItem(item, "prompt")->valuestring);
        int32_t *ids;
        size_t count;
        assert_int_equal(florence2_encode(f->tokenizer, prompt, &ids, &count), GLIMPSE_STATUS_OK);
        expect_ids_equal(ids, count, cJSON_GetObjectItem(item, "input_ids"), prompt);
        free(ids), free(prompt);
        n++;
    }
    assert_int_equal(n, 44);
}

static void expect_parsed(const char *text, const char *task_name, int width, int height, const cJSON *expected) {
    const florence2_task *task = florence2_task_find(task_name);
    assert_non_null(task);
    florence2_parsed parsed;
    assert_int_equal(florence2_post_process(text, task, width, height, &parsed), GLIMPSE_STATUS_OK);
    if (!json_same_float32(parsed.json, expected)) {
        char *got = cJSON_PrintUnformatted(parsed.json), *want = cJSON_PrintUnformatted(expected);
        fail_msg("%s on \"%s\" (%d x %d):\n  got      %s\n  expected %s", task_name, text, width, height, got, want);
    }
    florence2_parsed_free(&parsed);
}

static void test_postprocess_table(void **state) {
    text_fixture *f = *state;
    if (!f) skip();
    const cJSON *item;
    int n = 0;
    cJSON_ArrayForEach(item, cJSON_GetObjectItem(f->expected, "postprocess_table")) {
        const cJSON *size = cJSON_GetObjectItem(item, "image_size");
        expect_parsed(cJSON_GetObjectItem(item, "text")->valuestring, cJSON_GetObjectItem(item, "task")->valuestring,
                      cJSON_GetArrayItem(size, 0)->valueint, cJSON_GetArrayItem(size, 1)->valueint,
                      cJSON_GetObjectItem(item, "result"));
        n++;
    }
    assert_int_equal(n, 37);
}

/* Each generation case: its ids decode to its text, and the text parses to its result for the picture's size. */
static void test_cases_decode_and_parse(void **state) {
    text_fixture *f = *state;
    if (!f) skip();
    const cJSON *item, *images = cJSON_GetObjectItem(f->expected, "images");
    int n = 0;
    cJSON_ArrayForEach(item, cJSON_GetObjectItem(f->expected, "cases")) {
        const cJSON *list = cJSON_GetObjectItem(item, "ids");
        size_t count = (size_t)cJSON_GetArraySize(list);
        int32_t ids[64];
        assert_true(count <= 64);
        for (size_t i = 0; i < count; i++) ids[i] = cJSON_GetArrayItem(list, (int)i)->valueint;
        char *text;
        assert_int_equal(florence2_decode(f->tokenizer, ids, count, &text), GLIMPSE_STATUS_OK);
        assert_string_equal(text, cJSON_GetObjectItem(item, "text")->valuestring);
        const cJSON *image = cJSON_GetArrayItem(images, cJSON_GetObjectItem(item, "image")->valueint);
        expect_parsed(text, cJSON_GetObjectItem(item, "task")->valuestring,
                      cJSON_GetObjectItem(image, "width")->valueint, cJSON_GetObjectItem(image, "height")->valueint,
                      cJSON_GetObjectItem(item, "parsed"));
        free(text);
        n++;
    }
    assert_int_equal(n, 88);
}

static void test_task_inputs(void **state) {
    (void)state;
    char *prompt = NULL;
    assert_null(florence2_task_find("<VQA>"));
    assert_non_null(strstr(glimpse_last_error(), "<OCR_WITH_REGION>"));
    const florence2_task *od = florence2_task_find("<OD>"), *region = florence2_task_find("<REGION_TO_OCR>");
    const florence2_task *phrase = florence2_task_find("<CAPTION_TO_PHRASE_GROUNDING>");
    assert_int_equal(florence2_task_prompt(od, "a dog", &prompt), GLIMPSE_STATUS_INVALID_ARGUMENT);
    assert_int_equal(florence2_task_prompt(phrase, NULL, &prompt), GLIMPSE_STATUS_INVALID_ARGUMENT);
    static const char *const bad[] = {"<loc_1><loc_2><loc_3>", "<loc_1><loc_2><loc_3><loc_1000>",
                                      "<loc_01><loc_2><loc_3><loc_4>", "<loc_1><loc_2><loc_3><loc_4> ", "a dog"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(florence2_task_prompt(region, bad[i], &prompt), GLIMPSE_STATUS_INVALID_ARGUMENT);
    assert_null(prompt);
    assert_int_equal(florence2_task_prompt(region, "<loc_0><loc_10><loc_999><loc_5>", &prompt), GLIMPSE_STATUS_OK);
    assert_string_equal(prompt, "What text is in the region <loc_0><loc_10><loc_999><loc_5>?");
    free(prompt);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tokenizer_cases),  cmocka_unit_test(test_prompts),
        cmocka_unit_test(test_postprocess_table), cmocka_unit_test(test_cases_decode_and_parse),
        cmocka_unit_test(test_task_inputs),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
