/* chat_template.c — the known LLaVA chat templates, recognised by their
 * exact text and rendered by hand as their Jinja does: for each message, the
 * image parts first, then the text parts (the processor templates); ChatML
 * with a default system message (Qwen1.5-Chat's tokenizer template). */
#include "text/chat_template.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "weights/config.h"

/* llava-hf/llava-1.5-7b-hf's chat_template.json */
static const char LLAVA_1_5[] =
    "{% for message in messages %}{% if message['role'] != 'system' %}"
    "{{ message['role'].upper() + ': '}}{% endif %}"
    "{# Render all images first #}{% for content in message['content'] | selectattr('type', 'equalto', 'image') %}"
    "{{ '<image>\n' }}{% endfor %}"
    "{# Render all text next #}{% if message['role'] != 'assistant' %}"
    "{% for content in message['content'] | selectattr('type', 'equalto', 'text') %}"
    "{{ content['text'] + ' '}}{% endfor %}{% else %}"
    "{% for content in message['content'] | selectattr('type', 'equalto', 'text') %}"
    "{% generation %}{{ content['text'] + ' '}}{% endgeneration %}{% endfor %}{% endif %}"
    "{% endfor %}{% if add_generation_prompt %}{{ 'ASSISTANT:' }}{% endif %}";

/* llava-hf/llava-interleave-qwen-0.5b-hf's chat_template.json */
static const char LLAVA_INTERLEAVE[] =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n'}}"
    "{# Render all images first #}{% for content in message['content'] | selectattr('type', 'equalto', 'image') %}"
    "{{ '<image>' }}{% endfor %}"
    "{# Render all text next #}{% if message['role'] != 'assistant' %}"
    "{% for content in message['content'] | selectattr('type', 'equalto', 'text') %}"
    "{{ '\n' + content['text'] }}{% endfor %}{% else %}"
    "{% for content in message['content'] | selectattr('type', 'equalto', 'text') %}"
    "{% generation %}{{ '\n' + content['text'] }}{% endgeneration %}{% endfor %}{% endif %}"
    "{{'<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\n' }}{% endif %}";

/* Qwen/Qwen1.5-*-Chat's tokenizer_config.json chat_template */
static const char QWEN_CHATML[] =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

const char *chat_template_text(chat_template_kind kind) {
    return kind == CHAT_TEMPLATE_LLAVA_1_5 ? LLAVA_1_5 : kind == CHAT_TEMPLATE_LLAVA_INTERLEAVE ? LLAVA_INTERLEAVE
                                                                                              : QWEN_CHATML;
}

glimpse_status chat_template_recognise(const char *source, chat_template_kind *kind) {
    static const struct {
        const char *text;
        chat_template_kind kind;
    } known[] = {{LLAVA_1_5, CHAT_TEMPLATE_LLAVA_1_5},
                 {LLAVA_INTERLEAVE, CHAT_TEMPLATE_LLAVA_INTERLEAVE},
                 {QWEN_CHATML, CHAT_TEMPLATE_QWEN_CHATML}};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (source && strcmp(source, known[i].text) == 0) {
            *kind = known[i].kind;
            return GLIMPSE_STATUS_OK;
        }
    *kind = 0;
    return error_set(GLIMPSE_STATUS_UNSUPPORTED,
                     "an unknown chat template (glimpse renders llava-1.5's, llava-interleave's and Qwen1.5-Chat's "
                     "only; give the prompt text instead)");
}

/* The "chat_template" string of folder/name: OK and NULL when the file or the key is absent. */
static glimpse_status template_of(const char *folder, const char *name, char **source) {
    *source = NULL;
    cJSON *json = NULL;
    glimpse_status status = config_read_json_optional(folder, name, &json);
    if (status || !json) return status;
    if (!cJSON_IsObject(json)) {
        cJSON_Delete(json);
        return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s/%s is not a JSON object", folder, name);
    }
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(json, "chat_template");
    if (item && !cJSON_IsString(item) && !cJSON_IsNull(item))
        status = error_set(GLIMPSE_STATUS_UNSUPPORTED, "%s/%s: a chat_template that is not one string", folder, name);
    else if (cJSON_IsString(item) && !(*source = strdup(item->valuestring)))
        status = ERROR_OOM();
    cJSON_Delete(json);
    return status;
}

glimpse_status chat_template_load(const char *folder, chat_template_kind *kind) {
    *kind = 0;
    char *source = NULL;
    glimpse_status status = template_of(folder, "chat_template.json", &source);
    if (!status && !source) status = template_of(folder, "tokenizer_config.json", &source);
    if (!status && !source)
        status = error_set(GLIMPSE_STATUS_NOT_FOUND, "%s has no chat template (chat_template.json, "
                           "tokenizer_config.json)", folder);
    if (!status && (status = chat_template_recognise(source, kind))) error_prefix(status, "%s", folder);
    free(source);
    return status;
}

