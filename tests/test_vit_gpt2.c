/* test_vit_gpt2.c — ViT-GPT2 snapshots as glimpse-make-model writes them (the
 * published layout, random weights, a small config whose encoder is narrower
 * than its decoder, so enc_to_dec_proj runs): they load and caption in
 * float32, float16 and int8; the generation settings come from config.json's
 * top level when there is no generation_config.json; GPT-2's Conv1D weights
 * are turned, not misread; streamed text never ends in half a character;
 * other encoders and decoders, a decoder without cross-attention and a
 * missing tensor are refused by name. Needs no fixtures. */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "api/context.h"
#include "api/model.h"
#include "core/file.h"
#include "tests/support.h"
#include "weights/names.h"

#define END_ID 2999
static const char small_config[] =
    "{\"architectures\": [\"VisionEncoderDecoderModel\"], \"model_type\": \"vision-encoder-decoder\","
    " \"decoder_start_token_id\": 2999, \"eos_token_id\": 2999, \"pad_token_id\": 2999,"
    " \"num_beams\": 2, \"max_length\": 9,"
    " \"encoder\": {\"model_type\": \"vit\", \"hidden_size\": 24, \"num_hidden_layers\": 2,"
    " \"num_attention_heads\": 4, \"intermediate_size\": 40, \"image_size\": 36, \"patch_size\": 12,"
    " \"qkv_bias\": true},"
    " \"decoder\": {\"model_type\": \"gpt2\", \"n_embd\": 32, \"n_layer\": 2, \"n_head\": 4, \"n_positions\": 40,"
    " \"vocab_size\": 3000, \"add_cross_attention\": true, \"bos_token_id\": 2999, \"eos_token_id\": 2999}}";

/* test_workspace()/NAME from the small config, float16 with half. */
#define MAKE_MODEL(name, half) snapshot_from_config(test_workspace(), small_config, name, (half) ? " --f16" : "")

/* The caption of the smooth picture with params (NULL: the model's settings). */
static glimpse_caption caption_picture(const glimpse_model *model, const glimpse_caption_params *params) {
    glimpse_context *ctx;
    glimpse_image *image = smooth_picture();
    glimpse_caption caption;
    assert_int_equal(glimpse_context_create(model, NULL, &ctx), GLIMPSE_STATUS_OK);
    if (glimpse_caption_images(ctx, &image, 1, params, &caption)) fail_msg("%s", glimpse_last_error());
    glimpse_context_free(ctx);
    glimpse_image_free(image);
    return caption;
}

static void test_random_snapshot(void **state) {
    (void)state;
    char *folder = MAKE_MODEL("float32", 0);
    glimpse_model *model = load_model(folder, GLIMPSE_PRECISION_FLOAT32);
    assert_int_equal(glimpse_model_get_kind(model), GLIMPSE_MODEL_KIND_VIT_GPT2);
    assert_int_equal(test_blocks(model).vision->tokens, 10); /* 3 × 3 patches and the class token */
    assert_non_null(test_blocks(model).gpt2->projection_weight.data); /* 24 → 32: enc_to_dec_proj */
    assert_ptr_equal(test_blocks(model).gpt2->head.data, test_blocks(model).gpt2->token_embedding.data);
    assert_int_equal(test_blocks(model).gpt2->config.intermediate_size, 128); /* n_inner left out: 4 · n_embd */
    /* no generation_config.json: config.json's top level, as transformers' from_model_config */
    glimpse_caption_params settings = glimpse_caption_model_params(model);
    assert_int_equal(settings.beams, 2);
    assert_int_equal(settings.max_tokens, 8);
    assert_int_equal(settings.min_tokens, 0);
    glimpse_caption caption = caption_picture(model, NULL);
    assert_true(caption.id_count >= 2 && caption.id_count <= 9);
    assert_int_equal(caption.ids[0], END_ID);
    assert_non_null(caption.text);
    glimpse_caption_free(&caption);
    /* int8: the same call runs on the quantized projections */
    glimpse_model *quantized = load_model(folder, GLIMPSE_PRECISION_INT8);
    caption = caption_picture(quantized, NULL);
    assert_true(caption.id_count >= 2 && caption.id_count <= 9);
    glimpse_caption_free(&caption);
    glimpse_model_free(quantized);
    glimpse_model_free(model);
    free(folder);
}

/* Value [row][column] of a stored float32 or float16 matrix with `columns` columns. */
static float stored_value(const tensor_entry *entry, size_t row, size_t column, size_t columns) {
    size_t at = row * columns + column;
    if (entry->dtype == TENSOR_DTYPE_F32) {
        float value;
        memcpy(&value, entry->data + at * 4, 4);
        return value;
    }
    return kernel_f16_to_f32((uint16_t)(entry->data[at * 2] | entry->data[at * 2 + 1] << 8));
}

