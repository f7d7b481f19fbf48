/* test_explain_cli.c — `glimpse explain` as a user meets it: help, usage errors, JSON lines whose captions and
 * scores are the caption and rank commands' own, contact sheets that decode to their layout, raw tensors any
 * safetensors reader opens, a bad image named while the others go on; and the --html page in a real headless
 * browser (Debian's chromium; skipped with a message where it is absent): it loads without console messages,
 * every button switches the picture to its own map, and its screenshot shows the PNG the CLI wrote. */
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "core/file.h"
#include "glimpse.h"
#include "tests/support.h"
#include "weights/safetensors.h"

#define PICTURES GLIMPSE_SOURCE_DIR "/examples/pictures/"
#define DEMO_CAPTION GLIMPSE_SOURCE_DIR "/examples/models/demo-blip-caption"
#define DEMO_CLIP GLIMPSE_SOURCE_DIR "/examples/models/demo-clip"
/* The sheet's layout (api/explain.c): a 256-pixel panel in a 268 × 288 cell, six cells a row. */
#define CELL_WIDTH 268
#define CELL_HEIGHT 288

typedef struct result {
    int status;
    char *out, *err;
} result;

/* Runs argv[0 .. argc) followed by first and args up to a NULL. */
static result run_with(const char **argv, int argc, const char *first, va_list args) {
    for (const char *a = first; a && argc < 63; a = va_arg(args, const char *)) argv[argc++] = a;
    argv[argc] = NULL;
    result r;
    r.status = run_program(argv, &r.out, &r.err);
    return r;
}

/* Runs glimpse with the arguments (NULL-terminated). */
static result glimpse(const char *first, ...) {
    const char *argv[64] = {GLIMPSE_BINARY};
    va_list args;
    va_start(args, first);
    result r = run_with(argv, 1, first, args);
    va_end(args);
    return r;
}

static void result_free(result *r) { free(r->out), free(r->err); }

/* A fresh empty folder under /tmp (caller frees the name). */
static char *scratch_folder(void) {
    char *folder = strdup("/tmp/glimpse-explain-XXXXXX");
    assert_non_null(mkdtemp(folder));
    return folder;
}

/* Line `index` of JSON Lines text, parsed (fails the test if there is no such line or it does not parse). */
static cJSON *json_line(const char *text, int index) {
    const char *line = text;
    for (int i = 0; i < index; i++) {
        line = strchr(line, '\n');
        assert_non_null(line);
        line++;
    }
    const char *end = strchr(line, '\n');
    assert_non_null(end);
    char *copy = strndup(line, (size_t)(end - line));
    cJSON *json = cJSON_Parse(copy);
    if (!json) fail_msg("not JSON: %s", copy);
    free(copy);
    return json;
}

static int count_lines(const char *text) {
    int lines = 0;
    for (; *text; text++) lines += *text == '\n';
    return lines;
}

static glimpse_image *decode(const char *path) {
    glimpse_image *image = NULL;
    if (glimpse_image_load_file(path, NULL, &image)) fail_msg("%s: %s", path, glimpse_last_error());
    return image;
}

/* A word's grid: rows × columns of the grid size, summing to 1. */
static void check_grid(const cJSON *grid, int rows, int columns) {
    assert_int_equal(cJSON_GetArraySize(grid), rows);
    double sum = 0;
    const cJSON *row, *value;
    cJSON_ArrayForEach(row, grid) {
        assert_int_equal(cJSON_GetArraySize(row), columns);
        cJSON_ArrayForEach(value, row) sum += value->valuedouble;
    }
    assert_true(fabs(sum - 1) < 1e-5);
}

/* The sheet's size for `panels` square panels. */
static void check_sheet(const char *path, int panels) {
    glimpse_image *sheet = decode(path);
    int columns = panels < 6 ? panels : 6, rows = (panels + 5) / 6;
    assert_int_equal(glimpse_image_width(sheet), columns * CELL_WIDTH);
    assert_int_equal(glimpse_image_height(sheet), rows * CELL_HEIGHT);
    glimpse_image_free(sheet);
}

/* The "ids" of two JSON lines are the same list. */
static void expect_same_ids(const cJSON *line, const cJSON *expected) {
    char *ids = cJSON_PrintUnformatted(cJSON_GetObjectItem(line, "ids"));
    char *want_ids = cJSON_PrintUnformatted(cJSON_GetObjectItem(expected, "ids"));
    assert_string_equal(ids, want_ids);
    free(ids), free(want_ids);
}

