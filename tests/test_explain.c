/* test_explain.c — the explanation maps of glimpse.h against maps computed here, independently, from the
 * reference's attention probabilities (fixtures' attention.safetensors): CLIP rollout (full matrix products
 * through the layers, where the library walks one vector back), BLIP caption and ITM word maps and the raw
 * tensors; ViT-GPT2's word maps (byte-level BPE words) and BLIP-2's (the language model's attention over the
 * queries times the queries' Q-Former maps) and their raw tensors; upsampling through the crop; PNG pictures
 * that decode to the expected size and pixels; and the sanity rates on the demo models (a shape or colour
 * word's map falls on its shape). */
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
#include "text/bert_tokenizer.h"
#include "text/gpt2_tokenizer.h"
#include "api/context.h"
#include "api/model.h"
#include "tools/pictures.h"

#define TOLERANCE 1e-5

/* The largest |a - b| over n values. */
static double largest_difference(const float *a, const float *b, size_t n) {
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (d > worst || isnan(d)) worst = isnan(d) ? INFINITY : d;
    }
    return worst;
}

static glimpse_context *context_of(const glimpse_model *model) {
    glimpse_context *ctx = NULL;
    if (glimpse_context_create(model, NULL, &ctx)) fail_msg("%s", glimpse_last_error());
    return ctx;
}

static size_t json_size(const attention_fixture *f, const char *key) {
    return (size_t)cJSON_GetObjectItem(f->json, key)->valueint;
}

/* ------------------------------------------------------------ CLIP rollout */

/* Rollout as the paper writes it: R = Â_L ... Â_1 with Â = (mean of heads + I), rows renormalised; the class
 * token's row, patch columns, renormalised. probabilities [layers][images][heads][tokens][tokens] as the
 * reference stores them (one tensor per layer); layers 0 .. last; head -1: mean of all. */
static void reference_rollout(float *out, const safetensors *attention, size_t image, size_t images, size_t heads,
                              size_t tokens, size_t last, int head) {
    double *rollout = calloc(tokens * tokens, sizeof(double)), *step = malloc(tokens * tokens * sizeof(double));
    double *product = malloc(tokens * tokens * sizeof(double));
    for (size_t i = 0; i < tokens; i++) rollout[i * tokens + i] = 1;
    for (size_t l = 0; l <= last; l++) {
        char name[64];
        snprintf(name, sizeof name, "vision_attentions.%zu", l);
        size_t per = heads * tokens * tokens;
        const float *a = fixture_tensor(attention, name, images * per) + image * per;
        size_t first = head < 0 ? 0 : (size_t)head, end = head < 0 ? heads : (size_t)head + 1;
        for (size_t i = 0; i < tokens; i++) {
            double sum = 0;
            for (size_t k = 0; k < tokens; k++) {
                double mean = 0;
                for (size_t h = first; h < end; h++) mean += a[(h * tokens + i) * tokens + k];
                step[i * tokens + k] = mean / (double)(end - first) + (i == k);
                sum += step[i * tokens + k];
            }
            for (size_t k = 0; k < tokens; k++) step[i * tokens + k] /= sum;
        }
        for (size_t i = 0; i < tokens; i++)
            for (size_t j = 0; j < tokens; j++) {
                double sum = 0;
                for (size_t k = 0; k < tokens; k++) sum += step[i * tokens + k] * rollout[k * tokens + j];
                product[i * tokens + j] = sum;
            }
        memcpy(rollout, product, tokens * tokens * sizeof(double));
    }
    double sum = 0;
    for (size_t j = 1; j < tokens; j++) sum += rollout[j];
    for (size_t j = 1; j < tokens; j++) out[j - 1] = (float)(rollout[j] / sum);
    free(rollout), free(step), free(product);
}

static void test_clip_rollout_parity(void **state) {
    (void)state;
    attention_fixture f = attention_fixture_open("clip-tiny", "expected.json");
    glimpse_model_info info;
    glimpse_model_get_info(f.model, &info);
    size_t layers = (size_t)info.vision_layers, heads = (size_t)info.vision_heads;
    size_t side = (size_t)(info.image_size / info.patch_size), tokens = side * side + 1;
    const cJSON *images = cJSON_GetObjectItem(f.json, "images");
    size_t count = (size_t)cJSON_GetArraySize(images);
    glimpse_context *ctx = context_of(f.model);
    float *want = malloc(tokens * sizeof(float));
    struct variant {
        int layer, head;
    } variants[] = {{-1, -1}, {0, -1}, {(int)layers - 1, 1}, {-1, 0}, {-1, -1}};
    double worst = 0;
    for (size_t i = 0; i < count; i++) {
        glimpse_image *image = fixture_image(cJSON_GetArrayItem(images, (int)i)->valuestring);
        for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++) {
            glimpse_explain_params params = glimpse_explain_default_params();
            params.layer = variants[v].layer;
            params.head = variants[v].head;
            params.want_raw = v == 3;                      /* every layer in one pass, kept */
            ctx->rollout_budget = v == 4 ? 1 : CONTEXT_ROLLOUT_BUDGET; /* one layer a pass */
            glimpse_explanation *e = NULL;
            if (glimpse_explain_clip(ctx, image, NULL, &params, &e)) fail_msg("%s", glimpse_last_error());
            assert_int_equal(e->map_count, 1);
            assert_int_equal(e->maps[0].kind, GLIMPSE_EXPLAIN_MAP_ROLLOUT);
            assert_int_equal(e->grid_width * e->grid_height, (int)(tokens - 1));
            reference_rollout(want, f.attention, i, count, heads, tokens,
                              variants[v].layer < 0 ? layers - 1 : (size_t)variants[v].layer, variants[v].head);
            double d = largest_difference(e->maps[0].grid, want, tokens - 1);
            if (d > worst) worst = d;
            if (d > TOLERANCE) fail_msg("image %zu variant %zu: rollout differs by %g", i, v, d);
            if (params.want_raw) { /* the raw tensor is the reference's, layer by layer */
                assert_int_equal(e->raw_count, 1);
                assert_string_equal(e->raw[0].name, "vision_attentions");
                size_t per = heads * tokens * tokens;
                for (size_t l = 0; l < layers; l++) {
                    char name[64];
                    snprintf(name, sizeof name, "vision_attentions.%zu", l);
                    const float *ref = fixture_tensor(f.attention, name, count * per) + i * per;
                    assert_true(largest_difference(e->raw[0].data + l * per, ref, per) <= TOLERANCE);
                }
            }
            glimpse_explanation_free(e);
        }
        glimpse_image_free(image);
    }
    note_difference("CLIP rollout (5 variants, 9 images)", worst);
    free(want);
    glimpse_context_free(ctx);
    attention_fixture_close(&f);
}

/* ------------------------------------------------------ BLIP word maps */

/* The map of one row of reference cross-attention [layers, heads, rows, image_tokens]: layers and heads averaged,
 * class column dropped, renormalised, added into out scaled by weight. */
static void add_reference_row(float *out, const float *cross, size_t layers, size_t heads, size_t rows,
                              size_t image_tokens, size_t row, float weight) {
    size_t patches = image_tokens - 1;
    double *sum = calloc(patches, sizeof(double)), total = 0;
    for (size_t l = 0; l < layers; l++)
        for (size_t h = 0; h < heads; h++)
            for (size_t j = 0; j < patches; j++) sum[j] += cross[((l * heads + h) * rows + row) * image_tokens + 1 + j];
    for (size_t j = 0; j < patches; j++) total += sum[j];
    for (size_t j = 0; j < patches; j++) out[j] += (float)(sum[j] / total) * weight;
    free(sum);
}

/* The map of the word at ids[first .. first + count) against the mean of its tokens' rows t + row_shift of cross
 * [layers, heads, id_count, image_tokens]; fails beyond TOLERANCE. want: room for a grid. Returns the difference. */