/* Every Conv1D weight [in, out] reaches the products as [out, in]: element (o, i) is the file's (i, o). */
static void expect_turned(const glimpse_model *model) {
    const gpt2_layer *layer = &test_blocks(model).gpt2->layers[1];
    const tensor_entry *entry = weight_store_find(model->store, "decoder.transformer.h.1.attn.c_attn.weight");
    assert_non_null(entry);
    size_t h = 32;
    assert_int_equal(entry->shape[0], h);
    assert_int_equal(entry->shape[1], 3 * h);
    for (size_t o = 0; o < 3 * h; o++)
        for (size_t i = 0; i < h; i++) {
            float want = stored_value(entry, i, o, 3 * h), got;
            if (layer->qkv_weight.type == WEIGHT_TYPE_F32)
                got = ((const float *)layer->qkv_weight.data)[o * h + i];
            else
                got = kernel_f16_to_f32(((const uint16_t *)layer->qkv_weight.data)[o * h + i]);
            if (got != want) fail_msg("c_attn (%zu, %zu): %g, the file's (%zu, %zu) is %g", o, i, got, i, o, want);
        }
}

/* The first step's logits of the smooth picture. */
static float *first_logits(const glimpse_model *model) {
    size_t tokens = test_blocks(model).vision->tokens, hidden = (size_t)test_blocks(model).vision->config.hidden_size;
    size_t size = (size_t)test_blocks(model).vision->config.image_size, vocab = (size_t)test_blocks(model).gpt2->config.vocab_size;
    float *pixels = malloc(3 * size * size * sizeof(float)), *encoded = malloc(tokens * hidden * sizeof(float));
    float *logits = malloc(vocab * sizeof(float));
    glimpse_image *image = smooth_picture();
    assert_int_equal(preprocess_image(pixels, image, &model->preprocess), GLIMPSE_STATUS_OK);
    vit_state *vision;
    gpt2_state *decoder;
    assert_int_equal(vit_state_create(test_blocks(model).vision, 1, &vision), GLIMPSE_STATUS_OK);
    vit_forward(test_blocks(model).vision, vision, pixels, 1, ENCODER_OUTPUT_ALL_ROWS, NULL);
    vit_post_norm_all(test_blocks(model).vision, vision, 0, encoded);
    assert_int_equal(gpt2_state_create(test_blocks(model).gpt2, 1, 4, 4, tokens, &decoder), GLIMPSE_STATUS_OK);
    assert_int_equal(gpt2_set_image(test_blocks(model).gpt2, decoder, encoded, tokens, NULL), GLIMPSE_STATUS_OK);
    assert_int_equal(gpt2_decode_step(test_blocks(model).gpt2, decoder, &model->start_id, 1, 1, NULL), GLIMPSE_STATUS_OK);
    memcpy(logits, decoder->logits, vocab * sizeof(float));
    gpt2_state_free(decoder);
    vit_state_free(vision);
    glimpse_image_free(image);
    free(pixels), free(encoded);
    return logits;
}

/* The cosine of two first-step logits. */
static double logits_cosine(const float *a, const float *b) {
    double dot = 0, aa = 0, bb = 0;
    for (int i = 0; i < 3000; i++) dot += (double)a[i] * b[i], aa += (double)a[i] * a[i], bb += (double)b[i] * b[i];
    return dot / sqrt(aa * bb);
}

/* The float16 file's weights are the float32 file's rounded, int8's quantized from them: the first step's logits
 * agree closely. */
static void test_conv1d_float16_int8(void **state) {
    (void)state;
    char *exact_folder = MAKE_MODEL("float32", 0), *half_folder = MAKE_MODEL("float16", 1);
    glimpse_model *exact = load_model(exact_folder, GLIMPSE_PRECISION_FLOAT32);
    glimpse_model *half = load_model(half_folder, GLIMPSE_PRECISION_FLOAT32);
    expect_turned(exact);
    expect_turned(half);
    glimpse_model *quantized = load_model(exact_folder, GLIMPSE_PRECISION_INT8);
    float *a = first_logits(exact), *b = first_logits(half), *q = first_logits(quantized);
    note_difference("vit-gpt2 float16 logits, 1 - cosine", 1 - logits_cosine(a, b));
    note_difference("vit-gpt2 int8 logits, 1 - cosine", 1 - logits_cosine(a, q));
    assert_true(logits_cosine(a, b) > 0.999);
    assert_true(logits_cosine(a, q) > 0.99);
    glimpse_model_free(quantized);
    free(q);
    glimpse_caption caption = caption_picture(half, NULL);
    assert_true(caption.id_count >= 2);
    glimpse_caption_free(&caption);
    free(a), free(b);
    glimpse_model_free(exact), glimpse_model_free(half);
    free(exact_folder), free(half_folder);
}

/* Every text the token callback streams is the start of the final caption: a character whose bytes are split over
 * tokens waits for its last byte instead of showing as U+FFFD first. Sampling nearly uniformly over the small
 * vocabulary draws raw bytes often (ids 0-255), lead bytes of multi-byte characters among them. */
typedef struct prefixes {
    char texts[64][512];
    size_t count;
} prefixes;

