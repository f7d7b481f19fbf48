/* chat_completions.c — POST /v1/chat/completions as OpenAI's API defines it, for the models that converse (glimpse_chat:
 * LLaVA, BLIP-2): messages whose content is a string or parts of text and image_url (data: URIs of base64
 * pictures; a local file only under the folder the operator names with --allow-local-images), max_tokens,
 * temperature, top_p, seed, and stream (server-sent events written as the tokens come, then usage). The
 * answer is glimpse_chat's: token for token what glimpse chat and the library give. */
#include <cjson/cJSON.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "output/json.h"
#include "serve/internal.h"

#define CHAT_MAX_MESSAGES 256
#define CHAT_MAX_PARTS 1024
#define CHAT_MAX_IMAGES 16
#define CHAT_MAX_TOKENS 4096

typedef struct chat_request {
    serve_server *server;
    serve_model *model;
    cJSON *json; /* the body; the messages' texts point into it */
    glimpse_chat_message *messages;
    glimpse_chat_part *parts;
    glimpse_image *images[CHAT_MAX_IMAGES];
    size_t count, image_count;
    glimpse_caption_params params;
    int max_tokens; /* the resolved limit, for finish_reason */
    bool stream, include_usage;
    char id[48];
    long long created;
    glimpse_caption reply;
    /* streaming: the worker writes events into pending, the connection's thread reads them out */
    pthread_mutex_t lock;
    pthread_cond_t changed;
    char *pending, *previous; /* events not yet read; the text decoded at the last token */
    size_t pending_length, pending_capacity, sent; /* bytes of the text sent as deltas */
    bool finished, closed, submitted;
    serve_job job;
} chat_request;

/* ------------------------------------------------------------------ reading the request */

static int base64_value(unsigned char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+' || c == '-') return 62;
    if (c == '/' || c == '_') return 63;
    return -1;
}

/* RFC 4648 base64 (or its URL alphabet; padding optional) into a new buffer; false for anything else. */
static bool base64_decode(const char *text, unsigned char **out, size_t *size) {
    size_t length = strlen(text);
    while (length && text[length - 1] == '=') length--;
    if (length % 4 == 1) return false;
    unsigned char *bytes = malloc(length / 4 * 3 + 3);
    if (!bytes) return false;
    size_t n = 0;
    unsigned bits = 0, held = 0;
    for (size_t i = 0; i < length; i++) {
        int v = base64_value((unsigned char)text[i]);
        if (v < 0) {
            free(bytes);
            return false;
        }
        bits = (bits << 6) | (unsigned)v, held += 6;
        if (held >= 8) held -= 8, bytes[n++] = (unsigned char)(bits >> held);
        bits &= (1u << held) - 1;
    }
    *out = bytes, *size = n;
    return true;
}

/* A local picture under the operator's folder (--allow-local-images); false with the reply set. */
static bool local_image(serve_server *server, const char *path, glimpse_image **image, serve_reply *reply) {
    const char *root = server->config.local_images;
    if (!root) {
        reply_error(reply, 400, "image_url: this server takes pictures as data: URIs (base64); local files only "
                                "where its operator allows them (glimpse serve --allow-local-images DIR)");
        return false;
    }
    char real_root[PATH_MAX], real[PATH_MAX];
    bool inside = realpath(root, real_root) && realpath(path, real);
    size_t n = inside ? strlen(real_root) : 0;
    inside = inside && !strncmp(real, real_root, n) && (real[n] == '/' || !strcmp(real_root, "/"));
    if (!inside) {
        reply_error(reply, 403, "image_url: %.200s is not a file under the folder this server allows", path);
        return false;
    }
    glimpse_image_params params = glimpse_image_default_params();
    params.max_pixels = server->config.max_pixels;
    glimpse_status status = glimpse_image_load_file(real, &params, image);
    if (status) reply_error(reply, route_status_of(status), "image_url %.200s: %s", path, glimpse_last_error());
    return status == GLIMPSE_STATUS_OK;
}