/* OUT/astronaut.png is a sheet of `panels` panels; OUT/astronaut.attention.safetensors, opened (caller closes). */
static safetensors *astronaut_outputs(const char *out, int panels) {
    char path[600];
    snprintf(path, sizeof path, "%s/astronaut.png", out);
    check_sheet(path, panels);
    snprintf(path, sizeof path, "%s/astronaut.attention.safetensors", out);
    safetensors *tensors = NULL;
    if (safetensors_open(path, &tensors)) fail_msg("%s: %s", path, glimpse_last_error());
    return tensors;
}

static void test_help_and_usage(void **state) {
    (void)state;
    result r = glimpse("explain", "--help", NULL);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "rollout"));
    assert_non_null(strstr(r.out, "--html FILE"));
    assert_non_null(strstr(r.out, "--beams N")); /* the caption options apply */
    assert_non_null(strstr(r.out, "inferno"));
    assert_non_null(strstr(r.out, "-q, --question")); /* BLIP-2's answers, and its convention */
    assert_non_null(strstr(r.out, "sum over the queries"));
    result_free(&r);
    r = glimpse("--help", NULL);
    assert_non_null(strstr(r.out, "explain"));
    result_free(&r);
    r = glimpse("explain", "-m", DEMO_CAPTION, PICTURES "00000.png", NULL); /* no --out */
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "--out"));
    result_free(&r);
    r = glimpse("explain", "-m", DEMO_CAPTION, "-t", "a red circle", "--out", "/tmp", PICTURES "00000.png", NULL);
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "drop -t"));
    result_free(&r);
    r = glimpse("explain", "-m", DEMO_CLIP, "--layer", "x", "--out", "/tmp", PICTURES "00000.png", NULL);
    assert_int_equal(r.status, 2);
    result_free(&r);
    r = glimpse("explain", "-m", DEMO_CLIP, "--layer", "7", "--out", "/tmp", PICTURES "00000.png", NULL);
    assert_int_equal(r.status, 1); /* the demo CLIP has 3 layers: the library says so */
    assert_non_null(strstr(r.err, "layer 7"));
    result_free(&r);
}

/* The caption's words in `line` (a line of explain --json): each grid rows × columns summing to 1, each word in
 * the caption or answer `text`; BLIP-2's with `queries` weights summing to 1. Returns how many. */
static int check_words(const cJSON *line, const char *text, int rows, int columns, int queries) {
    const cJSON *word;
    int count = 0;
    cJSON_ArrayForEach(word, cJSON_GetObjectItem(line, "words")) {
        check_grid(cJSON_GetObjectItem(word, "grid"), rows, columns);
        assert_non_null(strstr(text, cJSON_GetObjectItem(word, "word")->valuestring));
        const cJSON *weights = cJSON_GetObjectItem(word, "queries"), *weight;
        assert_int_equal(weights ? cJSON_GetArraySize(weights) : 0, queries);
        double sum = 0;
        cJSON_ArrayForEach(weight, weights) sum += weight->valuedouble;
        if (queries) assert_true(fabs(sum - 1) < 1e-5);
        count++;
    }
    return count;
}

/* The two captioners on byte-level BPE: ViT-GPT2's caption and BLIP-2's answer are `glimpse caption`'s and
 * `glimpse ask`'s, their words are mapped, the raw tensors have the shapes --help states; -q is BLIP-2's alone. */
