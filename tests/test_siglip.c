/* test_siglip.c — SigLIP snapshots as glimpse-make-model writes them (the
 * published layout, random weights, a small config): they load, embed an
 * image and a text through the public API, and score with logit_bias; the
 * float16 file gives the float32 file's embeddings; an image size that is not
 * a multiple of the patch (so400m's 384 in 14s) drops its edge as the
 * convolution does; configs whose towers disagree are refused. Needs no
 * fixtures. */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "api/model.h"
#include "core/file.h"
#include "tests/support.h"
#include "weights/names.h"


/* 36 pixels in patches of 8: 4 × 4 patches and 4 pixels left at the right and bottom edges. */
static const char small_config[] =
    "{\"architectures\": [\"SiglipModel\"], \"model_type\": \"siglip\","
    " \"text_config\": {\"hidden_size\": 32, \"intermediate_size\": 48, \"num_hidden_layers\": 2,"
    " \"num_attention_heads\": 4, \"vocab_size\": 100, \"model_type\": \"siglip_text_model\"},"
    " \"vision_config\": {\"hidden_size\": 32, \"intermediate_size\": 48, \"num_hidden_layers\": 2,"
    " \"num_attention_heads\": 4, \"image_size\": 36, \"patch_size\": 8, \"model_type\": \"siglip_vision_model\"}}";

/* workspace/NAME from the small config, float16 with half. */
static char *make_model(const char *name, int half) {
    return snapshot_from_config(test_workspace(), small_config, name, half ? " --f16" : "");
}

/* out[0 .. dim) the image's embedding, out[dim .. 2·dim) the text's. */
static void embed_both(const glimpse_model *model, const char *text, float *out) {
    glimpse_context *ctx;
    glimpse_image *image = smooth_picture();
    assert_int_equal(glimpse_context_create(model, NULL, &ctx), GLIMPSE_STATUS_OK);
    assert_int_equal(glimpse_embed_images(ctx, &image, 1, out), GLIMPSE_STATUS_OK);
    assert_int_equal(glimpse_embed_texts(ctx, &text, 1, out + glimpse_model_embedding_dim(model)), GLIMPSE_STATUS_OK);
    glimpse_context_free(ctx);
    glimpse_image_free(image);
}

static void test_random_snapshot(void **state) {
    (void)state;
    char *folder = make_model("float32", 0);
    glimpse_model *model = load_model(folder, GLIMPSE_PRECISION_FLOAT32);
    glimpse_model_info info;
    assert_int_equal(glimpse_model_get_info(model, &info), GLIMPSE_STATUS_OK);
    assert_int_equal(info.kind, GLIMPSE_MODEL_KIND_SIGLIP);
    assert_int_equal(info.embedding_dim, 32);
    assert_int_equal(info.text_max_tokens, 64);      /* SigLIP's default, absent from the config */
    assert_string_equal(info.text_activation, "gelu_pytorch_tanh");
    assert_int_equal(test_blocks(model).vision->tokens, 16);      /* 4 × 4 patches, no class token */
    assert_float_equal(info.logit_bias, -10.0f, 0);  /* what glimpse-make-model writes */
    float embeddings[64], logit;
    embed_both(model, "a photo of a cat", embeddings);
    for (int e = 0; e < 2; e++) {
        double norm = 0;
        for (int d = 0; d < 32; d++) norm += (double)embeddings[e * 32 + d] * embeddings[e * 32 + d];
        assert_float_equal(norm, 1.0, 1e-5);
    }
    double cosine = 0;
    for (int d = 0; d < 32; d++) cosine += (double)embeddings[d] * embeddings[32 + d];
    assert_int_equal(glimpse_score(model, embeddings, 1, embeddings + 32, 1, &logit), GLIMPSE_STATUS_OK);
    assert_float_equal(logit, info.logit_scale * cosine + info.logit_bias, 1e-4);
    glimpse_model_free(model);
    free(folder);
}

