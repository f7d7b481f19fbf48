/* test_cli.c — the glimpse program as a user meets it: help and usage
 * errors, JSON Lines that parse, results that match the reference, and every
 * bad input (missing, empty, not an image, truncated, too large, a directory;
 * missing, corrupt or foreign model folders; tensors missing) named on
 * stderr while the other inputs are still processed. */
#define _GNU_SOURCE /* memmem */
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include <zlib.h>

#include "core/file.h"
#include "tests/support.h"

typedef struct run_result {
    int status;
    char *out, *err;
} run_result;

/* Runs the glimpse binary with the arguments first, then args up to a NULL. */
static run_result run_arguments(const char *first, va_list args) {
    const char *argv[64] = {GLIMPSE_BINARY};
    int argc = 1;
    for (const char *a = first; a && argc < 63; a = va_arg(args, const char *)) argv[argc++] = a;
    argv[argc] = NULL;
    run_result result;
    result.status = run_program(argv, &result.out, &result.err);
    return result;
}

/* Runs the glimpse binary with the given arguments (NULL-terminated). */
static run_result run(const char *first, ...) {
    va_list args;
    va_start(args, first);
    run_result result = run_arguments(first, args);
    va_end(args);
    return result;
}

static void result_free(run_result *r) {
    free(r->out);
    free(r->err);
}

/* Runs the glimpse binary (arguments NULL-terminated) and checks its exit
 * status and, unless in_stderr is NULL, a text its stderr holds. */
static void expect_run(int status, const char *in_stderr, const char *first, ...) {
    va_list args;
    va_start(args, first);
    run_result r = run_arguments(first, args);
    va_end(args);
    assert_int_equal(r.status, status);
    if (in_stderr) assert_non_null(strstr(r.err, in_stderr));
    result_free(&r);
}

static int count_lines(const char *text) {
    int lines = 0;
    for (const char *p = text; *p; p++) lines += *p == '\n';
    return lines;
}

/* Every stdout line must be a JSON object; returns them as an array. */
static cJSON *parse_json_lines(const char *text) {
    cJSON *all = cJSON_CreateArray();
    const char *line = text;
    while (*line) {
        const char *end = strchr(line, '\n');
        if (!end) fail_msg("JSON output does not end with a newline");
        cJSON *object = cJSON_ParseWithLength(line, (size_t)(end - line));
        if (!cJSON_IsObject(object)) fail_msg("stdout line is not a JSON object: %.*s", (int)(end - line), line);
        cJSON_AddItemToArray(all, object);
        line = end + 1;
    }
    return all;
}

static void test_help_and_usage(void **state) {
    (void)state;
    run_result r = run("--help", NULL);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "rank"));
    result_free(&r);
    r = run("--version", NULL);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, GLIMPSE_VERSION_STRING));
    result_free(&r);
    const char *commands[] = {"embed", "rank", "classify", "info"};
    for (int i = 0; i < 4; i++) {
        r = run(commands[i], "--help", NULL);
        assert_int_equal(r.status, 0);
        assert_non_null(strstr(r.out, "Usage: glimpse"));
        assert_non_null(strstr(r.out, "--threads"));
        result_free(&r);
    }
    expect_run(2, "unknown command", "frobnicate", NULL);
    r = run("rank", "-m", "x", "image.jpg", NULL);
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "-t TEXT"));
    assert_string_equal(r.out, "");
    result_free(&r);
    expect_run(2, "no model given", "rank", "-t", "a cat", "image.jpg", NULL);
    expect_run(2, "--top", "rank", "-m", "x", "-t", "a", "--top", "zero", "image.jpg", NULL);
    expect_run(2, "{}", "classify", "-m", "x", "-l", "cat", "--template", "no hole", "image.jpg", NULL);
}

static void test_missing_models(void **state) {
    (void)state;
    run_result r = run("rank", "-m", "/nonexistent/model", "-t", "a cat", "photo.jpg", NULL);
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, "/nonexistent/model"));
    assert_non_null(strstr(r.err, "does not exist"));
    assert_string_equal(r.out, "");
    result_free(&r);
    setenv("HF_HUB_CACHE", "/nonexistent-cache", 1);
    r = run("info", "-m", "openai/clip-vit-base-patch32", NULL);
    unsetenv("HF_HUB_CACHE");
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, "huggingface-cli download openai/clip-vit-base-patch32"));
    result_free(&r);
}

#define REQUIRE_FIXTURES()                                                                                             \
    if (!fixtures_folder()) skip()

static char *fixture(const char *relative) { return fixture_path(relative); }

static void test_rank_goes_on_past_bad_inputs(void **state) {
    (void)state;
    REQUIRE_FIXTURES();
    char *model = fixture("clip-tiny"), *good1 = fixture("images/chelsea.png"), *good2 = fixture("images/rocket.jpg");
    char *empty = fixture("images/empty.jpg"), *text = fixture("images/not_an_image.png");
    char *truncated = fixture("images/truncated.jpg");
    char folder[] = "/tmp/glimpse-no-images-XXXXXX"; /* a folder is walked: one without images */
    assert_non_null(mkdtemp(folder));
    run_result r = run("rank", "-m", model, "-t", "a cat", "-t", "a rocket", "--json", good1, empty, "/nonexistent.jpg",
                       text, truncated, folder, good2, NULL);
    assert_int_equal(r.status, 1);
    cJSON *lines = parse_json_lines(r.out);
    assert_int_equal(cJSON_GetArraySize(lines), 2);
    for (int t = 0; t < 2; t++) {
        const cJSON *line = cJSON_GetArrayItem(lines, t);
        assert_string_equal(cJSON_GetObjectItem(line, "text")->valuestring, t ? "a rocket" : "a cat");
        const cJSON *results = cJSON_GetObjectItem(line, "results");
        assert_int_equal(cJSON_GetArraySize(results), 2);
        double first = cJSON_GetObjectItem(cJSON_GetArrayItem(results, 0), "score")->valuedouble;
        double second = cJSON_GetObjectItem(cJSON_GetArrayItem(results, 1), "score")->valuedouble;
        assert_true(first >= second);
    }
    /* one line per bad input, each naming it */
    assert_int_equal(count_lines(r.err), 5);
    assert_non_null(strstr(r.err, "empty.jpg: empty file"));
    assert_non_null(strstr(r.err, "/nonexistent.jpg: No such file"));
    assert_non_null(strstr(r.err, "not_an_image.png: not an image"));
    assert_non_null(strstr(r.err, "truncated.jpg: broken JPEG"));
    assert_non_null(strstr(r.err, "no image files in this folder"));
    rmdir(folder);
    cJSON_Delete(lines);
    result_free(&r);
    /* --top */
    r = run("rank", "-m", model, "-t", "a cat", "--json", "--top", "1", good1, good2, NULL);
    assert_int_equal(r.status, 0);
    lines = parse_json_lines(r.out);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(cJSON_GetArrayItem(lines, 0), "results")), 1);
    cJSON_Delete(lines);
    result_free(&r);
    free(model), free(good1), free(good2), free(empty), free(text), free(truncated);
}