static double expect_word_map(const glimpse_explanation *e, const glimpse_explain_map *map, const float *cross,
                              size_t layers, size_t heads, size_t image_tokens, long row_shift, float *want) {
    size_t patches = image_tokens - 1;
    memset(want, 0, patches * sizeof(float));
    for (size_t j = 0; j < map->token_count; j++)
        add_reference_row(want, cross, layers, heads, e->id_count, image_tokens,
                          (size_t)((long)(map->first_token + j) + row_shift), 1.0f / (float)map->token_count);
    double d = largest_difference(map->grid, want, patches);
    if (d > TOLERANCE) fail_msg("word %zu '%s' differs by %g", (size_t)(map - e->maps), map->label, d);
    return d;
}

/* Every word map of e against the reference's rows (row_shift -1: the row that chose the token), the words
 * covering every non-special token from `begin` on, pieces ("##") joined to the word before. Returns the largest
 * difference. */
/* One layer's and head's rows of a [layers, heads, n, image_tokens] attention tensor: a new [n, image_tokens]. */
static float *one_head_rows(const float *attention, size_t heads, size_t n, size_t image_tokens, size_t layer,
                            size_t head) {
    float *one = malloc(n * image_tokens * sizeof(float));
    assert_non_null(one);
    memcpy(one, attention + (layer * heads + head) * n * image_tokens, n * image_tokens * sizeof(float));
    return one;
}

static double check_word_maps(const glimpse_explanation *e, const glimpse_model *model, const float *cross,
                              size_t layers, size_t heads, size_t image_tokens, size_t begin, int row_shift) {
    size_t patches = image_tokens - 1, next = begin;
    float *want = malloc(patches * sizeof(float));
    double worst = 0;
    for (size_t m = 0; m < e->map_count; m++) {
        const glimpse_explain_map *map = &e->maps[m];
        if (!strcmp(map->label, "[text]")) continue;
        while (next < e->id_count && bert_tokenizer_is_special(test_blocks(model).wordpiece, e->ids[next])) next++;
        assert_int_equal(map->first_token, next); /* words in order, none skipped */
        for (size_t j = 1; j < map->token_count; j++)
            assert_memory_equal(bert_tokenizer_token(test_blocks(model).wordpiece, e->ids[next + j]), "##", 2);
        const char *after = next + map->token_count < e->id_count
                                ? bert_tokenizer_token(test_blocks(model).wordpiece, e->ids[next + map->token_count])
                                : "";
        assert_false(!strncmp(after, "##", 2)); /* the next token starts a word */
        worst = fmax(worst, expect_word_map(e, map, cross, layers, heads, image_tokens, row_shift, want));
        next += map->token_count;
    }
    while (next < e->id_count && bert_tokenizer_is_special(test_blocks(model).wordpiece, e->ids[next])) next++;
    assert_int_equal(next, e->id_count);
    free(want);
    return worst;
}

static void test_blip_caption_word_maps(void **state) {
    (void)state;
    attention_fixture f = attention_fixture_open("blip-caption-tiny", "attention.json");
    size_t layers = json_size(&f, "layers"), heads = json_size(&f, "heads");
    size_t image_tokens = json_size(&f, "image_tokens");
    glimpse_context *ctx = context_of(f.model);
    const cJSON *item;
    double worst = 0;
    int cases = 0;
    cJSON_ArrayForEach(item, cJSON_GetObjectItem(f.json, "cases")) {
        const cJSON *list = cJSON_GetObjectItem(item, "ids");
        size_t n = (size_t)cJSON_GetArraySize(list);
        const char *prompt = cJSON_GetObjectItem(item, "prompt")->valuestring;
        size_t prompt_length = 0;
        assert_int_equal(bert_tokenizer_encode(test_blocks(f.model).wordpiece, prompt, NULL, 0, &prompt_length), GLIMPSE_STATUS_OK);
        prompt_length += 1;
        glimpse_caption_params caption = glimpse_caption_default_params();
        caption.prompt = prompt;
        caption.beams = 1;
        caption.max_tokens = (int)(n - prompt_length);
        glimpse_explain_params params = glimpse_explain_default_params();
        params.want_raw = true;
        glimpse_image *image = fixture_image(cJSON_GetObjectItem(item, "image")->valuestring);
        glimpse_explanation *e = NULL;
        if (glimpse_explain_caption(ctx, image, &caption, &params, &e)) fail_msg("%s", glimpse_last_error());
        assert_int_equal(e->id_count, n);
        for (size_t t = 0; t < n; t++) assert_int_equal(e->ids[t], cJSON_GetArrayItem(list, (int)t)->valueint);
        assert_true(isnan(e->score));
        const float *cross = fixture_tensor(f.attention, cJSON_GetObjectItem(item, "cross")->valuestring,
                                            layers * heads * n * image_tokens);
        const float *self = fixture_tensor(f.attention, cJSON_GetObjectItem(item, "self")->valuestring,
                                           layers * heads * n * n);
        double d = check_word_maps(e, f.model, cross, layers, heads, image_tokens, prompt_length, -1);
        if (d > worst) worst = d;
        /* the raw tensors: every row of one pass over the ids, as the reference's */
        assert_int_equal(e->raw_count, 2);
        assert_string_equal(e->raw[0].name, "cross_attentions");
        assert_string_equal(e->raw[1].name, "self_attentions");
        assert_int_equal(e->raw[0].shape[2], n);
        assert_int_equal(e->raw[0].shape[3], image_tokens);
        assert_true(largest_difference(e->raw[0].data, cross, layers * heads * n * image_tokens) <= TOLERANCE);
        assert_true(largest_difference(e->raw[1].data, self, layers * heads * n * n) <= TOLERANCE);
        glimpse_explanation_free(e);

        /* one layer and one head: the same rows of that layer and head alone */
        params = glimpse_explain_default_params();
        params.layer = (int)layers - 1;
        params.head = 2;
        if (glimpse_explain_caption(ctx, image, &caption, &params, &e)) fail_msg("%s", glimpse_last_error());
        assert_int_equal(e->raw_count, 0);
        float *one = one_head_rows(cross, heads, n, image_tokens, layers - 1, 2);
        d = check_word_maps(e, f.model, one, 1, 1, image_tokens, prompt_length, -1);
        if (d > worst) worst = d;
        free(one);
        glimpse_explanation_free(e);
        glimpse_image_free(image);
        cases++;
    }
    assert_int_equal(cases, 5);
    note_difference("BLIP caption word maps and raw tensors", worst);
    glimpse_context_free(ctx);
    attention_fixture_close(&f);
}

static void test_blip_itm_word_maps(void **state) {
    (void)state;
    attention_fixture f = attention_fixture_open("blip-itm-tiny", "attention.json");
    size_t layers = json_size(&f, "layers"), heads = json_size(&f, "heads");
    size_t image_tokens = json_size(&f, "image_tokens");
    const cJSON *images = cJSON_GetObjectItem(f.json, "images"), *texts = cJSON_GetObjectItem(f.json, "texts");
    glimpse_context *ctx = context_of(f.model);
    double worst = 0;
    bool pieces = false;
    float *want = malloc(image_tokens * sizeof(float));
    for (int i = 0; i < cJSON_GetArraySize(images); i++) {
        glimpse_image *image = fixture_image(cJSON_GetArrayItem(images, i)->valuestring);
        for (int j = 0; j < cJSON_GetArraySize(texts); j++) {
            const char *text = cJSON_GetArrayItem(texts, j)->valuestring;
            glimpse_explain_params params = glimpse_explain_default_params();
            params.want_raw = true;
            glimpse_explanation *e = NULL;
            if (glimpse_explain_match(ctx, image, text, &params, &e)) fail_msg("%s", glimpse_last_error());
            float score;
            assert_int_equal(glimpse_match(ctx, &image, 1, &text, 1, GLIMPSE_MATCH_MODE_ITM, &score),
                             GLIMPSE_STATUS_OK);
            assert_true(fabsf(score - e->score) <= 1e-6f); /* the same probability as glimpse_match's */
            char name[64];
            snprintf(name, sizeof name, "cross_attentions.%d.%d", i, j);
            size_t n = e->id_count;
            const float *cross = fixture_tensor(f.attention, name, layers * heads * n * image_tokens);
            double d = check_word_maps(e, f.model, cross, layers, heads, image_tokens, 0, 0);
            if (d > worst) worst = d;
            for (size_t m = 0; m < e->map_count; m++) pieces |= e->maps[m].token_count > 1;
            const glimpse_explain_map *whole = &e->maps[e->map_count - 1];
            assert_string_equal(whole->label, "[text]");
            memset(want, 0, image_tokens * sizeof(float));
            add_reference_row(want, cross, layers, heads, n, image_tokens, 0, 1.0f);
            d = largest_difference(whole->grid, want, image_tokens - 1);
            if (d > worst) worst = d;
            assert_true(d <= TOLERANCE);
            assert_int_equal(e->raw_count, 1);
            assert_true(largest_difference(e->raw[0].data, cross, layers * heads * n * image_tokens) <= TOLERANCE);
            glimpse_explanation_free(e);
        }
        glimpse_image_free(image);
    }
    assert_true(pieces); /* some word was made of several pieces */
    note_difference("BLIP ITM word and text maps", worst);
    free(want);
    glimpse_context_free(ctx);
    attention_fixture_close(&f);
}