/* An image_url part's picture: a data: URI with base64 bytes, or a file:// URL or path the operator allows. */
static bool part_image(serve_server *server, const cJSON *part, glimpse_image **image, serve_reply *reply) {
    const cJSON *url = cJSON_GetObjectItemCaseSensitive(part, "image_url");
    if (cJSON_IsObject(url)) url = cJSON_GetObjectItemCaseSensitive(url, "url");
    if (!cJSON_IsString(url)) {
        reply_error(reply, 400, "an image_url part needs image_url.url");
        return false;
    }
    const char *text = url->valuestring, *comma = strchr(text, ',');
    if (!strncmp(text, "file://", 7)) return local_image(server, text + 7, image, reply);
    if (text[0] == '/') return local_image(server, text, image, reply);
    if (strncmp(text, "data:", 5) || !comma || comma - text < 12 || strncmp(comma - 7, ";base64", 7)) {
        reply_error(reply, 400, "image_url: a data: URI with base64 bytes (data:image/png;base64,...); this server "
                                "fetches nothing from the network");
        return false;
    }
    unsigned char *bytes;
    size_t size;
    if (!base64_decode(comma + 1, &bytes, &size)) {
        reply_error(reply, 400, "image_url: the data: URI's base64 is malformed");
        return false;
    }
    bool ok = route_decode_image(server, (const char *)bytes, size, image, reply);
    free(bytes);
    return ok;
}

/* Parts of one message's content: a string, an array of parts, or null (an assistant's turn without text). */
static bool read_content(chat_request *r, const cJSON *content, size_t index, glimpse_chat_message *message,
                         size_t *parts_used, serve_reply *reply) {
    glimpse_chat_part *parts = r->parts + *parts_used;
    message->parts = parts, message->part_count = 0;
    if (cJSON_IsString(content) || cJSON_IsNull(content) || !content) {
        parts[0].text = cJSON_IsString(content) ? content->valuestring : "";
        message->part_count = 1, (*parts_used)++;
        return true;
    }
    if (!cJSON_IsArray(content)) {
        reply_error(reply, 400, "messages[%zu].content: a string or an array of parts", index);
        return false;
    }
    const cJSON *part;
    cJSON_ArrayForEach(part, content) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(part, "type");
        const char *kind = cJSON_IsString(type) ? type->valuestring : "";
        glimpse_chat_part *out = &parts[message->part_count];
        if (!strcmp(kind, "text")) {
            const cJSON *text = cJSON_GetObjectItemCaseSensitive(part, "text");
            if (!cJSON_IsString(text)) {
                reply_error(reply, 400, "messages[%zu]: a text part needs text", index);
                return false;
            }
            out->text = text->valuestring;
        } else if (!strcmp(kind, "image_url")) {
            if (r->image_count == CHAT_MAX_IMAGES) {
                reply_error(reply, 413, "more than %d pictures in one conversation", CHAT_MAX_IMAGES);
                return false;
            }
            if (!part_image(r->server, part, &r->images[r->image_count], reply)) return false;
            out->image = r->images[r->image_count++];
        } else {
            reply_error(reply, 400, "messages[%zu]: content parts are text or image_url, not \"%.40s\"", index, kind);
            return false;
        }
        message->part_count++, (*parts_used)++;
    }
    return true;
}

static bool read_messages(chat_request *r, serve_reply *reply) {
    const cJSON *messages = cJSON_GetObjectItemCaseSensitive(r->json, "messages"), *m;
    int count = cJSON_IsArray(messages) ? cJSON_GetArraySize(messages) : 0;
    if (count < 1 || count > CHAT_MAX_MESSAGES) {
        reply_error(reply, 400, "messages: an array of 1 to %d messages", CHAT_MAX_MESSAGES);
        return false;
    }
    size_t parts = 0;
    cJSON_ArrayForEach(m, messages) {
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(m, "content");
        parts += cJSON_IsArray(content) ? (size_t)cJSON_GetArraySize(content) : 1;
    }
    if (parts > CHAT_MAX_PARTS) {
        reply_error(reply, 413, "more than %d content parts", CHAT_MAX_PARTS);
        return false;
    }
    r->messages = calloc((size_t)count, sizeof *r->messages);
    r->parts = calloc(parts ? parts : 1, sizeof *r->parts);
    if (!r->messages || !r->parts) {
        reply_error(reply, 503, "out of memory");
        return false;
    }
    size_t used = 0;
    cJSON_ArrayForEach(m, messages) {
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
        if (!cJSON_IsString(role)) {
            reply_error(reply, 400, "messages[%zu] needs a role", r->count);
            return false;
        }
        if (!strcmp(role->valuestring, "developer")) role = NULL; /* OpenAI's newer name of the system role */
        r->messages[r->count].role = role ? role->valuestring : "system";
        if (!read_content(r, cJSON_GetObjectItemCaseSensitive(m, "content"), r->count, &r->messages[r->count], &used,
                          reply))
            return false;
        r->count++;
    }
    return true;
}

