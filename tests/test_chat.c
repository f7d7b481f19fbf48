/* test_chat.c — glimpse_chat, a conversation about pictures, against the llava-llama-tiny, llava-qwen2-tiny and
 * blip2-opt-tiny fixtures: a first turn gives the reference's ids for that prompt (llava-1.5's question, Qwen2's
 * two-picture question greedy and with 3 beams, BLIP-2's "Question: ... Answer:"), with the prompt, its ids and
 * its merged length as the reference has them; a second and a third turn render the conversation as the
 * checkpoints' chat templates do (written out here from the templates' text), keep the cached positions of the
 * earlier turns, and answer exactly as a fresh context does (greedy and sampled); a changed picture is not taken
 * from the cache; and every malformed conversation is refused with its reason. */
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

typedef struct fixture {
    cJSON *expected;
    glimpse_model *model;
    glimpse_context *ctx;
} fixture;

/* The fixture's model and expected.json, or a skip when the fixtures are absent. */
static fixture open_fixture(const char *name) {
    fixture f = {0};
    char relative[128];
    snprintf(relative, sizeof relative, "%s/expected.json", name);
    if (!fixtures_folder() || !(f.expected = fixture_json(relative))) skip();
    char *folder = fixture_path(name);
    if (glimpse_model_load(folder, NULL, &f.model)) fail_msg("%s: %s", name, glimpse_last_error());
    assert_int_equal(glimpse_context_create(f.model, NULL, &f.ctx), GLIMPSE_STATUS_OK);
    free(folder);
    return f;
}

static void close_fixture(fixture *f) {
    glimpse_context_free(f->ctx);
    glimpse_model_free(f->model);
    cJSON_Delete(f->expected);
}

static const cJSON *fixture_case(const fixture *f, int index) {
    return cJSON_GetArrayItem(cJSON_GetObjectItem(f->expected, "cases"), index);
}

static glimpse_caption chat(glimpse_context *ctx, const glimpse_chat_message *messages, size_t count,
                            const glimpse_caption_params *p, const char *what) {
    glimpse_caption reply;
    if (glimpse_chat(ctx, messages, count, p, &reply)) fail_msg("%s: %s", what, glimpse_last_error());
    return reply;
}

/* The same conversation in a new context (nothing cached) answers with the same ids and text. */
static void expect_same_as_fresh(const fixture *f, const glimpse_chat_message *messages, size_t count,
                                 const glimpse_caption_params *p, const glimpse_caption *reply, const char *what) {
    glimpse_context *fresh;
    assert_int_equal(glimpse_context_create(f->model, NULL, &fresh), GLIMPSE_STATUS_OK);
    glimpse_caption again = chat(fresh, messages, count, p, what);
    assert_int_equal(again.cached_positions, 0);
    assert_int_equal(again.id_count, reply->id_count);
    assert_memory_equal(again.ids, reply->ids, reply->id_count * sizeof *reply->ids);
    assert_string_equal(again.text, reply->text);
    assert_string_equal(again.prompt, reply->prompt);
    assert_int_equal(again.prompt_positions, reply->prompt_positions);
    glimpse_caption_free(&again);
    glimpse_context_free(fresh);
}

static glimpse_caption_params greedy(int max_tokens) {
    glimpse_caption_params p = glimpse_caption_default_params();
    p.max_tokens = max_tokens;
    p.beams = 1;
    return p;
}

