/* test_explain_llava_florence2.c — the explanations of the two families that explain by their own recorded pass,
 * against their fixtures' attention.safetensors, each tensor within 1e-5.
 * LLaVA (llava-llama-tiny, llava-qwen2-tiny): the family's one pass over the merged prompt and the answer (every
 * layer's self-attention [heads, T, T] and its image block, the two-picture Qwen2 case too); then
 * glimpse_explain_caption and glimpse_explain_answer through the public API: the answer's ids as the reference
 * generates them, the raw tensor, and every word's map on the 4×4 grid equal to the one computed here from the
 * reference's image block (layers and heads averaged, or one of each), the words grouped here from the
 * tokenizer's pieces.
 * Florence-2 (florence2-tiny): the family's pass (BART's encoder self-attention over the image rows and the
 * <CAPTION> prompt, the decoder's causal self-attention and its cross-attention to the encoder's output, over each
 * picture's greedy caption); glimpse_explain_caption: the caption's ids, the raw tensors, and each word's map on
 * DaViT's 3×3 grid equal to the one computed here from the reference's cross-attention rows (the image token
 * columns after the mean row). `glimpse explain` on both: tests/test_explain_cli.c. */
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
#include "explain/records.h"
#include "families/family.h"
#include "glimpse.h"
#include "tests/support.h"

#define MAX_IDS 256
#define IMAGE_ROWS 10 /* Florence-2: the mean row, then the 3×3 grid */

static size_t json_size(const cJSON *json, const char *key) {
    return (size_t)cJSON_GetObjectItem(json, key)->valueint;
}

static size_t json_ids(const cJSON *array, int32_t *out) {
    size_t n = 0;
    const cJSON *item;
    cJSON_ArrayForEach(item, array) out[n++] = (int32_t)item->valueint;
    return n;
}

static glimpse_context *context_of(const glimpse_model *model) {
    glimpse_context *ctx = NULL;
    if (glimpse_context_create(model, NULL, &ctx)) fail_msg("%s", glimpse_last_error());
    return ctx;
}

/* ------------------------------------------------------------ LLaVA */

/* The family's pass over attention.json's case (its pictures, prompt and answer) against every tensor. */
/* One pass's record against attention.json's tensors: every row it holds (everything: all T; else the rows from
 * the prompt's last position on) of each layer's self-attention, and the image block. */
static void check_llava_record(const attention_fixture *f, const char *name, const family_explain_pass *pass) {
    size_t layers = json_size(f->json, "layers"), heads = json_size(f->json, "heads");
    size_t total = json_size(f->json, "merged_length");
    const attention_record *r = &pass->records[pass->map_record];
    assert_int_equal(pass->map_kind, ATTENTION_KIND_SELF);
    assert_int_equal(r->heads, heads);
    assert_int_equal(r->columns[ATTENTION_KIND_SELF], total);
    assert_string_equal(pass->names[pass->map_record][ATTENTION_KIND_SELF], "self_attentions");
    size_t first = total - r->rows; /* the position of the record's row 0 */
    /* where the maps are read: the row before each answer token, the first picture's patches */
    const cJSON *rows = cJSON_GetObjectItem(f->json, "rows"), *columns = cJSON_GetObjectItem(f->json, "columns");
    assert_int_equal(pass->row_shift + (long)first, cJSON_GetArrayItem(rows, 0)->valueint);
    assert_int_equal(pass->first_column, cJSON_GetArrayItem(columns, 0)->valueint);
    size_t row_count = (size_t)cJSON_GetArraySize(rows), column_count = (size_t)cJSON_GetArraySize(columns);
    for (size_t l = 0; l < layers; l++) {
        char tensor[64], what[96];
        const float *recorded = r->probabilities[ATTENTION_KIND_SELF] + l * heads * r->rows * total;
        snprintf(tensor, sizeof tensor, "self_attentions.%zu", l);
        snprintf(what, sizeof what, "%s %s", name, tensor);
        const float *reference = fixture_tensor(f->attention, tensor, heads * total * total);
        for (size_t h = 0; h < heads; h++)
            compare_rows(recorded + h * r->rows * total, reference + (h * total + first) * total, 1, r->rows, total,
                         r->rows, what);
        snprintf(tensor, sizeof tensor, "image_attention.%zu", l);
        const float *block = fixture_tensor(f->attention, tensor, heads * row_count * column_count);
        double worst = 0;
        for (size_t h = 0; h < heads; h++)
            for (size_t i = 0; i < row_count; i++)
                for (size_t j = 0; j < column_count; j++) {
                    size_t row = (size_t)cJSON_GetArrayItem(rows, (int)i)->valueint - first;
                    size_t column = (size_t)cJSON_GetArrayItem(columns, (int)j)->valueint;
                    double d = fabs(recorded[(h * r->rows + row) * total + column] -
                                    block[(h * row_count + i) * column_count + j]);
                    worst = fmax(worst, d);
                }
        snprintf(what, sizeof what, "%s %s", name, tensor);
        note_difference(what, worst);
        assert_true(worst <= ATTENTION_TOLERANCE);
    }
}

