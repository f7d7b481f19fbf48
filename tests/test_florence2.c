/* test_florence2.c — the Florence-2 family through the public API against the florence2-tiny fixture: every one
 * of the 88 generation cases (11 tasks × 4 pictures, greedy and 3 beams, 20 new tokens) run by glimpse_run_task
 * from the picture file gives the reference's ids, text and post-processed result exactly; the caption tasks
 * through glimpse_caption_images give the same ids and the parsed caption as text; a task with a phrase or a
 * region takes it as the processor does; the snapshot's pytorch_model.bin alone loads and answers the same;
 * the refusals: unknown tasks, missing inputs, free caption prompts; and int8 runs. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "glimpse.h"
#include "tests/support.h"

typedef struct f2_fixture {
    glimpse_model *model;
    glimpse_context *ctx;
    cJSON *expected;
} f2_fixture;

static int setup(void **state) {
    *state = NULL;
    if (!fixtures_folder()) return 0;
    f2_fixture *f = calloc(1, sizeof *f);
    char *folder = fixture_path("florence2-tiny");
    glimpse_context_params cp = glimpse_context_default_params();
    cp.threads = 2;
    int failed = !f || !(f->expected = fixture_json("florence2-tiny/expected.json")) ||
                 glimpse_model_load(folder, NULL, &f->model) || glimpse_context_create(f->model, &cp, &f->ctx);
    if (failed) fprintf(stderr, "florence2-tiny: %s\n", glimpse_last_error());
    free(folder);
    *state = f;
    return failed ? -1 : 0;
}

static int teardown(void **state) {
    f2_fixture *f = *state;
    if (!f) return 0;
    glimpse_context_free(f->ctx);
    glimpse_model_free(f->model);
    cJSON_Delete(f->expected);
    free(f);
    return 0;
}

static glimpse_caption_params case_params(const cJSON *item) {
    const cJSON *params = cJSON_GetObjectItem(item, "params");
    glimpse_caption_params p = glimpse_caption_default_params();
    p.max_tokens = cJSON_GetObjectItem(params, "max_new_tokens")->valueint;
    p.beams = cJSON_GetObjectItem(params, "num_beams")->valueint;
    return p;
}

/* The case's picture, decoded from its file. */
static glimpse_image *case_image(const f2_fixture *f, const cJSON *item) {
    const cJSON *images = cJSON_GetObjectItem(f->expected, "images");
    const cJSON *image = cJSON_GetArrayItem(images, cJSON_GetObjectItem(item, "image")->valueint);
    return fixture_image(cJSON_GetObjectItem(image, "file")->valuestring);
}

static void test_every_case(void **state) {
    f2_fixture *f = *state;
    if (!f) skip();
    const cJSON *item, *prompts = cJSON_GetObjectItem(f->expected, "prompts");
    int c = 0;
    cJSON_ArrayForEach(item, cJSON_GetObjectItem(f->expected, "cases")) {
        const cJSON *prompt = cJSON_GetArrayItem(prompts, cJSON_GetObjectItem(item, "prompt_index")->valueint);
        const cJSON *input = cJSON_GetObjectItem(prompt, "text_input");
        glimpse_image *image = case_image(f, item);
        glimpse_caption_params p = case_params(item);
        glimpse_task_result result;
        if (glimpse_run_task(f->ctx, &image, 1, cJSON_GetObjectItem(item, "task")->valuestring,
                             cJSON_IsString(input) ? input->valuestring : NULL, &p, &result))
            fail_msg("case %d: %s", c, glimpse_last_error());
        char what[32];
        snprintf(what, sizeof what, "case %d", c);
        expect_ids_equal(result.ids, result.id_count, cJSON_GetObjectItem(item, "ids"), what);
        assert_string_equal(result.text, cJSON_GetObjectItem(item, "text")->valuestring);
        cJSON *parsed = cJSON_Parse(result.json);
        if (!json_same_float32(parsed, cJSON_GetObjectItem(item, "parsed")))
            fail_msg("case %d: parsed %s, the reference's %s", c, result.json,
                     cJSON_PrintUnformatted(cJSON_GetObjectItem(item, "parsed")));
        cJSON_Delete(parsed);
        glimpse_task_result_free(&result);
        glimpse_image_free(image);
        c++;
    }
    assert_int_equal(c, 88);
}

/* The <CAPTION> cases through the caption door (one call for the four pictures): the same ids, the parsed text. */
static void test_captions(void **state) {
    f2_fixture *f = *state;
    if (!f) skip();
    const cJSON *item;
    int checked = 0;
    for (int beams = 1; beams <= 3; beams += 2) {
        glimpse_image *images[4];
        const cJSON *items[4];
        int n = 0;
        cJSON_ArrayForEach(item, cJSON_GetObjectItem(f->expected, "cases")) {
            glimpse_caption_params p = case_params(item);
            if (strcmp(cJSON_GetObjectItem(item, "task")->valuestring, "<CAPTION>") || p.beams != beams) continue;
            items[n] = item, images[n++] = case_image(f, item);
        }
        assert_int_equal(n, 4);
        glimpse_caption_params p = case_params(items[0]);
        glimpse_caption captions[4];
        if (glimpse_caption_images(f->ctx, images, 4, &p, captions)) fail_msg("%s", glimpse_last_error());
        for (int i = 0; i < 4; i++) {
            expect_ids_equal(captions[i].ids, captions[i].id_count, cJSON_GetObjectItem(items[i], "ids"), "caption");
            const cJSON *parsed = cJSON_GetObjectItem(cJSON_GetObjectItem(items[i], "parsed"), "<CAPTION>");
            assert_string_equal(captions[i].text, parsed->valuestring);
            glimpse_caption_free(&captions[i]);
            glimpse_image_free(images[i]);
            checked++;
        }
    }
    assert_int_equal(checked, 8);
}