/* ----------------------------------------------- geometry and pictures */

static glimpse_image *decode_picture(const char *path) {
    glimpse_image *image = NULL;
    if (glimpse_image_load_file(path, NULL, &image)) fail_msg("%s: %s", path, glimpse_last_error());
    return image;
}

static glimpse_model *demo_model(const char *name) {
    char *path = file_join(GLIMPSE_SOURCE_DIR "/examples/models", name);
    glimpse_model *model = load_model(path, GLIMPSE_PRECISION_FLOAT32);
    return free(path), model;
}

/* A picture width × height of a smooth colour ramp. */
static glimpse_image *ramp(int width, int height) {
    uint8_t *pixels = malloc((size_t)width * (size_t)height * 3);
    for (int y = 0; y < height; y++)
        for (int x = 0; x < width; x++) {
            uint8_t *p = pixels + ((size_t)y * (size_t)width + (size_t)x) * 3;
            p[0] = (uint8_t)(x * 255 / width), p[1] = (uint8_t)(y * 255 / height), p[2] = 128;
        }
    glimpse_image *image = NULL;
    assert_int_equal(glimpse_image_from_pixels(pixels, width, height, 0, GLIMPSE_PIXEL_FORMAT_RGB8, &image),
                     GLIMPSE_STATUS_OK);
    free(pixels);
    return image;
}

/* The demo CLIP resizes the short side to 64 and crops 64 × 64 from the centre: on a 256 × 128 picture the grid
 * covers x 64 .. 192 (the crop's 32 .. 96 of the 128-wide resize, times 2), the margins stay outside. */
static void test_region_and_upsampling(void **state) {
    (void)state;
    glimpse_model *model = demo_model("demo-clip");
    glimpse_context *ctx = context_of(model);
    glimpse_image *image = ramp(256, 128);
    glimpse_explanation *e = NULL;
    assert_int_equal(glimpse_explain_clip(ctx, image, NULL, NULL, &e), GLIMPSE_STATUS_OK);
    assert_int_equal(e->grid_width, 4);
    assert_int_equal(e->image_width, 256);
    assert_true(fabsf(e->region[0] - 64) < 1e-4f && fabsf(e->region[2] - 192) < 1e-4f);
    assert_true(fabsf(e->region[1] - 0) < 1e-4f && fabsf(e->region[3] - 128) < 1e-4f);
    /* upsampled at full size: NAN in the margins; at a cell's centre (x = 64 + 16 + 32 c), the cell's value */
    float *full = malloc(256 * 128 * sizeof(float));
    assert_int_equal(glimpse_explain_upsample(e, 0, 256, 128, full), GLIMPSE_STATUS_OK);
    for (int y = 0; y < 128; y++) {
        assert_true(isnan(full[y * 256 + 63]) && isnan(full[y * 256 + 192]));
        assert_false(isnan(full[y * 256 + 64]) || isnan(full[y * 256 + 191]));
    }
    /* 8 × 4 pixels over the 256 × 128 picture: pixel centres at 16, 48, 80, ...: x = 2 .. 5 (80 .. 176) fall on
     * the cells' centres, x = 0, 1, 6, 7 in the margins */
    float small[8 * 4];
    assert_int_equal(glimpse_explain_upsample(e, 0, 8, 4, small), GLIMPSE_STATUS_OK);
    for (int row = 0; row < 4; row++) {
        assert_true(isnan(small[row * 8]) && isnan(small[row * 8 + 1]) && isnan(small[row * 8 + 6]));
        for (int column = 0; column < 4; column++)
            assert_true(fabsf(small[row * 8 + 2 + column] - e->maps[0].grid[row * 4 + column]) < 1e-6f);
    }
    assert_int_equal(glimpse_explain_upsample(e, 1, 256, 128, full), GLIMPSE_STATUS_INVALID_ARGUMENT);
    free(full);

    /* the sheet: two panels (the picture, the rollout) of 256 × 128, margins 6, label line 26 */
    void *png = NULL;
    size_t size = 0;
    if (glimpse_explain_render_png(e, image, GLIMPSE_EXPLAIN_SHEET, 0, NULL, &png, &size))
        fail_msg("%s", glimpse_last_error());
    glimpse_image *sheet = NULL;
    assert_int_equal(glimpse_image_load_memory(png, size, NULL, &sheet), GLIMPSE_STATUS_OK);
    assert_int_equal(glimpse_image_width(sheet), 2 * (256 + 12));
    assert_int_equal(glimpse_image_height(sheet), 128 + 6 + 26);
    /* the picture panel and the map panel's cropped-away margins are the picture itself (scaled 1:1 here) */
    const uint8_t *sheet_pixels = glimpse_image_pixels(sheet), *picture = glimpse_image_pixels(image);
    size_t stride = (size_t)glimpse_image_width(sheet) * 3;
    for (int y = 0; y < 128; y += 7)
        for (int x = 0; x < 256; x += 5) {
            const uint8_t *want = picture + ((size_t)y * 256 + (size_t)x) * 3;
            assert_memory_equal(sheet_pixels + (size_t)(y + 6) * stride + (size_t)(x + 6) * 3, want, 3);
            const uint8_t *in_map = sheet_pixels + (size_t)(y + 6) * stride + (size_t)(268 + 6 + x) * 3;
            if (x < 64 || x >= 192)
                assert_memory_equal(in_map, want, 3);
        }
    /* one map alone, panels of 128: 128 × 64 and its label */
    free(png);
    if (glimpse_explain_render_png(e, image, 0, 128, NULL, &png, &size)) fail_msg("%s", glimpse_last_error());
    glimpse_image_free(sheet);
    assert_int_equal(glimpse_image_load_memory(png, size, NULL, &sheet), GLIMPSE_STATUS_OK);
    assert_int_equal(glimpse_image_width(sheet), 128 + 12);
    assert_int_equal(glimpse_image_height(sheet), 64 + 6 + 26);
    /* a font that is not there is a clear error */
    free(png);
    assert_int_equal(glimpse_explain_render_png(e, image, 0, 128, "/nonexistent/font.ttf", &png, &size),
                     GLIMPSE_STATUS_NOT_FOUND);
    assert_non_null(strstr(glimpse_last_error(), "font"));
    glimpse_image_free(sheet);
    glimpse_explanation_free(e);
    glimpse_image_free(image);
    glimpse_context_free(ctx);
    glimpse_model_free(model);
}