/* The family's pass over attention.json's case (its pictures, prompt and answer) against every tensor: recording
 * everything (want_raw) and only the rows the maps read. */
static void test_llava_recorded_pass(void **state) {
    const char *name = *state;
    attention_fixture f = attention_fixture_open(name, "attention.json");
    size_t total = json_size(f.json, "merged_length"), prompt_rows = json_size(f.json, "prompt_merged_length");
    int32_t ids[MAX_IDS];
    size_t n = json_ids(cJSON_GetObjectItem(f.json, "ids"), ids), answer = total - prompt_rows;
    glimpse_image *images[4];
    size_t count = 0;
    const cJSON *item;
    cJSON_ArrayForEach(item, cJSON_GetObjectItem(f.json, "images")) images[count++] = fixture_image(item->valuestring);
    glimpse_context *ctx = context_of(f.model);
    const family_explainer *explainer = f.model->family->explain;
    assert_non_null(explainer);
    for (int everything = 1; everything >= 0; everything--) {
        family_explain_pass pass = {.map_layers = explain_all_layers(json_size(f.json, "layers")),
                                    .everything = everything};
        if (explainer->record(ctx, images, count, cJSON_GetObjectItem(f.json, "prompt")->valuestring, NULL,
                              ids + n - answer, answer, &pass))
            fail_msg("%s", glimpse_last_error());
        assert_int_equal(pass.records[pass.map_record].rows, everything ? total : answer + 1);
        check_llava_record(&f, name, &pass);
        for (size_t i = 0; i < FAMILY_EXPLAIN_RECORDS; i++) explain_record_release(&pass.records[i]);
    }
    for (size_t i = 0; i < count; i++) glimpse_image_free(images[i]);
    glimpse_context_free(ctx);
    attention_fixture_close(&f);
}

/* Whether a SentencePiece piece ("▁word", "<0x0A>") or a byte-level BPE token ("Ġword", "Ċ") is whitespace alone
 * or a special token (no word), and whether it starts with a space. */
static void piece_kind(const char *piece, bool *blank, bool *spaced) {
    static const char *const blanks[] = {"<0x0A>", "<0x09>", "<0x0D>", "<0x20>", "\xe2\x96\x81", "\xc4\x8a", "\xc4\xa0",
                                         "\xc4\x89", "\xc4\x8d"};
    static const char *const specials[] = {"<s>", "</s>", "<unk>", "<pad>", "<image>"};
    *blank = !strncmp(piece, "<|", 2); /* Qwen2's <|im_end|>, <|endoftext|>: decoded to nothing */
    /* the byte 0 (byte-level "Ā", SentencePiece's <0x00>) ends the text a C string holds: no word */
    *blank = *blank || !strcmp(piece, "\xc4\x80") || !strcmp(piece, "<0x00>");
    for (size_t i = 0; i < sizeof specials / sizeof specials[0]; i++) *blank = *blank || !strcmp(piece, specials[i]);
    for (size_t i = 0; i < sizeof blanks / sizeof blanks[0]; i++) {
        size_t length = strlen(blanks[i]);
        bool all = strlen(piece) > 0 && strlen(piece) % length == 0;
        for (size_t at = 0; all && piece[at]; at += length) all = !strncmp(piece + at, blanks[i], length);
        *blank = *blank || all;
    }
    *spaced = !strncmp(piece, "\xe2\x96\x81", 3) || !strncmp(piece, "\xc4\xa0", 2); /* "▁", "Ġ" */
}