/* llava-1.5: case 1's question as a first turn, then two more turns about the same picture. */
static void test_llava_llama(void **state) {
    (void)state;
    fixture f = open_fixture("llava-llama-tiny");
    const cJSON *item = fixture_case(&f, 1), *generation = cJSON_GetObjectItem(item, "greedy");
    assert_string_equal(cJSON_GetObjectItem(item, "prompt")->valuestring,
                        "USER: <image>\nWhat color is the cup? ASSISTANT:");
    glimpse_image *image = fixture_image("astronaut.png");
    glimpse_chat_part first[] = {{NULL, image}, {"What color is the cup?", NULL}};
    glimpse_chat_message messages[5] = {{"user", first, 2}};
    glimpse_caption_params p = greedy(20);
    glimpse_caption one = chat(f.ctx, messages, 1, &p, "turn 1");
    expect_ids_equal(one.ids, one.id_count, cJSON_GetObjectItem(generation, "new_ids"), "turn 1");
    assert_string_equal(one.text, cJSON_GetObjectItem(generation, "text")->valuestring);
    assert_string_equal(one.prompt, cJSON_GetObjectItem(item, "prompt")->valuestring);
    expect_ids_equal(one.prompt_ids, one.prompt_id_count, cJSON_GetObjectItem(item, "input_ids"), "turn 1 prompt");
    assert_int_equal(one.prompt_positions, cJSON_GetObjectItem(item, "merged_length")->valueint);
    assert_int_equal(one.cached_positions, 0);

    /* turn 2: the template's "ASSISTANT: " + answer + " " then the next "USER: " */
    glimpse_chat_part answer1[] = {{one.text, NULL}}, second[] = {{"Describe the image in one sentence.", NULL}};
    messages[1] = (glimpse_chat_message){"assistant", answer1, 1};
    messages[2] = (glimpse_chat_message){"user", second, 1};
    glimpse_caption two = chat(f.ctx, messages, 3, &p, "turn 2");
    char expected_prompt[512];
    snprintf(expected_prompt, sizeof expected_prompt,
             "USER: <image>\nWhat color is the cup? ASSISTANT: %s USER: Describe the image in one sentence. "
             "ASSISTANT:", one.text);
    assert_string_equal(two.prompt, expected_prompt);
    /* the picture's rows and the first question at least come from the cache */
    const cJSON *span = cJSON_GetArrayItem(cJSON_GetObjectItem(item, "image_spans"), 0);
    fprintf(stderr, "llava-llama-tiny: turn 2 kept %zu of %zu positions (turn 1 held %zu)\n", two.cached_positions,
            two.prompt_positions, one.prompt_positions + one.id_count - 1);
    assert_true(two.cached_positions > (size_t)cJSON_GetArrayItem(span, 1)->valueint);
    assert_true(two.cached_positions < two.prompt_positions);
    expect_same_as_fresh(&f, messages, 3, &p, &two, "turn 2 fresh");

    /* turn 3, sampled: the same seed gives the same answer with and without the cache */
    glimpse_chat_part answer2[] = {{two.text, NULL}}, third[] = {{"And the sky?", NULL}};
    messages[3] = (glimpse_chat_message){"assistant", answer2, 1};
    messages[4] = (glimpse_chat_message){"user", third, 1};
    glimpse_caption_params sampled = greedy(12);
    sampled.sample = true, sampled.seed = 7, sampled.temperature = 0.8f, sampled.top_k = 0;
    glimpse_caption three = chat(f.ctx, messages, 5, &sampled, "turn 3");
    assert_true(three.cached_positions > two.prompt_positions / 2);
    expect_same_as_fresh(&f, messages, 5, &sampled, &three, "turn 3 fresh");

    /* another picture in the first message: nothing from the picture on is reused */
    glimpse_image *other = fixture_image("chelsea.png");
    first[0].image = other;
    glimpse_caption changed = chat(f.ctx, messages, 3, &p, "changed picture");
    assert_true(changed.cached_positions <= (size_t)cJSON_GetArrayItem(span, 0)->valueint);
    expect_same_as_fresh(&f, messages, 3, &p, &changed, "changed picture fresh");

    glimpse_caption_free(&one), glimpse_caption_free(&two), glimpse_caption_free(&three);
    glimpse_caption_free(&changed);
    glimpse_image_free(image), glimpse_image_free(other);
    close_fixture(&f);
}

