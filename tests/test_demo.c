/* test_demo.c — the bundled demo models really caption and rank: on 200
 * pictures freshly drawn with a seed the training never used (training drew
 * with seeds 1 and 2), the C runtime's captions must be right for at least
 * 90% (right = it truly describes the picture: same shapes and colours, and
 * for two shapes the true relation for the order it names them in, since the
 * training captions name either shape first); and for groups of 20 pictures
 * with distinct captions, each caption must rank its own picture first at
 * least 90% of the time. */
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
#include "tools/pictures.h"

#define TEST_SEED 20261129u /* never used by tools/train/train_demo.py */

static glimpse_image *draw(picture_generator *generator, picture_scene *scene) {
    static uint8_t pixels[PICTURE_SIDE * PICTURE_SIDE * 3];
    picture_draw(generator, pixels, scene);
    glimpse_image *image = NULL;
    if (glimpse_image_from_pixels(pixels, PICTURE_SIDE, PICTURE_SIDE, 0, GLIMPSE_PIXEL_FORMAT_RGB8, &image))
        fail_msg("%s", glimpse_last_error());
    return image;
}

static glimpse_model *load(const char *name) {
    char *path = file_join(GLIMPSE_SOURCE_DIR "/examples/models", name);
    glimpse_model *model = NULL;
    if (glimpse_model_load(path, NULL, &model)) fail_msg("%s: %s", path, glimpse_last_error());
    free(path);
    return model;
}

static void test_captions_are_right(void **state) {
    (void)state;
    glimpse_model *model = load("demo-blip-caption");
    glimpse_context *ctx;
    assert_int_equal(glimpse_context_create(model, NULL, &ctx), GLIMPSE_STATUS_OK);
    glimpse_caption_params params = glimpse_caption_model_params(model);
    picture_generator generator;
    picture_generator_init(&generator, TEST_SEED);
    int right = 0, total = 200, shown = 0;
    for (int i = 0; i < total; i++) {
        picture_scene scene;
        glimpse_image *image = draw(&generator, &scene);
        glimpse_caption caption;
        assert_int_equal(glimpse_caption_images(ctx, &image, 1, &params, &caption),
                         GLIMPSE_STATUS_OK);
        if (picture_caption_is_true(&scene, caption.text))
            right++;
        else if (shown++ < 5)
            fprintf(stderr, "wrong: \"%s\" for \"%s\"\n", caption.text, scene.caption);
        glimpse_caption_free(&caption);
        glimpse_image_free(image);
    }
    fprintf(stderr, "demo captioner: %d of %d pictures captioned right (%.1f%%)\n", right, total, 100.0 * right / total);
    assert_true(right * 10 >= total * 9);
    glimpse_context_free(ctx);
    glimpse_model_free(model);
}

static void test_captions_rank_their_pictures_first(void **state) {
    (void)state;
    glimpse_model *model = load("demo-clip");
    glimpse_context *ctx;
    assert_int_equal(glimpse_context_create(model, NULL, &ctx), GLIMPSE_STATUS_OK);
    size_t dim = glimpse_model_embedding_dim(model);
    picture_generator generator;
    picture_generator_init(&generator, TEST_SEED + 1);
    enum { GROUP = 20, GROUPS = 5 };
    int right = 0, total = 0;
    for (int g = 0; g < GROUPS; g++) {
        picture_scene scenes[GROUP];
        glimpse_image *images[GROUP];
        const char *captions[GROUP];
        int n = 0;
        while (n < GROUP) { /* pictures whose captions describe no other picture of the group */
            picture_scene scene;
            glimpse_image *image = draw(&generator, &scene);
            int clash = 0;
            for (int j = 0; j < n && !clash; j++)
                clash = picture_caption_is_true(&scenes[j], scene.caption) ||
                        picture_caption_is_true(&scene, scenes[j].caption);
            if (clash) {
                glimpse_image_free(image);
                continue;
            }
            scenes[n] = scene;
            images[n++] = image;
        }
        for (int j = 0; j < GROUP; j++) captions[j] = scenes[j].caption;
        float image_embeddings[GROUP * 512], text_embeddings[GROUP * 512], logits[GROUP * GROUP];
        assert_true(dim <= 512);
        assert_int_equal(glimpse_embed_images(ctx, images, GROUP, image_embeddings),
                         GLIMPSE_STATUS_OK);
        assert_int_equal(glimpse_embed_texts(ctx, captions, GROUP, text_embeddings), GLIMPSE_STATUS_OK);
        assert_int_equal(glimpse_score(model, image_embeddings, GROUP, text_embeddings, GROUP, logits), GLIMPSE_STATUS_OK);
        for (int t = 0; t < GROUP; t++) {
            int best = 0;
            for (int i = 1; i < GROUP; i++)
                if (logits[i * GROUP + t] > logits[best * GROUP + t]) best = i;
            right += best == t;
            total++;
        }
        for (int j = 0; j < GROUP; j++) glimpse_image_free(images[j]);
    }
    fprintf(stderr, "demo dual encoder: %d of %d captions rank their own picture first (%.1f%%)\n", right, total,
            100.0 * right / total);
    assert_true(right * 10 >= total * 9);
    glimpse_context_free(ctx);
    glimpse_model_free(model);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_captions_are_right),
        cmocka_unit_test(test_captions_rank_their_pictures_first),
    };
    return cmocka_run_group_tests_name("demo models", tests, NULL, NULL);
}