/* The expected map of answer tokens [first, first + count): each token's row of the reference's image block
 * [layers][heads][rows][16] (row k: the query that chose answer token k), layers and heads in the ranges averaged
 * and renormalised, then the tokens averaged. */
static void expected_map(float *out, const float *const *blocks, size_t heads, size_t rows, size_t columns,
                         size_t first_layer, size_t end_layer, size_t first_head, size_t end_head, size_t first,
                         size_t count) {
    memset(out, 0, columns * sizeof(float));
    for (size_t k = first; k < first + count; k++) {
        double sum[64] = {0}, total = 0;
        for (size_t l = first_layer; l < end_layer; l++)
            for (size_t h = first_head; h < end_head; h++)
                for (size_t j = 0; j < columns; j++) sum[j] += blocks[l][(h * rows + k) * columns + j];
        for (size_t j = 0; j < columns; j++) total += sum[j];
        for (size_t j = 0; j < columns; j++) out[j] += (float)(sum[j] / total / (double)count);
    }
}

/* e's words against the pieces' grouping (a piece with "▁"/"Ġ" starts a word, whitespace pieces are none, others
 * continue the word) and each map against expected_map within the tolerance; returns the largest difference. */
static double check_words(const glimpse_explanation *e, const cJSON *tokens, const float *const *blocks,
                          size_t heads, size_t rows, size_t columns, size_t layer, int head, size_t layers) {
    size_t word = 0, n = (size_t)cJSON_GetArraySize(tokens), first = 0, count = 0;
    double worst = 0;
    float want[64];
    for (size_t t = 0; t <= n; t++) {
        bool blank = true, spaced = false;
        if (t < n) piece_kind(cJSON_GetArrayItem(tokens, (int)t)->valuestring, &blank, &spaced);
        if (count && (blank || spaced)) {
            assert_true(word < e->map_count);
            const glimpse_explain_map *map = &e->maps[word++];
            assert_int_equal(map->first_token, first);
            assert_int_equal(map->token_count, count);
            expected_map(want, blocks, heads, rows, columns, layer == SIZE_MAX ? 0 : layer,
                         layer == SIZE_MAX ? layers : layer + 1, head < 0 ? 0 : (size_t)head,
                         head < 0 ? heads : (size_t)head + 1, first, count);
            for (size_t j = 0; j < columns; j++) worst = fmax(worst, fabs(map->grid[j] - want[j]));
            count = 0;
        }
        if (!blank && !count++) first = t;
    }
    assert_int_equal(word, e->map_count);
    if (worst > ATTENTION_TOLERANCE) fail_msg("a word's map differs by %g", worst);
    return worst;
}

/* The reference's image blocks of each layer, [heads][rows][columns]. */
static void image_blocks(const attention_fixture *f, size_t layers, size_t heads, size_t rows, size_t columns,
                         const float **blocks) {
    for (size_t l = 0; l < layers; l++) {
        char tensor[64];
        snprintf(tensor, sizeof tensor, "image_attention.%zu", l);
        blocks[l] = fixture_tensor(f->attention, tensor, heads * rows * columns);
    }
}

/* llava-llama-tiny's case 0 (the caption request on astronaut.png) through glimpse_explain_caption: the default
 * caption prompt is the case's, the answer its greedy one; the maps against the reference's. */
