/* florence2_text.c — florence2_text.h: the processor's task table and added tokens, and BART's tokenizer with
 * them. */
#include "families/florence2_text.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

/* processing_florence2.py's task_prompts_without_inputs and task_prompts_with_input, and post_process_generation's
 * types; <OCR> and <REGION_TO_CATEGORY>, <REGION_TO_OCR> read as pure text. */
static const florence2_task tasks[] = {
    {"<CAPTION>", "What does the image describe?", FLORENCE2_INPUT_NONE, FLORENCE2_PURE_TEXT},
    {"<DETAILED_CAPTION>", "Describe in detail what is shown in the image.", FLORENCE2_INPUT_NONE,
     FLORENCE2_PURE_TEXT},
    {"<MORE_DETAILED_CAPTION>", "Describe with a paragraph what is shown in the image.", FLORENCE2_INPUT_NONE,
     FLORENCE2_PURE_TEXT},
    {"<OD>", "Locate the objects with category name in the image.", FLORENCE2_INPUT_NONE,
     FLORENCE2_BOXES_WITH_LABELS},
    {"<DENSE_REGION_CAPTION>", "Locate the objects in the image, with their descriptions.", FLORENCE2_INPUT_NONE,
     FLORENCE2_BOXES_WITH_LABELS},
    {"<REGION_PROPOSAL>", "Locate the region proposals in the image.", FLORENCE2_INPUT_NONE, FLORENCE2_BOXES},
    {"<OCR>", "What is the text in the image?", FLORENCE2_INPUT_NONE, FLORENCE2_PURE_TEXT},
    {"<OCR_WITH_REGION>", "What is the text in the image, with regions?", FLORENCE2_INPUT_NONE, FLORENCE2_OCR},
    {"<CAPTION_TO_PHRASE_GROUNDING>", "Locate the phrases in the caption: {input}", FLORENCE2_INPUT_PHRASE,
     FLORENCE2_PHRASE_GROUNDING},
    {"<REFERRING_EXPRESSION_SEGMENTATION>", "Locate {input} in the image with mask", FLORENCE2_INPUT_PHRASE,
     FLORENCE2_POLYGONS},
    {"<REGION_TO_SEGMENTATION>", "What is the polygon mask of region {input}", FLORENCE2_INPUT_REGION,
     FLORENCE2_POLYGONS},
    {"<OPEN_VOCABULARY_DETECTION>", "Locate {input} in the image.", FLORENCE2_INPUT_PHRASE,
     FLORENCE2_BOXES_OR_POLYGONS},
    {"<REGION_TO_CATEGORY>", "What is the region {input}?", FLORENCE2_INPUT_REGION, FLORENCE2_PURE_TEXT},
    {"<REGION_TO_DESCRIPTION>", "What does the region {input} describe?", FLORENCE2_INPUT_REGION,
     FLORENCE2_PURE_TEXT},
    {"<REGION_TO_OCR>", "What text is in the region {input}?", FLORENCE2_INPUT_REGION, FLORENCE2_PURE_TEXT},
};

const florence2_task *florence2_task_find(const char *name) {
    size_t count = sizeof tasks / sizeof tasks[0];
    for (size_t i = 0; name && i < count; i++)
        if (!strcmp(name, tasks[i].name)) return &tasks[i];
    char names[512] = "";
    for (size_t i = 0, used = 0; i < count && used < sizeof names; i++)
        used += (size_t)snprintf(names + used, sizeof names - used, "%s%s", i ? ", " : "", tasks[i].name);
    error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "\"%.60s\" is not a Florence-2 task; the tasks are %s",
              name ? name : "(none)", names);
    return NULL;
}

/* Whether text is exactly four <loc_N> tokens (N 0 … 999 written as the processor writes it). */
static bool is_region(const char *text) {
    for (int i = 0; i < 4; i++) {
        if (strncmp(text, "<loc_", 5) != 0) return false;
        text += 5;
        size_t digits = strspn(text, "0123456789");
        if (digits < 1 || digits > 3 || (digits > 1 && text[0] == '0') || text[digits] != '>') return false;
        text += digits + 1;
    }
    return *text == '\0';
}