static void test_vit_gpt2_and_blip2(void **state) {
    (void)state;
    if (!fixtures_folder()) skip();
    char *picture = fixture_path("images/astronaut.png"), *vit_gpt2 = fixture_path("vit-gpt2-tiny");
    char *blip2 = fixture_path("blip2-opt-tiny"), *out = scratch_folder(), path[600];
    result r = glimpse("explain", "-m", vit_gpt2, "--json", "--raw", "--raw-vision", "--out", out, picture, NULL);
    result want = glimpse("caption", "-m", vit_gpt2, "--json", picture, NULL);
    assert_int_equal(r.status, 0);
    assert_int_equal(want.status, 0);
    cJSON *line = json_line(r.out, 0), *expected = json_line(want.out, 0);
    const char *caption = cJSON_GetObjectItem(expected, "caption")->valuestring;
    assert_string_equal(cJSON_GetObjectItem(line, "caption")->valuestring, caption);
    expect_same_ids(line, expected);
    int words = check_words(line, caption, 5, 5, 0);
    assert_true(words >= 1);
    safetensors *tensors = astronaut_outputs(out, words + 1);
    size_t n = (size_t)cJSON_GetArraySize(cJSON_GetObjectItem(line, "ids"));
    size_t want_cross[4] = {2, 3, n, 26}, want_self[4] = {2, 3, n, n}, want_encoder[4] = {2, 5, 26, 26};
    assert_memory_equal(safetensors_find(tensors, "cross_attentions")->shape, want_cross, sizeof want_cross);
    assert_memory_equal(safetensors_find(tensors, "self_attentions")->shape, want_self, sizeof want_self);
    assert_memory_equal(safetensors_find(tensors, "encoder_attentions")->shape, want_encoder, sizeof want_encoder);
    safetensors_close(tensors);
    cJSON_Delete(line), cJSON_Delete(expected);
    result_free(&r), result_free(&want);

    const char *question = "what is in the picture?";
    r = glimpse("explain", "-m", blip2, "--json", "-q", question, "--out", out, picture, NULL);
    want = glimpse("ask", "-m", blip2, "--json", "-q", question, picture, NULL);
    assert_int_equal(r.status, 0);
    assert_int_equal(want.status, 0);
    line = json_line(r.out, 0), expected = json_line(want.out, 0);
    const char *answer = cJSON_GetObjectItem(expected, "answer")->valuestring;
    assert_string_equal(cJSON_GetObjectItem(line, "question")->valuestring, question);
    assert_string_equal(cJSON_GetObjectItem(line, "answer")->valuestring, answer);
    expect_same_ids(line, expected);
    words = check_words(line, answer, 4, 4, 6);
    const cJSON *maps = cJSON_GetObjectItem(line, "maps");
    assert_int_equal(cJSON_GetArraySize(maps), 1); /* what the queries looked at */
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(maps, 0), "kind")->valuestring, "queries");
    check_grid(cJSON_GetObjectItem(cJSON_GetArrayItem(maps, 0), "grid"), 4, 4);
    snprintf(path, sizeof path, "%s/astronaut.png", out);
    check_sheet(path, words + 2);
    cJSON_Delete(line), cJSON_Delete(expected);
    result_free(&r), result_free(&want);

    /* -q is BLIP-2's; -t and -q do not mix; --raw-vision goes with --raw */
    const char *usage[][4] = {{vit_gpt2, "-q", question, "-q needs"},
                              {blip2, "-t", "a cat", "drop -t"},
                              {blip2, "--raw-vision", "-q", "goes with --raw"}};
    for (int i = 0; i < 3; i++) {
        r = glimpse("explain", "-m", usage[i][0], usage[i][1], usage[i][2], "--out", out, picture, NULL);
        assert_int_equal(r.status, 2);
        assert_non_null(strstr(r.err, usage[i][3]));
        result_free(&r);
    }
    remove_tree(out);
    free(out), free(picture), free(vit_gpt2), free(blip2);
}