static bool keep_text(void *user, size_t image, int32_t id, const char *text) {
    (void)image, (void)id;
    prefixes *p = user;
    if (p->count < 64) snprintf(p->texts[p->count++], 512, "%s", text);
    return false;
}

static void test_streaming_whole_characters(void **state) {
    (void)state;
    char *folder = MAKE_MODEL("float32", 0);
    glimpse_model *model = load_model(folder, GLIMPSE_PRECISION_FLOAT32);
    glimpse_caption_params p = glimpse_caption_default_params();
    p.sample = true, p.top_k = 0, p.temperature = 50.0f, p.max_tokens = 30, p.min_tokens = 30, p.beams = 1;
    p.on_token = keep_text;
    int held_back = 0;
    for (uint64_t seed = 0; seed < 40; seed++) {
        prefixes kept = {.count = 0};
        p.seed = seed, p.user = &kept;
        glimpse_caption caption = caption_picture(model, &p);
        assert_int_equal(kept.count, caption.id_count - 1);
        for (size_t i = 0; i < kept.count && caption.ids[i + 1] != 0; i++) { /* byte 0 ends the C strings */
            size_t length = strlen(kept.texts[i]);
            if (strncmp(kept.texts[i], caption.text, length) != 0)
                fail_msg("seed %llu: streamed '%s' is not the start of '%s'", (unsigned long long)seed, kept.texts[i],
                         caption.text);
            /* a lead byte's token: the text so far would end in U+FFFD, and does not */
            int32_t id = caption.ids[i + 1];
            if (id >= 0xC2 && id <= 0xF4 && (length < 3 || memcmp(kept.texts[i] + length - 3, "\xEF\xBF\xBD", 3)))
                held_back++;
        }
        glimpse_caption_free(&caption);
    }
    assert_true(held_back > 0);
    glimpse_model_free(model);
    free(folder);
}

/* The snapshot with config.json replaced by the small config changed by `change` (a JSON object merged into
 * "encoder" or "decoder"): the load's status, and its message in *message. */
static glimpse_status load_changed(const char *folder, const char *section, const char *change, char *message,
                                   size_t capacity) {
    cJSON *config = cJSON_Parse(small_config), *patch = cJSON_Parse(change);
    cJSON *target = cJSON_GetObjectItem(config, section);
    cJSON *item;
    cJSON_ArrayForEach(item, patch) {
        cJSON_DeleteItemFromObject(target, item->string);
        cJSON_AddItemToObject(target, item->string, cJSON_Duplicate(item, 1));
    }
    char *text = cJSON_Print(config), *path = file_join(folder, "config.json");
    write_text_file(path, text);
    glimpse_model *model = NULL;
    glimpse_status status = glimpse_model_load(folder, NULL, &model);
    snprintf(message, capacity, "%s", status ? glimpse_last_error() : "");
    glimpse_model_free(model);
    write_text_file(path, small_config);
    free(text), free(path);
    cJSON_Delete(config), cJSON_Delete(patch);
    return status;
}

static void test_refusals(void **state) {
    (void)state;
    char *folder = MAKE_MODEL("float32", 0), message[1024];
    assert_int_equal(load_changed(folder, "encoder", "{\"model_type\": \"deit\"}", message, sizeof message),
                     GLIMPSE_STATUS_UNSUPPORTED);
    assert_non_null(strstr(message, "deit"));
    assert_int_equal(load_changed(folder, "decoder", "{\"model_type\": \"bert\"}", message, sizeof message),
                     GLIMPSE_STATUS_UNSUPPORTED);
    assert_int_equal(load_changed(folder, "encoder", "{\"qkv_bias\": false}", message, sizeof message),
                     GLIMPSE_STATUS_UNSUPPORTED);
    assert_int_equal(load_changed(folder, "decoder", "{\"add_cross_attention\": false}", message, sizeof message),
                     GLIMPSE_STATUS_UNSUPPORTED);
    assert_non_null(strstr(message, "cross-attention"));
    assert_int_equal(load_changed(folder, "decoder", "{\"n_layer\": 3}", message, sizeof message),
                     GLIMPSE_STATUS_NOT_FOUND);
    assert_non_null(strstr(message, "decoder.transformer.h.2.attn.c_attn.weight"));
    /* a width that does not match the file: the Conv1D shape is named, as stored ([in, out]) */
    assert_int_equal(load_changed(folder, "decoder", "{\"n_inner\": 64}", message, sizeof message),
                     GLIMPSE_STATUS_BAD_FORMAT);
    assert_non_null(strstr(message, "mlp.c_fc.weight"));
    /* the snapshot itself still loads */
    glimpse_model *model = load_model(folder, GLIMPSE_PRECISION_FLOAT32);
    glimpse_model_free(model);
    free(folder);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_snapshot),
        cmocka_unit_test(test_conv1d_float16_int8),
        cmocka_unit_test(test_streaming_whole_characters),
        cmocka_unit_test(test_refusals),
    };
    return report_differences(
        cmocka_run_group_tests_name("vit-gpt2 snapshots", tests, workspace_setup, workspace_teardown));
}
