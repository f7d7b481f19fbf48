/* test_llava_family.c — LLaVA's text side and the whole family through the public API, against the
 * llava-llama-tiny and llava-qwen2-tiny fixtures: every tokenizer case's ids (Llama's SentencePiece with legacy
 * false; Qwen2's byte-level BPE with NFC, its own pattern and added tokens), every case's prompt tokenized to its
 * input_ids, every generation's new ids decoded (skipping the special tokens) to the reference's text, every chat
 * template example rendered by the template the snapshot carries (an unknown one refused); then every
 * one-picture case (captions and questions, greedy and 3 beams, 20 new tokens) given its prompt verbatim to
 * glimpse_caption_images from the picture file gives the reference's new ids and text exactly, llava-1.5's
 * questions asked with glimpse_ask_images (its chat template) and its caption with no prompt (the stated
 * instruction) the same; the text-only cases and Qwen2's two-picture case through glimpse_ask_together (its
 * prompt, and its question in the chat template) too; and a prompt without its <image> is refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "glimpse.h"
#include "tests/support.h"
#include "text/chat_template.h"
#include "text/gpt2_tokenizer.h"
#include "text/llama_tokenizer.h"

/* One of the two tokenizers, through one pair of calls. */
typedef struct either {
    llama_tokenizer *llama;
    gpt2_tokenizer *qwen2;
} either;

static either load(const char *name) {
    either e = {0};
    char *folder = fixture_path(name);
    glimpse_status status = strstr(name, "llama") ? llama_tokenizer_load(folder, &e.llama)
                                                  : gpt2_tokenizer_load(folder, &e.qwen2);
    if (status) fail_msg("%s: %s", name, glimpse_last_error());
    free(folder);
    return e;
}

static void encode(const either *e, const char *text, int32_t **ids, size_t *count) {
    if (e->llama) {
        assert_int_equal(llama_tokenizer_encode(e->llama, text, true, ids, count), GLIMPSE_STATUS_OK);
        return;
    }
    size_t n = 0;
    glimpse_status status = gpt2_tokenizer_encode(e->qwen2, text, 1, NULL, 0, &n);
    assert_true(status == GLIMPSE_STATUS_OK || status == GLIMPSE_STATUS_TOO_LARGE);
    *ids = malloc((n ? n : 1) * sizeof **ids);
    assert_int_equal(gpt2_tokenizer_encode(e->qwen2, text, 1, *ids, n, count), GLIMPSE_STATUS_OK);
}

static char *decode(const either *e, const int32_t *ids, size_t count) {
    char *text = NULL;
    glimpse_status status = e->llama ? llama_tokenizer_decode(e->llama, ids, count, true, &text)
                                     : gpt2_tokenizer_decode(e->qwen2, ids, count, 1, 0, &text, NULL);
    if (status) fail_msg("decode: %s", glimpse_last_error());
    return text;
}

static void expect_encoding(const either *e, const char *text, const cJSON *expected) {
    int32_t *ids;
    size_t count;
    encode(e, text, &ids, &count);
    expect_ids_equal(ids, count, expected, text);
    free(ids);
}

/* Every chat_template_examples entry rendered by the template the snapshot's chat_template.json holds. */
static int check_chat_templates(const char *name, const cJSON *expected) {
    char *folder = fixture_path(name);
    chat_template_kind kind;
    if (chat_template_load(folder, &kind)) fail_msg("%s: %s", name, glimpse_last_error());
    free(folder);
    const cJSON *example;
    int n = 0;
    cJSON_ArrayForEach(example, cJSON_GetObjectItem(expected, "chat_template_examples")) {
        chat_message messages[8];
        chat_part parts[8][8];
        size_t count = 0;
        const cJSON *message, *part;
        cJSON_ArrayForEach(message, cJSON_GetObjectItem(example, "messages")) {
            size_t k = 0;
            cJSON_ArrayForEach(part, cJSON_GetObjectItem(message, "content")) {
                bool image = !strcmp(cJSON_GetObjectItem(part, "type")->valuestring, "image");
                parts[count][k++] = (chat_part){image ? CHAT_PART_IMAGE : CHAT_PART_TEXT,
                                                image ? NULL : cJSON_GetObjectItem(part, "text")->valuestring};
            }
            messages[count] = (chat_message){cJSON_GetObjectItem(message, "role")->valuestring, parts[count], k};
            count++;
        }
        char *prompt;
        assert_int_equal(chat_template_render(kind, messages, count,
                                              cJSON_IsTrue(cJSON_GetObjectItem(example, "add_generation_prompt")),
                                              &prompt),
                         GLIMPSE_STATUS_OK);
        assert_string_equal(prompt, cJSON_GetObjectItem(example, "rendered")->valuestring);
        free(prompt);
        n++;
    }
    assert_int_equal(chat_template_recognise("{{ messages }}", &kind), GLIMPSE_STATUS_UNSUPPORTED);
    return n;
}