/* A number field within [low, high] when present; false with the reply set. */
static bool number_field(const cJSON *json, const char *name, double low, double high, double *value,
                         serve_reply *reply) {
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(json, name);
    if (!item || cJSON_IsNull(item)) return true;
    if (!cJSON_IsNumber(item) || !(item->valuedouble >= low && item->valuedouble <= high)) {
        reply_error(reply, 400, "%s: a number from %g to %g", name, low, high);
        return false;
    }
    *value = item->valuedouble;
    return true;
}

/* The sampling fields: temperature 0 is greedy, above 0 samples (top_k off, as OpenAI's API has none); absent,
 * the checkpoint's own settings. */
static bool read_params(chat_request *r, serve_reply *reply) {
    glimpse_caption_params *p = &r->params;
    *p = glimpse_caption_default_params();
    double max_tokens = -1, temperature = -1, top_p = -1, seed = -1, n = 1;
    const cJSON *json = r->json, *stop = cJSON_GetObjectItemCaseSensitive(json, "stop");
    if (!number_field(json, "max_tokens", 1, CHAT_MAX_TOKENS, &max_tokens, reply) ||
        !number_field(json, "max_completion_tokens", 1, CHAT_MAX_TOKENS, &max_tokens, reply) ||
        !number_field(json, "temperature", 0, 100, &temperature, reply) ||
        !number_field(json, "top_p", 1e-6, 1, &top_p, reply) ||
        !number_field(json, "seed", 0, 9007199254740991.0, &seed, reply) || !number_field(json, "n", 1, 1, &n, reply))
        return false;
    if (stop && !cJSON_IsNull(stop)) {
        reply_error(reply, 400, "stop sequences are not supported: the answer ends at the model's end token or at "
                                "max_tokens");
        return false;
    }
    if (max_tokens > 0) p->max_tokens = (int)max_tokens;
    if (temperature == 0) p->beams = 1;
    if (temperature > 0 || top_p > 0) {
        p->sample = true, p->beams = 1, p->top_k = 0;
        p->temperature = temperature > 0 ? (float)temperature : 1.0f;
        if (top_p > 0) p->top_p = (float)top_p;
    }
    if (seed >= 0) p->seed = (uint64_t)seed;
    const cJSON *stream = cJSON_GetObjectItemCaseSensitive(json, "stream");
    const cJSON *options = cJSON_GetObjectItemCaseSensitive(json, "stream_options");
    r->stream = cJSON_IsTrue(stream);
    r->include_usage = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(options, "include_usage"));
    r->max_tokens = p->max_tokens > 0 ? p->max_tokens : glimpse_caption_model_params(r->model->model).max_tokens;
    return true;
}

/* ------------------------------------------------------------------ answers */

static cJSON *response_object(const chat_request *r, const char *object) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "id", r->id);
    cJSON_AddStringToObject(root, "object", object);
    cJSON_AddNumberToObject(root, "created", (double)r->created);
    cJSON_AddStringToObject(root, "model", r->model->name);
    return root;
}

static const char *finish_reason(const chat_request *r) {
    return r->reply.ended || (int)r->reply.id_count < r->max_tokens ? "stop" : "length";
}

static cJSON *usage(const chat_request *r) {
    cJSON *u = cJSON_CreateObject();
    cJSON_AddNumberToObject(u, "prompt_tokens", (double)r->reply.prompt_positions);
    cJSON_AddNumberToObject(u, "completion_tokens", (double)r->reply.id_count);
    cJSON_AddNumberToObject(u, "total_tokens", (double)(r->reply.prompt_positions + r->reply.id_count));
    cJSON *details = cJSON_AddObjectToObject(u, "prompt_tokens_details");
    cJSON_AddNumberToObject(details, "cached_tokens", (double)r->reply.cached_positions);
    return u;
}