static void test_caption(void **state) {
    (void)state;
    char *out = scratch_folder(), bad[600], raw[600], png[600];
    snprintf(bad, sizeof bad, "%s/broken.png", out);
    FILE *file = fopen(bad, "w");
    fputs("not a picture", file);
    fclose(file);
    result r = glimpse("explain", "-m", DEMO_CAPTION, "--beams", "1", "--json", "--raw", "--out", out,
                       PICTURES "00000.png", bad, PICTURES "00003.png", NULL);
    assert_int_equal(r.status, 1); /* the broken file fails, the others are explained */
    assert_non_null(strstr(r.err, "broken.png"));
    assert_int_equal(count_lines(r.out), 2);
    result caption = glimpse("caption", "-m", DEMO_CAPTION, "--beams", "1", "--json", PICTURES "00000.png",
                             PICTURES "00003.png", NULL);
    assert_int_equal(caption.status, 0);
    const char *stems[2] = {"00000", "00003"};
    for (int i = 0; i < 2; i++) {
        cJSON *line = json_line(r.out, i), *want = json_line(caption.out, i);
        assert_string_equal(cJSON_GetObjectItem(line, "caption")->valuestring,
                            cJSON_GetObjectItem(want, "caption")->valuestring);
        char *ids = cJSON_PrintUnformatted(cJSON_GetObjectItem(line, "ids"));
        char *want_ids = cJSON_PrintUnformatted(cJSON_GetObjectItem(want, "ids"));
        assert_string_equal(ids, want_ids);
        free(ids), free(want_ids);
        const cJSON *words = cJSON_GetObjectItem(line, "words"), *word;
        int count = 0;
        cJSON_ArrayForEach(word, words) { /* every word of the caption, in order */
            check_grid(cJSON_GetObjectItem(word, "grid"), 4, 4);
            assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(word, "tokens")), 1);
            assert_non_null(strstr(cJSON_GetObjectItem(want, "caption")->valuestring,
                                   cJSON_GetObjectItem(word, "word")->valuestring));
            count++;
        }
        assert_int_equal(count, cJSON_GetArraySize(cJSON_GetObjectItem(want, "ids")) - 2); /* [DEC], [SEP] */
        snprintf(png, sizeof png, "%s/%s.png", out, stems[i]);
        assert_string_equal(cJSON_GetObjectItem(line, "png")->valuestring, png);
        check_sheet(png, count + 1);
        /* the raw tensors: [layers, heads, seq_len, image_tokens] and [layers, heads, seq_len, seq_len] */
        snprintf(raw, sizeof raw, "%s/%s.attention.safetensors", out, stems[i]);
        safetensors *tensors = NULL;
        if (safetensors_open(raw, &tensors)) fail_msg("%s: %s", raw, glimpse_last_error());
        const tensor_entry *cross = safetensors_find(tensors, "cross_attentions");
        const tensor_entry *self = safetensors_find(tensors, "self_attentions");
        assert_non_null(cross);
        assert_non_null(self);
        size_t n = (size_t)cJSON_GetArraySize(cJSON_GetObjectItem(line, "ids"));
        size_t want_cross[4] = {2, 4, n, 17}, want_self[4] = {2, 4, n, n};
        assert_int_equal(cross->rank, 4);
        assert_memory_equal(cross->shape, want_cross, sizeof want_cross);
        assert_memory_equal(self->shape, want_self, sizeof want_self);
        const float *rows = (const float *)cross->data; /* every row sums to 1 */
        for (size_t row = 0; row < 2 * 4 * n; row++) {
            double sum = 0;
            for (size_t j = 0; j < 17; j++) sum += rows[row * 17 + j];
            assert_true(fabs(sum - 1) < 1e-5);
        }
        safetensors_close(tensors);
        cJSON_Delete(line), cJSON_Delete(want);
    }
    result_free(&caption);
    result_free(&r);
    remove_tree(out);
    free(out);
}

/* Two texts against one picture with the demo CLIP: STEM.0.png and STEM.1.png, and the scores rank gives. */
static void test_clip(void **state) {
    (void)state;
    char *out = scratch_folder(), png[600];
    result r = glimpse("explain", "-m", DEMO_CLIP, "-t", "a green square", "-t", "a red triangle", "--json", "--out",
                       out, PICTURES "00000.png", NULL);
    assert_int_equal(r.status, 0);
    assert_int_equal(count_lines(r.out), 2);
    const char *texts[2] = {"a green square", "a red triangle"};
    for (int t = 0; t < 2; t++) {
        cJSON *line = json_line(r.out, t);
        assert_string_equal(cJSON_GetObjectItem(line, "text")->valuestring, texts[t]);
        result rank = glimpse("rank", "-m", DEMO_CLIP, "-t", texts[t], "--json", PICTURES "00000.png", NULL);
        cJSON *ranked = json_line(rank.out, 0);
        double score = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(ranked, "results"), 0), "score")
                           ->valuedouble;
        assert_true(fabs(cJSON_GetObjectItem(line, "score")->valuedouble - score) <= 1e-5 * fmax(1, fabs(score)));
        const cJSON *maps = cJSON_GetObjectItem(line, "maps");
        assert_int_equal(cJSON_GetArraySize(maps), 2);
        assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(maps, 0), "kind")->valuestring, "rollout");
        assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(maps, 1), "kind")->valuestring, "occlusion");
        check_grid(cJSON_GetObjectItem(cJSON_GetArrayItem(maps, 0), "grid"), 4, 4);
        snprintf(png, sizeof png, "%s/00000.%d.png", out, t);
        check_sheet(png, 3);
        cJSON_Delete(ranked);
        result_free(&rank);
        cJSON_Delete(line);
    }
    result_free(&r);
    remove_tree(out);
    free(out);
}

