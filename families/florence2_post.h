/* florence2_post.h — Florence-2's post_process_generation (processing_florence2.py): the generated text of a task
 * read into its result — the text of a caption or OCR; boxes with labels (objects, dense regions, proposals,
 * grounded phrases); text lines with their quadrilaterals; polygons — with location bins mapped to the picture's
 * pixels in float32 as the processor maps them ((bin + 0.5) × size / 1000). The processor's regular expressions
 * are followed by hand, quirks included (a label may begin inside a location token; OCR keeps </s>); its result
 * comes out both as regions and as the processor's JSON. Location digits are ASCII (Python's \d also takes other
 * scripts' digits, which no Florence-2 token holds). */
#ifndef GLIMPSE_FAMILIES_FLORENCE2_POST_H
#define GLIMPSE_FAMILIES_FLORENCE2_POST_H

#include <cjson/cJSON.h>

#include "families/florence2_text.h"
#include "glimpse.h"

typedef struct florence2_parsed {
    char *answer;            /* pure-text tasks: the text without <s> and </s>; NULL otherwise */
    glimpse_region *regions; /* labels and coords malloc'd one by one (glimpse_task_result_free frees them) */
    size_t region_count, region_capacity;
    cJSON *json;             /* {"TASK": result} */
} florence2_parsed;

/* The result of `task` for generated text (decoded with special tokens) on a width × height picture. */
glimpse_status florence2_post_process(const char *text, const florence2_task *task, int width, int height,
                                      florence2_parsed *out);
void florence2_parsed_free(florence2_parsed *parsed);

#endif