static void answer_whole(const chat_request *r, serve_reply *reply) {
    cJSON *root = response_object(r, "chat.completion"), *choices = cJSON_AddArrayToObject(root, "choices");
    cJSON *choice = cJSON_CreateObject(), *message = cJSON_AddObjectToObject(choice, "message");
    cJSON_AddNumberToObject(choice, "index", 0);
    cJSON_AddStringToObject(message, "role", "assistant");
    cJSON_AddStringToObject(message, "content", r->reply.text);
    cJSON_AddStringToObject(choice, "finish_reason", finish_reason(r));
    cJSON_AddItemToArray(choices, choice);
    cJSON_AddItemToObject(root, "usage", usage(r));
    cJSON *ids = cJSON_AddArrayToObject(root, "ids"), *prompt_ids = cJSON_AddArrayToObject(root, "prompt_ids");
    for (size_t i = 0; i < r->reply.id_count; i++) cJSON_AddItemToArray(ids, cJSON_CreateNumber(r->reply.ids[i]));
    for (size_t i = 0; i < r->reply.prompt_id_count; i++)
        cJSON_AddItemToArray(prompt_ids, cJSON_CreateNumber(r->reply.prompt_ids[i]));
    route_reply_json(reply, 200, root);
}

/* ------------------------------------------------------------------ streaming */

/* Appends "data: JSON\n\n" (taking root; NULL: "data: [DONE]\n\n") to the events; the lock is held. */
static void put_event(chat_request *r, cJSON *root) {
    char *json = root ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    const char *text = json ? json : "[DONE]";
    size_t n = strlen(text) + 8;
    if (r->pending_length + n + 1 > r->pending_capacity) {
        size_t capacity = 2 * (r->pending_length + n + 1);
        char *grown = realloc(r->pending, capacity);
        if (!grown) {
            free(json);
            return;
        }
        r->pending = grown, r->pending_capacity = capacity;
    }
    r->pending_length += (size_t)sprintf(r->pending + r->pending_length, "data: %s\n\n", text);
    free(json);
    pthread_cond_signal(&r->changed);
}

/* A chunk whose choice has delta (taken) and finish_reason (NULL: null). */
static cJSON *chunk(const chat_request *r, cJSON *delta, const char *finish) {
    cJSON *root = response_object(r, "chat.completion.chunk"), *choices = cJSON_AddArrayToObject(root, "choices");
    cJSON *choice = cJSON_CreateObject();
    cJSON_AddNumberToObject(choice, "index", 0);
    cJSON_AddItemToObject(choice, "delta", delta);
    if (finish) cJSON_AddStringToObject(choice, "finish_reason", finish);
    else cJSON_AddNullToObject(choice, "finish_reason");
    cJSON_AddItemToArray(choices, choice);
    return root;
}

/* The text from byte r->sent to `end` as a content delta (valid UTF-8 kept valid); the lock is held. */
static void put_text(chat_request *r, const char *text, size_t end) {
    if (end <= r->sent) return;
    char *piece = strndup(text + r->sent, end - r->sent);
    char *valid = piece && !json_utf8_valid(piece) ? json_utf8_repaired(piece) : NULL;
    cJSON *delta = cJSON_CreateObject();
    cJSON_AddStringToObject(delta, "content", valid ? valid : piece ? piece : "");
    put_event(r, chunk(r, delta, NULL));
    free(piece), free(valid);
    r->sent = end;
}

/* The worker's token callback: what is new in the decoded text, as a delta (a replacement character at its end
 * waits: it may be the first bytes of a character the next token completes). True stops: the client left. */
static bool on_token(void *user, size_t image, int32_t id, const char *text) {
    (void)image, (void)id;
    chat_request *r = user;
    pthread_mutex_lock(&r->lock);
    size_t end = strlen(text);
    while (end >= 3 && !memcmp(text + end - 3, "\xEF\xBF\xBD", 3)) end -= 3;
    if (!r->previous || !strncmp(text, r->previous, r->sent)) put_text(r, text, end); /* what was sent stands */
    free(r->previous);
    r->previous = strdup(text);
    bool closed = r->closed;
    pthread_mutex_unlock(&r->lock);
    return closed;
}