static void test_refusals(void **state) {
    f2_fixture *f = *state;
    if (!f) skip();
    glimpse_image *image = smooth_picture();
    glimpse_task_result result;
    glimpse_caption caption;
    glimpse_caption_params p = glimpse_caption_default_params();
    p.max_tokens = 4;
    assert_int_equal(glimpse_run_task(f->ctx, &image, 1, "<VQA>", NULL, &p, &result), GLIMPSE_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(glimpse_last_error(), "<REGION_TO_OCR>"));
    assert_int_equal(glimpse_run_task(f->ctx, &image, 1, "<REGION_TO_DESCRIPTION>", NULL, &p, &result),
                     GLIMPSE_STATUS_INVALID_ARGUMENT);
    assert_int_equal(glimpse_run_task(f->ctx, &image, 1, "<OD>", "a dog", &p, &result), GLIMPSE_STATUS_INVALID_ARGUMENT);
    p.prompt = "a picture of";
    assert_int_equal(glimpse_caption_images(f->ctx, &image, 1, &p, &caption), GLIMPSE_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(glimpse_last_error(), "--detail"));
    p.prompt = NULL, p.max_tokens = 5000;
    assert_int_equal(glimpse_run_task(f->ctx, &image, 1, "<OCR>", NULL, &p, &result), GLIMPSE_STATUS_TOO_LARGE);
    glimpse_image_free(image);
    char *folder = fixture_path("florence2-tiny");
    glimpse_load_params lp = glimpse_load_default_params();
    lp.precision = GLIMPSE_PRECISION_INT8;
    glimpse_model *m = NULL; /* int8: DaViT's and BART's projections quantized; it runs, its ids its own */
    assert_int_equal(glimpse_model_load(folder, &lp, &m), GLIMPSE_STATUS_OK);
    glimpse_context *ctx;
    assert_int_equal(glimpse_context_create(m, NULL, &ctx), GLIMPSE_STATUS_OK);
    image = fixture_image("chelsea.png");
    p.max_tokens = 20;
    assert_int_equal(glimpse_run_task(ctx, &image, 1, "<OD>", NULL, &p, &result), GLIMPSE_STATUS_OK);
    assert_true(result.id_count >= 3 && result.ids[0] == 2 && result.ids[1] == 0);
    glimpse_task_result_free(&result);
    glimpse_image_free(image);
    glimpse_context_free(ctx);
    glimpse_model_free(m);
    free(folder);
}

/* A new folder (template changed in place) holding links to the fixture files under `under` named by files[]. */
static void link_fixture_files(char *folder, const char *under, const char *const *files, size_t count) {
    assert_non_null(mkdtemp(folder));
    for (size_t i = 0; i < count; i++) {
        char name[128], link[256], *target;
        snprintf(name, sizeof name, "%s/%s", under, files[i]);
        target = fixture_path(name);
        snprintf(link, sizeof link, "%s/%s", folder, files[i]);
        assert_int_equal(symlink(target, link), 0);
        free(target);
    }
}

/* A folder holding the hub's pytorch_model.bin (no safetensors) answers as the safetensors file does. */
static void test_pytorch_bin_snapshot(void **state) {
    f2_fixture *f = *state;
    if (!f) skip();
    static const char *const files[] = {"config.json", "preprocessor_config.json", "tokenizer.json",
                                        "tokenizer_config.json", "vocab.json", "pytorch_model.bin"};
    char folder[] = "/tmp/glimpse-florence2-XXXXXX", link[128];
    link_fixture_files(folder, "florence2-tiny", files, 6);
    glimpse_model *model;
    glimpse_context *ctx;
    assert_int_equal(glimpse_model_load(folder, NULL, &model), GLIMPSE_STATUS_OK);
    assert_int_equal(glimpse_context_create(model, NULL, &ctx), GLIMPSE_STATUS_OK);
    glimpse_image *image = fixture_image("chelsea.png");
    glimpse_caption_params p = glimpse_caption_default_params();
    p.max_tokens = 20;
    glimpse_task_result a, b;
    assert_int_equal(glimpse_run_task(ctx, &image, 1, "<OD>", NULL, &p, &a), GLIMPSE_STATUS_OK);
    assert_int_equal(glimpse_run_task(f->ctx, &image, 1, "<OD>", NULL, &p, &b), GLIMPSE_STATUS_OK);
    assert_int_equal(a.id_count, b.id_count);
    assert_memory_equal(a.ids, b.ids, a.id_count * sizeof *a.ids);
    assert_string_equal(a.json, b.json);
    glimpse_task_result_free(&a), glimpse_task_result_free(&b);
    glimpse_image_free(image);
    glimpse_context_free(ctx);
    glimpse_model_free(model);
    for (size_t i = 0; i < 6; i++) {
        snprintf(link, sizeof link, "%s/%s", folder, files[i]);
        unlink(link);
    }
    rmdir(folder);
}