static void test_llava_caption_maps(void **state) {
    (void)state;
    attention_fixture f = attention_fixture_open("llava-llama-tiny", "attention.json");
    cJSON *expected = fixture_json("llava-llama-tiny/expected.json");
    const cJSON *greedy = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(expected, "cases"), 0), "greedy");
    size_t layers = json_size(f.json, "layers"), heads = json_size(f.json, "heads");
    size_t total = json_size(f.json, "merged_length");
    size_t rows = (size_t)cJSON_GetArraySize(cJSON_GetObjectItem(f.json, "rows"));
    size_t columns = (size_t)cJSON_GetArraySize(cJSON_GetObjectItem(f.json, "columns"));
    const float *blocks[8];
    image_blocks(&f, layers, heads, rows, columns, blocks);
    glimpse_context *ctx = context_of(f.model);
    glimpse_image *image = fixture_image("astronaut.png");
    glimpse_caption_params caption = glimpse_caption_default_params();
    caption.beams = 1, caption.max_tokens = 20;
    glimpse_explain_params params = glimpse_explain_default_params();
    params.want_raw = true;
    glimpse_explanation *e = NULL;
    if (glimpse_explain_caption(ctx, image, &caption, &params, &e)) fail_msg("%s", glimpse_last_error());
    expect_ids_equal(e->ids, e->id_count, cJSON_GetObjectItem(greedy, "new_ids"), "the explained answer");
    assert_string_equal(e->text, cJSON_GetObjectItem(greedy, "text")->valuestring);
    assert_int_equal(e->grid_width, 4);
    assert_int_equal(e->grid_height, 4);
    const cJSON *tokens = cJSON_GetObjectItem(greedy, "tokens");
    double worst = check_words(e, tokens, blocks, heads, rows, columns, SIZE_MAX, -1, layers);
    assert_int_equal(e->raw_count, 1);
    assert_string_equal(e->raw[0].name, "self_attentions");
    size_t shape[4] = {layers, heads, total, total};
    assert_memory_equal(e->raw[0].shape, shape, sizeof shape);
    for (size_t l = 0; l < layers; l++) {
        char tensor[64];
        snprintf(tensor, sizeof tensor, "self_attentions.%zu", l);
        compare_rows(e->raw[0].data + l * heads * total * total,
                     fixture_tensor(f.attention, tensor, heads * total * total), heads, total, total, total,
                     "llava-llama-tiny raw self_attentions");
    }
    glimpse_explanation_free(e);
    /* without the raw tensor: only the rows the maps read are recorded */
    params = glimpse_explain_default_params();
    if (glimpse_explain_caption(ctx, image, &caption, &params, &e)) fail_msg("%s", glimpse_last_error());
    assert_int_equal(e->raw_count, 0);
    worst = fmax(worst, check_words(e, tokens, blocks, heads, rows, columns, SIZE_MAX, -1, layers));
    glimpse_explanation_free(e);
    /* one layer and one head */
    params.layer = 1, params.head = 4;
    if (glimpse_explain_caption(ctx, image, &caption, &params, &e)) fail_msg("%s", glimpse_last_error());
    assert_int_equal(e->raw_count, 0);
    worst = fmax(worst, check_words(e, tokens, blocks, heads, rows, columns, 1, 4, layers));
    glimpse_explanation_free(e);
    params.layer = (int)layers;
    assert_int_equal(glimpse_explain_caption(ctx, image, &caption, &params, &e), GLIMPSE_STATUS_INVALID_ARGUMENT);
    note_difference("llava-llama-tiny word maps", worst);
    glimpse_image_free(image);
    glimpse_context_free(ctx);
    cJSON_Delete(expected);
    attention_fixture_close(&f);
}