/* ITM with the fixture model: the probability rank gives, a map per word and the whole text's. */
static void test_itm(void **state) {
    (void)state;
    if (!fixtures_folder()) skip();
    char *model = fixture_path("blip-itm-tiny"), *picture = fixture_path("images/chelsea.png");
    char *out = scratch_folder();
    const char *text = "Ünïcödé, punctuation... and CAPS!";
    result r = glimpse("explain", "-m", model, "-t", text, "--json", "--raw", "--out", out, picture, NULL);
    assert_int_equal(r.status, 0);
    cJSON *line = json_line(r.out, 0);
    result rank = glimpse("rank", "-m", model, "-t", text, "--json", picture, NULL);
    cJSON *ranked = json_line(rank.out, 0);
    double score =
        cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(ranked, "results"), 0), "score")->valuedouble;
    assert_true(fabs(cJSON_GetObjectItem(line, "probability")->valuedouble - score) <= 1e-6);
    const cJSON *words = cJSON_GetObjectItem(line, "words"), *word;
    bool pieces = false;
    cJSON_ArrayForEach(word, words) pieces |= cJSON_GetArraySize(cJSON_GetObjectItem(word, "tokens")) > 1;
    assert_true(pieces); /* "Ünïcödé" is word pieces joined */
    const cJSON *maps = cJSON_GetObjectItem(line, "maps");
    assert_int_equal(cJSON_GetArraySize(maps), 1);
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(maps, 0), "kind")->valuestring, "text");
    cJSON_Delete(ranked), cJSON_Delete(line);
    result_free(&rank);
    result_free(&r);
    r = glimpse("explain", "-m", model, "--out", out, picture, NULL); /* ITM explains a match: it needs -t */
    assert_int_equal(r.status, 2);
    result_free(&r);
    remove_tree(out);
    free(out), free(model), free(picture);
}

/* ------------------------------------------------------------- the browser */

/* Debian's chromium, or $GLIMPSE_CHROMIUM; NULL when there is none. */
static const char *chromium(void) {
    const char *given = getenv("GLIMPSE_CHROMIUM");
    if (given && access(given, X_OK) == 0) return given;
    return access("/usr/bin/chromium", X_OK) == 0 ? "/usr/bin/chromium" : NULL;
}

/* Runs headless chromium on the page with the given extra arguments (NULL-terminated); fills r. */
static result browse(const char *profile, const char *first, ...) {
    const char *argv[64] = {chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                            "--hide-scrollbars", "--force-device-scale-factor=1", "--enable-logging=stderr", "--v=0"};
    char profile_option[600];
    snprintf(profile_option, sizeof profile_option, "--user-data-dir=%s", profile);
    argv[9] = profile_option;
    va_list args;
    va_start(args, first);
    result r = run_with(argv, 10, first, args);
    va_end(args);
    return r;
}

static void test_html_in_chromium(void **state) {
    (void)state;
    if (!chromium()) {
        fprintf(stderr, "skipped: no chromium (apt-get install chromium, or set GLIMPSE_CHROMIUM)\n");
        skip();
    }
    char *out = scratch_folder(), page[600], url[700], shot[600], sheet_path[600], profile[600];
    snprintf(page, sizeof page, "%s/page.html", out);
    snprintf(shot, sizeof shot, "%s/shot.png", out);
    snprintf(sheet_path, sizeof sheet_path, "%s/00000.png", out);
    snprintf(profile, sizeof profile, "%s/profile", out);
    result r = glimpse("explain", "-m", DEMO_CAPTION, "--json", "--out", out, "--html", page, PICTURES "00000.png",
                       PICTURES "00003.png", NULL);
    assert_int_equal(r.status, 0);
    int buttons = 0;
    for (int i = 0; i < 2; i++) {
        cJSON *line = json_line(r.out, i);
        buttons += cJSON_GetArraySize(cJSON_GetObjectItem(line, "words")) + 1; /* and the picture's */
        cJSON_Delete(line);
    }
    result_free(&r);

    /* every button, hovered and clicked, shows its own map; nothing on the console */
    snprintf(url, sizeof url, "file://%s#selftest", page);
    r = browse(profile, "--dump-dom", url, NULL);
    assert_int_equal(r.status, 0);
    char expected[64];
    snprintf(expected, sizeof expected, "<pre id=\"selftest\">switched %d of %d</pre>", buttons, buttons);
    if (!strstr(r.out, expected)) fail_msg("the page's self-test did not report \"%s\"", expected);
    if (strstr(r.err, ":CONSOLE")) fail_msg("console messages: %s", strstr(r.err, ":CONSOLE"));
    result_free(&r);

    /* the page showing the third word's map: its top-left panel is the sheet's fourth cell, pixel for pixel up to
     * the browser's rounding */
    snprintf(url, sizeof url, "file://%s#show=s0-m3", page);
    char screenshot_option[700];
    snprintf(screenshot_option, sizeof screenshot_option, "--screenshot=%s", shot);
    r = browse(profile, screenshot_option, "--window-size=800,600", url, NULL);
    assert_int_equal(r.status, 0);
    result_free(&r);
    glimpse_image *screen = decode(shot), *sheet = decode(sheet_path);
    const uint8_t *a = glimpse_image_pixels(screen), *b = glimpse_image_pixels(sheet);
    size_t a_stride = (size_t)glimpse_image_width(screen) * 3, b_stride = (size_t)glimpse_image_width(sheet) * 3;
    double total = 0;
    int largest = 0;
    for (size_t y = 0; y < CELL_HEIGHT; y++)
        for (size_t x = 0; x < CELL_WIDTH * 3; x++) {
            int d = abs((int)a[y * a_stride + x] - (int)b[y * b_stride + 3 * CELL_WIDTH * 3 + x]);
            total += d;
            if (d > largest) largest = d;
        }
    double mean = total / (CELL_HEIGHT * CELL_WIDTH * 3);
    fprintf(stderr, "screenshot against the sheet's panel: mean difference %.3f, largest %d (of 255)\n", mean,
            largest);
    assert_true(mean < 1.0 && largest <= 8);
    glimpse_image_free(screen), glimpse_image_free(sheet);
    remove_tree(out);
    free(out);
}

