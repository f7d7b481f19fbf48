/* test_blip2.c — BLIP-2 snapshots as glimpse-make-model writes them (the
 * published layout in two shards, random weights, a small config): float32
 * and float16 (torch_dtype float16, as Salesforce/blip2-opt-2.7b's) load,
 * caption and answer through the public API, the float16 file's weights
 * staying 16-bit; a missing shard and a language projection OPT cannot take
 * are refused with clear errors. Needs no fixtures. */
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


/* 28 pixels in patches of 14, 4 queries, Q-Former cross-attention in layers 0 and 2, OPT of 2 layers. */
#define SMALL_CONFIG(DTYPE, PROJ) SMALL_CONFIG_LN(DTYPE, PROJ, "true")
#define SMALL_CONFIG_LN(DTYPE, PROJ, PRE_LN)                                                                           \
    "{\"architectures\": [\"Blip2ForConditionalGeneration\"], \"model_type\": \"blip-2\", \"num_query_tokens\": 4,"  \
    " \"torch_dtype\": \"" DTYPE "\","                                                                                \
    " \"vision_config\": {\"hidden_size\": 32, \"intermediate_size\": 48, \"num_hidden_layers\": 2,"                  \
    " \"num_attention_heads\": 2, \"image_size\": 28, \"patch_size\": 14, \"layer_norm_eps\": 1e-5},"                 \
    " \"qformer_config\": {\"hidden_size\": 24, \"intermediate_size\": 40, \"num_hidden_layers\": 3,"                 \
    " \"num_attention_heads\": 2, \"cross_attention_frequency\": 2, \"encoder_hidden_size\": 32},"                    \
    " \"text_config\": {\"hidden_size\": 16, \"ffn_dim\": 32, \"num_hidden_layers\": 2, \"num_attention_heads\": 2,"  \
    " \"vocab_size\": 300, \"max_position_embeddings\": 64, \"word_embed_proj_dim\": " PROJ ","                       \
    " \"bos_token_id\": 2, \"eos_token_id\": 2, \"pad_token_id\": 1, \"do_layer_norm_before\": " PRE_LN "}}"

static void caption_and_ask(const glimpse_model *model) {
    glimpse_context *ctx;
    glimpse_image *image = smooth_picture();
    assert_int_equal(glimpse_context_create(model, NULL, &ctx), GLIMPSE_STATUS_OK);
    glimpse_caption_params p = glimpse_caption_default_params();
    p.min_tokens = 5; /* not to stop at once on the end token */
    glimpse_caption caption;
    if (glimpse_caption_images(ctx, &image, 1, &p, &caption)) fail_msg("%s", glimpse_last_error());
    assert_true(caption.id_count >= 6 && caption.id_count <= 20);
    assert_int_equal(caption.ids[0], 2);
    assert_non_null(caption.text);
    glimpse_caption_free(&caption);
    p.beams = 3;
    assert_int_equal(glimpse_ask_images(ctx, &image, 1, "what is it?", &p, &caption), GLIMPSE_STATUS_OK);
    assert_int_equal(caption.ids[0], 2);
    glimpse_caption_free(&caption);
    glimpse_context_free(ctx);
    glimpse_image_free(image);
}