/* Wrong models, bad layers and heads are refused with a reason. */
static void test_refusals(void **state) {
    (void)state;
    glimpse_model *clip = demo_model("demo-clip"), *captioner = demo_model("demo-blip-caption");
    glimpse_context *clip_ctx = context_of(clip), *caption_ctx = context_of(captioner);
    glimpse_image *image = ramp(64, 64);
    glimpse_explanation *e = (glimpse_explanation *)1;
    assert_int_equal(glimpse_explain_caption(clip_ctx, image, NULL, NULL, &e), GLIMPSE_STATUS_WRONG_MODEL);
    assert_null(e);
    assert_int_equal(glimpse_explain_match(caption_ctx, image, "a red circle", NULL, &e), GLIMPSE_STATUS_WRONG_MODEL);
    assert_int_equal(glimpse_explain_clip(caption_ctx, image, "a red circle", NULL, &e), GLIMPSE_STATUS_WRONG_MODEL);
    glimpse_explain_params params = glimpse_explain_default_params();
    params.layer = 3; /* the demo CLIP has 3 vision layers */
    assert_int_equal(glimpse_explain_clip(clip_ctx, image, NULL, &params, &e), GLIMPSE_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(glimpse_last_error(), "layer 3"));
    params.layer = -1;
    params.head = 4;
    assert_int_equal(glimpse_explain_caption(caption_ctx, image, NULL, &params, &e), GLIMPSE_STATUS_INVALID_ARGUMENT);
    assert_int_equal(glimpse_explain_clip(NULL, image, NULL, NULL, &e), GLIMPSE_STATUS_INVALID_ARGUMENT);
    /* no raw tensors to write */
    assert_int_equal(glimpse_explain_clip(clip_ctx, image, NULL, NULL, &e), GLIMPSE_STATUS_OK);
    assert_int_equal(glimpse_explain_write_safetensors(e, "/tmp/never-written.safetensors"),
                     GLIMPSE_STATUS_INVALID_ARGUMENT);
    glimpse_explanation_free(e);
    glimpse_explanation_free(NULL);
    glimpse_image_free(image);
    glimpse_context_free(clip_ctx), glimpse_context_free(caption_ctx);
    glimpse_model_free(clip), glimpse_model_free(captioner);
}

/* ------------------------------------------ byte-level BPE captioners */

/* vocab.json's tokens by id, read here rather than through the library's tokenizer. */
typedef struct bpe_vocab {
    cJSON *json;
    const char **token;
    size_t count;
} bpe_vocab;

static bpe_vocab bpe_vocab_open(const char *fixture) {
    char relative[128];
    snprintf(relative, sizeof relative, "%s/vocab.json", fixture);
    bpe_vocab v = {fixture_json(relative), NULL, 0};
    assert_non_null(v.json);
    const cJSON *item;
    cJSON_ArrayForEach(item, v.json) if ((size_t)item->valueint + 1 > v.count) v.count = (size_t)item->valueint + 1;
    v.token = calloc(v.count, sizeof *v.token);
    cJSON_ArrayForEach(item, v.json) v.token[item->valueint] = item->string;
    return v;
}

static void bpe_vocab_close(bpe_vocab *v) {
    cJSON_Delete(v->json);
    free(v->token);
}

/* The byte alphabet's stand-ins for whitespace: Ġ (space), Ċ (newline), ĉ (tab), č (carriage return). */
static bool bpe_space_at(const char *s) {
    return (uint8_t)s[0] == 0xC4 && ((uint8_t)s[1] == 0xA0 || (uint8_t)s[1] == 0x8A || (uint8_t)s[1] == 0x89 ||
                                     (uint8_t)s[1] == 0x8D);
}

/* A word token: in the vocabulary, not a special token, not whitespace alone. */
static bool bpe_is_word(const bpe_vocab *v, int32_t id) {
    static const char *const special[] = {"<|endoftext|>", "<s>", "</s>", "<pad>", "<unk>"};
    if (id < 0 || (size_t)id >= v->count || !v->token[id]) return false;
    const char *token = v->token[id];
    for (size_t i = 0; i < sizeof special / sizeof special[0]; i++)
        if (!strcmp(token, special[i])) return false;
    for (; *token; token += 2)
        if (!bpe_space_at(token)) return true;
    return false;
}

/* The next word of ids[*t .. end): *first, *count; false when none is left. A word starts at a word token and
 * takes the word tokens after it that do not start with whitespace. */
static bool next_bpe_word(const bpe_vocab *v, const int32_t *ids, size_t end, size_t *t, size_t *first,
                          size_t *count) {
    while (*t < end && !bpe_is_word(v, ids[*t])) (*t)++;
    if (*t >= end) return false;
    *first = *t, *count = 1;
    for (size_t next = *first + 1; next < end && bpe_is_word(v, ids[next]) && !bpe_space_at(v->token[ids[next]]); next++)
        (*count)++;
    *t = *first + *count;
    return true;
}

/* ViT-GPT2's word maps: every word of the caption (BPE words as next_bpe_word makes them) against the mean of its
 * tokens' rows t - 1 of cross [layers, heads, n, image_tokens]. Returns the largest difference. */
static double check_bpe_word_maps(const glimpse_explanation *e, const bpe_vocab *v, const float *cross, size_t layers,
                                  size_t heads, size_t image_tokens, size_t begin) {
    size_t patches = image_tokens - 1, t = begin, first, count, m = 0;
    float *want = malloc(patches * sizeof(float));
    double worst = 0;
    while (next_bpe_word(v, e->ids, e->id_count, &t, &first, &count)) {
        assert_true(m < e->map_count);
        const glimpse_explain_map *map = &e->maps[m++];
        assert_int_equal(map->first_token, first);
        assert_int_equal(map->token_count, count);
        worst = fmax(worst, expect_word_map(e, map, cross, layers, heads, image_tokens, -1, want));
    }
    assert_int_equal(m, e->map_count);
    free(want);
    return worst;
}

/* Every greedy case of vit-gpt2-tiny's attention.json (with and without a prompt): the caption's ids, the raw
 * tensors (cross, self, and the encoder's with want_vision) and each word's map from the reference's rows; one
 * layer and head alone; and a beam-search case (one pass after the search) against its own raw rows. */