glimpse_status florence2_task_prompt(const florence2_task *task, const char *input, char **prompt) {
    *prompt = NULL;
    if (input && !input[0]) input = NULL;
    if (task->input == FLORENCE2_INPUT_NONE && input)
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "%s takes no phrase or region", task->name);
    if (task->input == FLORENCE2_INPUT_PHRASE && !input)
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "%s needs a phrase", task->name);
    if (task->input == FLORENCE2_INPUT_REGION && !(input && is_region(input)))
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "%s needs a region: four <loc_N> tokens (N from 0 to 999: "
                         "x0, y0, x1, y1 in thousandths of the picture), e.g. from glimpse_task_region", task->name);
    const char *slot = strstr(task->prompt, "{input}");
    size_t before = slot ? (size_t)(slot - task->prompt) : strlen(task->prompt);
    size_t input_length = slot ? strlen(input) : 0, after = slot ? strlen(slot + 7) : 0;
    *prompt = malloc(before + input_length + after + 1);
    if (!*prompt) return ERROR_OOM();
    memcpy(*prompt, task->prompt, before);
    if (slot) {
        memcpy(*prompt + before, input, input_length);
        memcpy(*prompt + before + input_length, slot + 7, after);
    }
    (*prompt)[before + input_length + after] = '\0';
    return GLIMPSE_STATUS_OK;
}

/* The processor's tokens_to_add, in order: 4 + 1,000 locations + 20 = 1,024. */
static const char *const named_tokens[] = {
    "<cap>", "</cap>", "<ncap>", "</ncap>", "<dcap>", "</dcap>", "<grounding>", "</grounding>", "<seg>", "</seg>",
    "<sep>", "<region_cap>", "</region_cap>", "<region_to_desciption>", "</region_to_desciption>", "<proposal>",
    "</proposal>", "<poly>", "</poly>", "<and>"};

glimpse_status florence2_tokenizer_load(const char *folder, gpt2_tokenizer **out) {
    /* BartTokenizer's own defaults: <mask> takes the space before it (lstrip) */
    gpt2_tokenizer_options bart = {.bos = {"<s>", 0, 0}, .eos = {"</s>", 0, 0}, .unk = {"<unk>", 0, 0},
                                   .sep = {"</s>", 0, 0}, .pad = {"<pad>", 0, 0}, .cls = {"<s>", 0, 0},
                                   .mask = {"<mask>", 1, 0}};
    glimpse_status status = gpt2_tokenizer_load_with(folder, &bart, out);
    if (status) return status;
    char locations[1000][12];
    const char *added[FLORENCE2_ADDED_TOKENS];
    size_t n = 0;
    const char *first[4] = {"<od>", "</od>", "<ocr>", "</ocr>"};
    for (int i = 0; i < 4; i++) added[n++] = first[i];
    for (int i = 0; i < 1000; i++) {
        snprintf(locations[i], sizeof locations[i], "<loc_%d>", i);
        added[n++] = locations[i];
    }
    for (size_t i = 0; i < sizeof named_tokens / sizeof named_tokens[0]; i++) added[n++] = named_tokens[i];
    size_t vocab = gpt2_tokenizer_vocab_size(*out);
    if (vocab != FLORENCE2_ADDED_FIRST_ID)
        status = error_set(GLIMPSE_STATUS_UNSUPPORTED, "%s/vocab.json holds %zu tokens; Florence-2's processor adds its "
                           "own after BART's %d", folder, vocab, FLORENCE2_ADDED_FIRST_ID);
    if (!status) status = gpt2_tokenizer_add_tokens(*out, added, n, FLORENCE2_ADDED_FIRST_ID);
    if (status) {
        gpt2_tokenizer_free(*out);
        *out = NULL;
    }
    return status;
}

glimpse_status florence2_encode(const gpt2_tokenizer *tokenizer, const char *prompt, int32_t **ids, size_t *count) {
    *ids = NULL, *count = 0;
    size_t n = 0;
    glimpse_status status = gpt2_tokenizer_encode(tokenizer, prompt, 0, NULL, 0, &n);
    if (status && status != GLIMPSE_STATUS_TOO_LARGE) return status;
    *ids = malloc((n + 2) * sizeof **ids);
    if (!*ids) return ERROR_OOM();
    (*ids)[0] = gpt2_tokenizer_bos_id(tokenizer);
    status = gpt2_tokenizer_encode(tokenizer, prompt, 0, *ids + 1, n, &n);
    if (status) {
        free(*ids);
        *ids = NULL;
        return status;
    }
    (*ids)[n + 1] = gpt2_tokenizer_eos_id(tokenizer);
    *count = n + 2;
    return GLIMPSE_STATUS_OK;
}

glimpse_status florence2_decode(const gpt2_tokenizer *tokenizer, const int32_t *ids, size_t count, char **text) {
    return gpt2_tokenizer_decode(tokenizer, ids, count, 0, 1, text, NULL);
}