/* The CLI's scores for text `text` of fixtures/NAME are the reference logits
 * (CLIP's logit_scale x cosine; SigLIP's with its logit_bias). */
static void expect_rank_scores(const char *name, int text_index) {
    char relative[256];
    snprintf(relative, sizeof relative, "%s/expected.json", name);
    cJSON *expected = fixture_json(relative);
    char *model = fixture(name);
    const cJSON *images = cJSON_GetObjectItem(expected, "images"), *texts = cJSON_GetObjectItem(expected, "texts");
    char *paths[16];
    for (int i = 0; i < cJSON_GetArraySize(images); i++) {
        snprintf(relative, sizeof relative, "images/%s", cJSON_GetArrayItem(images, i)->valuestring);
        paths[i] = fixture(relative);
    }
    const char *text = cJSON_GetArrayItem(texts, text_index)->valuestring;
    run_result r = run("rank", "-m", model, "-t", text, "--json", "--threads", "1", paths[0], paths[1], paths[2],
                       paths[3], paths[4], paths[5], paths[6], paths[7], paths[8], NULL);
    assert_int_equal(r.status, 0);
    cJSON *lines = parse_json_lines(r.out);
    const cJSON *results = cJSON_GetObjectItem(cJSON_GetArrayItem(lines, 0), "results");
    assert_int_equal(cJSON_GetArraySize(results), 9);
    const cJSON *logits = cJSON_GetObjectItem(expected, "logits_per_image");
    const cJSON *item;
    cJSON_ArrayForEach(item, results) {
        const char *path = cJSON_GetObjectItem(item, "image")->valuestring;
        int i = 0;
        while (strcmp(paths[i], path) != 0) i++;
        double want = cJSON_GetArrayItem(cJSON_GetArrayItem(logits, i), text_index)->valuedouble;
        double got = cJSON_GetObjectItem(item, "score")->valuedouble;
        if (fabs(got - want) > 1e-4 * (fabs(want) > 1 ? fabs(want) : 1))
            fail_msg("%s: score %g, reference %g", path, got, want);
    }
    cJSON_Delete(lines);
    result_free(&r);
    for (int i = 0; i < 9; i++) free(paths[i]);
    free(model);
    cJSON_Delete(expected);
}

static void test_rank_scores_match_reference(void **state) {
    (void)state;
    REQUIRE_FIXTURES();
    expect_rank_scores("clip-tiny", 5); /* accents and an emoji */
    expect_rank_scores("siglip-tiny", 5);
}

static void test_embed_and_classify_json(void **state) {
    (void)state;
    REQUIRE_FIXTURES();
    char *model = fixture("clip-tiny"), *cat = fixture("images/chelsea.png");
    safetensors *reference = fixture_tensors("clip-tiny/reference.safetensors");
    run_result r = run("embed", "-m", model, "--json", "-i", cat, "-t", "a cup of coffee", NULL);
    assert_int_equal(r.status, 0);
    cJSON *lines = parse_json_lines(r.out);
    assert_int_equal(cJSON_GetArraySize(lines), 2);
    const cJSON *image_line = cJSON_GetArrayItem(lines, 0), *text_line = cJSON_GetArrayItem(lines, 1);
    assert_non_null(cJSON_GetObjectItem(image_line, "image"));
    assert_string_equal(cJSON_GetObjectItem(text_line, "text")->valuestring, "a cup of coffee");
    const float *image_embeds = fixture_tensor(reference, "image_embeds", 9 * 24) + 1 * 24; /* chelsea is image 1 */
    const float *text_embeds = fixture_tensor(reference, "text_embeds", 9 * 24) + 2 * 24;   /* text 2 */
    for (int d = 0; d < 24; d++) {
        assert_float_equal(cJSON_GetArrayItem(cJSON_GetObjectItem(image_line, "embedding"), d)->valuedouble,
                           image_embeds[d], 1e-4);
        assert_float_equal(cJSON_GetArrayItem(cJSON_GetObjectItem(text_line, "embedding"), d)->valuedouble,
                           text_embeds[d], 1e-4);
    }
    cJSON_Delete(lines);
    result_free(&r);
    r = run("classify", "-m", model, "-l", "cat", "-l", "coffee", "-l", "rocket", "--json", cat, NULL);
    assert_int_equal(r.status, 0);
    lines = parse_json_lines(r.out);
    const cJSON *labels = cJSON_GetObjectItem(cJSON_GetArrayItem(lines, 0), "labels");
    assert_int_equal(cJSON_GetArraySize(labels), 3);
    double sum = 0, previous = 2;
    const cJSON *label;
    cJSON_ArrayForEach(label, labels) {
        double p = cJSON_GetObjectItem(label, "probability")->valuedouble;
        assert_true(p <= previous);
        previous = p;
        sum += p;
    }
    assert_float_equal(sum, 1.0, 1e-5);
    cJSON_Delete(lines);
    result_free(&r);
    safetensors_close(reference);
    free(model), free(cat);
}

/* One classify line's probabilities by label (labels[0 .. count)), after checking what the line says of them. */
static void read_classify_line(const cJSON *line, const char *kind, bool sums_to_one, const char *const *labels,
                               size_t count, double *probabilities) {
    assert_string_equal(cJSON_GetObjectItem(line, "probabilities")->valuestring, kind);
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(line, "sum_to_one")) == sums_to_one);
    const cJSON *item;
    double sum = 0;
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(line, "labels")), count);
    cJSON_ArrayForEach(item, cJSON_GetObjectItem(line, "labels")) {
        size_t l = 0;
        while (l < count && strcmp(labels[l], cJSON_GetObjectItem(item, "label")->valuestring) != 0) l++;
        assert_true(l < count);
        sum += probabilities[l] = cJSON_GetObjectItem(item, "probability")->valuedouble;
    }
    if (sums_to_one) assert_float_equal(sum, 1.0, 1e-5);
}

/* SigLIP on the command line: embeddings, sigmoid probabilities (and the
 * softmax on request), info, as the reference computed them. */