static void test_vit_gpt2_word_maps(void **state) {
    (void)state;
    attention_fixture f = attention_fixture_open("vit-gpt2-tiny", "attention.json");
    size_t layers = json_size(&f, "decoder_layers"), heads = json_size(&f, "decoder_heads");
    size_t image_tokens = json_size(&f, "image_tokens"), encoder_layers = json_size(&f, "encoder_layers");
    size_t encoder_heads = json_size(&f, "encoder_heads");
    bpe_vocab vocab = bpe_vocab_open("vit-gpt2-tiny");
    glimpse_context *ctx = context_of(f.model);
    const cJSON *item;
    double worst = 0;
    int cases = 0;
    cJSON_ArrayForEach(item, cJSON_GetObjectItem(f.json, "cases")) {
        const cJSON *list = cJSON_GetObjectItem(item, "ids");
        size_t n = (size_t)cJSON_GetArraySize(list), prompt_length = 0;
        const char *prompt = cJSON_GetObjectItem(item, "prompt")->valuestring;
        assert_int_equal(gpt2_tokenizer_encode(test_blocks(f.model).byte_bpe, prompt, 0, NULL, 0, &prompt_length),
                         prompt[0] ? GLIMPSE_STATUS_TOO_LARGE : GLIMPSE_STATUS_OK);
        prompt_length += 1; /* the start token */
        glimpse_caption_params caption = glimpse_caption_default_params();
        caption.prompt = prompt;
        caption.beams = 1;
        caption.max_tokens = (int)(n - prompt_length);
        glimpse_explain_params params = glimpse_explain_default_params();
        params.want_raw = params.want_vision = true;
        glimpse_image *image = fixture_image(cJSON_GetObjectItem(item, "image")->valuestring);
        glimpse_explanation *e = NULL;
        if (glimpse_explain_caption(ctx, image, &caption, &params, &e)) fail_msg("%s", glimpse_last_error());
        assert_int_equal(e->id_count, n);
        for (size_t t = 0; t < n; t++) assert_int_equal(e->ids[t], cJSON_GetArrayItem(list, (int)t)->valueint);
        const float *cross = fixture_tensor(f.attention, cJSON_GetObjectItem(item, "cross")->valuestring,
                                            layers * heads * n * image_tokens);
        const float *self = fixture_tensor(f.attention, cJSON_GetObjectItem(item, "self")->valuestring,
                                           layers * heads * n * n);
        size_t encoder_floats = encoder_layers * encoder_heads * image_tokens * image_tokens;
        const float *encoder =
            fixture_tensor(f.attention, cJSON_GetObjectItem(item, "encoder")->valuestring, encoder_floats);
        double d = check_bpe_word_maps(e, &vocab, cross, layers, heads, image_tokens, prompt_length);
        if (d > worst) worst = d;
        assert_true(e->map_count >= 1);
        assert_int_equal(e->raw_count, 3);
        assert_string_equal(e->raw[0].name, "cross_attentions");
        assert_string_equal(e->raw[1].name, "self_attentions");
        assert_string_equal(e->raw[2].name, "encoder_attentions");
        assert_int_equal(e->raw[0].shape[2], n);
        assert_int_equal(e->raw[2].shape[3], image_tokens);
        d = largest_difference(e->raw[0].data, cross, layers * heads * n * image_tokens);
        d = fmax(d, largest_difference(e->raw[1].data, self, layers * heads * n * n));
        d = fmax(d, largest_difference(e->raw[2].data, encoder, encoder_floats));
        if (d > worst) worst = d;
        assert_true(d <= TOLERANCE);
        glimpse_explanation_free(e);

        /* the last layer and head 1 alone, streamed without raw tensors */
        params = glimpse_explain_default_params();
        params.layer = (int)layers - 1;
        params.head = 1;
        if (glimpse_explain_caption(ctx, image, &caption, &params, &e)) fail_msg("%s", glimpse_last_error());
        assert_int_equal(e->raw_count, 0);
        float *one = one_head_rows(cross, heads, n, image_tokens, layers - 1, 1);
        d = check_bpe_word_maps(e, &vocab, one, 1, 1, image_tokens, prompt_length);
        if (d > worst) worst = d;
        free(one);
        glimpse_explanation_free(e);
        glimpse_image_free(image);
        cases++;
    }
    assert_int_equal(cases, 6);
    /* beam search: the caption glimpse_caption_images gives, maps from one pass over it */
    glimpse_image *image = fixture_image("astronaut.png");
    glimpse_caption_params caption = glimpse_caption_default_params();
    caption.beams = 4;
    caption.max_tokens = 15;
    glimpse_explain_params params = glimpse_explain_default_params();
    params.want_raw = true;
    glimpse_explanation *e = NULL;
    glimpse_caption plain;
    if (glimpse_explain_caption(ctx, image, &caption, &params, &e)) fail_msg("%s", glimpse_last_error());
    assert_int_equal(glimpse_caption_images(ctx, &image, 1, &caption, &plain), GLIMPSE_STATUS_OK);
    assert_int_equal(plain.id_count, e->id_count);
    assert_memory_equal(plain.ids, e->ids, e->id_count * sizeof(int32_t));
    assert_string_equal(plain.text, e->text);
    assert_int_equal(e->raw_count, 2);
    worst = fmax(worst, check_bpe_word_maps(e, &vocab, e->raw[0].data, layers, heads, image_tokens, 1));
    glimpse_caption_free(&plain);
    glimpse_explanation_free(e);
    glimpse_image_free(image);
    note_difference("ViT-GPT2 word maps and raw tensors", worst);
    bpe_vocab_close(&vocab);
    glimpse_context_free(ctx);
    attention_fixture_close(&f);
}

/* BLIP-2's maps computed here: each query's map from the reference's Q-Former cross-attention (layers and heads
 * averaged, class column dropped, renormalised); a word's weights on the queries from the language model's
 * self-attention the call returned (its tokens' rows queries + prompt - 2 + t over the query columns, layers and
 * heads averaged, renormalised, the tokens' mean); its map Σ weight · query map, renormalised. */
static double check_blip2_maps(const glimpse_explanation *e, const bpe_vocab *v, const float *qformer_cross,
                               size_t cross_layers, size_t qformer_heads, size_t queries, size_t image_tokens,
                               size_t prompt_length) {
    size_t patches = image_tokens - 1;
    const glimpse_explain_tensor *self = &e->raw[0];
    size_t layers = self->shape[0], heads = self->shape[1], rows = self->shape[2];
    assert_string_equal(self->name, "self_attentions");
    assert_int_equal(rows, queries + prompt_length + e->id_count - 1);
    /* the language model's rows sum to 1 and see no later position */
    for (size_t slot = 0; slot < layers * heads; slot++)
        for (size_t r = 0; r < rows; r++) {
            const float *row = self->data + (slot * rows + r) * rows;
            double sum = 0;
            for (size_t k = 0; k < rows; k++) sum += row[k];
            assert_true(fabs(sum - 1) < 1e-5);
            for (size_t k = r + 1; k < rows; k++) assert_true(row[k] == 0.0f);
        }
    float *query_maps = calloc(queries * patches, sizeof(float)), *want = malloc(patches * sizeof(float));
    double *weights = malloc(queries * sizeof(double)), worst = 0;
    for (size_t q = 0; q < queries; q++)
        add_reference_row(query_maps + q * patches, qformer_cross, cross_layers, qformer_heads, queries, image_tokens,
                          q, 1.0f);
    size_t t = 1, first, count, m = 0;
    while (next_bpe_word(v, e->ids, e->id_count, &t, &first, &count)) {
        const glimpse_explain_map *map = &e->maps[m++];
        assert_int_equal(map->first_token, first);
        assert_int_equal(map->token_count, count);
        assert_int_equal(map->query_count, queries);
        for (size_t q = 0; q < queries; q++) weights[q] = 0;
        for (size_t j = 0; j < count; j++) {
            size_t r = queries + prompt_length - 2 + first + j;
            double row[64] = {0}, total = 0;
            assert_true(queries <= 64);
            for (size_t slot = 0; slot < layers * heads; slot++)
                for (size_t q = 0; q < queries; q++) row[q] += self->data[(slot * rows + r) * rows + q];
            for (size_t q = 0; q < queries; q++) total += row[q];
            for (size_t q = 0; q < queries; q++) weights[q] += row[q] / total / (double)count;
        }
        double total = 0;
        for (size_t j = 0; j < patches; j++) {
            double sum = 0;
            for (size_t q = 0; q < queries; q++) sum += weights[q] * query_maps[q * patches + j];
            want[j] = (float)sum;
            total += sum;
        }
        for (size_t j = 0; j < patches; j++) want[j] = (float)(want[j] / total);
        double d = largest_difference(map->grid, want, patches);
        for (size_t q = 0; q < queries; q++) d = fmax(d, fabs(map->queries[q] - weights[q]));
        if (d > worst) worst = d;
        if (d > TOLERANCE) fail_msg("word '%s' differs by %g", map->label, d);
    }
    /* then the queries' mean map, last */
    assert_int_equal(m + 1, e->map_count);
    const glimpse_explain_map *all = &e->maps[m];
    assert_int_equal(all->kind, GLIMPSE_EXPLAIN_MAP_QUERIES);
    memset(want, 0, patches * sizeof(float));
    for (size_t q = 0; q < queries; q++)
        for (size_t j = 0; j < patches; j++) want[j] += query_maps[q * patches + j] / (float)queries;
    worst = fmax(worst, largest_difference(all->grid, want, patches));
    assert_true(worst <= TOLERANCE);
    free(query_maps), free(want), free(weights);
    return worst;
}

/* Every case of blip2-opt-tiny's expected.json (greedy and beam captions; questions through
 * glimpse_explain_answer): its ids, the Q-Former's raw tensors against the reference's within 1e-5, and the maps
 * against check_blip2_maps'. Greedy maps are made step by step, the raw tensors by one pass: they must agree. */