/* The question of a llava-1.5 prompt "USER: <image>\nQUESTION ASSISTANT:" (new string). */
static char *llava15_question(const char *prompt) {
    const char *start = strstr(prompt, "<image>\n"), *end = strstr(prompt, " ASSISTANT:");
    assert_non_null(start);
    assert_non_null(end);
    start += strlen("<image>\n");
    return strndup(start, (size_t)(end - start));
}

/* Every word's map read from a raw self_attentions [layers][heads][T][T] as expected_map reads the reference's
 * image block: rows from row_shift on, columns from first_column. */
static double check_words_against_raw(const glimpse_explanation *e, const cJSON *tokens, size_t row_shift,
                                      size_t first_column) {
    size_t layers = e->raw[0].shape[0], heads = e->raw[0].shape[1], total = e->raw[0].shape[2];
    size_t rows = total - row_shift;
    float *copy = malloc(layers * heads * rows * 16 * sizeof(float));
    const float *blocks[8];
    for (size_t l = 0; l < layers; l++) {
        for (size_t h = 0; h < heads; h++)
            for (size_t i = 0; i < rows; i++)
                memcpy(copy + ((l * heads + h) * rows + i) * 16,
                       e->raw[0].data + ((l * heads + h) * total + row_shift + i) * total + first_column,
                       16 * sizeof(float));
        blocks[l] = copy + l * heads * rows * 16;
    }
    double worst = check_words(e, tokens, blocks, heads, rows, 16, SIZE_MAX, -1, layers);
    free(copy);
    return worst;
}

/* The ask path: glimpse_explain_answer with the question of each model's first question case, the template's
 * prompt as the reference's; the answer's ids are the reference's and its maps those of the raw tensor's rows
 * (the recorded pass itself is held to the reference above). */
static void test_llava_answer_maps(void **state) {
    const char *name = *state;
    glimpse_model *model = NULL;
    cJSON *expected = NULL;
    safetensors *reference = NULL;
    if (!fixtures_folder()) skip();
    if (fixture_open(name, "expected.json", "reference.safetensors", &model, &expected, &reference))
        fail_msg("%s: the fixture cannot be read", name);
    const cJSON *item = cJSON_GetArrayItem(cJSON_GetObjectItem(expected, "cases"), 1);
    assert_string_equal(cJSON_GetObjectItem(item, "prompt_kind")->valuestring, "question");
    const cJSON *greedy = cJSON_GetObjectItem(item, "greedy");
    const char *prompt = cJSON_GetObjectItem(item, "prompt")->valuestring;
    glimpse_context *ctx = context_of(model);
    glimpse_image *image = fixture_image(cJSON_GetArrayItem(cJSON_GetObjectItem(item, "images"), 0)->valuestring);
    glimpse_caption_params caption = glimpse_caption_default_params();
    caption.beams = 1, caption.max_tokens = 20;
    glimpse_explain_params params = glimpse_explain_default_params();
    params.want_raw = true;
    glimpse_explanation *e = NULL;
    bool llama = strstr(prompt, "USER:") != NULL;
    char *question = llama ? llava15_question(prompt) : NULL;
    glimpse_status status = GLIMPSE_STATUS_OK;
    if (llama) {
        status = glimpse_explain_answer(ctx, image, question, &caption, &params, &e);
    } else { /* the reconstructed interleave template is not the case's spacing: the prompt verbatim */
        caption.prompt = prompt;
        status = glimpse_explain_caption(ctx, image, &caption, &params, &e);
    }
    if (status) fail_msg("%s", glimpse_last_error());
    expect_ids_equal(e->ids, e->id_count, cJSON_GetObjectItem(greedy, "new_ids"), "the explained answer");
    size_t merged = json_size(item, "merged_length");
    size_t first_column = (size_t)cJSON_GetArrayItem(cJSON_GetArrayItem(cJSON_GetObjectItem(item, "image_spans"), 0),
                                                     0)->valueint;
    assert_int_equal(e->raw[0].shape[2], merged + e->id_count);
    double worst = check_words_against_raw(e, cJSON_GetObjectItem(greedy, "tokens"), merged - 1, first_column);
    note_difference("answer word maps against their own raw rows", worst);
    glimpse_explanation_free(e);
    free(question);
    glimpse_image_free(image);
    glimpse_context_free(ctx);
    fixture_close(model, expected, reference);
}