static void test_siglip_commands(void **state) {
    (void)state;
    REQUIRE_FIXTURES();
    char *model = fixture("siglip-tiny"), *cat = fixture("images/chelsea.png");
    cJSON *expected = fixture_json("siglip-tiny/expected.json");
    safetensors *reference = fixture_tensors("siglip-tiny/reference.safetensors");
    const char *labels[3];
    for (int l = 0; l < 3; l++) labels[l] = cJSON_GetArrayItem(cJSON_GetObjectItem(expected, "texts"), l)->valuestring;
    run_result r = run("embed", "-m", model, "--json", "-i", cat, "-t", labels[2], NULL);
    assert_int_equal(r.status, 0);
    cJSON *lines = parse_json_lines(r.out);
    const float *embeds[2] = {fixture_tensor(reference, "image_embeds", 9 * 40) + 1 * 40, /* chelsea is image 1 */
                              fixture_tensor(reference, "text_embeds", 11 * 40) + 2 * 40};
    for (int line = 0; line < 2; line++)
        for (int d = 0; d < 40; d++)
            assert_float_equal(
                cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetArrayItem(lines, line), "embedding"), d)->valuedouble,
                embeds[line][d], 1e-4);
    cJSON_Delete(lines);
    result_free(&r);
    /* the labels as the fixture's texts ("{}"): each probability is the reference's sigmoid */
    double probabilities[3];
    const cJSON *reference_row = cJSON_GetArrayItem(cJSON_GetObjectItem(expected, "probs_per_image"), 1);
    r = run("classify", "-m", model, "--template", "{}", "-l", labels[0], "-l", labels[1], "-l", labels[2], "--json",
            cat, NULL);
    assert_int_equal(r.status, 0);
    lines = parse_json_lines(r.out);
    read_classify_line(cJSON_GetArrayItem(lines, 0), "sigmoid", false, labels, 3, probabilities);
    for (int l = 0; l < 3; l++)
        assert_float_equal(probabilities[l], cJSON_GetArrayItem(reference_row, l)->valuedouble, 1e-4);
    cJSON_Delete(lines);
    result_free(&r);
    r = run("classify", "-m", model, "--softmax", "-l", labels[0], "-l", labels[1], "-l", labels[2], "--json", cat,
            NULL);
    assert_int_equal(r.status, 0);
    lines = parse_json_lines(r.out);
    read_classify_line(cJSON_GetArrayItem(lines, 0), "softmax", true, labels, 3, probabilities);
    cJSON_Delete(lines);
    result_free(&r);
    r = run("classify", "--help", NULL);
    assert_non_null(strstr(r.out, "do NOT sum to 1"));
    assert_non_null(strstr(r.out, "--softmax"));
    result_free(&r);
    r = run("info", "-m", model, "--json", NULL);
    assert_int_equal(r.status, 0);
    lines = parse_json_lines(r.out);
    const cJSON *info = cJSON_GetArrayItem(lines, 0);
    assert_string_equal(cJSON_GetObjectItem(info, "architecture")->valuestring, "SiglipModel");
    assert_float_equal(cJSON_GetObjectItem(info, "logit_bias")->valuedouble,
                       cJSON_GetObjectItem(expected, "logit_bias")->valuedouble, 1e-6);
    assert_int_equal(cJSON_GetObjectItem(info, "text_max_tokens")->valueint, 64);
    cJSON_Delete(lines);
    result_free(&r);
    safetensors_close(reference);
    cJSON_Delete(expected);
    free(model), free(cat);
}

/* A SigLIP index searches with SigLIP's scores, and an index takes one model: CLIP is refused, and the reverse. */
static void test_siglip_index(void **state) {
    (void)state;
    REQUIRE_FIXTURES();
    char *siglip = fixture("siglip-tiny"), *clip = fixture("clip-tiny");
    char *cat = fixture("images/chelsea.png"), *coffee = fixture("images/coffee.png");
    char folder[] = "/tmp/glimpse-siglip-index-XXXXXX";
    assert_non_null(mkdtemp(folder));
    char *siglip_db = file_join(folder, "siglip.db"), *clip_db = file_join(folder, "clip.db");
    expect_run(0, NULL, "index", "-m", siglip, "--db", siglip_db, cat, coffee, NULL);
    run_result r = run("search", "--db", siglip_db, "--json", "a cup of coffee", NULL);
    assert_int_equal(r.status, 0);
    cJSON *lines = parse_json_lines(r.out);
    const cJSON *results = cJSON_GetObjectItem(cJSON_GetArrayItem(lines, 0), "results");
    assert_int_equal(cJSON_GetArraySize(results), 2);
    cJSON *expected = fixture_json("siglip-tiny/expected.json"); /* "a cup of coffee" is text 2, coffee.png image 2 */
    double want = cJSON_GetArrayItem(cJSON_GetArrayItem(cJSON_GetObjectItem(expected, "logits_per_image"), 2), 2)
                      ->valuedouble;
    assert_non_null(strstr(cJSON_GetObjectItem(cJSON_GetArrayItem(results, 0), "image")->valuestring, "coffee.png"));
    assert_float_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(results, 0), "score")->valuedouble, want, 1e-4);
    cJSON_Delete(lines);
    result_free(&r);
    expect_run(1, "built with another model (SiglipModel/", "index", "-m", clip, "--db", siglip_db, cat, NULL);
    expect_run(1, "built with another model (SiglipModel/", "search", "-m", clip, "--db", siglip_db, "a cat", NULL);
    expect_run(0, NULL, "index", "-m", clip, "--db", clip_db, cat, NULL);
    expect_run(1, "built with another model (CLIPModel/", "index", "-m", siglip, "--db", clip_db, coffee, NULL);
    char command[512];
    snprintf(command, sizeof command, "rm -rf %s", folder);
    assert_int_equal(system(command), 0);
    cJSON_Delete(expected);
    free(siglip_db), free(clip_db), free(siglip), free(clip), free(cat), free(coffee);
}

static void copy_file(const char *from, const char *to, size_t limit) {
    uint8_t *bytes;
    size_t size;
    assert_int_equal(file_read_all(from, 1 << 28, &bytes, &size), GLIMPSE_STATUS_OK);
    FILE *f = fopen(to, "wb");
    fwrite(bytes, 1, size < limit ? size : limit, f);
    fclose(f);
    free(bytes);
}

/* A copy of clip-tiny in a temporary folder that the caller then damages. */
static char *copy_clip_tiny(void) {
    char *folder = strdup("/tmp/glimpse-model-XXXXXX");
    assert_non_null(mkdtemp(folder));
    const char *names[] = {"config.json", "model.safetensors", "vocab.json", "merges.txt", "preprocessor_config.json"};
    for (int i = 0; i < 5; i++) {
        char relative[128];
        snprintf(relative, sizeof relative, "clip-tiny/%s", names[i]);
        char *from = fixture(relative), *to = file_join(folder, names[i]);
        copy_file(from, to, SIZE_MAX);
        free(from), free(to);
    }
    return folder;
}

static void expect_model_error(const char *folder, const char *needle) {
    char *image = fixture("images/chelsea.png");
    run_result r = run("rank", "-m", folder, "-t", "a cat", image, NULL);
    assert_int_equal(r.status, 1);
    assert_string_equal(r.out, "");
    if (!strstr(r.err, needle)) fail_msg("stderr \"%s\" does not mention \"%s\"", r.err, needle);
    assert_int_equal(count_lines(r.err), 1);
    result_free(&r);
    free(image);
}

