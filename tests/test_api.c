/* test_api.c — contracts of the public API that no model family owns: calls
 * given nothing to work on (zero images or texts) refuse it as the header
 * says, and caption settings left to the model take the snapshot's
 * generation_config.json, else glimpse's own. Runs on the bundled demo
 * models; the BLIP retrieval and tiny captioning parts use the fixtures. */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/file.h"
#include "glimpse.h"
#include "tests/support.h"

static glimpse_model *load_demo(const char *name) {
    char *path = file_join(GLIMPSE_SOURCE_DIR "/examples/models", name);
    glimpse_model *model = load_model(path, GLIMPSE_PRECISION_FLOAT32);
    free(path);
    return model;
}

static glimpse_image *demo_picture(int index) {
    char name[64];
    snprintf(name, sizeof name, "examples/pictures/%05d.png", index);
    char *path = file_join(GLIMPSE_SOURCE_DIR, name);
    glimpse_image *image = NULL;
    assert_int_equal(glimpse_image_load_file(path, NULL, &image), GLIMPSE_STATUS_OK);
    free(path);
    return image;
}

static void assert_no_images_refused(glimpse_status status) {
    assert_int_equal(status, GLIMPSE_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(glimpse_last_error(), "no images"));
}

/* Zero images or texts is GLIMPSE_STATUS_INVALID_ARGUMENT in every call
 * that takes them; a re-ranking shortlist may be empty. */
static void test_zero_items_are_invalid(void **state) {
    (void)state;
    glimpse_model *clip = load_demo("demo-clip"), *blip = load_demo("demo-blip-caption");
    glimpse_context *clip_ctx, *blip_ctx;
    assert_int_equal(glimpse_context_create(clip, NULL, &clip_ctx), GLIMPSE_STATUS_OK);
    assert_int_equal(glimpse_context_create(blip, NULL, &blip_ctx), GLIMPSE_STATUS_OK);
    glimpse_image *image = demo_picture(0);
    const char *text = "a red circle";
    float embedding[512], logit = 0;
    assert_true(glimpse_model_embedding_dim(clip) <= 512);
    assert_no_images_refused(glimpse_embed_images(clip_ctx, &image, 0, embedding));
    assert_int_equal(glimpse_embed_texts(clip_ctx, &text, 0, embedding), GLIMPSE_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(glimpse_last_error(), "no texts"));
    assert_int_equal(glimpse_embed_images(clip_ctx, &image, 1, NULL), GLIMPSE_STATUS_INVALID_ARGUMENT);
    assert_int_equal(glimpse_embed_images(clip_ctx, &image, 1, embedding), GLIMPSE_STATUS_OK);
    /* 4 x 70,000 (a TIFF the fuzzer made claimed 4 x 589,828): resizing its short side to the demo CLIP's 64
     * would make 64 x 1,120,000 pixels before the crop, so it is refused, not ground through */
    uint8_t *strip = calloc((size_t)4 * 70000 * 3, 1);
    glimpse_image *elongated;
    assert_int_equal(glimpse_image_from_pixels(strip, 4, 70000, 12, GLIMPSE_PIXEL_FORMAT_RGB8, &elongated), GLIMPSE_STATUS_OK);
    assert_int_equal(glimpse_embed_images(clip_ctx, &elongated, 1, embedding), GLIMPSE_STATUS_TOO_LARGE);
    assert_non_null(strstr(glimpse_last_error(), "too elongated"));
    glimpse_image_free(elongated);
    free(strip);
    assert_int_equal(glimpse_score(clip, embedding, 0, embedding, 1, &logit), GLIMPSE_STATUS_INVALID_ARGUMENT);
    assert_int_equal(glimpse_score(clip, embedding, 1, embedding, 0, &logit), GLIMPSE_STATUS_INVALID_ARGUMENT);
    assert_int_equal(glimpse_score(clip, embedding, 1, embedding, 1, &logit), GLIMPSE_STATUS_OK);
    glimpse_caption caption = {.text = NULL};
    assert_no_images_refused(glimpse_caption_images(blip_ctx, &image, 0, NULL, &caption));
    assert_null(caption.text);
    char *folder = fixture_path("blip-itm-tiny");
    if (folder) {
        glimpse_model *itm = load_model(folder, GLIMPSE_PRECISION_FLOAT32);
        glimpse_context *itm_ctx;
        assert_int_equal(glimpse_context_create(itm, NULL, &itm_ctx), GLIMPSE_STATUS_OK);
        float score;
        assert_int_equal(glimpse_match(itm_ctx, &image, 0, &text, 1, GLIMPSE_MATCH_MODE_ITM, &score),
                         GLIMPSE_STATUS_INVALID_ARGUMENT);
        assert_int_equal(glimpse_match(itm_ctx, &image, 1, &text, 0, GLIMPSE_MATCH_MODE_ITC, &score),
                         GLIMPSE_STATUS_INVALID_ARGUMENT);
        assert_int_equal(glimpse_match(itm_ctx, &image, 1, &text, 1, GLIMPSE_MATCH_MODE_ITM, &score),
                         GLIMPSE_STATUS_OK);
        glimpse_ranked ranked;
        size_t ranked_count = 1;
        assert_int_equal(glimpse_rerank(itm_ctx, text, &image, 0, &logit, 1, &ranked, &ranked_count),
                         GLIMPSE_STATUS_OK);
        assert_int_equal(ranked_count, 0);
        glimpse_context_free(itm_ctx);
        glimpse_model_free(itm);
        free(folder);
    }
    glimpse_image_free(image);
    glimpse_context_free(clip_ctx), glimpse_context_free(blip_ctx);
    glimpse_model_free(clip), glimpse_model_free(blip);
}

