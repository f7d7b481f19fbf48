/* chat_template.h — the chat templates LLaVA checkpoints carry, recognised by
 * their text and rendered in C (no Jinja evaluator): llava-1.5's processor
 * template ("USER: <image>\n... ASSISTANT:"), llava-interleave's processor
 * template (ChatML with <image> lines) and Qwen1.5-Chat's tokenizer template
 * (ChatML, a default system message, text only). Any other template is
 * refused with GLIMPSE_STATUS_UNSUPPORTED, never guessed. */
#ifndef GLIMPSE_TEXT_CHAT_TEMPLATE_H
#define GLIMPSE_TEXT_CHAT_TEMPLATE_H

#include <stddef.h>

#include "glimpse.h"

typedef enum chat_template_kind {
    CHAT_TEMPLATE_LLAVA_1_5 = 1,      /* llava-hf/llava-1.5-*: chat_template.json */
    CHAT_TEMPLATE_LLAVA_INTERLEAVE,   /* llava-hf/llava-interleave-qwen-*: chat_template.json */
    CHAT_TEMPLATE_QWEN_CHATML,        /* Qwen1.5-Chat's tokenizer_config.json chat_template */
} chat_template_kind;

typedef enum chat_part_kind { CHAT_PART_TEXT, CHAT_PART_IMAGE } chat_part_kind;

typedef struct chat_part {
    chat_part_kind kind;
    const char *text; /* CHAT_PART_TEXT: UTF-8; ignored for an image */
} chat_part;

/* role: "user", "assistant" or "system" (others are refused). */
typedef struct chat_message {
    const char *role;
    const chat_part *parts;
    size_t part_count;
} chat_message;

/* The template's text exactly as its checkpoint stores it. */
const char *chat_template_text(chat_template_kind kind);

/* Which known template `source` is (the template text exactly as stored). */
glimpse_status chat_template_recognise(const char *source, chat_template_kind *kind);

/* The template a processor applies: folder/chat_template.json's
 * "chat_template", else tokenizer_config.json's "chat_template"; neither is
 * GLIMPSE_STATUS_NOT_FOUND, an unknown one GLIMPSE_STATUS_UNSUPPORTED. */
glimpse_status chat_template_load(const char *folder, chat_template_kind *kind);

/* apply_chat_template(messages, add_generation_prompt, tokenize=False): the
 * prompt as a new NUL-terminated string (caller frees). The Qwen ChatML
 * template takes one text part a message (its content is a string) and
 * refuses images. */
glimpse_status chat_template_render(chat_template_kind kind, const chat_message *messages, size_t count,
                                    int add_generation_prompt, char **prompt);

#endif