static void test_damaged_models(void **state) {
    (void)state;
    REQUIRE_FIXTURES();
    char *folder = copy_clip_tiny();
    char *weights = file_join(folder, "model.safetensors"), *config = file_join(folder, "config.json");
    char *original = fixture("clip-tiny/model.safetensors");
    /* truncated weights */
    copy_file(original, weights, 4096);
    expect_model_error(folder, "model.safetensors");
    /* a header length that lies */
    uint8_t *bytes;
    size_t size;
    assert_int_equal(file_read_all(original, 1 << 28, &bytes, &size), GLIMPSE_STATUS_OK);
    bytes[5] = 0x7f;
    FILE *f = fopen(weights, "wb");
    fwrite(bytes, 1, size, f);
    fclose(f);
    expect_model_error(folder, "header length");
    /* a tensor renamed away: never silently initialised */
    bytes[5] = 0;
    char *name = memmem(bytes, size, "\"logit_scale\"", 13);
    assert_non_null(name);
    name[11] = 'X';
    f = fopen(weights, "wb");
    fwrite(bytes, 1, size, f);
    fclose(f);
    expect_model_error(folder, "no tensor 'logit_scale'");
    name[11] = 'e';
    /* a shape the config does not imply */
    char *shape = memmem(bytes, size, "\"shape\":[24,48]", 15);
    if (shape) {
        shape[10] = '3'; /* [24,48] -> [34,48] breaks the byte count too: caught either way */
        f = fopen(weights, "wb");
        fwrite(bytes, 1, size, f);
        fclose(f);
        expect_model_error(folder, "model.safetensors");
    }
    free(bytes);
    copy_file(original, weights, SIZE_MAX);
    /* a config that is not CLIP, and one that is not JSON */
    f = fopen(config, "w");
    fputs("{\"architectures\": [\"BertModel\"], \"model_type\": \"bert\"}", f);
    fclose(f);
    expect_model_error(folder, "BertModel");
    f = fopen(config, "w");
    fputs("{\"architectures\": [\"CLIPModel\"], ", f);
    fclose(f);
    expect_model_error(folder, "not valid JSON");
    /* an unsupported activation is named */
    char *original_config = fixture("clip-tiny/config.json");
    assert_int_equal(file_read_all(original_config, 1 << 20, &bytes, &size), GLIMPSE_STATUS_OK);
    char *act = strstr((char *)bytes, "quick_gelu");
    memcpy(act, "quick_relu", 10);
    f = fopen(config, "wb");
    fwrite(bytes, 1, size, f);
    fclose(f);
    free(bytes);
    expect_model_error(folder, "quick_relu");
    /* no weights at all, no config at all */
    copy_file(original_config, config, SIZE_MAX);
    unlink(weights);
    expect_model_error(folder, "no model.safetensors");
    unlink(config);
    expect_model_error(folder, "config.json");
    free(original_config), free(original), free(weights), free(config);
    remove_tree(folder);
    free(folder);
}

static void test_image_limits(void **state) {
    (void)state;
    REQUIRE_FIXTURES();
    char *model = fixture("clip-tiny"), *image = fixture("images/astronaut.png"), *cat = fixture("images/chelsea.png");
    run_result r = run("rank", "-m", model, "-t", "a", "--max-pixels", "200000", "--json", image, cat, NULL);
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, "astronaut.png: 512x512 pixels is over the limit of 200000"));
    cJSON *lines = parse_json_lines(r.out);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(cJSON_GetArrayItem(lines, 0), "results")), 1);
    cJSON_Delete(lines);
    result_free(&r);
    /* a PNG whose header claims 30000x30000: refused before decoding */
    uint8_t *bytes;
    size_t size;
    assert_int_equal(file_read_all(cat, 1 << 26, &bytes, &size), GLIMPSE_STATUS_OK);
    for (int i = 0; i < 2; i++) {
        uint8_t *p = bytes + 16 + 4 * i;
        p[0] = 0, p[1] = 0, p[2] = 30000 >> 8, p[3] = 30000 & 0xff;
    }
    uint32_t crc = (uint32_t)crc32(0, bytes + 12, 17);
    bytes[29] = (uint8_t)(crc >> 24), bytes[30] = (uint8_t)(crc >> 16), bytes[31] = (uint8_t)(crc >> 8),
    bytes[32] = (uint8_t)crc;
    char bomb[] = "/tmp/glimpse-bomb-XXXXXX";
    int fd = mkstemp(bomb);
    assert_int_equal(write(fd, bytes, size), (ssize_t)size);
    close(fd);
    free(bytes);
    expect_run(1, "30000x30000 pixels is over the limit", "embed", "-m", model, bomb, NULL);
    unlink(bomb);
    free(model), free(image), free(cat);
}

/* The embedding JSON array of the one image line of `glimpse embed --json`. */
static char *embedding_of(run_result *r) {
    assert_int_equal(r->status, 0);
    cJSON *lines = parse_json_lines(r->out);
    char *text = cJSON_PrintUnformatted(cJSON_GetObjectItem(cJSON_GetArrayItem(lines, 0), "embedding"));
    return cJSON_Delete(lines), result_free(r), text;
}

/* A picture tagged "rotate 90° clockwise" (a PNG eXIf chunk) is embedded
 * turned, unless --no-exif-rotate keeps it as stored. */
static void test_exif_rotate_option(void **state) {
    (void)state;
    char *clip = file_join(GLIMPSE_SOURCE_DIR, "examples/models/demo-clip"),
         *plain = file_join(GLIMPSE_SOURCE_DIR, "examples/pictures/00003.png");
    uint8_t *bytes;
    size_t size;
    assert_int_equal(file_read_all(plain, 1 << 26, &bytes, &size), GLIMPSE_STATUS_OK);
    static const uint8_t exif[] = {'I', 'I', 42, 0, 8, 0, 0, 0, 1, 0, 0x12, 0x01, 3, 0, 1, 0, 0, 0, 6, 0, 0, 0, 0, 0, 0, 0};
    uint8_t chunk[12 + sizeof exif] = {0, 0, 0, sizeof exif, 'e', 'X', 'I', 'f'};
    memcpy(chunk + 8, exif, sizeof exif);
    uint32_t crc = (uint32_t)crc32(0, chunk + 4, 4 + sizeof exif);
    uint8_t *end = chunk + 8 + sizeof exif;
    end[0] = (uint8_t)(crc >> 24), end[1] = (uint8_t)(crc >> 16), end[2] = (uint8_t)(crc >> 8), end[3] = (uint8_t)crc;
    char tagged[] = "/tmp/glimpse-exif-XXXXXX";
    int fd = mkstemp(tagged);
    assert_int_equal(write(fd, bytes, 33), 33); /* signature and IHDR, then eXIf, then the rest */
    assert_int_equal(write(fd, chunk, sizeof chunk), (ssize_t)sizeof chunk);
    assert_int_equal(write(fd, bytes + 33, size - 33), (ssize_t)(size - 33));
    close(fd);
    free(bytes);
    run_result r = run("embed", "-m", clip, "--json", "-i", plain, NULL);
    char *stored = embedding_of(&r);
    r = run("embed", "-m", clip, "--json", "-i", tagged, NULL);
    char *turned = embedding_of(&r);
    r = run("embed", "-m", clip, "--json", "--no-exif-rotate", "-i", tagged, NULL);
    char *kept = embedding_of(&r);
    assert_string_equal(kept, stored);
    assert_string_not_equal(turned, stored);
    unlink(tagged);
    free(stored), free(turned), free(kept), free(clip), free(plain);
}