/* ------------------------------------------------------------ Florence-2 */

/* florence2-tiny's model, attention files, expected.json, sizes and a context. */
typedef struct florence2_fixture {
    attention_fixture f;
    cJSON *expected;
    size_t layers, heads, encoder_layers, encoder_heads;
    glimpse_context *ctx;
} florence2_fixture;

static florence2_fixture florence2_open(void) {
    florence2_fixture x = {.f = attention_fixture_open("florence2-tiny", "attention.json")};
    x.expected = fixture_json("florence2-tiny/expected.json");
    assert_non_null(x.expected);
    x.layers = json_size(x.f.json, "decoder_layers"), x.heads = json_size(x.f.json, "decoder_heads");
    x.encoder_layers = json_size(x.f.json, "encoder_layers"), x.encoder_heads = json_size(x.f.json, "encoder_heads");
    x.ctx = context_of(x.f.model);
    return x;
}

static void florence2_close(florence2_fixture *x) {
    glimpse_context_free(x->ctx);
    cJSON_Delete(x->expected);
    attention_fixture_close(&x->f);
}

/* The fixture tensor NAME.index. */
static const float *tensor_of(const attention_fixture *f, const char *name, size_t index, size_t elements) {
    char full[64];
    snprintf(full, sizeof full, "%s.%zu", name, index);
    return fixture_tensor(f->attention, full, elements);
}

/* attention.json's case: its picture's index and file, and the encoder's length for its prompt (its task). */
static void case_of(const cJSON *item, const cJSON *expected, size_t *index, const char **file, size_t *length,
                    const char **task) {
    *index = json_size(item, "image");
    const cJSON *prompt = cJSON_GetArrayItem(cJSON_GetObjectItem(expected, "prompts"),
                                             (int)json_size(item, "prompt_index"));
    *file = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(expected, "images"), (int)*index), "file")
                ->valuestring;
    *length = json_size(prompt, "num_encoder_tokens");
    *task = cJSON_GetObjectItem(prompt, "task")->valuestring;
}

static void test_florence2_recorded_pass(void **state) {
    (void)state;
    florence2_fixture x = florence2_open();
    const cJSON *item;
    int cases = 0;
    cJSON_ArrayForEach(item, cJSON_GetObjectItem(x.f.json, "cases")) {
        size_t index, length;
        const char *file, *task;
        case_of(item, x.expected, &index, &file, &length, &task);
        int32_t ids[MAX_IDS];
        size_t n = json_ids(cJSON_GetObjectItem(item, "ids"), ids);
        glimpse_image *image = fixture_image(file);
        family_explain_pass pass = {.map_layers = explain_all_layers(x.layers), .everything = true};
        if (x.f.model->family->explain->record(x.ctx, &image, 1, task, NULL, ids, n, &pass))
            fail_msg("%s", glimpse_last_error());
        const attention_record *encoder = &pass.records[0], *decoder = &pass.records[pass.map_record];
        assert_int_equal(pass.map_kind, ATTENTION_KIND_CROSS);
        assert_int_equal(pass.row_shift, -1);
        assert_int_equal(pass.first_column, 1);
        assert_int_equal(encoder->rows, length);
        assert_int_equal(decoder->rows, n);
        assert_string_equal(pass.names[0][ATTENTION_KIND_SELF], "encoder_attentions");
        assert_string_equal(pass.names[1][ATTENTION_KIND_SELF], "decoder_self_attentions");
        assert_string_equal(pass.names[1][ATTENTION_KIND_CROSS], "cross_attentions");
        size_t encoder_block = x.encoder_heads * length * length;
        const float *want_encoder = tensor_of(&x.f, "encoder_attentions", index, x.encoder_layers * encoder_block);
        const float *want_self = tensor_of(&x.f, "decoder_self_attentions", index, x.layers * x.heads * n * n);
        const float *want_cross = tensor_of(&x.f, "cross_attentions", index, x.layers * x.heads * n * length);
        for (size_t l = 0; l < x.encoder_layers; l++)
            compare_rows(encoder->probabilities[ATTENTION_KIND_SELF] + l * encoder_block,
                         want_encoder + l * encoder_block, x.encoder_heads, length, length, length,
                         "florence2-tiny encoder_attentions");
        for (size_t l = 0; l < x.layers; l++) {
            size_t self_block = x.heads * n * n, cross_block = x.heads * n * length;
            compare_rows(decoder->probabilities[ATTENTION_KIND_SELF] + l * self_block, want_self + l * self_block,
                         x.heads, n, n, n, "florence2-tiny decoder_self_attentions");
            compare_rows(decoder->probabilities[ATTENTION_KIND_CROSS] + l * cross_block, want_cross + l * cross_block,
                         x.heads, n, length, n, "florence2-tiny cross_attentions");
        }
        for (size_t r = 0; r < FAMILY_EXPLAIN_RECORDS; r++) explain_record_release(&pass.records[r]);
        glimpse_image_free(image);
        cases++;
    }
    assert_int_equal(cases, 4);
    florence2_close(&x);
}