/* LLaVA (a caption from Llama, an answer from Qwen2) and Florence-2: the explained caption or answer is the one
 * `glimpse caption` / `glimpse ask` gives, every word has a map on the family's grid, the sheet holds them, and
 * --raw writes the family's tensors. */
static void test_llava_and_florence2(void **state) {
    (void)state;
    if (!fixtures_folder()) skip();
    static const struct {
        const char *fixture, *question; /* question NULL: a caption */
        int side;
        const char *raw;
        bool merged; /* the raw tensor's rows: the merged prompt and the answer (LLaVA), else the ids */
    } runs[] = {{"llava-llama-tiny", NULL, 4, "self_attentions", true},
                {"llava-qwen2-tiny", "What is this?", 4, "self_attentions", true},
                {"florence2-tiny", NULL, 3, "cross_attentions", false}};
    char *picture = fixture_path("images/astronaut.png"), *out = scratch_folder();
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        char *model = fixture_path(runs[i].fixture);
        const char *q = runs[i].question;
        result r = q ? glimpse("explain", "-m", model, "--json", "--raw", "-q", q, "--out", out, picture, NULL)
                     : glimpse("explain", "-m", model, "--json", "--raw", "--out", out, picture, NULL);
        result want = q ? glimpse("ask", "-m", model, "--json", "-q", q, picture, NULL)
                        : glimpse("caption", "-m", model, "--json", picture, NULL);
        if (r.status) fail_msg("%s: %s", runs[i].fixture, r.err);
        assert_int_equal(want.status, 0);
        cJSON *line = json_line(r.out, 0), *expected = json_line(want.out, 0);
        const char *key = q ? "answer" : "caption", *text = cJSON_GetObjectItem(expected, key)->valuestring;
        assert_string_equal(cJSON_GetObjectItem(line, key)->valuestring, text);
        expect_same_ids(line, expected);
        int words = check_words(line, text, runs[i].side, runs[i].side, 0);
        assert_true(words >= 1);
        safetensors *tensors = astronaut_outputs(out, words + 1);
        const tensor_entry *t = safetensors_find(tensors, runs[i].raw);
        assert_non_null(t);
        size_t n = (size_t)cJSON_GetArraySize(cJSON_GetObjectItem(line, "ids"));
        /* (a caption that filled the decoder's positions runs without its last id, which chose nothing) */
        assert_true(runs[i].merged ? t->shape[2] > n : t->shape[2] == n || t->shape[2] + 1 == n);
        safetensors_close(tensors);
        cJSON_Delete(line), cJSON_Delete(expected);
        result_free(&r), result_free(&want);
        free(model);
    }
    remove_tree(out);
    free(out), free(picture);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_help_and_usage), cmocka_unit_test(test_caption),
                                       cmocka_unit_test(test_vit_gpt2_and_blip2),
                                       cmocka_unit_test(test_llava_and_florence2),
                                       cmocka_unit_test(test_clip), cmocka_unit_test(test_itm),
                                       cmocka_unit_test(test_html_in_chromium)};
    return cmocka_run_group_tests_name("glimpse explain", tests, NULL, NULL);
}