static void test_hub_id_from_cache(void **state) {
    (void)state;
    REQUIRE_FIXTURES();
    char cache[] = "/tmp/glimpse-cache-XXXXXX";
    assert_non_null(mkdtemp(cache));
    char command[2048], *model = fixture("clip-tiny");
    snprintf(command, sizeof command,
             "mkdir -p %s/models--tiny-org--clip-tiny/refs %s/models--tiny-org--clip-tiny/snapshots && "
             "printf 0123abcd > %s/models--tiny-org--clip-tiny/refs/main && "
             "ln -s %s %s/models--tiny-org--clip-tiny/snapshots/0123abcd",
             cache, cache, cache, model, cache);
    assert_int_equal(system(command), 0);
    setenv("HF_HUB_CACHE", cache, 1);
    run_result r = run("info", "-m", "tiny-org/clip-tiny", "--json", NULL);
    unsetenv("HF_HUB_CACHE");
    assert_int_equal(r.status, 0);
    cJSON *lines = parse_json_lines(r.out);
    const cJSON *info = cJSON_GetArrayItem(lines, 0);
    assert_string_equal(cJSON_GetObjectItem(info, "architecture")->valuestring, "CLIPModel");
    assert_int_equal(cJSON_GetObjectItem(info, "embedding_dim")->valueint, 24);
    assert_non_null(strstr(cJSON_GetObjectItem(info, "path")->valuestring, "snapshots/0123abcd"));
    /* a float32 checkpoint at aligned offsets is used in place: nothing copied */
    assert_string_equal(cJSON_GetObjectItem(info, "dtype")->valuestring, "F32");
    assert_int_equal(cJSON_GetObjectItem(info, "copied_bytes")->valuedouble, 0);
    cJSON_Delete(lines);
    result_free(&r);
    remove_tree(cache);
    free(model);
}

static void test_caption(void **state) {
    (void)state;
    REQUIRE_FIXTURES();
    char *model = fixture("blip-caption-tiny"), *cat = fixture("images/chelsea.png");
    char *truncated = fixture("images/truncated.jpg"), *clip = fixture("clip-tiny");
    cJSON *expected = fixture_json("blip-caption-tiny/expected.json");
    /* the reference's beam-3 case for chelsea.png without a prompt: max_length 20, min_length 5 */
    const cJSON *wanted = NULL, *item;
    cJSON_ArrayForEach(item, cJSON_GetObjectItem(expected, "cases")) {
        if (strcmp(cJSON_GetObjectItem(item, "image")->valuestring, "chelsea.png") == 0 &&
            strcmp(cJSON_GetObjectItem(item, "prompt")->valuestring, "") == 0 &&
            strcmp(cJSON_GetObjectItem(item, "generation")->valuestring, "beam3") == 0)
            wanted = item;
    }
    assert_non_null(wanted);
    run_result r = run("caption", "-m", model, "--beams", "3", "--max-tokens", "19", "--min-tokens", "4", "--json",
                       truncated, cat, NULL);
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, "truncated.jpg: broken JPEG"));
    cJSON *lines = parse_json_lines(r.out);
    assert_int_equal(cJSON_GetArraySize(lines), 1);
    const cJSON *line = cJSON_GetArrayItem(lines, 0);
    assert_string_equal(cJSON_GetObjectItem(line, "caption")->valuestring,
                        cJSON_GetObjectItem(wanted, "caption")->valuestring);
    const cJSON *ids = cJSON_GetObjectItem(line, "ids"), *reference_ids = cJSON_GetObjectItem(wanted, "ids");
    assert_int_equal(cJSON_GetArraySize(ids), cJSON_GetArraySize(reference_ids));
    for (int i = 0; i < cJSON_GetArraySize(ids); i++)
        assert_int_equal(cJSON_GetArrayItem(ids, i)->valueint, cJSON_GetArrayItem(reference_ids, i)->valueint);
    cJSON_Delete(lines);
    result_free(&r);
    /* plain output for one image: the caption alone */
    r = run("caption", "-m", model, cat, NULL);
    assert_int_equal(r.status, 0);
    assert_int_equal(count_lines(r.out), 1);
    assert_null(strchr(r.out, '\t'));
    result_free(&r);
    /* a CLIP model cannot caption; usage errors */
    expect_run(1, "needs a BLIP captioning model", "caption", "-m", clip, cat, NULL);
    expect_run(2, NULL, "caption", "-m", model, "--sample", "--beams", "3", cat, NULL);
    expect_run(2, NULL, "caption", "-m", model, "--min-tokens", "9", "--max-tokens", "3", cat, NULL);
    /* --min-tokens alone above the model's maximum (20 without a generation_config.json) is lowered to it */
    r = run("caption", "-m", model, "--min-tokens", "30", "--beams", "1", "--json", cat, NULL);
    assert_int_equal(r.status, 0);
    lines = parse_json_lines(r.out);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(cJSON_GetArrayItem(lines, 0), "ids")), 1 + 20);
    cJSON_Delete(lines);
    result_free(&r);
    r = run("caption", "--help", NULL);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "--max-tokens"));
    result_free(&r);
    cJSON_Delete(expected);
    free(model), free(cat), free(truncated), free(clip);
}

/* A caption as the CLI prints it: the reference's decoded text (`caption` of a fixture case) without the spaces at
 * its ends, as the model cards' strip() leaves it (the fixtures' decodes begin with a space, and hold no other
 * whitespace at their ends). */
static void expect_printed_caption(const char *printed, const char *reference) {
    size_t start = strspn(reference, " "), length = strlen(reference + start);
    while (length && reference[start + length - 1] == ' ') length--;
    if (strlen(printed) != length || memcmp(printed, reference + start, length) != 0)
        fail_msg("printed \"%s\", expected the reference's \"%s\" stripped", printed, reference);
}

/* The blip2-opt-tiny case of that image, prompt ("" or the question's) and generation. */
static const cJSON *blip2_case(const cJSON *expected, const char *image, bool prompted, const char *generation) {
    const cJSON *item;
    cJSON_ArrayForEach(item, cJSON_GetObjectItem(expected, "cases")) {
        if (strcmp(cJSON_GetObjectItem(item, "image")->valuestring, image) == 0 &&
            (cJSON_GetObjectItem(item, "prompt")->valuestring[0] != '\0') == prompted &&
            strcmp(cJSON_GetObjectItem(item, "generation")->valuestring, generation) == 0)
            return item;
    }
    fail_msg("no case %s %d %s", image, prompted, generation);
    return NULL;
}

/* The same ids as a JSON line's "ids". */
static void expect_ids(const cJSON *line, const cJSON *reference_ids) {
    const cJSON *ids = cJSON_GetObjectItem(line, "ids");
    assert_int_equal(cJSON_GetArraySize(ids), cJSON_GetArraySize(reference_ids));
    for (int i = 0; i < cJSON_GetArraySize(ids); i++)
        assert_int_equal(cJSON_GetArrayItem(ids, i)->valueint, cJSON_GetArrayItem(reference_ids, i)->valueint);
}