/* The map of the tokens ids[first .. first + count): each one's row t - 1 of cross [layers][heads][n][length], the
 * image columns 1 .. 9, layers and heads in the ranges averaged and renormalised, then the tokens averaged;
 * compared with map. Returns the difference. */
static double expect_florence2_map(const glimpse_explain_map *map, const float *cross, size_t heads, size_t n,
                                   size_t length, size_t first_layer, size_t end_layer, size_t first_head,
                                   size_t end_head) {
    size_t patches = IMAGE_ROWS - 1;
    float want[IMAGE_ROWS] = {0};
    for (size_t t = map->first_token; t < map->first_token + map->token_count; t++) {
        double sum[IMAGE_ROWS] = {0}, total = 0;
        for (size_t l = first_layer; l < end_layer; l++)
            for (size_t h = first_head; h < end_head; h++)
                for (size_t j = 0; j < patches; j++) sum[j] += cross[((l * heads + h) * n + t - 1) * length + 1 + j];
        for (size_t j = 0; j < patches; j++) total += sum[j];
        for (size_t j = 0; j < patches; j++) want[j] += (float)(sum[j] / total / (double)map->token_count);
    }
    double worst = 0;
    for (size_t j = 0; j < patches; j++) worst = fmax(worst, fabs(map->grid[j] - want[j]));
    if (worst > ATTENTION_TOLERANCE) fail_msg("the map of '%s' differs by %g", map->label, worst);
    return worst;
}

/* Every map of e: words in order after the start token, not overlapping, each labelled, each against expect_map. */
static double check_florence2_maps(const glimpse_explanation *e, const float *cross, size_t heads, size_t length,
                                   size_t layer, int head, size_t layers) {
    size_t next = 1;
    double worst = 0;
    for (size_t m = 0; m < e->map_count; m++) {
        const glimpse_explain_map *map = &e->maps[m];
        assert_true(map->first_token >= next);
        assert_true(map->token_count >= 1);
        assert_true(map->first_token + map->token_count <= e->id_count);
        assert_true(strlen(map->label) > 0);
        assert_non_null(strstr(e->text, map->label));
        next = map->first_token + map->token_count;
        size_t first_layer = layer == SIZE_MAX ? 0 : layer, end_layer = layer == SIZE_MAX ? layers : layer + 1;
        size_t first_head = head < 0 ? 0 : (size_t)head, end_head = head < 0 ? heads : (size_t)head + 1;
        worst = fmax(worst, expect_florence2_map(map, cross, heads, e->id_count, length, first_layer, end_layer,
                                                 first_head, end_head));
    }
    return worst;
}

