/* test_16bit.c — float16 and bfloat16 checkpoints run with their weight
 * matrices kept 16-bit (mapped in place where the AVX-512 kernels run) and
 * give exactly what the same numbers stored as float32 give: embeddings,
 * caption token ids (greedy and beams), ITM scores, and int8 results. Each
 * 16-bit model is compared with a float32 copy of itself written here (every
 * value widened exactly), so any difference is the runtime's, not rounding.
 * Uses the demo models (float16) and, when present, the BLIP ITM fixture
 * (converted to bfloat16). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cjson/cJSON.h>
#include <cmocka.h>

#include "core/cpu.h"
#include "core/file.h"
#include "glimpse.h"
#include "core/kernels.h"
#include "tools/pictures.h"
#include "weights/safetensors.h"
#include "tests/support.h"

static uint16_t to_bf16(float value) { /* round to nearest even (finite values) */
    uint32_t bits;
    memcpy(&bits, &value, sizeof bits);
    bits += 0x7fffu + ((bits >> 16) & 1u);
    return (uint16_t)(bits >> 16);
}

/* A copy of the snapshot folder `from` in a new temporary folder, its other
 * files linked and model.safetensors rewritten with every float tensor as
 * `dtype` ("F32": widened exactly; "BF16": rounded). Caller frees the path. */
static char *convert_snapshot(const char *from, const char *dtype) {
    char *to = strdup("/tmp/glimpse-16bit-XXXXXX");
    if (!mkdtemp(to)) fail_msg("mkdtemp failed");
    const char *names[] = {"config.json", "preprocessor_config.json", "tokenizer.json", "tokenizer_config.json",
                           "special_tokens_map.json", "vocab.txt", "vocab.json", "merges.txt", "added_tokens.json",
                           "generation_config.json"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char *source = file_join(from, names[i]), *link = file_join(to, names[i]);
        if (file_is_regular(source) && symlink(source, link) != 0) fail_msg("cannot link %s", link);
        free(source), free(link);
    }
    char *weights = file_join(from, "model.safetensors");
    safetensors *file;
    if (safetensors_open(weights, &file)) fail_msg("%s", glimpse_last_error());
    int bf16 = strcmp(dtype, "BF16") == 0;
    size_t total = 0;
    for (size_t i = 0; i < file->count; i++) {
        const tensor_entry *e = &file->entries[i];
        total += e->dtype == TENSOR_DTYPE_OTHER ? e->bytes : e->elements * (bf16 ? 2 : 4);
    }
    uint8_t *data = malloc(total ? total : 1);
    cJSON *header = cJSON_CreateObject();
    size_t at = 0;
    for (size_t i = 0; i < file->count; i++) {
        const tensor_entry *e = &file->entries[i];
        cJSON *entry = cJSON_AddObjectToObject(header, e->name);
        cJSON_AddStringToObject(entry, "dtype", e->dtype == TENSOR_DTYPE_OTHER ? e->dtype_name : dtype);
        cJSON *shape = cJSON_AddArrayToObject(entry, "shape");
        for (int d = 0; d < e->rank; d++) cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)e->shape[d]));
        size_t bytes = e->dtype == TENSOR_DTYPE_OTHER ? e->bytes : e->elements * (bf16 ? 2 : 4);
        if (e->dtype == TENSOR_DTYPE_OTHER) {
            memcpy(data + at, e->data, bytes);
        } else {
            float *wide = malloc(e->elements * sizeof *wide + 1);
            kernel_widen(wide, e->data, e->dtype == TENSOR_DTYPE_F16    ? WEIGHT_TYPE_F16
                                        : e->dtype == TENSOR_DTYPE_BF16 ? WEIGHT_TYPE_BF16
                                                                        : WEIGHT_TYPE_F32,
                         e->elements);
            for (size_t k = 0; k < e->elements; k++) {
                if (bf16) {
                    uint16_t h = to_bf16(wide[k]);
                    data[at + 2 * k] = (uint8_t)h, data[at + 2 * k + 1] = (uint8_t)(h >> 8);
                } else {
                    memcpy(data + at + 4 * k, &wide[k], 4);
                }
            }
            free(wide);
        }
        cJSON *offsets = cJSON_AddArrayToObject(entry, "data_offsets");
        cJSON_AddItemToArray(offsets, cJSON_CreateNumber((double)at));
        cJSON_AddItemToArray(offsets, cJSON_CreateNumber((double)(at + bytes)));
        at += bytes;
    }
    char *text = cJSON_PrintUnformatted(header);
    size_t length = strlen(text), padded = (length + 8 + 7) / 8 * 8 - 8; /* data 8-byte aligned */
    char *out_path = file_join(to, "model.safetensors");
    FILE *out = fopen(out_path, "wb");
    assert_non_null(out);
    uint8_t size_bytes[8];
    for (int b = 0; b < 8; b++) size_bytes[b] = (uint8_t)((uint64_t)padded >> (8 * b));
    fwrite(size_bytes, 1, 8, out);
    fwrite(text, 1, length, out);
    for (size_t p = length; p < padded; p++) fputc(' ', out);
    fwrite(data, 1, total, out);
    assert_int_equal(fclose(out), 0);
    free(out_path), free(text), free(data), free(weights);
    cJSON_Delete(header);
    safetensors_close(file);
    return to;
}

