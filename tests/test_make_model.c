/* test_make_model.c — glimpse-make-model's LLaVA and Florence-2 snapshots: from the fixtures' configs it writes
 * exactly their tensor names, shapes and dtypes; from the published configs (shared/configs), with --layers
 * keeping the published widths, vocabularies and picture sizes in two layers, the snapshots load (glimpse info)
 * and run (glimpse ask, glimpse task) with their tokenizers' special tokens at the configs' ids. Skips without
 * the fixtures (the configs sit beside them). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/file.h"
#include "tests/support.h"
#include "weights/safetensors.h"

/* A published config (shared/configs/NAME.json) made into workspace/FOLDER with options; caller frees. */
static char *snapshot_from_file(const char *path, const char *folder, const char *options) {
    uint8_t *bytes;
    size_t size;
    if (file_read_all(path, 1 << 20, &bytes, &size)) fail_msg("%s: %s", path, glimpse_last_error());
    char *text = malloc(size + 1);
    assert_non_null(text);
    memcpy(text, bytes, size), text[size] = '\0';
    char *made = snapshot_from_config(test_workspace(), text, folder, options);
    free(text), free(bytes);
    return made;
}

/* The fixture's model.safetensors against the one glimpse-make-model writes from the fixture's config.json:
 * the same names, each with the same dtype and shape. */
static void test_fixture_layouts(void **state) {
    (void)state;
    if (!fixtures_folder()) skip();
    static const char *const names[] = {"florence2-tiny", "llava-llama-tiny", "llava-qwen2-tiny"};
    for (size_t n = 0; n < sizeof names / sizeof names[0]; n++) {
        char relative[128];
        snprintf(relative, sizeof relative, "%s/config.json", names[n]);
        char *config = fixture_path(relative), *folder = snapshot_from_file(config, names[n], "");
        char *made_path = file_join(folder, "model.safetensors");
        snprintf(relative, sizeof relative, "%s/model.safetensors", names[n]);
        safetensors *expected = fixture_tensors(relative), *made;
        assert_int_equal(safetensors_open(made_path, &made), GLIMPSE_STATUS_OK);
        if (made->count != expected->count)
            fail_msg("%s: %zu tensors written, the fixture has %zu", names[n], made->count, expected->count);
        for (size_t i = 0; i < expected->count; i++) {
            const tensor_entry *want = &expected->entries[i], *got = safetensors_find(made, want->name);
            if (!got) fail_msg("%s: %s is not written", names[n], want->name);
            char a[TENSOR_SHAPE_TEXT_CAPACITY], b[TENSOR_SHAPE_TEXT_CAPACITY];
            if (strcmp(got->dtype_name, want->dtype_name) || got->rank != want->rank ||
                memcmp(got->shape, want->shape, (size_t)want->rank * sizeof want->shape[0]))
                fail_msg("%s: %s is %s %s, the fixture's %s %s", names[n], want->name, got->dtype_name,
                         tensor_shape_string(a, sizeof a, got->shape, got->rank), want->dtype_name,
                         tensor_shape_string(b, sizeof b, want->shape, want->rank));
        }
        printf("%s: %zu tensors as the fixture's\n", names[n], made->count);
        safetensors_close(made), safetensors_close(expected);
        free(made_path), free(folder), free(config);
    }
}

/* glimpse ARGS...; its standard output (caller frees), the test failed if it fails. */
static char *run_glimpse(const char *const *argv) {
    char *out, *err;
    if (run_program(argv, &out, &err)) fail_msg("%s %s: %s", argv[1], argv[3], err);
    free(err);
    return out;
}

/* shared/configs/NAME.json written with two layers per stack, checked with glimpse info; its folder (the test
 * skipped without the fixtures, beside which the configs sit). */