/* Qwen2 (interleave): case 9's two pictures in one message, greedy and 3 beams; then a turn with a third
 * picture. The template writes an assistant's text as every message's text, after a newline of its own. */
static void test_llava_qwen2(void **state) {
    (void)state;
    fixture f = open_fixture("llava-qwen2-tiny");
    const cJSON *item = fixture_case(&f, 9);
    assert_string_equal(cJSON_GetObjectItem(item, "prompt_kind")->valuestring, "two_images");
    glimpse_image *a = fixture_image("astronaut.png"), *b = fixture_image("rocket.jpg");
    glimpse_image *c = fixture_image("coffee_wide.png");
    glimpse_chat_part first[] = {{NULL, a}, {NULL, b}, {"What is the difference between these two images?", NULL}};
    glimpse_chat_message messages[3] = {{"user", first, 3}};
    static const char *const searches[] = {"greedy", "beam3"};
    glimpse_caption one = {0};
    for (int s = 1; s >= 0; s--) { /* beams first: the greedy turn is the one the next turn continues */
        const cJSON *generation = cJSON_GetObjectItem(item, searches[s]);
        glimpse_caption_params p = greedy(20);
        p.beams = s ? 3 : 1;
        glimpse_caption_free(&one);
        one = chat(f.ctx, messages, 1, &p, searches[s]);
        expect_ids_equal(one.ids, one.id_count, cJSON_GetObjectItem(generation, "new_ids"), searches[s]);
        assert_string_equal(one.prompt, cJSON_GetObjectItem(item, "prompt")->valuestring);
    }
    glimpse_chat_part answer1[] = {{one.text, NULL}}, second[] = {{NULL, c}, {"And this one?", NULL}};
    messages[1] = (glimpse_chat_message){"assistant", answer1, 1};
    messages[2] = (glimpse_chat_message){"user", second, 2};
    glimpse_caption_params p = greedy(16);
    glimpse_caption two = chat(f.ctx, messages, 3, &p, "turn 2");
    char expected_prompt[1024];
    snprintf(expected_prompt, sizeof expected_prompt,
             "<|im_start|>user\n<image><image>\nWhat is the difference between these two images?<|im_end|>\n"
             "<|im_start|>assistant\n\n%s<|im_end|>\n<|im_start|>user\n<image>\nAnd this one?<|im_end|>\n"
             "<|im_start|>assistant\n", one.text);
    assert_string_equal(two.prompt, expected_prompt);
    fprintf(stderr, "llava-qwen2-tiny: turn 2 kept %zu of %zu positions\n", two.cached_positions,
            two.prompt_positions);
    assert_true(two.cached_positions >= (size_t)cJSON_GetObjectItem(item, "merged_length")->valueint);
    expect_same_as_fresh(&f, messages, 3, &p, &two, "turn 2 fresh");
    glimpse_caption_free(&one), glimpse_caption_free(&two);
    glimpse_image_free(a), glimpse_image_free(b), glimpse_image_free(c);
    close_fixture(&f);
}