static void remove_snapshot(char *folder) {
    char command[600];
    snprintf(command, sizeof command, "rm -rf '%s'", folder);
    assert_int_equal(system(command), 0);
    free(folder);
}

/* The 16-bit model's weight matrices are mapped, not copied, where the kernels read them. */
static void expect_kept_16bit(const glimpse_model *model) {
    glimpse_model_info info;
    assert_int_equal(glimpse_model_get_info(model, &info), GLIMPSE_STATUS_OK);
    fprintf(stderr, "%s: %.2f MB of %s weights, %.2f MB copied to float32 at load\n", info.architecture,
            info.weight_bytes / 1e6, info.weight_dtype, info.copied_bytes / 1e6);
    if (cpu_has_avx512())
        assert_true(info.copied_bytes * 2 < info.weight_bytes); /* norms, biases, positions only */
    else
        assert_true(info.copied_bytes == info.weight_bytes * 2); /* everything widened */
}

#define PICTURES 6

static void draw_pictures(glimpse_image **images, picture_scene *scenes, uint32_t seed) {
    static uint8_t pixels[PICTURE_SIDE * PICTURE_SIDE * 3];
    picture_generator generator;
    picture_generator_init(&generator, seed);
    for (int i = 0; i < PICTURES; i++) {
        picture_draw(&generator, pixels, &scenes[i]);
        if (glimpse_image_from_pixels(pixels, PICTURE_SIDE, PICTURE_SIDE, 0, GLIMPSE_PIXEL_FORMAT_RGB8, &images[i]))
            fail_msg("%s", glimpse_last_error());
    }
}

/* Image and text embeddings of a CLIP model for the pictures and their captions. */
static float *clip_embeddings(glimpse_model *model, glimpse_image **images, const picture_scene *scenes) {
    size_t dim = glimpse_model_embedding_dim(model);
    float *out = malloc(2 * PICTURES * dim * sizeof *out);
    glimpse_context *ctx;
    assert_int_equal(glimpse_context_create(model, NULL, &ctx), GLIMPSE_STATUS_OK);
    const char *texts[PICTURES];
    for (int i = 0; i < PICTURES; i++) texts[i] = scenes[i].caption;
    assert_int_equal(glimpse_embed_images(ctx, images, PICTURES, out), GLIMPSE_STATUS_OK);
    assert_int_equal(glimpse_embed_texts(ctx, texts, PICTURES, out + PICTURES * dim), GLIMPSE_STATUS_OK);
    glimpse_context_free(ctx);
    return out;
}

static void test_clip_float16_as_float32(void **state) {
    (void)state;
    char *half = file_join(GLIMPSE_SOURCE_DIR "/examples/models", "demo-clip"), *wide = convert_snapshot(half, "F32");
    glimpse_image *images[PICTURES];
    picture_scene scenes[PICTURES];
    draw_pictures(images, scenes, 31337u);
    for (int p = 0; p < 2; p++) { /* float32 products, then int8 quantized from each */
        glimpse_precision precision = p ? GLIMPSE_PRECISION_INT8 : GLIMPSE_PRECISION_FLOAT32;
        glimpse_model *a = load_model(half, precision), *b = load_model(wide, precision);
        if (!p) expect_kept_16bit(a);
        size_t dim = glimpse_model_embedding_dim(a);
        float *x = clip_embeddings(a, images, scenes), *y = clip_embeddings(b, images, scenes);
        for (size_t i = 0; i < 2 * PICTURES * dim; i++)
            if (memcmp(&x[i], &y[i], sizeof x[i]) != 0)
                fail_msg("%s embedding value %zu: %.9g from float16, %.9g from float32", p ? "int8" : "float32", i,
                         x[i], y[i]);
        free(x), free(y);
        glimpse_model_free(a), glimpse_model_free(b);
    }
    for (int i = 0; i < PICTURES; i++) glimpse_image_free(images[i]);
    free(half);
    remove_snapshot(wide);
}