/* ------------------------------------------------------------ rendering */

typedef struct prompt_buffer {
    char *text;
    size_t length, capacity;
    glimpse_status status;
} prompt_buffer;

static void put(prompt_buffer *b, const char *text) {
    size_t n = strlen(text);
    if (b->status) return;
    if (b->length + n + 1 > b->capacity) {
        size_t capacity = 2 * (b->length + n + 1);
        char *grown = realloc(b->text, capacity);
        if (!grown) {
            b->status = ERROR_OOM();
            return;
        }
        b->text = grown, b->capacity = capacity;
    }
    memcpy(b->text + b->length, text, n + 1);
    b->length += n;
}

/* The parts of one kind in order, each between before and after. */
static void put_parts(prompt_buffer *b, const chat_message *m, chat_part_kind kind, const char *before,
                      const char *after) {
    for (size_t i = 0; i < m->part_count; i++) {
        if (m->parts[i].kind != kind) continue;
        put(b, before);
        if (kind == CHAT_PART_TEXT) put(b, m->parts[i].text ? m->parts[i].text : "");
        put(b, after);
    }
}

static void render_llava_1_5(prompt_buffer *b, const chat_message *m) {
    if (strcmp(m->role, "system") != 0) put(b, strcmp(m->role, "user") == 0 ? "USER: " : "ASSISTANT: ");
    put_parts(b, m, CHAT_PART_IMAGE, "", "<image>\n");
    put_parts(b, m, CHAT_PART_TEXT, "", " ");
}

static void render_interleave(prompt_buffer *b, const chat_message *m) {
    put(b, "<|im_start|>");
    put(b, m->role);
    put(b, "\n");
    put_parts(b, m, CHAT_PART_IMAGE, "", "<image>");
    put_parts(b, m, CHAT_PART_TEXT, "\n", "");
    put(b, "<|im_end|>\n");
}

static void render_chatml(prompt_buffer *b, const chat_message *messages, size_t index) {
    const chat_message *m = &messages[index];
    if (m->part_count != 1 || m->parts[0].kind != CHAT_PART_TEXT) {
        b->status = b->status ? b->status
                              : error_set(GLIMPSE_STATUS_UNSUPPORTED, "Qwen's ChatML template takes one text part a "
                                          "message (message %zu has %zu parts or an image)", index, m->part_count);
        return;
    }
    if (index == 0 && strcmp(m->role, "system") != 0) put(b, "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n");
    put(b, "<|im_start|>");
    put(b, m->role);
    put(b, "\n");
    put(b, m->parts[0].text ? m->parts[0].text : "");
    put(b, "<|im_end|>\n");
}

static glimpse_status check_roles(const chat_message *messages, size_t count) {
    for (size_t i = 0; i < count; i++) {
        const char *role = messages[i].role ? messages[i].role : "";
        if (strcmp(role, "user") != 0 && strcmp(role, "assistant") != 0 && strcmp(role, "system") != 0)
            return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "message %zu: role \"%.40s\" (user, assistant or system)",
                             i, role);
        if (messages[i].part_count && !messages[i].parts)
            return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "message %zu: parts missing", i);
    }
    return GLIMPSE_STATUS_OK;
}

glimpse_status chat_template_render(chat_template_kind kind, const chat_message *messages, size_t count,
                                    int add_generation_prompt, char **prompt) {
    *prompt = NULL;
    glimpse_status status = check_roles(messages, count);
    if (status) return status;
    if (kind != CHAT_TEMPLATE_LLAVA_1_5 && kind != CHAT_TEMPLATE_LLAVA_INTERLEAVE && kind != CHAT_TEMPLATE_QWEN_CHATML)
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "chat template kind %d", (int)kind);
    prompt_buffer b = {0};
    put(&b, "");
    for (size_t i = 0; i < count; i++) {
        if (kind == CHAT_TEMPLATE_LLAVA_1_5) render_llava_1_5(&b, &messages[i]);
        else if (kind == CHAT_TEMPLATE_LLAVA_INTERLEAVE) render_interleave(&b, &messages[i]);
        else render_chatml(&b, messages, i);
    }
    if (add_generation_prompt)
        put(&b, kind == CHAT_TEMPLATE_LLAVA_1_5 ? "ASSISTANT:" : "<|im_start|>assistant\n");
    if (b.status) {
        free(b.text);
        return b.status;
    }
    *prompt = b.text;
    return GLIMPSE_STATUS_OK;
}