static char *published_snapshot(const char *name, const char *architecture) {
    if (!fixtures_folder()) skip();
#ifdef __SANITIZE_ADDRESS__
    /* Under AddressSanitizer these two full-width forward passes took 100 of the sanitizer pass's 600 test
     * seconds (the instrumented product kernels), while the plain and minimal passes run them at full speed;
     * every code path they take runs here too, on the fixtures' odd sizes (test_fixture_layouts above, the
     * families' parity tests). */
    print_message("published shapes run in the passes without AddressSanitizer\n");
    skip();
#endif
    char relative[160];
    snprintf(relative, sizeof relative, "../configs/%s.json", name);
    char *config = fixture_path(relative), *folder = snapshot_from_file(config, name, " --layers 2");
    const char *argv[] = {GLIMPSE_BINARY, "info", "-m", folder, NULL};
    char *out = run_glimpse(argv);
    if (!strstr(out, architecture)) fail_msg("glimpse info -m %s:\n%s", folder, out);
    free(out), free(config);
    return folder;
}

/* The example picture both models are run on. */
static const char picture[] = GLIMPSE_SOURCE_DIR "/examples/pictures/00000.png";

/* How many of the JSON list's numbers are id. */
static int count_id(const cJSON *list, int id) {
    int found = 0;
    const cJSON *item;
    cJSON_ArrayForEach(item, list) found += item->valueint == id;
    return found;
}

/* llava-interleave-qwen-0.5b: SigLIP at 384 pixels (729 image rows), Qwen2 of 1,024 wide with its 152,000-row
 * table; the chat template puts <|im_start|> (151644), <|im_end|> (151645) and <image> (151646) in the prompt. */
static void test_published_llava(void **state) {
    (void)state;
    char *folder = published_snapshot("llava-hf--llava-interleave-qwen-0.5b-hf", "LlavaForConditionalGeneration");
    const char *argv[] = {GLIMPSE_BINARY, "ask", "-m", folder, "-q", "What is this?", "--max-tokens", "3", "--json",
                          picture, NULL};
    char *out = run_glimpse(argv);
    cJSON *json = cJSON_Parse(out);
    assert_non_null(json);
    const cJSON *prompt = cJSON_GetObjectItem(json, "prompt_ids");
    assert_int_equal(count_id(prompt, 151646), 1);
    assert_int_equal(count_id(prompt, 151644), 2);
    assert_int_equal(count_id(prompt, 151645), 1);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(json, "ids")), 3);
    cJSON_Delete(json);
    free(out), free(folder);
}

/* Florence-2-base: DaViT at 768 pixels, BART with the processor's 1,024 tokens after the vocabulary's 50,265:
 * a task without input and one with a region of <loc_N> tokens both run. */
static void test_published_florence2(void **state) {
    (void)state;
    char *folder = published_snapshot("microsoft--Florence-2-base", "Florence2ForConditionalGeneration");
    static const char *const tasks[][2] = {{"<OD>", NULL}, {"<REGION_TO_DESCRIPTION>", "10,10,40,30"}};
    for (int t = 0; t < 2; t++) {
        const char *argv[] = {GLIMPSE_BINARY, "task", "-m", folder, "--task", tasks[t][0], "--beams", "1",
                              "--max-tokens", "4", "--json", picture, NULL, NULL, NULL};
        if (tasks[t][1]) argv[11] = "--region", argv[12] = tasks[t][1], argv[13] = picture;
        char *out = run_glimpse(argv);
        cJSON *json = cJSON_Parse(out);
        assert_non_null(json);
        const cJSON *ids = cJSON_GetObjectItem(json, "ids");
        assert_true(cJSON_GetArraySize(ids) >= 2 && cJSON_GetArraySize(ids) <= 6);
        assert_int_equal(cJSON_GetArrayItem(ids, 0)->valueint, 2); /* decoder_start_token_id, then the forced <s> */
        assert_int_equal(cJSON_GetArrayItem(ids, 1)->valueint, 0);
        assert_non_null(cJSON_GetObjectItem(cJSON_GetObjectItem(json, "result"), tasks[t][0]));
        cJSON_Delete(json);
        free(out);
    }
    free(folder);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_fixture_layouts), cmocka_unit_test(test_published_llava),
                                       cmocka_unit_test(test_published_florence2)};
    return cmocka_run_group_tests(tests, workspace_setup, workspace_teardown);
}