static void caption_all(glimpse_model *model, glimpse_image **images, int beams, glimpse_caption *out) {
    glimpse_context *ctx;
    assert_int_equal(glimpse_context_create(model, NULL, &ctx), GLIMPSE_STATUS_OK);
    glimpse_caption_params params = glimpse_caption_model_params(model);
    params.beams = beams;
    assert_int_equal(glimpse_caption_images(ctx, images, PICTURES, &params, out),
                     GLIMPSE_STATUS_OK);
    glimpse_context_free(ctx);
}

static void test_captioner_bfloat16_as_float32(void **state) {
    (void)state;
    char *f16 = file_join(GLIMPSE_SOURCE_DIR "/examples/models", "demo-blip-caption");
    char *half = convert_snapshot(f16, "BF16"), *wide = convert_snapshot(half, "F32");
    glimpse_image *images[PICTURES];
    picture_scene scenes[PICTURES];
    draw_pictures(images, scenes, 4242u);
    glimpse_model *a = load_model(half, GLIMPSE_PRECISION_FLOAT32), *b = load_model(wide, GLIMPSE_PRECISION_FLOAT32);
    expect_kept_16bit(a);
    int same_as_f16 = 0;
    for (int beams = 1; beams <= 3; beams += 2) {
        glimpse_caption x[PICTURES], y[PICTURES];
        caption_all(a, images, beams, x);
        caption_all(b, images, beams, y);
        for (int i = 0; i < PICTURES; i++) {
            if (x[i].id_count != y[i].id_count || memcmp(x[i].ids, y[i].ids, x[i].id_count * sizeof *x[i].ids))
                fail_msg("%d beam(s), picture %d: \"%s\" from bfloat16, \"%s\" from float32", beams, i, x[i].text,
                         y[i].text);
            same_as_f16 += picture_caption_is_true(&scenes[i], x[i].text);
            glimpse_caption_free(&x[i]), glimpse_caption_free(&y[i]);
        }
    }
    fprintf(stderr, "demo captioner in bfloat16: %d of %d captions right\n", same_as_f16, 2 * PICTURES);
    glimpse_model_free(a), glimpse_model_free(b);
    for (int i = 0; i < PICTURES; i++) glimpse_image_free(images[i]);
    free(f16);
    remove_snapshot(half), remove_snapshot(wide);
}

static void test_itm_bfloat16_as_float32(void **state) {
    (void)state;
    if (!fixtures_folder()) skip();
    char *f32 = fixture_path("blip-itm-tiny");
    char *half = convert_snapshot(f32, "BF16"), *wide = convert_snapshot(half, "F32");
    glimpse_image *images[PICTURES];
    picture_scene scenes[PICTURES];
    draw_pictures(images, scenes, 777u);
    const char *texts[] = {"a red circle", "two blue squares", "a cup of coffee"};
    for (int mode = 0; mode < 2; mode++) {
        float x[PICTURES * 3], y[PICTURES * 3];
        glimpse_model *a = load_model(half, GLIMPSE_PRECISION_FLOAT32);
        glimpse_model *b = load_model(wide, GLIMPSE_PRECISION_FLOAT32);
        if (!mode) expect_kept_16bit(a);
        glimpse_context *ca, *cb;
        assert_int_equal(glimpse_context_create(a, NULL, &ca), GLIMPSE_STATUS_OK);
        assert_int_equal(glimpse_context_create(b, NULL, &cb), GLIMPSE_STATUS_OK);
        glimpse_match_mode m = mode ? GLIMPSE_MATCH_MODE_ITC : GLIMPSE_MATCH_MODE_ITM;
        assert_int_equal(glimpse_match(ca, images, PICTURES, texts, 3, m, x), GLIMPSE_STATUS_OK);
        assert_int_equal(glimpse_match(cb, images, PICTURES, texts, 3, m, y), GLIMPSE_STATUS_OK);
        assert_memory_equal(x, y, sizeof x);
        glimpse_context_free(ca), glimpse_context_free(cb);
        glimpse_model_free(a), glimpse_model_free(b);
    }
    for (int i = 0; i < PICTURES; i++) glimpse_image_free(images[i]);
    free(f32);
    remove_snapshot(half), remove_snapshot(wide);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_clip_float16_as_float32),
        cmocka_unit_test(test_captioner_bfloat16_as_float32),
        cmocka_unit_test(test_itm_bfloat16_as_float32),
    };
    return cmocka_run_group_tests_name("16bit", tests, NULL, NULL);
}