/* The float16 file's weights are the float32 file's rounded: the embeddings agree closely. */
static void test_float16_snapshot(void **state) {
    (void)state;
    char *exact_folder = make_model("float32", 0), *half_folder = make_model("float16", 1);
    glimpse_model *exact = load_model(exact_folder, GLIMPSE_PRECISION_FLOAT32);
    glimpse_model *half = load_model(half_folder, GLIMPSE_PRECISION_FLOAT32);
    float a[64], b[64];
    embed_both(exact, "a dog", a);
    embed_both(half, "a dog", b);
    for (int e = 0; e < 2; e++) {
        double cosine = 0;
        for (int d = 0; d < 32; d++) cosine += (double)a[e * 32 + d] * b[e * 32 + d];
        assert_true(cosine > 0.999);
    }
    glimpse_model_free(exact), glimpse_model_free(half);
    free(exact_folder), free(half_folder);
}

/* 36 pixels in patches of 8: the last 4 rows and columns are dropped, so the
 * tower gives exactly what the same weights give on the 32 × 32 top-left crop. */
static void test_patch_remainder(void **state) {
    (void)state;
    char *folder = make_model("float32", 0);
    glimpse_model *model = load_model(folder, GLIMPSE_PRECISION_FLOAT32);
    cJSON *vision_json = cJSON_Duplicate(cJSON_GetObjectItem(model->config, "vision_config"), 1);
    cJSON_ReplaceItemInObject(vision_json, "image_size", cJSON_CreateNumber(32));
    vit_config config;
    vit_model cropped;
    assert_int_equal(vit_config_read(vision_json, "test", VIT_VARIANT_SIGLIP, &config), GLIMPSE_STATUS_OK);
    assert_int_equal(vit_model_load(&cropped, &config, &names_siglip.vision, model->store), GLIMPSE_STATUS_OK);
    float pixels[3][36][36], crop[3][32][32], whole_embedding[32], crop_embedding[32];
    for (int c = 0; c < 3; c++)
        for (int y = 0; y < 36; y++)
            for (int x = 0; x < 36; x++) {
                pixels[c][y][x] = sinf(0.3f * (float)(x + 2 * y + 5 * c));
                if (y < 32 && x < 32) crop[c][y][x] = pixels[c][y][x];
            }
    vit_state *whole_run, *crop_run;
    assert_int_equal(vit_state_create(test_blocks(model).vision, 1, &whole_run), GLIMPSE_STATUS_OK);
    assert_int_equal(vit_state_create(&cropped, 1, &crop_run), GLIMPSE_STATUS_OK);
    vit_forward(test_blocks(model).vision, whole_run, &pixels[0][0][0], 1, ENCODER_OUTPUT_ALL_ROWS, NULL);
    vit_forward(&cropped, crop_run, &crop[0][0][0], 1, ENCODER_OUTPUT_ALL_ROWS, NULL);
    vit_embed(test_blocks(model).vision, whole_run, 0, whole_embedding);
    vit_embed(&cropped, crop_run, 0, crop_embedding);
    assert_memory_equal(whole_embedding, crop_embedding, sizeof whole_embedding);
    vit_state_free(whole_run), vit_state_free(crop_run);
    vit_model_free(&cropped);
    cJSON_Delete(vision_json);
    glimpse_model_free(model);
    free(folder);
}

/* Towers embedding in different sizes cannot be compared: refused, naming both. */
static void test_towers_must_agree(void **state) {
    (void)state;
    char *folder = make_model("float32", 0), *config = file_join(folder, "config.json");
    char *changed = strdup(small_config);
    memcpy(strstr(changed, "\"hidden_size\": 32"), "\"hidden_size\": 48", 17); /* the text tower's */
    write_text_file(config, changed);
    glimpse_model *model = NULL;
    assert_int_equal(glimpse_model_load(folder, NULL, &model), GLIMPSE_STATUS_UNSUPPORTED);
    assert_null(model);
    assert_non_null(strstr(glimpse_last_error(), "embeds in 32 dimensions, the text tower's head in 48"));
    free(changed), free(config), free(folder);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_snapshot), cmocka_unit_test(test_float16_snapshot),
        cmocka_unit_test(test_patch_remainder), cmocka_unit_test(test_towers_must_agree),
    };
    return cmocka_run_group_tests_name("siglip", tests, workspace_setup, workspace_teardown);
}
