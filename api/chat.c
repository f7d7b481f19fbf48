/* chat.c — glimpse_chat, the public door to a conversation about pictures: checks the messages (roles, parts,
 * a user's message last), resolves the caption settings as glimpse_ask_images does, and hands the conversation
 * to the family's chat hook (families/llava.c renders it with the chat template and keeps the key/value cache;
 * families/blip2.c chains its question prompt). */
#include <stdio.h>
#include <string.h>

#include "api/context.h"
#include "api/model.h"
#include "core/error.h"
#include "families/family.h"

/* What every family's chat may assume: roles known, parts present, each part one text or one picture, the
 * last message the user's. */
static glimpse_status check_messages(const glimpse_chat_message *messages, size_t count) {
    if (!count || !messages) return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_chat: no messages");
    for (size_t i = 0; i < count; i++) {
        const glimpse_chat_message *m = &messages[i];
        const char *role = m->role ? m->role : "(none)";
        if (strcmp(role, "user") != 0 && strcmp(role, "assistant") != 0 && strcmp(role, "system") != 0)
            return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "message %zu: role \"%.40s\" (user, assistant or "
                             "system)", i + 1, role);
        if (m->part_count && !m->parts)
            return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "message %zu: %zu parts but no array", i + 1,
                             m->part_count);
        for (size_t j = 0; j < m->part_count; j++)
            if (!m->parts[j].text == !m->parts[j].image)
                return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "message %zu, part %zu: give a text or a "
                                 "picture (one of them)", i + 1, j + 1);
    }
    if (strcmp(messages[count - 1].role, "user") != 0)
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_chat: the last message is the %s's; the "
                         "assistant answers a user's message", messages[count - 1].role);
    return GLIMPSE_STATUS_OK;
}

glimpse_status glimpse_chat(glimpse_context *ctx, const glimpse_chat_message *messages, size_t count,
                            const glimpse_caption_params *params, glimpse_caption *out) {
    if (!ctx || !out) return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_chat: NULL argument");
    memset(out, 0, sizeof *out);
    const glimpse_model *model = ctx->model;
    const family_captioner *captioner = model->family->caption;
    if (!captioner || !captioner->chat) {
        char names[256];
        family_names(FAMILY_CAN(GLIMPSE_CAPABILITY_CHAT), true, names, sizeof names);
        return error_set(GLIMPSE_STATUS_WRONG_MODEL, "conversations need a model that converses (%s), this is %s",
                         names, model->architecture);
    }
    glimpse_status status = check_messages(messages, count);
    glimpse_caption_params resolved;
    if (!status) status = caption_params_resolve(model, params, &resolved);
    if (!status && resolved.prompt)
        status = error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_chat makes the prompt from the messages: leave "
                           "the params' prompt NULL");
    if (!status) status = captioner->chat(ctx, messages, count, &resolved, out);
    if (status) glimpse_caption_free(out);
    return status;
}