/* glimpse task --json prints the case's ids, text and the processor's result, as the library gives them. */
static void test_cli_task_json(void **state) {
    f2_fixture *f = *state;
    if (!f) skip();
    const cJSON *item = NULL, *it;
    cJSON_ArrayForEach(it, cJSON_GetObjectItem(f->expected, "cases")) /* image 1's greedy <OD> */
        if (!item && !strcmp(cJSON_GetObjectItem(it, "task")->valuestring, "<OD>") &&
            cJSON_GetObjectItem(it, "image")->valueint == 1 && case_params(it).beams == 1)
            item = it;
    assert_non_null(item);
    char *folder = fixture_path("florence2-tiny"), *picture = fixture_path("images/chelsea.png"), *out, *err;
    const char *argv[] = {GLIMPSE_BINARY, "task", "-m", folder, "--task", "<OD>", "--beams", "1", "--max-tokens",
                          "20", "--json", picture, NULL};
    assert_int_equal(run_program(argv, &out, &err), 0);
    cJSON *json = cJSON_Parse(out);
    assert_non_null(json);
    const cJSON *ids = cJSON_GetObjectItem(json, "ids");
    int32_t got[64];
    size_t n = (size_t)cJSON_GetArraySize(ids);
    for (size_t i = 0; i < n && i < 64; i++) got[i] = cJSON_GetArrayItem(ids, (int)i)->valueint;
    expect_ids_equal(got, n, cJSON_GetObjectItem(item, "ids"), "glimpse task --json");
    assert_string_equal(cJSON_GetObjectItem(json, "text")->valuestring, cJSON_GetObjectItem(item, "text")->valuestring);
    assert_true(json_same_float32(cJSON_GetObjectItem(json, "result"), cJSON_GetObjectItem(item, "parsed")));
    cJSON_Delete(json);
    free(out), free(err), free(folder), free(picture);
}

/* glimpse index --ocr --task-model reads each picture's text with <OCR> (greedy, as glimpse_task_words_new
 * reads), and glimpse search --text-in finds the picture by a word of it. */
static void test_index_reads_words(void **state) {
    f2_fixture *f = *state;
    if (!f || !glimpse_has_feature(GLIMPSE_FEATURE_INDEX)) skip(); /* a build without the index: nothing to index */
    glimpse_image *image = fixture_image("chelsea.png");
    glimpse_caption_params p = glimpse_caption_default_params();
    p.beams = 1;
    glimpse_task_result read;
    assert_int_equal(glimpse_run_task(f->ctx, &image, 1, "<OCR>", NULL, &p, &read), GLIMPSE_STATUS_OK);
    glimpse_image_free(image);
    char word[64] = ""; /* the answer's first word of letters alone */
    for (const char *c = read.answer; *c && !word[0]; c++) {
        size_t n = 0;
        while ((c[n] >= 'a' && c[n] <= 'z') || (c[n] >= 'A' && c[n] <= 'Z')) n++;
        if (n >= 3 && n < sizeof word) memcpy(word, c, n), word[n] = '\0';
        if (n) c += n - 1;
    }
    glimpse_task_result_free(&read);
    if (!word[0]) skip(); /* this checkpoint's random weights read no word of three letters */
    char library[] = "/tmp/glimpse-f2-index-XXXXXX", db[128];
    static const char *const pictures[] = {"chelsea.png", "rocket.jpg"};
    link_fixture_files(library, "images", pictures, 2);
    char *model = fixture_path("florence2-tiny"), *clip = fixture_path("clip-tiny");
    snprintf(db, sizeof db, "%s.db", library);
    char *out, *err;
    const char *index[] = {GLIMPSE_BINARY, "index", "-m", clip, "--db", db, "--ocr", "--task-model", model, "--quiet",
                           library, NULL};
    if (run_program(index, &out, &err) != 0) fail_msg("glimpse index: %s", err);
    free(out), free(err);
    const char *search[] = {GLIMPSE_BINARY, "search", "--db", db, "--text-in", word, "--json", NULL};
    if (run_program(search, &out, &err) != 0) fail_msg("glimpse search: %s", err);
    assert_non_null(strstr(out, "chelsea.png"));
    free(out), free(err), free(model), free(clip);
    char command[512];
    snprintf(command, sizeof command, "rm -rf %s %s %s.vectors", library, db, db);
    assert_int_equal(system(command), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_case),
        cmocka_unit_test(test_captions),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_pytorch_bin_snapshot),
        cmocka_unit_test(test_cli_task_json),
        cmocka_unit_test(test_index_reads_words),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
