/* fuzz_florence2_post.c — libFuzzer target: arbitrary text through Florence-2's post-processing
 * (families/florence2_post.h) for every task, on picture sizes the input chooses. Byte 0 picks the task, bytes
 * 1-4 the width and height (1 to 65536); the rest is the generated text (NUL bytes end it, as in a C string). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "families/florence2_post.h"

static const char *const tasks[] = {"<CAPTION>", "<DETAILED_CAPTION>", "<MORE_DETAILED_CAPTION>", "<OD>",
                                    "<DENSE_REGION_CAPTION>", "<REGION_PROPOSAL>", "<OCR>", "<OCR_WITH_REGION>",
                                    "<CAPTION_TO_PHRASE_GROUNDING>", "<REFERRING_EXPRESSION_SEGMENTATION>",
                                    "<REGION_TO_SEGMENTATION>", "<OPEN_VOCABULARY_DETECTION>", "<REGION_TO_CATEGORY>",
                                    "<REGION_TO_DESCRIPTION>", "<REGION_TO_OCR>"};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 5) return 0;
    const florence2_task *task = florence2_task_find(tasks[data[0] % (sizeof tasks / sizeof tasks[0])]);
    int width = 1 + (data[1] | data[2] << 8), height = 1 + (data[3] | data[4] << 8);
    char *text = malloc(size - 4);
    if (!text || !task) abort();
    memcpy(text, data + 5, size - 5);
    text[size - 5] = '\0';
    florence2_parsed parsed;
    if (florence2_post_process(text, task, width, height, &parsed) == GLIMPSE_STATUS_OK) {
        for (size_t i = 0; i < parsed.region_count; i++) /* every region readable, every label a string */
            if (strlen(parsed.regions[i].label) > size || (parsed.regions[i].coord_count && !parsed.regions[i].coords))
                abort();
        char *json = cJSON_PrintUnformatted(parsed.json);
        if (!json) abort();
        cJSON_free(json);
        florence2_parsed_free(&parsed);
    }
    free(text);
    return 0;
}