/* BLIP-2 through `glimpse caption` and `glimpse ask`: the reference's ids; ask's JSON and its refusals. */
static void test_blip2_caption_and_ask(void **state) {
    (void)state;
    REQUIRE_FIXTURES();
    char *model = fixture("blip2-opt-tiny"), *cat = fixture("images/chelsea.png"), *blip = fixture("blip-caption-tiny");
    cJSON *expected = fixture_json("blip2-opt-tiny/expected.json");
    run_result r = run("caption", "-m", model, "--beams", "3", "--max-tokens", "10", "--json", cat, NULL);
    assert_int_equal(r.status, 0);
    cJSON *lines = parse_json_lines(r.out);
    const cJSON *beam3 = blip2_case(expected, "chelsea.png", false, "beam3");
    expect_ids(cJSON_GetArrayItem(lines, 0), cJSON_GetObjectItem(beam3, "ids"));
    /* the reference's decode begins with a space, which the caption is printed without (the model card's strip) */
    const char *reference = cJSON_GetObjectItem(beam3, "caption")->valuestring;
    assert_true(reference[0] == ' ' && reference[1] != ' ');
    expect_printed_caption(cJSON_GetObjectItem(cJSON_GetArrayItem(lines, 0), "caption")->valuestring, reference);
    cJSON_Delete(lines);
    result_free(&r);
    r = run("caption", "-m", model, "--beams", "3", "--max-tokens", "10", cat, NULL);
    assert_int_equal(r.status, 0);
    assert_int_equal(strlen(r.out), strlen(reference));
    assert_memory_equal(r.out, reference + 1, strlen(reference) - 1);
    assert_int_equal(r.out[strlen(reference) - 1], '\n');
    result_free(&r);
    r = run("ask", "-m", model, "-q", "what is in the picture?", "--max-tokens", "13", "--json", cat, NULL);
    assert_int_equal(r.status, 0);
    lines = parse_json_lines(r.out);
    const cJSON *line = cJSON_GetArrayItem(lines, 0);
    assert_string_equal(cJSON_GetObjectItem(line, "question")->valuestring, "what is in the picture?");
    char *answer = strdup(cJSON_GetObjectItem(line, "answer")->valuestring);
    assert_true(answer[0] != ' ' && answer[strlen(answer) - 1] != ' '); /* stripped, as the model card prints it */
    expect_ids(line, cJSON_GetObjectItem(blip2_case(expected, "chelsea.png", true, "greedy"), "ids"));
    cJSON_Delete(lines);
    result_free(&r);
    /* a free prompt: the same as the question's */
    r = run("ask", "-m", model, "--prompt", "Question: what is in the picture? Answer:", "--max-tokens", "13",
            "--json", cat, NULL);
    assert_int_equal(r.status, 0);
    lines = parse_json_lines(r.out);
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(lines, 0), "answer")->valuestring, answer);
    assert_non_null(cJSON_GetObjectItem(cJSON_GetArrayItem(lines, 0), "prompt"));
    cJSON_Delete(lines);
    result_free(&r);
    expect_run(2, "a question", "ask", "-m", model, cat, NULL);
    expect_run(2, "one of the two", "ask", "-m", model, "-q", "what?", "--prompt", "x", cat, NULL);
    expect_run(1, "needs a BLIP-2 model", "ask", "-m", blip, "-q", "what?", cat, NULL);
    expect_run(2, NULL, "caption", "-m", model, "-q", "what?", cat, NULL);
    r = run("ask", "--help", NULL);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "Question: QUESTION Answer:"));
    result_free(&r);
    cJSON_Delete(expected);
    free(answer), free(model), free(cat), free(blip);
}

/* ViT-GPT2's captions through the CLI: each image's greedy and 4-beam case, a prompted one, the model's own
 * defaults (greedy, 19 new tokens), and info naming the family. */
static void test_vit_gpt2_caption(void **state) {
    (void)state;
    REQUIRE_FIXTURES();
    char *model = fixture("vit-gpt2-tiny");
    cJSON *expected = fixture_json("vit-gpt2-tiny/expected.json");
    char *images[4];
    for (int i = 0; i < 4; i++) {
        char relative[64];
        snprintf(relative, sizeof relative, "images/%s",
                 cJSON_GetArrayItem(cJSON_GetObjectItem(expected, "images"), i)->valuestring);
        images[i] = fixture(relative);
    }
    const cJSON *cases = cJSON_GetObjectItem(expected, "cases");
    /* cases 2i and 2i + 1: image i greedy and with 4 beams, max_length 16;
     * case 9: rocket.jpg, "a picture of", 4 beams */
    const char *beams[] = {"1", "4"};
    for (int b = 0; b < 2; b++) {
        run_result r = run("caption", "-m", model, "--beams", beams[b], "--max-tokens", "15", "--json", images[0],
                           images[1], images[2], images[3], NULL);
        assert_int_equal(r.status, 0);
        cJSON *lines = parse_json_lines(r.out);
        assert_int_equal(cJSON_GetArraySize(lines), 4);
        for (int i = 0; i < 4; i++) {
            const cJSON *want = cJSON_GetArrayItem(cases, 2 * i + b), *line = cJSON_GetArrayItem(lines, i);
            expect_printed_caption(cJSON_GetObjectItem(line, "caption")->valuestring,
                                   cJSON_GetObjectItem(want, "caption")->valuestring);
            char *got_ids = cJSON_PrintUnformatted(cJSON_GetObjectItem(line, "ids"));
            char *want_ids = cJSON_PrintUnformatted(cJSON_GetObjectItem(want, "ids"));
            assert_string_equal(got_ids, want_ids);
            free(got_ids), free(want_ids);
        }
        cJSON_Delete(lines);
        result_free(&r);
    }
    run_result r = run("caption", "-m", model, "--prompt", "a picture of", "--beams", "4", "--max-tokens", "12",
                       "--json", images[1], NULL);
    assert_int_equal(r.status, 0);
    cJSON *lines = parse_json_lines(r.out);
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(lines, 0), "caption")->valuestring,
                        cJSON_GetObjectItem(cJSON_GetArrayItem(cases, 9), "caption")->valuestring);
    cJSON_Delete(lines);
    result_free(&r);
    r = run("caption", "-m", model, "--json", images[0], NULL); /* max_length 20, greedy: the greedy case and more */
    assert_int_equal(r.status, 0);
    lines = parse_json_lines(r.out);
    const cJSON *ids = cJSON_GetObjectItem(cJSON_GetArrayItem(lines, 0), "ids");
    assert_int_equal(cJSON_GetArraySize(ids), 20);
    const cJSON *greedy = cJSON_GetObjectItem(cJSON_GetArrayItem(cases, 0), "ids");
    for (int i = 0; i < cJSON_GetArraySize(greedy); i++)
        assert_int_equal(cJSON_GetArrayItem(ids, i)->valueint, cJSON_GetArrayItem(greedy, i)->valueint);
    cJSON_Delete(lines);
    result_free(&r);
    r = run("info", "-m", model, NULL);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "VisionEncoderDecoderModel"));
    assert_non_null(strstr(r.out, "ViT-GPT2"));
    result_free(&r);
    r = run("caption", "--help", NULL);
    assert_non_null(strstr(r.out, "ViT-GPT2"));
    result_free(&r);
    for (int i = 0; i < 4; i++) free(images[i]);
    cJSON_Delete(expected);
    free(model);
}