static void test_blip2_word_maps(void **state) {
    (void)state;
    attention_fixture f = attention_fixture_open("blip2-opt-tiny", "attention.json");
    cJSON *expected = fixture_json("blip2-opt-tiny/expected.json");
    assert_non_null(expected);
    size_t layers = json_size(&f, "qformer_layers"), heads = json_size(&f, "heads");
    size_t queries = json_size(&f, "query_tokens"), image_tokens = json_size(&f, "image_tokens");
    size_t cross_layers = (size_t)cJSON_GetArraySize(cJSON_GetObjectItem(f.json, "cross_attention_layers"));
    size_t question_prompt = (size_t)cJSON_GetArraySize(cJSON_GetObjectItem(expected, "prompt_input_ids"));
    bpe_vocab vocab = bpe_vocab_open("blip2-opt-tiny");
    glimpse_context *ctx = context_of(f.model);
    const cJSON *item;
    double worst = 0;
    int cases = 0;
    cJSON_ArrayForEach(item, cJSON_GetObjectItem(expected, "cases")) {
        const char *image_name = cJSON_GetObjectItem(item, "image")->valuestring;
        const char *prompt = cJSON_GetObjectItem(item, "prompt")->valuestring;
        const cJSON *settings = cJSON_GetObjectItem(item, "params"), *list = cJSON_GetObjectItem(item, "ids");
        size_t n = (size_t)cJSON_GetArraySize(list), image_index = 0;
        const cJSON *name;
        cJSON_ArrayForEach(name, cJSON_GetObjectItem(f.json, "images")) {
            if (!strcmp(name->valuestring, image_name)) break;
            image_index++;
        }
        glimpse_caption_params caption = glimpse_caption_default_params();
        const cJSON *beams = cJSON_GetObjectItem(settings, "num_beams");
        caption.beams = beams ? beams->valueint : 1;
        caption.max_tokens = (int)n - 1; /* greedy: max_length counts the start token; beams: max_new_tokens */
        glimpse_explain_params params = glimpse_explain_default_params();
        params.want_raw = true;
        glimpse_image *image = fixture_image(image_name);
        glimpse_explanation *e = NULL;
        glimpse_status status;
        if (prompt[0]) { /* the question prompt: "Question: what is in the picture? Answer:" */
            assert_string_equal(prompt, "Question: what is in the picture? Answer:");
            status = glimpse_explain_answer(ctx, image, "what is in the picture?", &caption, &params, &e);
        } else {
            status = glimpse_explain_caption(ctx, image, &caption, &params, &e);
        }
        if (status) fail_msg("%s", glimpse_last_error());
        assert_int_equal(e->id_count, n);
        for (size_t t = 0; t < n; t++) assert_int_equal(e->ids[t], cJSON_GetArrayItem(list, (int)t)->valueint);
        assert_int_equal(e->raw_count, 3);
        assert_string_equal(e->raw[1].name, "qformer_cross_attentions");
        assert_string_equal(e->raw[2].name, "qformer_self_attentions");
        char tensor[64];
        snprintf(tensor, sizeof tensor, "qformer_cross_attentions.%zu", image_index);
        size_t cross_floats = cross_layers * heads * queries * image_tokens;
        const float *cross = fixture_tensor(f.attention, tensor, cross_floats);
        snprintf(tensor, sizeof tensor, "qformer_self_attentions.%zu", image_index);
        const float *self = fixture_tensor(f.attention, tensor, layers * heads * queries * queries);
        double d = fmax(largest_difference(e->raw[1].data, cross, cross_floats),
                        largest_difference(e->raw[2].data, self, layers * heads * queries * queries));
        assert_true(d <= TOLERANCE);
        d = fmax(d, check_blip2_maps(e, &vocab, cross, cross_layers, heads, queries, image_tokens,
                                     prompt[0] ? question_prompt : 1));
        if (d > worst) worst = d;
        glimpse_explanation_free(e);
        glimpse_image_free(image);
        cases++;
    }
    assert_int_equal(cases, 12);
    note_difference("BLIP-2 word maps and Q-Former raw tensors", worst);
    /* a question and a prompt together, and a question to a model that answers none, are refused */
    glimpse_image *image = fixture_image("astronaut.png");
    glimpse_caption_params caption = glimpse_caption_default_params();
    caption.prompt = "a picture of";
    glimpse_explanation *e = (glimpse_explanation *)1;
    assert_int_equal(glimpse_explain_answer(ctx, image, "what?", &caption, NULL, &e), GLIMPSE_STATUS_INVALID_ARGUMENT);
    assert_null(e);
    glimpse_model *other = demo_model("demo-blip-caption");
    glimpse_context *other_ctx = context_of(other);
    assert_int_equal(glimpse_explain_answer(other_ctx, image, "what?", NULL, NULL, &e), GLIMPSE_STATUS_WRONG_MODEL);
    glimpse_context_free(other_ctx);
    glimpse_model_free(other);
    glimpse_image_free(image);
    bpe_vocab_close(&vocab);
    cJSON_Delete(expected);
    glimpse_context_free(ctx);
    attention_fixture_close(&f);
}

/* Events of a streamed explanation: each map's grid as it came, and how many tokens had come by then. */
typedef struct stream_log {
    size_t tokens, maps, tokens_at_map[64];
    float grids[64][16];
    bool in_order;
} stream_log;

static bool log_token(void *user, size_t image, int32_t id, const char *text) {
    (void)image, (void)id, (void)text;
    ((stream_log *)user)->tokens++;
    return false;
}

static bool log_map(void *user, const glimpse_explanation *e, size_t map) {
    stream_log *log = user;
    log->in_order &= map == log->maps && map + 1 == e->map_count && e->grid_width * e->grid_height == 16;
    if (log->maps < 64) {
        log->tokens_at_map[log->maps] = log->tokens;
        memcpy(log->grids[log->maps], e->maps[map].grid, sizeof log->grids[0]);
    }
    log->maps++;
    return false;
}

/* A greedy caption's words come as they are generated (a word's map before the caption ends, once the token after
 * it has come), equal to the final maps; the caller's token callback still runs. Beam search's maps (one pass
 * after the search) equal maps made here from its raw tensors. */
static void test_caption_maps_stream(void **state) {
    (void)state;
    glimpse_model *model = demo_model("demo-blip-caption");
    glimpse_context *ctx = context_of(model);
    glimpse_image *image = decode_picture(GLIMPSE_SOURCE_DIR "/examples/pictures/00000.png");
    stream_log log = {.in_order = true};
    glimpse_caption_params caption = glimpse_caption_default_params();
    caption.beams = 1;
    caption.on_token = log_token;
    caption.user = &log;
    glimpse_explain_params params = glimpse_explain_default_params();
    params.on_map = log_map;
    params.user = &log;
    glimpse_explanation *e = NULL;
    if (glimpse_explain_caption(ctx, image, &caption, &params, &e)) fail_msg("%s", glimpse_last_error());
    assert_true(log.in_order);
    assert_int_equal(log.maps, e->map_count);
    assert_int_equal(log.tokens, e->id_count - 1); /* every token after [DEC] */
    assert_true(e->map_count >= 4);
    for (size_t m = 0; m < e->map_count; m++) {
        assert_memory_equal(log.grids[m], e->maps[m].grid, sizeof log.grids[0]);
        /* word m came as soon as the token after it was chosen, before the caller heard of that token */
        assert_int_equal(log.tokens_at_map[m], e->maps[m].first_token + e->maps[m].token_count - 1);
    }
    assert_true(log.tokens_at_map[0] < log.tokens);
    glimpse_explanation_free(e);

    caption = glimpse_caption_default_params();
    caption.beams = 3;
    params = glimpse_explain_default_params();
    params.want_raw = true;
    if (glimpse_explain_caption(ctx, image, &caption, &params, &e)) fail_msg("%s", glimpse_last_error());
    glimpse_caption plain;
    assert_int_equal(glimpse_caption_images(ctx, &image, 1, &caption, &plain), GLIMPSE_STATUS_OK);
    assert_string_equal(plain.text, e->text); /* the caption glimpse_caption_images gives */
    glimpse_caption_free(&plain);
    const glimpse_explain_tensor *cross = &e->raw[0];
    assert_true(check_word_maps(e, model, cross->data, cross->shape[0], cross->shape[1], cross->shape[3], 1, -1) <=
                TOLERANCE);
    glimpse_explanation_free(e);
    glimpse_image_free(image);
    glimpse_context_free(ctx);
    glimpse_model_free(model);
}

/* ------------------------------------------------------------------ SigLIP */

/* SigLIP's attention-pooling map against the probe's attention computed here from the reference's
 * vision_last_hidden_state and the head's stacked in_proj weights; and its rollout against full matrix products
 * of the raw tensors, started from that map. */