/* glimpse_run_task: only a task model runs tasks (the error names the families that can), a free prompt is
 * refused (the task makes it), zero images are invalid, and a refused call leaves its results empty. */
static void test_tasks_need_a_task_model(void **state) {
    (void)state;
    glimpse_model *blip = load_demo("demo-blip-caption");
    glimpse_context *ctx;
    assert_int_equal(glimpse_context_create(blip, NULL, &ctx), GLIMPSE_STATUS_OK);
    glimpse_image *image = demo_picture(0);
    glimpse_task_result result = {.text = (char *)"stale"};
    assert_int_equal(glimpse_run_task(ctx, &image, 1, "<OCR>", NULL, NULL, &result), GLIMPSE_STATUS_WRONG_MODEL);
    assert_non_null(strstr(glimpse_last_error(), "tasks need a task model"));
    assert_null(result.text);
    assert_int_equal(result.region_count, 0);
    assert_no_images_refused(glimpse_run_task(ctx, &image, 0, "<OCR>", NULL, NULL, &result));
    assert_int_equal(glimpse_run_task(ctx, &image, 1, NULL, NULL, NULL, &result), GLIMPSE_STATUS_INVALID_ARGUMENT);
    assert_false(glimpse_model_kind_can(GLIMPSE_MODEL_KIND_BLIP_CAPTION, GLIMPSE_CAPABILITY_TASK));
    glimpse_task_result_free(&result);
    glimpse_task_result_free(NULL);
    glimpse_image_free(image);
    glimpse_context_free(ctx);
    glimpse_model_free(blip);
}

static void assert_same_caption(glimpse_context *ctx, glimpse_image *image, const glimpse_caption_params *a,
                                const glimpse_caption_params *b) {
    glimpse_caption first, second;
    assert_int_equal(glimpse_caption_images(ctx, &image, 1, a, &first), GLIMPSE_STATUS_OK);
    assert_int_equal(glimpse_caption_images(ctx, &image, 1, b, &second), GLIMPSE_STATUS_OK);
    assert_int_equal(first.id_count, second.id_count);
    assert_memory_equal(first.ids, second.ids, first.id_count * sizeof *first.ids);
    glimpse_caption_free(&first), glimpse_caption_free(&second);
}

/* glimpse_dot_rows: every row checked before anything is written (a row past the matrix or negative is
 * refused, out untouched), no rows is nothing to do, and the scores are the rows' inner products, on the
 * caller and over threads (2,000 rows). */
static void test_dot_rows_checks_its_rows(void **state) {
    (void)state;
    enum { COUNT = 3000, DIM = 40, N = 2000 };
    float *matrix = malloc(COUNT * DIM * sizeof *matrix), query[DIM], *out = malloc(N * sizeof *out);
    int64_t *rows = malloc(N * sizeof *rows);
    assert_non_null(matrix), assert_non_null(out), assert_non_null(rows);
    for (size_t i = 0; i < (size_t)COUNT * DIM; i++) matrix[i] = (float)((i * 37) % 101) / 101.0f - 0.5f;
    for (size_t d = 0; d < DIM; d++) query[d] = (float)d / DIM - 0.3f;
    for (size_t i = 0; i < N; i++) rows[i] = (int64_t)((i * 1543) % COUNT);
    for (int threads = 0; threads <= 1; threads++) {
        assert_int_equal(glimpse_dot_rows(matrix, COUNT, DIM, rows, N, query, threads, out), GLIMPSE_STATUS_OK);
        for (size_t i = 0; i < N; i++) {
            double dot = 0;
            for (size_t d = 0; d < DIM; d++) dot += (double)matrix[(size_t)rows[i] * DIM + d] * query[d];
            assert_true(fabs(dot - out[i]) < 1e-5);
        }
    }
    /* rows NULL: the first n rows, never more than the matrix has */
    assert_int_equal(glimpse_dot_rows(matrix, N, DIM, NULL, N + 1, query, 2, out), GLIMPSE_STATUS_INVALID_ARGUMENT);
    assert_int_equal(glimpse_dot_rows(matrix, COUNT, DIM, NULL, N, query, 2, out), GLIMPSE_STATUS_OK);
    for (size_t i = 0; i < N; i++) {
        double dot = 0;
        for (size_t d = 0; d < DIM; d++) dot += (double)matrix[i * DIM + d] * query[d];
        assert_true(fabs(dot - out[i]) < 1e-5);
    }
    for (int64_t bad = 0; bad < 2; bad++) {
        rows[N - 1] = bad ? -1 : COUNT;
        for (size_t i = 0; i < N; i++) out[i] = 7.0f;
        assert_int_equal(glimpse_dot_rows(matrix, COUNT, DIM, rows, N, query, 0, out), GLIMPSE_STATUS_INVALID_ARGUMENT);
        assert_non_null(strstr(glimpse_last_error(), "outside a matrix of 3000 rows"));
        for (size_t i = 0; i < N; i++) assert_true(out[i] == 7.0f);
    }
    assert_int_equal(glimpse_dot_rows(NULL, 0, DIM, NULL, 0, query, 0, NULL), GLIMPSE_STATUS_OK);
    assert_int_equal(glimpse_dot_rows(matrix, COUNT, 0, rows, 1, query, 0, out), GLIMPSE_STATUS_INVALID_ARGUMENT);
    free(matrix), free(out), free(rows);
}