/* --int8 on the demo models (no fixtures needed): the same captions and
 * embeddings within int8's error as float32, and the option in --help. */
static void test_int8_option(void **state) {
    (void)state;
    char *captioner = file_join(GLIMPSE_SOURCE_DIR, "examples/models/demo-blip-caption");
    char *clip = file_join(GLIMPSE_SOURCE_DIR, "examples/models/demo-clip");
    char *picture = file_join(GLIMPSE_SOURCE_DIR, "examples/pictures/00000.png");
    run_result exact = run("caption", "-m", captioner, "--json", picture, NULL);
    run_result quantized = run("caption", "-m", captioner, "--int8", "--json", picture, NULL);
    assert_int_equal(exact.status, 0);
    assert_int_equal(quantized.status, 0);
    assert_string_equal(quantized.out, exact.out);
    result_free(&exact), result_free(&quantized);
    exact = run("embed", "-m", clip, "-t", "a red circle", "--json", NULL);
    quantized = run("embed", "-m", clip, "--int8", "-t", "a red circle", "--json", NULL);
    assert_int_equal(quantized.status, 0);
    cJSON *a = parse_json_lines(exact.out), *b = parse_json_lines(quantized.out);
    const cJSON *x = cJSON_GetObjectItem(cJSON_GetArrayItem(a, 0), "embedding");
    const cJSON *y = cJSON_GetObjectItem(cJSON_GetArrayItem(b, 0), "embedding");
    assert_int_equal(cJSON_GetArraySize(x), cJSON_GetArraySize(y));
    double dot = 0, xx = 0, yy = 0;
    for (int i = 0; i < cJSON_GetArraySize(x); i++) {
        double u = cJSON_GetArrayItem(x, i)->valuedouble, v = cJSON_GetArrayItem(y, i)->valuedouble;
        dot += u * v, xx += u * u, yy += v * v;
    }
    assert_true(dot / sqrt(xx * yy) >= 0.999);
    assert_string_not_equal(exact.out, quantized.out); /* and it did quantize */
    cJSON_Delete(a), cJSON_Delete(b);
    result_free(&exact), result_free(&quantized);
    run_result help = run("embed", "--help", NULL);
    assert_non_null(strstr(help.out, "--int8"));
    result_free(&help);
    /* info says the precision loaded, and that a captioner gives no embeddings (issue 35) */
    run_result info = run("info", "-m", clip, "--int8", NULL);
    assert_non_null(strstr(info.out, "precision      int8"));
    result_free(&info);
    info = run("info", "-m", clip, "--int8", "--json", NULL);
    assert_non_null(strstr(info.out, "\"precision\": \"int8\""));
    result_free(&info);
    info = run("info", "-m", captioner, NULL);
    assert_non_null(strstr(info.out, "embedding      none"));
    assert_null(strstr(info.out, "0 dimensions"));
    result_free(&info);
    /* without VNNI and AVX2 (forced off here) it still works, and says it will be slow */
    setenv("GLIMPSE_NO_AVX512", "1", 1);
    quantized = run("embed", "-m", clip, "--int8", "-t", "a red circle", "--json", NULL);
    unsetenv("GLIMPSE_NO_AVX512");
    assert_int_equal(quantized.status, 0);
    assert_non_null(strstr(quantized.err, "neither AVX-512 VNNI nor AVX2"));
    result_free(&quantized);
    free(captioner), free(clip), free(picture);
}

static void test_rank_with_blip_and_rerank(void **state) {
    (void)state;
    REQUIRE_FIXTURES();
    char *itm = fixture("blip-itm-tiny"), *clip = fixture("clip-tiny"), *caption = fixture("blip-caption-tiny");
    char *astronaut = fixture("images/astronaut.png"), *cat = fixture("images/chelsea.png");
    char *coffee = fixture("images/coffee.png");
    cJSON *expected = fixture_json("blip-itm-tiny/expected.json");
    /* ITM probabilities, best first, as the reference computed them (text 2: "a cup of coffee") */
    for (int itc = 0; itc < 2; itc++) {
        run_result r = itc ? run("rank", "-m", itm, "--itc", "-t", "a cup of coffee", "--json", astronaut, cat, coffee, NULL)
                           : run("rank", "-m", itm, "-t", "a cup of coffee", "--json", astronaut, cat, coffee, NULL);
        assert_int_equal(r.status, 0);
        cJSON *lines = parse_json_lines(r.out);
        const cJSON *results = cJSON_GetObjectItem(cJSON_GetArrayItem(lines, 0), "results");
        assert_int_equal(cJSON_GetArraySize(results), 3);
        const cJSON *table = cJSON_GetObjectItem(expected, itc ? "itc_cosine" : "itm_match_probability");
        double previous = 1e9;
        const cJSON *item;
        cJSON_ArrayForEach(item, results) {
            const char *path = cJSON_GetObjectItem(item, "image")->valuestring;
            int i = strstr(path, "astronaut") ? 0 : strstr(path, "chelsea") ? 1 : 2;
            double score = cJSON_GetObjectItem(item, "score")->valuedouble;
            assert_float_equal(score, cJSON_GetArrayItem(cJSON_GetArrayItem(table, i), 2)->valuedouble, 1e-4);
            assert_true(score <= previous);
            previous = score;
        }
        cJSON_Delete(lines);
        result_free(&r);
    }
    /* two-stage: CLIP shortlists 2, ITM orders them; both scores reported */
    run_result r = run("rank", "-m", clip, "--rerank", itm, "--rerank-top", "2", "-t", "a cup of coffee", "--json",
                       astronaut, cat, coffee, NULL);
    assert_int_equal(r.status, 0);
    cJSON *lines = parse_json_lines(r.out);
    const cJSON *results = cJSON_GetObjectItem(cJSON_GetArrayItem(lines, 0), "results");
    assert_int_equal(cJSON_GetArraySize(results), 2);
    const cJSON *first = cJSON_GetArrayItem(results, 0), *second = cJSON_GetArrayItem(results, 1);
    assert_non_null(cJSON_GetObjectItem(first, "clip_score"));
    assert_float_equal(cJSON_GetObjectItem(first, "score")->valuedouble,
                       cJSON_GetObjectItem(first, "itm_score")->valuedouble, 0);
    assert_true(cJSON_GetObjectItem(first, "score")->valuedouble >= cJSON_GetObjectItem(second, "score")->valuedouble);
    cJSON_Delete(lines);
    result_free(&r);
    /* wrong pairings are refused clearly */
    expect_run(1, "BlipForImageTextRetrieval", "rank", "-m", clip, "--rerank", caption, "-t", "a", cat, NULL);
    expect_run(1, "captioning model", "rank", "-m", caption, "-t", "a", cat, NULL);
    expect_run(2, NULL, "rank", "-m", clip, "--itc", "-t", "a", cat, NULL);
    cJSON_Delete(expected);
    free(itm), free(clip), free(caption), free(astronaut), free(cat), free(coffee);
}