static void test_random_snapshots(void **state) {
    (void)state;
    char *exact = snapshot_from_config(test_workspace(), SMALL_CONFIG("float32", "16"), "float32", "");
    char *half = snapshot_from_config(test_workspace(), SMALL_CONFIG("float16", "16"), "float16", "");
    const char *folders[2] = {exact, half}, *dtypes[2] = {"F32", "F16"};
    for (int i = 0; i < 2; i++) {
        char *index = file_join(folders[i], "model.safetensors.index.json");
        char *shard = file_join(folders[i], "model-00002-of-00002.safetensors");
        assert_true(file_is_regular(index) && file_is_regular(shard)); /* two shards, as the hub's */
        glimpse_model *model = load_model(folders[i], GLIMPSE_PRECISION_FLOAT32);
        glimpse_model_info info;
        assert_int_equal(glimpse_model_get_info(model, &info), GLIMPSE_STATUS_OK);
        assert_int_equal(info.kind, GLIMPSE_MODEL_KIND_BLIP2);
        assert_string_equal(info.weight_dtype, dtypes[i]);
        assert_int_equal(info.text_hidden_size, 16);
        assert_int_equal(info.vocab_size, 300);
        assert_int_equal(test_blocks(model).vision->tokens, 5);
        assert_int_equal(test_blocks(model).qformer->queries, 4);
        assert_null(test_blocks(model).qformer->bert.layers[1].cross_key_weight.data);
        caption_and_ask(model);
        glimpse_model_free(model);
        /* a shard missing: named */
        assert_int_equal(remove(shard), 0);
        model = NULL;
        assert_int_equal(glimpse_model_load(folders[i], NULL, &model), GLIMPSE_STATUS_NOT_FOUND);
        assert_null(model);
        assert_non_null(strstr(glimpse_last_error(), "model-00002-of-00002.safetensors"));
        free(index), free(shard);
    }
    free(exact), free(half);
}

/* A generation_config.json that names none of the search settings (as later hub revisions of
 * Salesforce/blip2-opt-2.7b have it) leaves generate's defaults, not BLIP's: greedy, max_length 20, no minimum. */
static void test_generation_config_defaults(void **state) {
    (void)state;
    char *folder = snapshot_from_config(test_workspace(), SMALL_CONFIG("float32", "16"), "generation", " --shards 1");
    char *path = file_join(folder, "generation_config.json");
    write_text_file(path, "{\"bos_token_id\": 2, \"eos_token_id\": 50118, \"pad_token_id\": 1}");
    glimpse_model *model = load_model(folder, GLIMPSE_PRECISION_FLOAT32);
    glimpse_caption_params p = glimpse_caption_model_params(model);
    assert_int_equal(p.beams, 1);
    assert_int_equal(p.max_tokens, 19);
    assert_int_equal(p.min_tokens, 0);
    glimpse_model_free(model);
    write_text_file(path, "[1, 2]");
    model = NULL;
    assert_int_equal(glimpse_model_load(folder, NULL, &model), GLIMPSE_STATUS_BAD_FORMAT);
    assert_non_null(strstr(glimpse_last_error(), "not a JSON object"));
    free(path), free(folder);
}

/* OPT with do_layer_norm_before false (facebook/opt-350m's post-LN layers): no final LayerNorm is read, and
 * it captions. */
static void test_post_layer_norm(void **state) {
    (void)state;
    char *folder =
        snapshot_from_config(test_workspace(), SMALL_CONFIG_LN("float32", "16", "false"), "post-ln", " --shards 1");
    glimpse_model *model = load_model(folder, GLIMPSE_PRECISION_FLOAT32);
    assert_false(test_blocks(model).language_model->config.layer_norm_before);
    assert_null(test_blocks(model).language_model->final_norm_weight);
    caption_and_ask(model);
    glimpse_model_free(model);
    free(folder);
}

/* transformers puts the projected queries and OPT's word embeddings in one sequence: their widths must agree. */
static void test_projection_must_fit(void **state) {
    (void)state;
    char *folder = snapshot_from_config(test_workspace(), SMALL_CONFIG("float32", "12"), "narrow", " --shards 1");
    glimpse_model *model = NULL;
    assert_int_equal(glimpse_model_load(folder, NULL, &model), GLIMPSE_STATUS_UNSUPPORTED);
    assert_null(model);
    assert_non_null(strstr(glimpse_last_error(), "OPT's word embeddings have 12"));
    free(folder);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_snapshots),
        cmocka_unit_test(test_projection_must_fit),
        cmocka_unit_test(test_generation_config_defaults),
        cmocka_unit_test(test_post_layer_norm),
    };
    return cmocka_run_group_tests_name("blip2", tests, workspace_setup, workspace_teardown);
}