/* The default params leave beams, lengths and penalties to the model: the
 * demo captioner's generation_config.json says 1 beam, max_length 16,
 * min_length 0; a model without one gets glimpse's 3 beams, 5 to 20 tokens. */
static void test_caption_settings_left_to_the_model(void **state) {
    (void)state;
    glimpse_caption_params defaults = glimpse_caption_default_params();
    assert_int_equal(defaults.beams, GLIMPSE_CAPTION_MODEL_DEFAULT);
    assert_int_equal(defaults.max_tokens, GLIMPSE_CAPTION_MODEL_DEFAULT);
    assert_int_equal(defaults.min_tokens, GLIMPSE_CAPTION_MODEL_DEFAULT);
    assert_true(isnan(defaults.length_penalty) && isnan(defaults.repetition_penalty));
    assert_false(defaults.sample);
    glimpse_caption_params glimpse_own = glimpse_caption_model_params(NULL);
    assert_int_equal(glimpse_own.beams, 3);
    assert_int_equal(glimpse_own.max_tokens, 20);
    assert_int_equal(glimpse_own.min_tokens, 5);
    assert_true(glimpse_own.length_penalty == 1.0f && glimpse_own.repetition_penalty == 1.0f);

    glimpse_model *model = load_demo("demo-blip-caption");
    glimpse_caption_params resolved = glimpse_caption_model_params(model);
    assert_int_equal(resolved.beams, 1);
    assert_int_equal(resolved.max_tokens, 15);
    assert_int_equal(resolved.min_tokens, 0);
    assert_true(resolved.length_penalty == 1.0f && resolved.repetition_penalty == 1.0f);
    glimpse_context *ctx;
    assert_int_equal(glimpse_context_create(model, NULL, &ctx), GLIMPSE_STATUS_OK);
    glimpse_image *image = demo_picture(3);
    /* NULL, the defaults and the resolved settings are one caption */
    assert_same_caption(ctx, image, NULL, &defaults);
    assert_same_caption(ctx, image, &defaults, &resolved);
    /* a field set is taken as it is, the others still from the model */
    glimpse_caption_params some = defaults, all = resolved;
    some.beams = all.beams = 3;
    some.max_tokens = all.max_tokens = 4;
    assert_same_caption(ctx, image, &some, &all);
    glimpse_caption caption;
    assert_int_equal(glimpse_caption_images(ctx, &image, 1, &some, &caption), GLIMPSE_STATUS_OK);
    assert_true(caption.id_count <= 1 + 4);
    glimpse_caption_free(&caption);
    /* sampling with the beams left to the model draws one caption; with 3 beams set it is refused */
    glimpse_caption_params sampled = defaults;
    sampled.sample = true;
    assert_int_equal(glimpse_caption_images(ctx, &image, 1, &sampled, &caption), GLIMPSE_STATUS_OK);
    glimpse_caption_free(&caption);
    sampled.beams = 3;
    assert_int_equal(glimpse_caption_images(ctx, &image, 1, &sampled, &caption), GLIMPSE_STATUS_INVALID_ARGUMENT);
    glimpse_image_free(image);
    glimpse_context_free(ctx);
    glimpse_model_free(model);
}

/* A minimum left to the model never exceeds a maximum that is set; a
 * minimum set above the model's maximum is refused. */
