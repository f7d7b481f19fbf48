/* florence2_text.h — Florence-2's processor on the text side (processing_florence2.py): the tasks as the model card
 * names them, each with the English prompt it becomes (with the phrase or region put in) and how its generated
 * text is read back; BART's tokenizer with the 1,024 tokens the processor adds (<od>, <loc_0> … <loc_999>,
 * <poly>, …); the prompt's ids (<s> … </s>); and decoding as the hub's fast tokenizer decodes with special
 * tokens kept. */
#ifndef GLIMPSE_FAMILIES_FLORENCE2_TEXT_H
#define GLIMPSE_FAMILIES_FLORENCE2_TEXT_H

#include <stddef.h>
#include <stdint.h>

#include "glimpse.h"
#include "text/gpt2_tokenizer.h"

/* How a task's generated text becomes its result (post_process_generation's types). */
typedef enum florence2_parse {
    FLORENCE2_PURE_TEXT,
    FLORENCE2_BOXES_WITH_LABELS, /* description_with_bboxes */
    FLORENCE2_BOXES,             /* bboxes (region proposals) */
    FLORENCE2_PHRASE_GROUNDING,
    FLORENCE2_POLYGONS,
    FLORENCE2_OCR,               /* quad boxes with their text */
    FLORENCE2_BOXES_OR_POLYGONS  /* description_with_bboxes_or_polygons (open-vocabulary detection) */
} florence2_parse;

typedef enum florence2_input {
    FLORENCE2_INPUT_NONE,
    FLORENCE2_INPUT_PHRASE,
    FLORENCE2_INPUT_REGION /* four <loc_N> tokens */
} florence2_input;

typedef struct florence2_task {
    const char *name;   /* "<OD>" */
    const char *prompt; /* the English prompt; "{input}" stands for the input */
    florence2_input input;
    florence2_parse parse;
} florence2_task;

/* The task of that name; NULL (with an error listing the tasks) for none. */
const florence2_task *florence2_task_find(const char *name);
/* The prompt of task with input (NULL for none) put in, as a new string; an input a task does not take, or a
 * missing one it does, is refused. */
glimpse_status florence2_task_prompt(const florence2_task *task, const char *input, char **prompt);

/* The processor's added tokens, in id order from FLORENCE2_ADDED_FIRST_ID. */
#define FLORENCE2_ADDED_TOKENS 1024
#define FLORENCE2_ADDED_FIRST_ID 50265

/* BART's tokenizer from the snapshot (vocab.json, merges from merges.txt or tokenizer.json), with the added
 * tokens. Caller frees with gpt2_tokenizer_free. */
glimpse_status florence2_tokenizer_load(const char *folder, gpt2_tokenizer **out);
/* The prompt's ids: <s>, the text's tokens, </s>. *ids new (caller frees). */
glimpse_status florence2_encode(const gpt2_tokenizer *tokenizer, const char *prompt, int32_t **ids, size_t *count);
/* batch_decode(ids, skip_special_tokens=False) as the fast tokenizer does it: the tokens' text joined, then
 * transformers' clean-up of spaces. */
glimpse_status florence2_decode(const gpt2_tokenizer *tokenizer, const int32_t *ids, size_t count, char **text);

#endif