static void check_fixture(const char *name) {
    char json_name[128];
    snprintf(json_name, sizeof json_name, "%s/expected.json", name);
    cJSON *expected = fixture_json(json_name);
    if (!expected) skip();
    either e = load(name);
    const cJSON *item;
    int n = 0, cases = 0;
    cJSON_ArrayForEach(item, cJSON_GetObjectItem(expected, "tokenizer_cases")) {
        expect_encoding(&e, cJSON_GetObjectItem(item, "text")->valuestring, cJSON_GetObjectItem(item, "input_ids"));
        n++;
    }
    cJSON_ArrayForEach(item, cJSON_GetObjectItem(expected, "cases")) {
        expect_encoding(&e, cJSON_GetObjectItem(item, "prompt")->valuestring, cJSON_GetObjectItem(item, "input_ids"));
        static const char *const searches[] = {"greedy", "beam3"};
        for (int s = 0; s < 2; s++) {
            const cJSON *generation = cJSON_GetObjectItem(item, searches[s]);
            const cJSON *new_ids = cJSON_GetObjectItem(generation, "new_ids");
            int32_t list[64];
            size_t k = (size_t)cJSON_GetArraySize(new_ids);
            assert_true(k <= 64);
            for (size_t i = 0; i < k; i++) list[i] = cJSON_GetArrayItem(new_ids, (int)i)->valueint;
            char *text = decode(&e, list, k);
            assert_string_equal(text, cJSON_GetObjectItem(generation, "text")->valuestring);
            free(text);
        }
        cases++;
    }
    int templates = check_chat_templates(name, expected);
    fprintf(stderr, "%s: %d tokenizer cases, %d prompts and their %d decoded generations, %d chat templates identical\n",
            name, n, cases, 2 * cases, templates);
    llama_tokenizer_free(e.llama);
    gpt2_tokenizer_free(e.qwen2);
    cJSON_Delete(expected);
}

static void expect_generation(const glimpse_caption *caption, const cJSON *generation, const char *what) {
    expect_ids_equal(caption->ids, caption->id_count, cJSON_GetObjectItem(generation, "new_ids"), what);
    assert_string_equal(caption->text, cJSON_GetObjectItem(generation, "text")->valuestring);
}

/* The question inside llava-1.5's prompt "USER: <image>\nQUESTION ASSISTANT:", or NULL. */
static char *llava15_question(const char *prompt) {
    const char *head = "USER: <image>\n", *tail = " ASSISTANT:";
    size_t length = strlen(prompt);
    if (strncmp(prompt, head, strlen(head)) || length < strlen(head) + strlen(tail) ||
        strcmp(prompt + length - strlen(tail), tail))
        return NULL;
    return strndup(prompt + strlen(head), length - strlen(head) - strlen(tail));
}

/* A case of no picture or several through glimpse_ask_together: its prompt verbatim, and where a chat-template
 * example renders exactly that prompt, its question in the template; both searches each. */
static int check_together(glimpse_context *ctx, const cJSON *expected, const cJSON *item, int k) {
    const cJSON *files = cJSON_GetObjectItem(item, "images"), *example;
    size_t count = (size_t)cJSON_GetArraySize(files);
    glimpse_image *images[4];
    assert_true(count <= 4);
    for (size_t i = 0; i < count; i++) images[i] = fixture_image(cJSON_GetArrayItem(files, (int)i)->valuestring);
    const char *prompt = cJSON_GetObjectItem(item, "prompt")->valuestring, *question = NULL;
    cJSON_ArrayForEach(example, cJSON_GetObjectItem(expected, "chat_template_examples"))
        if (!strcmp(cJSON_GetObjectItem(example, "rendered")->valuestring, prompt)) {
            const cJSON *parts = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(example, "messages"), 0),
                                                     "content");
            question = cJSON_GetObjectItem(cJSON_GetArrayItem(parts, cJSON_GetArraySize(parts) - 1), "text")->valuestring;
        }
    static const char *const searches[] = {"greedy", "beam3"};
    for (int s = 0; s < 2; s++) {
        const cJSON *generation = cJSON_GetObjectItem(item, searches[s]);
        const cJSON *params = cJSON_GetObjectItem(generation, "params");
        glimpse_caption_params p = glimpse_caption_default_params();
        p.max_tokens = cJSON_GetObjectItem(params, "max_new_tokens")->valueint;
        p.beams = cJSON_GetObjectItem(params, "num_beams")->valueint;
        p.prompt = prompt;
        char what[128];
        snprintf(what, sizeof what, "case %d (%zu pictures) %s", k, count, searches[s]);
        glimpse_caption answer;
        if (glimpse_ask_together(ctx, images, count, NULL, &p, &answer)) fail_msg("%s: %s", what, glimpse_last_error());
        expect_generation(&answer, generation, what);
        glimpse_caption_free(&answer);
        if (question) {
            p.prompt = NULL;
            if (glimpse_ask_together(ctx, images, count, question, &p, &answer))
                fail_msg("%s (template): %s", what, glimpse_last_error());
            expect_generation(&answer, generation, what);
            glimpse_caption_free(&answer);
        }
    }
    for (size_t i = 0; i < count; i++) glimpse_image_free(images[i]);
    return 2;
}