static void test_caption_minimum_left_to_the_model(void **state) {
    (void)state;
    char *folder = fixture_path("blip-caption-tiny"); /* no generation_config.json: at least 5 tokens */
    if (!folder) skip();
    glimpse_model *model = load_model(folder, GLIMPSE_PRECISION_FLOAT32);
    glimpse_context *ctx;
    assert_int_equal(glimpse_context_create(model, NULL, &ctx), GLIMPSE_STATUS_OK);
    glimpse_image *image = fixture_image("chelsea.png");
    glimpse_caption_params params = glimpse_caption_default_params();
    params.beams = 1;
    params.max_tokens = 3;
    glimpse_caption caption;
    assert_int_equal(glimpse_caption_images(ctx, &image, 1, &params, &caption), GLIMPSE_STATUS_OK);
    assert_int_equal(caption.id_count, 1 + 3);
    glimpse_caption_free(&caption);
    params = glimpse_caption_default_params();
    params.min_tokens = 21;
    assert_int_equal(glimpse_caption_images(ctx, &image, 1, &params, &caption), GLIMPSE_STATUS_INVALID_ARGUMENT);
    glimpse_image_free(image);
    glimpse_context_free(ctx);
    glimpse_model_free(model);
    free(folder);
}

/* glimpse_image_decode names the bytes by their label, and with prepare_for gives an image that embeds to the
 * same numbers as the picture decoded plainly (the resize done ahead); glimpse_image_prepare does the same to a
 * decoded image, and glimpse_image_resize makes a thumbnail of the size asked. */
static void test_images_decoded_and_prepared_for_a_model(void **state) {
    (void)state;
    glimpse_model *clip = load_demo("demo-clip");
    glimpse_context *ctx;
    assert_int_equal(glimpse_context_create(clip, NULL, &ctx), GLIMPSE_STATUS_OK);
    char *path = file_join(GLIMPSE_SOURCE_DIR, "examples/pictures/00003.png");
    const uint8_t *bytes;
    size_t size;
    assert_int_equal(file_map(path, &bytes, &size), GLIMPSE_STATUS_OK);
    glimpse_image *plain = NULL, *prepared = NULL, *later = demo_picture(3), *bad = NULL, *small = NULL;
    assert_int_equal(glimpse_image_decode(bytes, size, "pictures/three.png", NULL, NULL, false, &plain), GLIMPSE_STATUS_OK);
    assert_int_equal(glimpse_image_decode(bytes, size, NULL, NULL, clip, false, &prepared), GLIMPSE_STATUS_OK);
    assert_int_equal(glimpse_image_prepare(clip, &later), GLIMPSE_STATUS_OK);
    size_t dim = glimpse_model_embedding_dim(clip);
    float a[512], b[512], c[512];
    assert_true(dim <= 512);
    /* the demo CLIP's 64-pixel input is smaller than the picture: a prepared image is resized already */
    assert_true(glimpse_image_width(prepared) < glimpse_image_width(plain));
    assert_int_equal(glimpse_image_width(prepared), glimpse_image_width(later));
    assert_int_equal(glimpse_embed_images(ctx, &plain, 1, a), GLIMPSE_STATUS_OK);
    assert_int_equal(glimpse_embed_images(ctx, &prepared, 1, b), GLIMPSE_STATUS_OK);
    assert_int_equal(glimpse_embed_images(ctx, &later, 1, c), GLIMPSE_STATUS_OK);
    assert_memory_equal(a, b, dim * sizeof(float));
    assert_memory_equal(a, c, dim * sizeof(float));
    assert_int_not_equal(glimpse_image_decode(bytes, size / 3, "pictures/cut.png", NULL, NULL, false, &bad),
                         GLIMPSE_STATUS_OK);
    assert_null(bad);
    assert_non_null(strstr(glimpse_last_error(), "pictures/cut.png"));
    assert_int_equal(glimpse_image_resize(plain, 7, 5, &small), GLIMPSE_STATUS_OK);
    assert_int_equal(glimpse_image_width(small), 7);
    assert_int_equal(glimpse_image_height(small), 5);
    glimpse_image_free(small);
    assert_int_equal(glimpse_image_resize(plain, 0, 5, &small), GLIMPSE_STATUS_INVALID_ARGUMENT);
    assert_null(small);
    glimpse_image_free(plain), glimpse_image_free(prepared), glimpse_image_free(later);
    file_unmap(bytes, size);
    free(path);
    glimpse_context_free(ctx);
    glimpse_model_free(clip);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_zero_items_are_invalid),
        cmocka_unit_test(test_tasks_need_a_task_model),
        cmocka_unit_test(test_dot_rows_checks_its_rows),
        cmocka_unit_test(test_caption_settings_left_to_the_model),
        cmocka_unit_test(test_caption_minimum_left_to_the_model),
        cmocka_unit_test(test_images_decoded_and_prepared_for_a_model),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