/* BLIP-2: one turn is its question prompt (the fixture's question case); a second chains the answer. */
static void test_blip2(void **state) {
    (void)state;
    fixture f = open_fixture("blip2-opt-tiny");
    const cJSON *item = fixture_case(&f, 2);
    assert_string_equal(cJSON_GetObjectItem(item, "prompt")->valuestring, "Question: what is in the picture? Answer:");
    glimpse_image *image = fixture_image("astronaut.png");
    glimpse_chat_part first[] = {{NULL, image}, {"what is in the picture?", NULL}};
    glimpse_chat_message messages[3] = {{"user", first, 2}};
    glimpse_caption_params p = greedy(13);
    glimpse_caption one = chat(f.ctx, messages, 1, &p, "BLIP-2 turn 1");
    expect_ids_equal(one.ids, one.id_count, cJSON_GetObjectItem(item, "ids"), "BLIP-2 turn 1");
    assert_string_equal(one.prompt, "Question: what is in the picture? Answer:");
    expect_ids_equal(one.prompt_ids, one.prompt_id_count, cJSON_GetObjectItem(f.expected, "prompt_input_ids"),
                     "BLIP-2 prompt");
    glimpse_chat_part answer1[] = {{"an astronaut", NULL}}, second[] = {{"where is he?", NULL}};
    messages[1] = (glimpse_chat_message){"assistant", answer1, 1};
    messages[2] = (glimpse_chat_message){"user", second, 1};
    glimpse_caption two = chat(f.ctx, messages, 3, &p, "BLIP-2 turn 2");
    assert_string_equal(two.prompt, "Question: what is in the picture? Answer: an astronaut Question: where is he? "
                                    "Answer:");
    glimpse_caption_free(&one), glimpse_caption_free(&two);
    /* BLIP-2 converses about exactly one picture */
    glimpse_chat_part none[] = {{"hello", NULL}};
    glimpse_chat_message text_only = {"user", none, 1};
    glimpse_caption reply;
    assert_int_equal(glimpse_chat(f.ctx, &text_only, 1, &p, &reply), GLIMPSE_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(glimpse_last_error(), "one picture"));
    glimpse_image_free(image);
    close_fixture(&f);
}

/* Each malformed conversation refused with its reason, and a model that does not converse. */
static void test_refusals(void **state) {
    (void)state;
    fixture f = open_fixture("llava-llama-tiny");
    glimpse_image *image = fixture_image("astronaut.png");
    glimpse_chat_part text[] = {{"hi", NULL}}, both[] = {{"hi", image}}, neither[] = {{NULL, NULL}};
    glimpse_caption_params p = greedy(4);
    glimpse_caption reply;
    const struct {
        glimpse_chat_message messages[2];
        size_t count;
        const char *reason;
    } cases[] = {
        {{{"bot", text, 1}}, 1, "role \"bot\""},
        {{{"user", text, 1}, {"assistant", text, 1}}, 2, "last message is the assistant's"},
        {{{"user", both, 1}}, 1, "one of them"},
        {{{"user", neither, 1}}, 1, "one of them"},
        {{{"user", NULL, 1}}, 1, "no array"},
        {{{"user", text, 1}}, 0, "no messages"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        assert_int_equal(glimpse_chat(f.ctx, cases[i].messages, cases[i].count, &p, &reply),
                         GLIMPSE_STATUS_INVALID_ARGUMENT);
        if (!strstr(glimpse_last_error(), cases[i].reason))
            fail_msg("case %zu: \"%s\" lacks \"%s\"", i, glimpse_last_error(), cases[i].reason);
        assert_null(reply.text);
    }
    glimpse_caption_params prompted = p;
    prompted.prompt = "USER: hi ASSISTANT:";
    glimpse_chat_message ok = {"user", text, 1};
    assert_int_equal(glimpse_chat(f.ctx, &ok, 1, &prompted, &reply), GLIMPSE_STATUS_INVALID_ARGUMENT);
    close_fixture(&f);
    fixture blip = open_fixture("blip-caption-tiny");
    assert_int_equal(glimpse_chat(blip.ctx, &ok, 1, &p, &reply), GLIMPSE_STATUS_WRONG_MODEL);
    assert_non_null(strstr(glimpse_last_error(), "LlavaForConditionalGeneration"));
    assert_false(glimpse_model_kind_can(GLIMPSE_MODEL_KIND_BLIP_CAPTION, GLIMPSE_CAPABILITY_CHAT));
    assert_true(glimpse_model_kind_can(GLIMPSE_MODEL_KIND_LLAVA, GLIMPSE_CAPABILITY_CHAT));
    close_fixture(&blip);
    glimpse_image_free(image);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_llava_llama), cmocka_unit_test(test_llava_qwen2),
                                       cmocka_unit_test(test_blip2), cmocka_unit_test(test_refusals)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