static void check_family(const char *name) {
    char relative[128];
    snprintf(relative, sizeof relative, "%s/expected.json", name);
    cJSON *expected = fixture_json(relative);
    if (!expected) skip();
    char *folder = fixture_path(name);
    glimpse_model *model;
    glimpse_context *ctx;
    if (glimpse_model_load(folder, NULL, &model)) fail_msg("%s: %s", name, glimpse_last_error());
    assert_int_equal(glimpse_context_create(model, NULL, &ctx), GLIMPSE_STATUS_OK);
    const cJSON *item;
    int k = 0, checked = 0;
    cJSON_ArrayForEach(item, cJSON_GetObjectItem(expected, "cases")) {
        const cJSON *images = cJSON_GetObjectItem(item, "images");
        if (cJSON_GetArraySize(images) != 1) { /* the text-only and two-picture cases: glimpse_ask_together */
            checked += check_together(ctx, expected, item, k);
            k++;
            continue;
        }
        glimpse_image *image = fixture_image(cJSON_GetArrayItem(images, 0)->valuestring);
        const char *prompt = cJSON_GetObjectItem(item, "prompt")->valuestring;
        static const char *const searches[] = {"greedy", "beam3"};
        for (int s = 0; s < 2; s++) {
            const cJSON *generation = cJSON_GetObjectItem(item, searches[s]), *params;
            params = cJSON_GetObjectItem(generation, "params");
            glimpse_caption_params p = glimpse_caption_default_params();
            p.max_tokens = cJSON_GetObjectItem(params, "max_new_tokens")->valueint;
            p.beams = cJSON_GetObjectItem(params, "num_beams")->valueint;
            p.prompt = prompt;
            glimpse_caption caption;
            char what[128];
            snprintf(what, sizeof what, "%s case %d %s", name, k, searches[s]);
            if (glimpse_caption_images(ctx, &image, 1, &p, &caption)) fail_msg("%s: %s", what, glimpse_last_error());
            expect_generation(&caption, generation, what);
            glimpse_caption_free(&caption);
            char *question = llava15_question(prompt);
            if (question) { /* the same through the chat template: a question, or the caption instruction */
                p.prompt = NULL;
                bool caption_case = !strcmp(cJSON_GetObjectItem(item, "prompt_kind")->valuestring, "caption");
                glimpse_status status = caption_case ? glimpse_caption_images(ctx, &image, 1, &p, &caption)
                                                     : glimpse_ask_images(ctx, &image, 1, question, &p, &caption);
                if (status) fail_msg("%s (template): %s", what, glimpse_last_error());
                expect_generation(&caption, generation, what);
                glimpse_caption_free(&caption);
                free(question);
            }
            checked++;
        }
        glimpse_image_free(image);
        k++;
    }
    glimpse_image *image = fixture_image("astronaut.png");
    glimpse_caption_params p = glimpse_caption_default_params();
    glimpse_caption caption;
    p.prompt = "no picture marked here";
    assert_int_equal(glimpse_caption_images(ctx, &image, 1, &p, &caption), GLIMPSE_STATUS_INVALID_ARGUMENT);
    glimpse_image_free(image);
    fprintf(stderr, "%s: %d generations identical\n", name, checked);
    assert_int_equal(checked, cJSON_GetArraySize(cJSON_GetObjectItem(expected, "cases")) * 2);
    glimpse_context_free(ctx);
    glimpse_model_free(model);
    cJSON_Delete(expected);
    free(folder);
}

/* glimpse ask --together --json: the two-picture case's question gives its corrected beam result, with the
 * prompt and prompt ids the reference had. */