static glimpse_status run_chat(serve_job *job, glimpse_context *ctx) {
    chat_request *r = job->data;
    glimpse_status status = glimpse_chat(ctx, r->messages, r->count, &r->params, &r->reply);
    if (!r->stream) return status;
    pthread_mutex_lock(&r->lock);
    if (!status) {
        put_text(r, r->reply.text, strlen(r->reply.text));
        put_event(r, chunk(r, cJSON_CreateObject(), finish_reason(r)));
        if (r->include_usage) {
            cJSON *root = response_object(r, "chat.completion.chunk");
            cJSON_AddArrayToObject(root, "choices");
            cJSON_AddItemToObject(root, "usage", usage(r));
            put_event(r, root);
        }
    } else { /* as OpenAI's streams report an error after the headers went out */
        cJSON *root = cJSON_CreateObject(), *error = cJSON_AddObjectToObject(root, "error");
        cJSON_AddStringToObject(error, "message", glimpse_last_error());
        cJSON_AddStringToObject(error, "type", route_status_of(status) < 500 ? "invalid_request_error" : "server_error");
        cJSON_AddNumberToObject(error, "code", route_status_of(status));
        put_event(r, root);
    }
    put_event(r, NULL);
    r->finished = true;
    pthread_cond_signal(&r->changed);
    pthread_mutex_unlock(&r->lock);
    return status;
}

static void free_request(chat_request *r) {
    glimpse_caption_free(&r->reply);
    for (size_t i = 0; i < r->image_count; i++) glimpse_image_free(r->images[i]);
    cJSON_Delete(r->json);
    free(r->messages), free(r->parts), free(r->pending), free(r->previous);
    pthread_mutex_destroy(&r->lock);
    pthread_cond_destroy(&r->changed);
    free(r);
}

static long stream_read(void *stream, char *buffer, size_t capacity) {
    chat_request *r = stream;
    pthread_mutex_lock(&r->lock);
    while (!r->pending_length && !r->finished) pthread_cond_wait(&r->changed, &r->lock);
    size_t n = r->pending_length < capacity ? r->pending_length : capacity;
    memcpy(buffer, r->pending, n);
    memmove(r->pending, r->pending + n, r->pending_length - n);
    r->pending_length -= n;
    pthread_mutex_unlock(&r->lock);
    return n ? (long)n : -1;
}

/* The answer is over (sent, or the client went away): the search stops at its next token, then all is freed. */
static void stream_end(void *stream) {
    chat_request *r = stream;
    pthread_mutex_lock(&r->lock);
    r->closed = true;
    pthread_mutex_unlock(&r->lock);
    if (r->submitted) queue_wait(&r->model->queue, &r->job);
    free_request(r);
}

void answer_chat(serve_server *server, serve_request *request, serve_reply *reply) {
    static atomic_ullong next_id;
    chat_request *r = calloc(1, sizeof *r);
    if (!r) {
        reply_error(reply, 503, "out of memory");
        return;
    }
    pthread_mutex_init(&r->lock, NULL);
    pthread_cond_init(&r->changed, NULL);
    r->server = server;
    r->created = (long long)time(NULL);
    snprintf(r->id, sizeof r->id, "chatcmpl-%llx%llx", (unsigned long long)r->created,
             (unsigned long long)atomic_fetch_add(&next_id, 1));
    if (request->kind != SERVE_BODY_JSON || !(r->json = cJSON_ParseWithLength(request->body, request->size)) ||
        !cJSON_IsObject(r->json)) {
        reply_error(reply, 400, "/v1/chat/completions takes a JSON object (application/json), as OpenAI's API");
        free_request(r);
        return;
    }
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(r->json, "model");
    const char *model_name = cJSON_IsString(name) && name->valuestring[0] ? name->valuestring : NULL;
    if (!(r->model = route_choose_model(server, model_name, GLIMPSE_CAPABILITY_CHAT, reply)) ||
        !read_params(r, reply) || !read_messages(r, reply)) {
        free_request(r);
        return;
    }
    r->params.on_token = r->stream ? on_token : NULL, r->params.user = r;
    r->job = (serve_job){.run = run_chat, .data = r};
    if (!r->stream) {
        if (route_run_job(server, request, r->model, &r->job, reply)) answer_whole(r, reply);
        free_request(r);
        return;
    }
    cJSON *delta = cJSON_CreateObject();
    cJSON_AddStringToObject(delta, "role", "assistant");
    cJSON_AddStringToObject(delta, "content", "");
    put_event(r, chunk(r, delta, NULL));
    if (!queue_submit(&r->model->queue, &r->job)) {
        reply_error(reply, 503, "busy: %zu requests are waiting already; try again shortly", server->load.limit);
        reply->retry_after = 1;
        free_request(r);
        return;
    }
    r->submitted = true;
    reply->status = 200;
    reply->content_type = "text/event-stream";
    reply->stream = r, reply->stream_read = stream_read, reply->stream_end = stream_end;
}