/* glimpse bench: every stage's spread brackets its median; --profile adds the
 * shares of each kind of work, which for a forward pass are mostly products
 * and, with the rest, cover the stage's time. */
/* Whether the products took the largest share of the vision stage's time among the kinds of work. */
static bool products_lead(const cJSON *profile) {
    double products = cJSON_GetObjectItem(profile, "products")->valuedouble;
    return products >= cJSON_GetObjectItem(profile, "attention")->valuedouble &&
           products >= cJSON_GetObjectItem(profile, "norms")->valuedouble &&
           products >= cJSON_GetObjectItem(profile, "activations")->valuedouble;
}

static void test_bench_spread_and_profile(void **state) {
    (void)state;
    char *clip = file_join(GLIMPSE_SOURCE_DIR, "examples/models/demo-clip");
    /* (20 runs: a share sums over a stage's runs, so one run descheduled inside one kind of work on a crowded
     * machine cannot outweigh the rest. The shares are of wall time: on a machine busy with other work any of
     * them can shrink, so the products' lead is asked of one of up to three benches, every other check of each) */
    run_result r = {0};
    bool led = false;
    for (int attempt = 0; attempt < 3 && !led; attempt++) {
        result_free(&r);
        r = run("bench", "-m", clip, "--runs", "20", "--threads", "2", "--profile", "--json", NULL);
        assert_int_equal(r.status, 0);
        cJSON *lines = parse_json_lines(r.out);
        bool saw_vision = false;
        for (const cJSON *line = lines->child; line; line = line->next) {
            double median = cJSON_GetObjectItem(line, "median_ms")->valuedouble;
            assert_true(cJSON_GetObjectItem(line, "min_ms")->valuedouble <= median);
            assert_true(cJSON_GetObjectItem(line, "max_ms")->valuedouble >= median);
            const cJSON *profile = cJSON_GetObjectItem(line, "profile");
            assert_non_null(profile);
            double sum = 0;
            for (const cJSON *share = profile->child; share; share = share->next) {
                assert_true(share->valuedouble >= -1e-3 && share->valuedouble <= 1 + 1e-3);
                if (strcmp(share->string, "thread_waits") != 0) sum += share->valuedouble;
            }
            assert_float_equal(sum, 1.0, 5e-3); /* (five shares printed to 3 decimals) */
            if (strcmp(cJSON_GetObjectItem(line, "stage")->valuestring, "vision") == 0) {
                saw_vision = true;
                assert_true(cJSON_GetObjectItem(profile, "products")->valuedouble > 0);
                led = products_lead(profile);
            }
        }
        assert_true(saw_vision);
        cJSON_Delete(lines);
    }
    assert_true(led);
    result_free(&r);
    r = run("bench", "-m", clip, "--runs", "1", "--json", NULL); /* no profile unless asked */
    assert_int_equal(r.status, 0);
    assert_null(strstr(r.out, "profile"));
    /* the towers' attention_gflop: their layers' scores and values' sums, the last layer's for the pooled token
     * alone (CLIP's embeddings), from demo-clip's config: 17 tokens (4 × 4 patches and the class token) through 3
     * layers of 96 features, 32 text tokens through 2 */
    const double vision_attention = 2 * 4.0 * 17 * 17 * 96 + 4.0 * 17 * 96;
    const double text_attention = 4.0 * 32 * 32 * 96 + 4.0 * 32 * 96;
    cJSON *stages = parse_json_lines(r.out);
    int towers = 0;
    for (const cJSON *line = stages->child; line; line = line->next) {
        const char *stage = cJSON_GetObjectItem(line, "stage")->valuestring;
        const cJSON *attention = cJSON_GetObjectItem(line, "attention_gflop");
        if (strcmp(stage, "vision") != 0 && strcmp(stage, "text") != 0) {
            assert_null(attention);
            continue;
        }
        towers++;
        assert_non_null(attention);
        assert_float_equal(attention->valuedouble * 1e9, stage[0] == 'v' ? vision_attention : text_attention, 1e3);
        assert_true(attention->valuedouble < cJSON_GetObjectItem(line, "gflop")->valuedouble);
    }
    assert_int_equal(towers, 2);
    cJSON_Delete(stages);
    result_free(&r);
    free(clip);
    /* --captions: both ways and the gain, for greedy and 3 beams, with rates that follow from the times */
    char *captioner = file_join(GLIMPSE_SOURCE_DIR, "examples/models/demo-blip-caption");
    r = run("bench", "-m", captioner, "--captions", "3", "--tokens", "3", "--runs", "1", "--json", NULL);
    assert_int_equal(r.status, 0);
    cJSON *lines = parse_json_lines(r.out);
    int rows = 0;
    for (const cJSON *line = lines->child; line; line = line->next) {
        if (strcmp(cJSON_GetObjectItem(line, "stage")->valuestring, "captions") != 0) continue;
        rows++;
        const cJSON *rate = cJSON_GetObjectItem(line, "decoder_tokens_per_s");
        if (!rate) {
            assert_true(cJSON_GetObjectItem(line, "decoder_ratio")->valuedouble > 0);
            continue;
        }
        double decoding = cJSON_GetObjectItem(line, "decoding_ms")->valuedouble;
        assert_true(decoding > 0 && decoding <= cJSON_GetObjectItem(line, "median_ms")->valuedouble);
        /* (decoding_ms is printed to 0.1 ms: the rate lies between those of its rounding's ends) */
        assert_true(rate->valuedouble >= 0.999 * 9 / ((decoding + 0.05) / 1e3));
        if (decoding > 0.05) assert_true(rate->valuedouble <= 1.001 * 9 / ((decoding - 0.05) / 1e3));
    }
    assert_int_equal(rows, 6);
    cJSON_Delete(lines);
    result_free(&r);
    free(captioner);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bench_spread_and_profile),
        cmocka_unit_test(test_help_and_usage),          cmocka_unit_test(test_missing_models),
        cmocka_unit_test(test_rank_goes_on_past_bad_inputs), cmocka_unit_test(test_rank_scores_match_reference),
        cmocka_unit_test(test_embed_and_classify_json), cmocka_unit_test(test_damaged_models),
        cmocka_unit_test(test_image_limits),            cmocka_unit_test(test_exif_rotate_option),
        cmocka_unit_test(test_hub_id_from_cache),
        cmocka_unit_test(test_caption),                 cmocka_unit_test(test_rank_with_blip_and_rerank), cmocka_unit_test(test_int8_option),
        cmocka_unit_test(test_siglip_commands),
        cmocka_unit_test(test_blip2_caption_and_ask),
        cmocka_unit_test(test_vit_gpt2_caption),
        cmocka_unit_test(test_siglip_index),
    };
    return cmocka_run_group_tests_name("cli", tests, NULL, NULL);
}