static void test_cli_together(void **state) {
    (void)state;
    cJSON *expected = fixture_json("llava-qwen2-tiny/expected.json");
    if (!expected) skip();
    const cJSON *item = cJSON_GetArrayItem(cJSON_GetObjectItem(expected, "cases"), 9);
    assert_string_equal(cJSON_GetObjectItem(item, "prompt_kind")->valuestring, "two_images");
    char *model = fixture_path("llava-qwen2-tiny"), *a = fixture_path("images/astronaut.png");
    char *b = fixture_path("images/rocket.jpg"), *out, *err;
    const char *argv[] = {GLIMPSE_BINARY, "ask", "-m", model, "--together", "-q",
                          "What is the difference between these two images?", "--beams", "3", "--max-tokens", "20",
                          "--json", a, b, NULL};
    if (run_program(argv, &out, &err)) fail_msg("glimpse ask --together: %s", err);
    cJSON *json = cJSON_Parse(out);
    assert_non_null(json);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(json, "images")), 2);
    const cJSON *ids = cJSON_GetObjectItem(json, "ids");
    int32_t list[64];
    size_t count = (size_t)cJSON_GetArraySize(ids);
    assert_true(count <= 64);
    for (size_t i = 0; i < count; i++) list[i] = cJSON_GetArrayItem(ids, (int)i)->valueint;
    expect_ids_equal(list, count, cJSON_GetObjectItem(cJSON_GetObjectItem(item, "beam3"), "new_ids"),
                     "glimpse ask --together");
    /* the prompt as the chat template renders it, and its ids as the reference's processor gave them */
    assert_string_equal(cJSON_GetObjectItem(json, "prompt")->valuestring, cJSON_GetObjectItem(item, "prompt")->valuestring);
    const cJSON *prompt_ids = cJSON_GetObjectItem(json, "prompt_ids");
    int32_t prompt[128];
    size_t prompt_count = (size_t)cJSON_GetArraySize(prompt_ids);
    assert_true(prompt_count <= 128);
    for (size_t i = 0; i < prompt_count; i++) prompt[i] = cJSON_GetArrayItem(prompt_ids, (int)i)->valueint;
    expect_ids_equal(prompt, prompt_count, cJSON_GetObjectItem(item, "input_ids"), "glimpse ask --together prompt");
    cJSON_Delete(json), cJSON_Delete(expected);
    free(out), free(err), free(model), free(a), free(b);
}

/* --int8 through the public API: the family's quantize hook runs, the model says int8, and it answers and
 * converses (its numbers: test_llava's test_int8). */
static void test_int8_answers(void **state) {
    (void)state;
    if (!fixtures_folder()) skip();
    char *folder = fixture_path("llava-qwen2-tiny");
    glimpse_model *model = load_model(folder, GLIMPSE_PRECISION_INT8);
    glimpse_model_info info;
    glimpse_model_get_info(model, &info);
    assert_int_equal(info.precision, GLIMPSE_PRECISION_INT8);
    glimpse_context *ctx;
    assert_int_equal(glimpse_context_create(model, NULL, &ctx), GLIMPSE_STATUS_OK);
    glimpse_image *image = fixture_image("astronaut.png");
    glimpse_caption_params p = glimpse_caption_default_params();
    p.max_tokens = 8, p.beams = 1;
    glimpse_caption answer;
    if (glimpse_ask_images(ctx, &image, 1, "What is this?", &p, &answer)) fail_msg("int8: %s", glimpse_last_error());
    assert_true(answer.id_count >= 1 && answer.id_count <= 8);
    glimpse_caption_free(&answer);
    glimpse_image_free(image);
    glimpse_context_free(ctx);
    glimpse_model_free(model);
    free(folder);
}

/* glimpse bench times LLaVA's own stages: the image side, the prompt, decoding steps (with the bytes a step reads)
 * and whole captions. */
static void test_bench_stages(void **state) {
    (void)state;
    if (!fixtures_folder()) skip();
    char *model = fixture_path("llava-qwen2-tiny"), *out, *err;
    const char *argv[] = {GLIMPSE_BINARY, "bench", "-m", model, "--runs", "2", "--tokens", "3", "--json", NULL};
    if (run_program(argv, &out, &err)) fail_msg("glimpse bench: %s", err);
    static const char *const stages[] = {"\"stage\": \"image\"", "\"stage\": \"prompt\"",
                                         "\"stage\": \"decoder_step\"", "\"stage\": \"decoder_step_bytes\"",
                                         "\"stage\": \"caption\""};
    for (size_t i = 0; i < sizeof stages / sizeof stages[0]; i++)
        if (!strstr(out, stages[i])) fail_msg("glimpse bench lacks %s:\n%s", stages[i], out);
    free(out), free(err), free(model);
}