static void test_florence2_caption_maps(void **state) {
    (void)state;
    florence2_fixture x = florence2_open();
    const cJSON *item;
    double worst = 0;
    size_t words = 0;
    cJSON_ArrayForEach(item, cJSON_GetObjectItem(x.f.json, "cases")) {
        size_t index, length, n = (size_t)cJSON_GetArraySize(cJSON_GetObjectItem(item, "ids"));
        const char *file, *task;
        case_of(item, x.expected, &index, &file, &length, &task);
        assert_string_equal(task, "<CAPTION>"); /* what a caption explains */
        glimpse_image *image = fixture_image(file);
        glimpse_caption_params caption = glimpse_caption_default_params();
        caption.beams = 1, caption.max_tokens = 20;
        glimpse_explain_params params = glimpse_explain_default_params();
        params.want_raw = true;
        glimpse_explanation *e = NULL;
        if (glimpse_explain_caption(x.ctx, image, &caption, &params, &e)) fail_msg("%s", glimpse_last_error());
        expect_ids_equal(e->ids, e->id_count, cJSON_GetObjectItem(item, "ids"), "the explained caption");
        assert_int_equal(e->grid_width, 3);
        assert_int_equal(e->grid_height, 3);
        const float *cross = tensor_of(&x.f, "cross_attentions", index, x.layers * x.heads * n * length);
        worst = fmax(worst, check_florence2_maps(e, cross, x.heads, length, SIZE_MAX, -1, x.layers));
        words += e->map_count;
        /* the raw tensors: the pass's records, as the reference's */
        static const char *const names[] = {"encoder_attentions", "decoder_self_attentions", "cross_attentions"};
        size_t sizes[] = {x.encoder_layers * x.encoder_heads * length * length, x.layers * x.heads * n * n,
                          x.layers * x.heads * n * length};
        assert_int_equal(e->raw_count, 3);
        for (size_t r = 0; r < 3; r++) {
            const glimpse_explain_tensor *t = NULL;
            for (size_t i = 0; i < e->raw_count; i++)
                if (!strcmp(e->raw[i].name, names[r])) t = &e->raw[i];
            assert_non_null(t);
            size_t count = t->shape[0] * t->shape[1] * t->shape[2] * t->shape[3];
            assert_int_equal(count, sizes[r]);
            size_t rows = t->shape[2], columns = t->shape[3], block = t->shape[1] * rows * columns;
            const float *want = tensor_of(&x.f, names[r], index, sizes[r]);
            for (size_t l = 0; l < t->shape[0]; l++)
                compare_rows(t->data + l * block, want + l * block, t->shape[1], rows, columns, rows, names[r]);
        }
        glimpse_explanation_free(e);
        /* one layer and one head */
        params = glimpse_explain_default_params();
        params.layer = 0, params.head = 1;
        if (glimpse_explain_caption(x.ctx, image, &caption, &params, &e)) fail_msg("%s", glimpse_last_error());
        assert_int_equal(e->raw_count, 0);
        worst = fmax(worst, check_florence2_maps(e, cross, x.heads, length, 0, 1, x.layers));
        glimpse_explanation_free(e);
        glimpse_image_free(image);
    }
    assert_true(words > 0);
    note_difference("florence2-tiny word maps", worst);
    florence2_close(&x);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_prestate(test_llava_recorded_pass, "llava-llama-tiny"),
        cmocka_unit_test_prestate(test_llava_recorded_pass, "llava-qwen2-tiny"),
        cmocka_unit_test(test_llava_caption_maps),
        cmocka_unit_test_prestate(test_llava_answer_maps, "llava-llama-tiny"),
        cmocka_unit_test_prestate(test_llava_answer_maps, "llava-qwen2-tiny"),
        cmocka_unit_test(test_florence2_recorded_pass),
        cmocka_unit_test(test_florence2_caption_maps),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    return report_differences(failed);
}