static void test_siglip_maps(void **state) {
    (void)state;
    parity_fixture *f = NULL;
    if (parity_setup((void **)&f, "siglip-tiny", 1)) fail_msg("siglip-tiny cannot be read");
    if (!f) skip();
    safetensors *weights = fixture_tensors("siglip-tiny/model.safetensors");
    assert_non_null(weights);
    glimpse_model_info info;
    glimpse_model_get_info(f->model, &info);
    size_t hidden = (size_t)info.vision_hidden_size, heads = (size_t)info.vision_heads;
    size_t layers = (size_t)info.vision_layers, tokens = (size_t)((info.image_size / info.patch_size) *
                                                                  (info.image_size / info.patch_size));
    size_t head_dim = hidden / heads;
    const float *in_proj = fixture_tensor(weights, "vision_model.head.attention.in_proj_weight", 3 * hidden * hidden);
    const float *in_bias = fixture_tensor(weights, "vision_model.head.attention.in_proj_bias", 3 * hidden);
    const float *probe = fixture_tensor(weights, "vision_model.head.probe", hidden);
    const float *states = fixture_tensor(f->reference, "vision_last_hidden_state", f->image_count * tokens * hidden);
    glimpse_context *ctx = context_of(f->model);
    double *q = malloc(hidden * sizeof(double)), *scores = malloc(tokens * sizeof(double));
    float *want = malloc(tokens * sizeof(float));
    double worst = 0;
    for (size_t i = 0; i < f->image_count; i++) {
        for (size_t o = 0; o < hidden; o++) {
            q[o] = in_bias[o];
            for (size_t k = 0; k < hidden; k++) q[o] += (double)in_proj[o * hidden + k] * probe[k];
        }
        memset(want, 0, tokens * sizeof(float));
        for (size_t h = 0; h < heads; h++) {
            double largest = -INFINITY, sum = 0;
            for (size_t j = 0; j < tokens; j++) {
                const float *x = states + (i * tokens + j) * hidden;
                double score = 0;
                for (size_t d = h * head_dim; d < (h + 1) * head_dim; d++) {
                    double key = in_bias[hidden + d];
                    for (size_t k = 0; k < hidden; k++) key += (double)in_proj[(hidden + d) * hidden + k] * x[k];
                    score += q[d] * key;
                }
                scores[j] = score / sqrt((double)head_dim);
                if (scores[j] > largest) largest = scores[j];
            }
            for (size_t j = 0; j < tokens; j++) sum += scores[j] = exp(scores[j] - largest);
            for (size_t j = 0; j < tokens; j++) want[j] += (float)(scores[j] / sum / (double)heads);
        }
        glimpse_image *image = fixture_image(parity_image(f, i));
        glimpse_explain_params params = glimpse_explain_default_params();
        params.want_raw = true;
        glimpse_explanation *e = NULL;
        if (glimpse_explain_clip(ctx, image, parity_text(f, 0), &params, &e)) fail_msg("%s", glimpse_last_error());
        assert_int_equal(e->map_count, 3);
        glimpse_explanation *by_layer = NULL; /* the same maps with one layer recorded a pass */
        params.want_raw = false;
        ctx->rollout_budget = 1;
        if (glimpse_explain_clip(ctx, image, parity_text(f, 0), &params, &by_layer))
            fail_msg("%s", glimpse_last_error());
        ctx->rollout_budget = CONTEXT_ROLLOUT_BUDGET;
        for (size_t m = 0; m < 3; m++)
            assert_true(largest_difference(by_layer->maps[m].grid, e->maps[m].grid, tokens) <= 1e-6);
        glimpse_explanation_free(by_layer);
        assert_int_equal(e->maps[2].kind, GLIMPSE_EXPLAIN_MAP_ATTENTION_POOL);
        double d = largest_difference(e->maps[2].grid, want, tokens);
        if (d > worst) worst = d;
        if (d > TOLERANCE) fail_msg("image %zu: attention-pooling map differs by %g", i, d);
        /* rollout: pool row × Â_L ... Â_1 over the raw tensors, as matrices */
        assert_int_equal(e->raw_count, 2);
        assert_string_equal(e->raw[1].name, "attention_pool");
        double *vector = malloc(tokens * sizeof(double)), *next = malloc(tokens * sizeof(double));
        for (size_t j = 0; j < tokens; j++) vector[j] = e->maps[2].grid[j];
        for (size_t l = layers; l-- > 0;) {
            const float *a = e->raw[0].data + l * heads * tokens * tokens;
            for (size_t k = 0; k < tokens; k++) next[k] = 0;
            for (size_t r = 0; r < tokens; r++) {
                double row[tokens], sum = 0;
                for (size_t k = 0; k < tokens; k++) {
                    row[k] = r == k;
                    for (size_t h = 0; h < heads; h++) row[k] += a[(h * tokens + r) * tokens + k] / (double)heads;
                    sum += row[k];
                }
                for (size_t k = 0; k < tokens; k++) next[k] += vector[r] * row[k] / sum;
            }
            memcpy(vector, next, tokens * sizeof(double));
        }
        double total = 0;
        for (size_t j = 0; j < tokens; j++) total += vector[j];
        for (size_t j = 0; j < tokens; j++) want[j] = (float)(vector[j] / total);
        assert_true(largest_difference(e->maps[0].grid, want, tokens) <= TOLERANCE);
        free(vector), free(next);
        glimpse_explanation_free(e);
        glimpse_image_free(image);
    }
    note_difference("SigLIP attention-pooling map (from the reference's hidden states)", worst);
    free(q), free(scores), free(want);
    glimpse_context_free(ctx);
    safetensors_close(weights);
    parity_teardown((void **)&f);
}

/* A picture of one colour: covering a patch with the mean colour changes nothing, every drop is 0; the score is
 * glimpse_score's logit. */
static void test_occlusion_of_a_flat_picture(void **state) {
    (void)state;
    glimpse_model *model = demo_model("demo-clip");
    glimpse_context *ctx = context_of(model);
    uint8_t pixels[64 * 64 * 3];
    for (size_t i = 0; i < sizeof pixels; i++) pixels[i] = (uint8_t)(i % 3 == 0 ? 200 : 90);
    glimpse_image *image = NULL;
    assert_int_equal(glimpse_image_from_pixels(pixels, 64, 64, 0, GLIMPSE_PIXEL_FORMAT_RGB8, &image),
                     GLIMPSE_STATUS_OK);
    const char *text = "a red square";
    glimpse_explanation *e = NULL;
    if (glimpse_explain_clip(ctx, image, text, NULL, &e)) fail_msg("%s", glimpse_last_error());
    assert_int_equal(e->map_count, 2);
    /* 0 up to the rounding of a batched pass (a row's products may round one ulp apart by its place in a batch) */
    for (int i = 0; i < e->grid_width * e->grid_height; i++)
        assert_true(fabsf(e->maps[1].grid[i]) <= 1e-5f * fmaxf(1, fabsf(e->score)));
    float image_embedding[64], text_embedding[64], logit;
    assert_int_equal(glimpse_model_embedding_dim(model), 64);
    assert_int_equal(glimpse_embed_images(ctx, &image, 1, image_embedding), GLIMPSE_STATUS_OK);
    assert_int_equal(glimpse_embed_texts(ctx, &text, 1, text_embedding), GLIMPSE_STATUS_OK);
    assert_int_equal(glimpse_score(model, image_embedding, 1, text_embedding, 1, &logit), GLIMPSE_STATUS_OK);
    assert_true(e->score == logit);
    glimpse_explanation_free(e);
    glimpse_image_free(image);
    glimpse_context_free(ctx);
    glimpse_model_free(model);
}

/* ------------------------------------------------ sanity on the demo models */

#define TEST_SEED 20261201u /* never used by tools/train/train_demo.py (seeds 1 and 2) nor test_demo.c */
#define SANITY_PICTURES 100