/* glimpse-make-model writes LLaVA snapshots in both forms the hub has (llava-1.5: CLIP and Llama with a
 * SentencePiece model; interleave: SigLIP and Qwen2 with a byte-level vocabulary), here with the published configs'
 * shapes narrowed (2 layers, 64 features; the published image sizes, vocabularies and image token ids): each loads,
 * its tokenizer gives <image> the config's id, and it answers a question through the chat template. */
static void test_made_snapshots(void **state) {
    (void)state;
    static const char *const configs[] = {
        "{\"architectures\": [\"LlavaForConditionalGeneration\"], \"image_token_index\": 32000, \"model_type\": "
        "\"llava\", \"pad_token_id\": 32001, \"projector_hidden_act\": \"gelu\", \"text_config\": {\"model_type\": "
        "\"llama\", \"hidden_size\": 64, \"intermediate_size\": 96, \"num_hidden_layers\": 2, \"num_attention_heads\": "
        "4, \"max_position_embeddings\": 4096, \"rms_norm_eps\": 1e-05, \"vocab_size\": 32064}, \"vision_config\": "
        "{\"hidden_size\": 64, \"image_size\": 336, \"intermediate_size\": 96, \"model_type\": \"clip_vision_model\", "
        "\"num_attention_heads\": 4, \"num_hidden_layers\": 2, \"patch_size\": 14, \"projection_dim\": 32}, "
        "\"vision_feature_layer\": -2, \"vision_feature_select_strategy\": \"default\", \"vocab_size\": 32064}",
        "{\"architectures\": [\"LlavaForConditionalGeneration\"], \"image_seq_length\": 729, \"image_token_index\": "
        "151646, \"model_type\": \"llava\", \"projector_hidden_act\": \"gelu\", \"text_config\": {\"model_type\": "
        "\"qwen2\", \"hidden_size\": 64, \"intermediate_size\": 96, \"num_hidden_layers\": 2, \"num_attention_heads\": "
        "4, \"num_key_value_heads\": 2, \"rope_theta\": 1000000.0, \"tie_word_embeddings\": true, \"vocab_size\": "
        "152000}, \"vision_config\": {\"hidden_size\": 64, \"image_size\": 384, \"intermediate_size\": 96, "
        "\"model_type\": \"siglip_vision_model\", \"num_attention_heads\": 4, \"num_hidden_layers\": 2, "
        "\"patch_size\": 14, \"vision_use_head\": false}, \"vision_feature_layer\": -1, "
        "\"vision_feature_select_strategy\": \"full\"}"};
    static const char *const names[] = {"llava-1.5-narrow", "llava-interleave-narrow"};
    char workspace[] = "/tmp/glimpse-llava-made-XXXXXX";
    assert_non_null(mkdtemp(workspace));
    for (int i = 0; i < 2; i++) {
        char *folder = snapshot_from_config(workspace, configs[i], names[i], i ? "" : " --f16"), *out, *err;
        char picture[600];
        snprintf(picture, sizeof picture, "%s/examples/pictures/00000.png", GLIMPSE_SOURCE_DIR);
        const char *argv[] = {GLIMPSE_BINARY, "ask", "-m", folder, "-q", "What is this?", "--max-tokens", "3",
                              "--json", picture, NULL};
        if (run_program(argv, &out, &err)) fail_msg("%s: glimpse ask: %s", names[i], err);
        cJSON *json = cJSON_Parse(out);
        assert_non_null(json);
        int image_token = i ? 151646 : 32000, found = 0;
        const cJSON *id;
        cJSON_ArrayForEach(id, cJSON_GetObjectItem(json, "prompt_ids")) found += id->valueint == image_token;
        assert_int_equal(found, 1); /* the template's <image>, the config's id */
        assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(json, "ids")), 3);
        cJSON_Delete(json);
        free(out), free(err), free(folder);
    }
    char command[700];
    snprintf(command, sizeof command, "rm -rf %s", workspace);
    assert_int_equal(system(command), 0);
}

/* state: the fixture's name */
static void test_fixture(void **state) {
    if (!fixtures_folder()) skip();
    check_fixture(*state);
    check_family(*state);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test_prestate(test_fixture, "llava-llama-tiny"),
                                       cmocka_unit_test_prestate(test_fixture, "llava-qwen2-tiny"),
                                       cmocka_unit_test(test_cli_together), cmocka_unit_test(test_int8_answers),
                                       cmocka_unit_test(test_bench_stages), cmocka_unit_test(test_made_snapshots)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
