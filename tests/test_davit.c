/* test_davit.c — Florence-2's image side against the florence2-tiny fixture: the reference's pixel_values of
 * each picture through DaViT (vision/davit.h) give each stage's tokens (davit_stage0..3) and, with the position
 * and temporal embeddings, the projection and its norm (families/florence2_vision.h), image_features; the
 * checkpoint's pytorch_model.bin gives the same features as its model.safetensors; and glimpse's preprocessing
 * of the pictures gives the reference's pixel_values. */
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

#include "families/florence2_vision.h"
#include "tests/support.h"
#include "vision/preprocess.h"
#include "weights/config.h"

#define HIDDEN_TOLERANCE 1e-4
#define IMAGES 4

typedef struct davit_fixture {
    weight_store *store;
    cJSON *config, *expected;
    safetensors *reference;
    florence2_vision vision;
    int image_size;
} davit_fixture;

static int setup(void **state) {
    *state = NULL;
    if (!fixtures_folder()) return 0;
    davit_fixture *f = calloc(1, sizeof *f);
    char *folder = fixture_path("florence2-tiny");
    int failed = !f || !folder || weight_store_open(folder, &f->store) ||
                 config_read_json(folder, "config.json", &f->config) ||
                 !(f->expected = fixture_json("florence2-tiny/expected.json")) ||
                 !(f->reference = fixture_tensors("florence2-tiny/reference.safetensors"));
    if (!failed) {
        f->image_size = cJSON_GetObjectItem(f->expected, "image_size")->valueint;
        failed = florence2_vision_load(&f->vision, f->config, cJSON_GetObjectItem(f->config, "vision_config"),
                                       f->image_size, &names_florence2, f->store) != GLIMPSE_STATUS_OK;
    }
    free(folder);
    if (failed) fprintf(stderr, "florence2-tiny: %s\n", glimpse_last_error());
    *state = f;
    return failed ? -1 : 0;
}

static int teardown(void **state) {
    davit_fixture *f = *state;
    if (!f) return 0;
    florence2_vision_free(&f->vision);
    weight_store_free(f->store);
    cJSON_Delete(f->config), cJSON_Delete(f->expected);
    safetensors_close(f->reference);
    free(f);
    return 0;
}

typedef struct stage_check {
    const safetensors *reference;
    int image;
} stage_check;

static void check_stage(void *user, int stage, const float *tokens, size_t count, size_t dim) {
    const stage_check *c = user;
    char name[64];
    snprintf(name, sizeof name, "davit_stage%d.%d", stage, c->image);
    expect_reference_close(tokens, c->reference, name, count * dim, "davit stages", HIDDEN_TOLERANCE);
}

static void features_of(const davit_fixture *f, const florence2_vision *vision, int image, float *out,
                        davit_stage_fn on_stage) {
    size_t side = (size_t)f->image_size;
    char name[64];
    snprintf(name, sizeof name, "pixel_values.%d", image);
    const float *pixels = fixture_tensor(f->reference, name, 3 * side * side);
    florence2_vision_state state;
    assert_int_equal(florence2_vision_state_create(vision, &state), GLIMPSE_STATUS_OK);
    stage_check check = {f->reference, image};
    assert_int_equal(florence2_image_features(vision, &state, pixels, out, on_stage, &check, NULL), 0);
    florence2_vision_state_free(&state);
}

static void test_stages_and_features(void **state) {
    davit_fixture *f = *state;
    if (!f) skip();
    size_t rows = florence2_image_rows(&f->vision), width = f->vision.projection_dim;
    float *features = malloc(rows * width * sizeof *features);
    for (int image = 0; image < IMAGES; image++) {
        features_of(f, &f->vision, image, features, check_stage);
        char name[64];
        snprintf(name, sizeof name, "image_features.%d", image);
        expect_reference_close(features, f->reference, name, rows * width, "image_features", HIDDEN_TOLERANCE);
    }
    free(features);
}

/* The hub's own file, pytorch_model.bin, read without executing anything: the same features bit for bit. */
static void test_pytorch_bin_gives_the_same(void **state) {
    davit_fixture *f = *state;
    if (!f) skip();
    char *bin = fixture_path("florence2-tiny/pytorch_model.bin"), folder[] = "/tmp/glimpse-davit-XXXXXX", link[64];
    assert_non_null(mkdtemp(folder));
    snprintf(link, sizeof link, "%s/pytorch_model.bin", folder);
    assert_int_equal(symlink(bin, link), 0); /* a folder holding the .bin alone */
    weight_store *store;
    assert_int_equal(weight_store_open(folder, &store), GLIMPSE_STATUS_OK);
    assert_string_equal(weight_store_format(store), "PyTorch .bin");
    unlink(link), rmdir(folder);
    florence2_vision vision;
    assert_int_equal(florence2_vision_load(&vision, f->config, cJSON_GetObjectItem(f->config, "vision_config"),
                                           f->image_size, &names_florence2, store),
                     GLIMPSE_STATUS_OK);
    size_t n = florence2_image_rows(&vision) * vision.projection_dim;
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    features_of(f, &f->vision, 1, a, NULL);
    features_of(f, &vision, 1, b, NULL);
    assert_memory_equal(a, b, n * sizeof *a);
    free(a), free(b), free(bin);
    florence2_vision_free(&vision);
    weight_store_free(store);
}

static void test_preprocessing(void **state) {
    davit_fixture *f = *state;
    if (!f) skip();
    char *folder = fixture_path("florence2-tiny");
    cJSON *json;
    assert_int_equal(config_read_json(folder, "preprocessor_config.json", &json), GLIMPSE_STATUS_OK);
    preprocess_config config = preprocess_default_blip(f->image_size);
    assert_int_equal(preprocess_config_read(json, "preprocessor_config.json", 1, &config), GLIMPSE_STATUS_OK);
    size_t side = (size_t)f->image_size;
    float *pixels = malloc(3 * side * side * sizeof *pixels);
    const cJSON *images = cJSON_GetObjectItem(f->expected, "images");
    for (int i = 0; i < IMAGES; i++) {
        const char *file = cJSON_GetObjectItem(cJSON_GetArrayItem(images, i), "file")->valuestring;
        glimpse_image *image = fixture_image(file);
        assert_int_equal(preprocess_image(pixels, image, &config), GLIMPSE_STATUS_OK);
        char name[64];
        snprintf(name, sizeof name, "pixel_values.%d", i);
        const float *expected = fixture_tensor(f->reference, name, 3 * side * side);
        double largest = 0;
        for (size_t j = 0; j < 3 * side * side; j++)
            if (fabs(pixels[j] - expected[j]) > largest) largest = fabs(pixels[j] - expected[j]);
        note_difference("pixel_values", largest);
        if (largest > 1e-6) fail_msg("%s: pixel_values differ by %g", file, largest);
        glimpse_image_free(image);
    }
    free(pixels), free(folder);
    cJSON_Delete(json);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stages_and_features),
        cmocka_unit_test(test_pytorch_bin_gives_the_same),
        cmocka_unit_test(test_preprocessing),
    };
    return report_differences(cmocka_run_group_tests(tests, setup, teardown));
}