/* The share of a map's positive mass (upsampled onto the 224-pixel picture) inside a shape's bounding box. */
static double mass_inside(const float *full, const picture_shape *shape) {
    double inside = 0, total = 0;
    for (int y = 0; y < PICTURE_SIDE; y++)
        for (int x = 0; x < PICTURE_SIDE; x++) {
            float v = full[y * PICTURE_SIDE + x];
            if (!(v > 0)) continue;
            total += v;
            if (x >= shape->x && x < shape->x + shape->size && y >= shape->y && y < shape->y + shape->size)
                inside += v;
        }
    return total > 0 ? inside / total : 0;
}

static glimpse_image *draw_two_shapes(picture_generator *generator, picture_scene *scene) {
    static uint8_t pixels[PICTURE_SIDE * PICTURE_SIDE * 3];
    do picture_draw(generator, pixels, scene);
    while (scene->count != 2 || (scene->shapes[0].kind == scene->shapes[1].kind &&
                                 scene->shapes[0].colour == scene->shapes[1].colour));
    glimpse_image *image = NULL;
    assert_int_equal(glimpse_image_from_pixels(pixels, PICTURE_SIDE, PICTURE_SIDE, 0, GLIMPSE_PIXEL_FORMAT_RGB8,
                                               &image),
                     GLIMPSE_STATUS_OK);
    return image;
}

/* The scene shape a caption's object (its colour and shape words) names, or -1. */
static int shape_named(const picture_scene *scene, const char *colour, const char *kind) {
    for (int s = 0; s < 2; s++)
        if (colour && kind && !strcmp(picture_colour_names[scene->shapes[s].colour], colour) &&
            !strcmp(picture_shape_names[scene->shapes[s].kind], kind))
            return s;
    return -1;
}

static bool is_name(const char *word, const char *const *names, int count) {
    for (int i = 0; i < count; i++)
        if (!strcmp(word, names[i])) return true;
    return false;
}

/* Tallies of a sanity measure: words whose map has more mass in their own shape's box than in the other's, and
 * words whose map has most (over half) of its mass in their own box. */
typedef struct tally {
    int words, more_than_other, most_inside;
} tally;

static void count_word(tally *t, const float *full, const picture_scene *scene, int shape) {
    double own = mass_inside(full, &scene->shapes[shape]), other = mass_inside(full, &scene->shapes[1 - shape]);
    t->words++;
    t->more_than_other += own > other;
    t->most_inside += own > 0.5;
}

static void test_caption_words_fall_on_their_shapes(void **state) {
    (void)state;
    glimpse_model *model = demo_model("demo-blip-caption");
    glimpse_context *ctx = context_of(model);
    picture_generator generator;
    picture_generator_init(&generator, TEST_SEED);
    float *full = malloc(PICTURE_SIDE * PICTURE_SIDE * sizeof(float));
    tally words = {0};
    double box_share = 0; /* the boxes' share of the picture: chance of "most inside" for a flat map */
    for (int i = 0; i < SANITY_PICTURES; i++) {
        picture_scene scene;
        glimpse_image *image = draw_two_shapes(&generator, &scene);
        glimpse_explanation *e = NULL;
        if (glimpse_explain_caption(ctx, image, NULL, NULL, &e)) fail_msg("%s", glimpse_last_error());
        /* the caption's objects: "a C S [relation] a C S"; the second "a" starts the second */
        int object = -1;
        const char *colour[2] = {NULL, NULL}, *kind[2] = {NULL, NULL};
        for (size_t m = 0; m < e->map_count; m++) {
            const char *w = e->maps[m].label;
            if (!strcmp(w, "a") && object < 1) object++;
            if (object < 0) continue;
            if (is_name(w, picture_colour_names, 4)) colour[object] = w;
            if (is_name(w, picture_shape_names, 3)) kind[object] = w;
        }
        object = -1;
        for (size_t m = 0; m < e->map_count; m++) {
            const char *w = e->maps[m].label;
            if (!strcmp(w, "a") && object < 1) object++;
            if (object < 0 || !(is_name(w, picture_colour_names, 4) || is_name(w, picture_shape_names, 3))) continue;
            int shape = shape_named(&scene, colour[object], kind[object]);
            if (shape < 0) continue; /* a wrong caption's object names no shape */
            assert_int_equal(glimpse_explain_upsample(e, m, PICTURE_SIDE, PICTURE_SIDE, full), GLIMPSE_STATUS_OK);
            count_word(&words, full, &scene, shape);
            box_share += (double)scene.shapes[shape].size * scene.shapes[shape].size / (PICTURE_SIDE * PICTURE_SIDE);
        }
        glimpse_explanation_free(e);
        glimpse_image_free(image);
    }
    fprintf(stderr,
            "demo captioner, %d two-shape pictures: of %d colour and shape words, %d (%.1f%%) put more of their map "
            "in their shape's box than in the other shape's (chance 50%%), %d (%.1f%%) over half of it (the box "
            "is %.1f%% of the picture on average)\n",
            SANITY_PICTURES, words.words, words.more_than_other, 100.0 * words.more_than_other / words.words,
            words.most_inside, 100.0 * words.most_inside / words.words, 100.0 * box_share / words.words);
    assert_true(words.words >= 3 * SANITY_PICTURES);
    assert_true(words.more_than_other * 10 >= words.words * 7);
    free(full);
    glimpse_context_free(ctx);
    glimpse_model_free(model);
}

static void test_clip_occlusion_falls_on_the_shape(void **state) {
    (void)state;
    glimpse_model *model = demo_model("demo-clip");
    glimpse_context *ctx = context_of(model);
    picture_generator generator;
    picture_generator_init(&generator, TEST_SEED + 1);
    float *full = malloc(PICTURE_SIDE * PICTURE_SIDE * sizeof(float));
    tally texts = {0};
    for (int i = 0; i < SANITY_PICTURES; i++) {
        picture_scene scene;
        glimpse_image *image = draw_two_shapes(&generator, &scene);
        for (int s = 0; s < 2; s++) { /* "a red circle": one of the two shapes, named alone */
            char text[64];
            snprintf(text, sizeof text, "a %s %s", picture_colour_names[scene.shapes[s].colour],
                     picture_shape_names[scene.shapes[s].kind]);
            glimpse_explanation *e = NULL;
            if (glimpse_explain_clip(ctx, image, text, NULL, &e)) fail_msg("%s", glimpse_last_error());
            assert_int_equal(e->map_count, 2);
            assert_int_equal(e->maps[1].kind, GLIMPSE_EXPLAIN_MAP_OCCLUSION);
            assert_int_equal(glimpse_explain_upsample(e, 1, PICTURE_SIDE, PICTURE_SIDE, full), GLIMPSE_STATUS_OK);
            count_word(&texts, full, &scene, s);
            glimpse_explanation_free(e);
        }
        glimpse_image_free(image);
    }
    fprintf(stderr,
            "demo CLIP occlusion, %d two-shape pictures, each shape named alone: %d of %d maps (%.1f%%) have more "
            "of their positive mass in the named shape's box than in the other's (chance 50%%), %d (%.1f%%) over "
            "half of it\n",
            SANITY_PICTURES, texts.more_than_other, texts.words, 100.0 * texts.more_than_other / texts.words,
            texts.most_inside, 100.0 * texts.most_inside / texts.words);
    assert_true(texts.more_than_other * 10 >= texts.words * 6);
    free(full);
    glimpse_context_free(ctx);
    glimpse_model_free(model);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_clip_rollout_parity),
                                       cmocka_unit_test(test_blip_caption_word_maps),
                                       cmocka_unit_test(test_blip_itm_word_maps),
                                       cmocka_unit_test(test_vit_gpt2_word_maps),
                                       cmocka_unit_test(test_blip2_word_maps),
                                       cmocka_unit_test(test_region_and_upsampling),
                                       cmocka_unit_test(test_refusals),
                                       cmocka_unit_test(test_caption_maps_stream),
                                       cmocka_unit_test(test_siglip_maps),
                                       cmocka_unit_test(test_occlusion_of_a_flat_picture),
                                       cmocka_unit_test(test_caption_words_fall_on_their_shapes),
                                       cmocka_unit_test(test_clip_occlusion_falls_on_the_shape)};
    return report_differences(cmocka_run_group_tests_name("explain", tests, NULL, NULL));
}
