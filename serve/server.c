/* server.c — glimpse serve's HTTP side on libmicrohttpd (one thread per
 * connection, so a request may wait for its model): loading the models,
 * listening, the checks made on a request's headers before its body is read
 * (draining, route, API key, size, media type), receiving the body (raw, or
 * multipart parts through libmicrohttpd's post processor), answering, and
 * the draining stop. What each route does is routes.c's business. */
#define _GNU_SOURCE /* strdup, strcasestr */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "output/json.h"
#include "serve/internal.h"
#include "serve/microhttpd_library.h"

serve_config serve_default_config(void) {
    serve_config config = {0};
    config.host = "127.0.0.1";
    config.port = 8080;
    config.max_body = 32u << 20;
    config.queue_limit = 64;
    config.timeout_seconds = 30;
    config.max_connections = 256;
    config.max_per_client = 64;
    config.max_batch = 8;
    config.batch_wait_ms = 2;
    config.precision = GLIMPSE_PRECISION_FLOAT32;
    config.max_pixels = glimpse_image_default_params().max_pixels;
    return config;
}

static double now_seconds(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + now.tv_nsec * 1e-9;
}

void serve_log(const serve_server *server, const char *format, ...) {
    if (!server->config.log) return;
    char line[1024];
    va_list args;
    va_start(args, format);
    vsnprintf(line, sizeof line, format, args);
    va_end(args);
    server->config.log(server->config.log_user, line);
}

/* ------------------------------------------------------------------ libmicrohttpd's own refusals */

/* The connection this thread serves (one thread a connection), known once its request line is read, and whether
 * the server has queued its answer to that request (a refusal after that is not answered again). */
static __thread struct MHD_Connection *thread_connection;
static __thread bool thread_answered;

static void *on_request_line(void *user, const char *uri, struct MHD_Connection *connection) {
    (void)user, (void)uri;
    thread_connection = connection;
    thread_answered = false;
    return NULL; /* (the request's state, made by on_request's first call) */
}

/* The text of libmicrohttpd's HTML page (what is between <body> and </body>, without tags), else `otherwise`. */
static void page_text(char *text, size_t room, const char *html, const char *otherwise) {
    const char *body = html ? strstr(html, "<body>") : NULL, *end = body ? strstr(body, "</body>") : NULL;
    size_t n = 0;
    bool tag = false;
    for (const char *c = body ? body + 6 : NULL; c && c < end && n + 1 < room; c++) {
        if (*c == '<') tag = true;
        else if (*c == '>') tag = false;
        else if (!tag) text[n++] = *c;
    }
    text[n] = '\0';
    if (!n) snprintf(text, room, "%s", otherwise);
}

/* Answers in the library's place: the refusal as this server's JSON error, then the connection's sending side
 * shut, so that the library's own answer (an HTML page; in 0.9.75, after its status line and headers twice,
 * as its state machine builds them again after its own error: fixed in 1.0.0) goes nowhere. */
static void answer_for_library(struct MHD_Connection *connection, unsigned status, const char *html) {
    const union MHD_ConnectionInfo *info =
        microhttpd.MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!info || status < 400 || status > 599) return;
    char text[256];
    page_text(text, sizeof text, html, microhttpd.MHD_get_reason_phrase_for(status));
    serve_reply reply = {0};
    reply_error(&reply, (int)status, "the request cannot be read: %s", text);
    char head[256];
    int n = snprintf(head, sizeof head,
                     "HTTP/1.1 %u %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
                     status, microhttpd.MHD_get_reason_phrase_for(status), reply.size);
    struct iovec parts[2] = {{head, (size_t)n}, {reply.body, reply.size}};
    struct msghdr message = {.msg_iov = parts, .msg_iovlen = reply.body ? 2 : 1};
    if (n > 0 && (size_t)n < sizeof head) (void)sendmsg(info->connect_fd, &message, MSG_NOSIGNAL | MSG_DONTWAIT);
    shutdown(info->connect_fd, SHUT_WR);
    free(reply.body);
}

/* libmicrohttpd's log; also where it says it refuses a request itself (a malformed or too large Content-Length, a
 * malformed chunk, headers past its memory): the last moment before it answers, on the connection's thread. */
static void log_from_microhttpd(void *user, const char *format, va_list args) {
    const serve_server *server = user;
    static const char refusal[] = "Error processing request (HTTP response code is %u ('%s'))";
    if (thread_connection && !thread_answered && !strncmp(format, refusal, sizeof refusal - 1)) {
        va_list copy;
        va_copy(copy, args);
        unsigned status = va_arg(copy, unsigned);
        const char *html = va_arg(copy, const char *);
        va_end(copy);
        answer_for_library(thread_connection, status, html);
    }
    if (!server->config.log) return;
    char line[1024];
    vsnprintf(line, sizeof line, format, args);
    size_t length = strlen(line);
    while (length && (line[length - 1] == '\n' || line[length - 1] == '\r')) line[--length] = '\0';
    serve_log(server, "libmicrohttpd: %s", line);
}

/* ------------------------------------------------------------------ routes */

enum { METHOD_GET = 1, METHOD_POST = 2 };

typedef struct route_entry {
    const char *path;
    int methods;
    serve_route route;
} route_entry;

static const route_entry routes[] = {
    {"/v1/embed", METHOD_POST, SERVE_ROUTE_EMBED},     {"/v1/rank", METHOD_POST, SERVE_ROUTE_RANK},
    {"/v1/caption", METHOD_POST, SERVE_ROUTE_CAPTION}, {"/v1/ask", METHOD_POST, SERVE_ROUTE_ASK},
    {"/v1/chat/completions", METHOD_POST, SERVE_ROUTE_CHAT},
    {"/v1/task", METHOD_POST, SERVE_ROUTE_TASK},       {"/v1/ocr", METHOD_POST, SERVE_ROUTE_OCR},
    {"/v1/detect", METHOD_POST, SERVE_ROUTE_DETECT},
    {"/v1/explain", METHOD_POST, SERVE_ROUTE_EXPLAIN}, {"/v1/search", METHOD_GET | METHOD_POST, SERVE_ROUTE_SEARCH},
    {"/predict", METHOD_POST, SERVE_ROUTE_PREDICT},    {"/ping", METHOD_GET, SERVE_ROUTE_PING},
    {"/", METHOD_GET, SERVE_ROUTE_PING},               {"/health", METHOD_GET, SERVE_ROUTE_HEALTH},
    {"/v1/models", METHOD_GET, SERVE_ROUTE_MODELS},    {"/metrics", METHOD_GET, SERVE_ROUTE_METRICS}};

static const route_entry *find_route(const char *url) {
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++)
        if (strcmp(url, routes[i].path) == 0) return &routes[i];
    return NULL;
}

/* ------------------------------------------------------------- answering */

void reply_error(serve_reply *reply, int status, const char *format, ...) {
    char message[768];
    va_list args;
    va_start(args, format);
    vsnprintf(message, sizeof message, format, args);
    va_end(args);
    /* the message as a JSON string, as every JSON glimpse writes: escaped, and valid UTF-8 (a byte that is
     * not, from a file name or a query, or cut by the bound above, becomes U+FFFD) */
    reply->status = status;
    reply->content_type = "application/json";
    reply->body = NULL;
    reply->size = 0;
    char *body = NULL;
    size_t size = 0;
    FILE *out = open_memstream(&body, &size);
    if (!out) return;
    fputs("{\"error\": ", out);
    json_string(out, message);
    fputs("}\n", out);
    if (fclose(out) != 0) {
        free(body);
        return;
    }
    reply->body = body;
    reply->size = size;
}

/* Queues reply (taking its body) as the answer; close asks for the connection
 * to be closed after it (the body was not read, or the server is draining). */
/* libmicrohttpd's reader of a streamed reply: the route's stream_read, at its end END_OF_STREAM. */
static ssize_t read_stream(void *user, uint64_t position, char *buffer, size_t capacity) {
    (void)position;
    serve_reply *reply = user;
    long n = reply->stream_read(reply->stream, buffer, capacity);
    return n < 0 ? (ssize_t)MHD_CONTENT_READER_END_OF_STREAM : (ssize_t)n;
}

static void end_stream(void *user) {
    serve_reply *reply = user;
    reply->stream_end(reply->stream);
    free(reply);
}

static enum MHD_Result send_reply(serve_request *request, serve_reply *reply, bool close) {
    struct MHD_Response *response = NULL;
    if (reply->stream) { /* written as it is made: chunked */
        serve_reply *kept = malloc(sizeof *kept);
        if (kept) *kept = *reply;
        response = kept ? microhttpd.MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, read_stream, kept,
                                                                       end_stream)
                        : NULL;
        if (!response) {
            reply->stream_end(reply->stream);
            free(kept);
            return MHD_NO;
        }
    } else {
        response = microhttpd.MHD_create_response_from_buffer(
            reply->size, reply->body ? reply->body : (void *)"",
            reply->body ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
        if (!response) {
            free(reply->body);
            return MHD_NO;
        }
    }
    microhttpd.MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE,
                                       reply->content_type ? reply->content_type : "application/json");
    if (reply->retry_after) {
        char seconds[16];
        snprintf(seconds, sizeof seconds, "%u", reply->retry_after);
        microhttpd.MHD_add_response_header(response, MHD_HTTP_HEADER_RETRY_AFTER, seconds);
    }
    if (reply->status == 401) microhttpd.MHD_add_response_header(response, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
    if (reply->status == 405) microhttpd.MHD_add_response_header(response, MHD_HTTP_HEADER_ALLOW, "GET, POST");
    if (close) microhttpd.MHD_add_response_header(response, MHD_HTTP_HEADER_CONNECTION, "close");
    enum MHD_Result queued = microhttpd.MHD_queue_response(request->connection, (unsigned)reply->status, response);
    microhttpd.MHD_destroy_response(response);
    if (queued == MHD_YES) request->status = reply->status, thread_answered = true;
    return queued;
}

/* An error answered before the body was read: the connection closes after it. */
static enum MHD_Result refuse(serve_request *request, int status, unsigned retry_after, const char *format, ...)
    __attribute__((format(printf, 4, 5)));
static enum MHD_Result refuse(serve_request *request, int status, unsigned retry_after, const char *format, ...) {
    char message[512];
    va_list args;
    va_start(args, format);
    vsnprintf(message, sizeof message, format, args);
    va_end(args);
    serve_reply reply = {0};
    reply_error(&reply, status, "%s", message);
    reply.retry_after = retry_after;
    return send_reply(request, &reply, true);
}

/* ------------------------------------------------------------ the API key */

/* Whether the request carries the key, as "Authorization: Bearer KEY" or
 * "X-API-Key: KEY" (*sent: whether it carries one at all). The comparison
 * takes the same time whatever the bytes. */
static bool authorized(const serve_server *server, struct MHD_Connection *connection, bool *sent) {
    *sent = false;
    if (!server->api_key) return true;
    const char *given = microhttpd.MHD_lookup_connection_value(connection, MHD_HEADER_KIND, "X-API-Key");
    const char *authorization = microhttpd.MHD_lookup_connection_value(connection, MHD_HEADER_KIND, "Authorization");
    if (!given && authorization && strncasecmp(authorization, "Bearer ", 7) == 0) given = authorization + 7;
    if (!given) return false;
    *sent = true;
    size_t expected_length = strlen(server->api_key), given_length = strlen(given);
    unsigned char difference = expected_length != given_length;
    for (size_t i = 0; i < expected_length; i++)
        difference |= (unsigned char)(server->api_key[i] ^ (i < given_length ? given[i] : 0));
    return difference == 0;
}

/* ------------------------------------------------------- receiving a body */

static serve_body_kind body_kind(const char *content_type, bool *known) {
    *known = true;
    if (!content_type) return SERVE_BODY_NONE;
    char type[128];
    size_t n = strcspn(content_type, ";");
    if (n >= sizeof type) n = sizeof type - 1;
    memcpy(type, content_type, n);
    type[n] = '\0';
    while (n && (type[n - 1] == ' ' || type[n - 1] == '\t')) type[--n] = '\0';
    if (strcasecmp(type, "application/json") == 0) return SERVE_BODY_JSON;
    if (strncasecmp(type, "image/", 6) == 0 || strcasecmp(type, "application/octet-stream") == 0)
        return SERVE_BODY_IMAGE;
    if (strcasecmp(type, "multipart/form-data") == 0 || strcasecmp(type, "application/x-www-form-urlencoded") == 0)
        return SERVE_BODY_MULTIPART;
    *known = false;
    return SERVE_BODY_NONE;
}

static char *copy_or_null(const char *text) { return text ? strdup(text) : NULL; }

/* libmicrohttpd's post processor hands each part's bytes here, in pieces. */
static enum MHD_Result take_part(void *user, enum MHD_ValueKind kind, const char *key, const char *filename,
                                 const char *content_type, const char *transfer_encoding, const char *data,
                                 uint64_t offset, size_t size) {
    (void)kind, (void)transfer_encoding;
    serve_request *request = user;
    serve_part *part = request->part_count ? &request->parts[request->part_count - 1] : NULL;
    if (!part || offset == 0 || strcmp(part->name, key ? key : "") != 0 || offset != part->size) {
        if (request->part_count == SERVE_MAX_PARTS || offset != 0) {
            request->bad_parts = true;
            return MHD_NO;
        }
        part = &request->parts[request->part_count++];
        memset(part, 0, sizeof *part);
        part->name = strdup(key ? key : "");
        part->filename = copy_or_null(filename);
        part->content_type = copy_or_null(content_type);
        part->data = malloc(1);
        if (!part->name || !part->data || (filename && !part->filename) || (content_type && !part->content_type)) {
            request->bad_parts = true;
            return MHD_NO;
        }
        part->data[0] = '\0';
    }
    if (size) {
        char *grown = realloc(part->data, part->size + size + 1);
        if (!grown) {
            request->bad_parts = true;
            return MHD_NO;
        }
        part->data = grown;
        memcpy(part->data + part->size, data, size);
        part->size += size;
        part->data[part->size] = '\0';
    }
    return MHD_YES;
}

static bool append_body(serve_request *request, const char *data, size_t size) {
    if (request->size + size + 1 > request->capacity) {
        size_t capacity = request->capacity ? request->capacity : 16384;
        while (capacity < request->size + size + 1) capacity *= 2;
        char *grown = realloc(request->body, capacity);
        if (!grown) return false;
        request->body = grown;
        request->capacity = capacity;
    }
    memcpy(request->body + request->size, data, size);
    request->size += size;
    request->body[request->size] = '\0';
    return true;
}

const char *request_argument(const serve_request *request, const char *name) {
    const char *value = microhttpd.MHD_lookup_connection_value(request->connection, MHD_GET_ARGUMENT_KIND, name);
    if (value) return value;
    for (size_t i = 0; i < request->part_count; i++)
        if (strcmp(request->parts[i].name, name) == 0 && !request->parts[i].filename) return request->parts[i].data;
    return NULL;
}

static enum MHD_Result find_nul(void *user, enum MHD_ValueKind kind, const char *key, size_t key_size,
                                 const char *value, size_t value_size) {
    (void)kind, (void)key_size;
    if (value && memchr(value, 0, value_size)) {
        *(const char **)user = key;
        return MHD_NO;
    }
    return MHD_YES;
}

const char *request_nul_argument(const serve_request *request) {
    const char *found = NULL;
    microhttpd.MHD_get_connection_values_n(request->connection, MHD_GET_ARGUMENT_KIND, find_nul, &found);
    if (found) return found;
    for (size_t i = 0; i < request->part_count; i++) {
        const serve_part *part = &request->parts[i];
        if (!part->filename && strcmp(part->name, "image") != 0 && memchr(part->data, 0, part->size)) return part->name;
    }
    return NULL;
}

/* ------------------------------------------------------------ the handler */

static bool receives_images(serve_route route) {
    return route == SERVE_ROUTE_EMBED || route == SERVE_ROUTE_PREDICT || route == SERVE_ROUTE_SEARCH;
}

/* Counts the headers named Host, and those with an empty name. */
static enum MHD_Result count_odd_headers(void *user, enum MHD_ValueKind kind, const char *key, const char *value) {
    (void)kind, (void)value;
    int *counts = user;
    if (!key || !key[0]) counts[1]++;
    else if (strcasecmp(key, "Host") == 0) counts[0]++;
    return MHD_YES;
}

/* The checks made on the headers, before any of the body is read. */
static enum MHD_Result begin_request(serve_server *server, serve_request *request, const char *url,
                                     const char *method, const char *version) {
    struct MHD_Connection *connection = request->connection;
    if (atomic_load(&server->draining)) return refuse(request, 503, 5, "the server is shutting down");
    int odd[2] = {0, 0}; /* libmicrohttpd takes these; RFC 9112 says 400 */
    microhttpd.MHD_get_connection_values(connection, MHD_HEADER_KIND, count_odd_headers, odd);
    if (odd[0] > 1 || odd[1]) return refuse(request, 400, 0, "malformed headers: two Host headers, or a nameless one");
    /* checked here rather than by libmicrohttpd, whose own answer is not JSON (0.9.75 sent its headers twice) */
    if (!odd[0] && version && strcmp(version, MHD_HTTP_VERSION_1_0) != 0)
        return refuse(request, 400, 0, "malformed headers: an HTTP/1.1 request needs a Host header");
    if (strchr(url, ' ')) return refuse(request, 400, 0, "malformed request line: a space in the URL");
    const route_entry *entry = find_route(url);
    if (!entry) {
        request->route = SERVE_ROUTE_UNKNOWN;
        return refuse(request, 404, 0, "no such endpoint: %s", url);
    }
    request->route = entry->route;
    int asked = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0 ? METHOD_GET
                : strcmp(method, "POST") == 0                           ? METHOD_POST
                                                                        : 0;
    if (!(entry->methods & asked)) return refuse(request, 405, 0, "%s does not take %s", url, method);
    bool open = entry->route == SERVE_ROUTE_HEALTH || entry->route == SERVE_ROUTE_PING ||
                (entry->route == SERVE_ROUTE_PREDICT && server->config.open_predict); /* immich sends no key */
    bool sent;
    if (!open && !authorized(server, connection, &sent))
        return refuse(request, 401, 0,
                      sent ? "the API key sent is not this server's"
                           : "an API key is required: send it as 'Authorization: Bearer KEY'");
    const char *length =
        microhttpd.MHD_lookup_connection_value(connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (length) {
        char *end;
        unsigned long long declared = strtoull(length, &end, 10);
        if (end != length && declared > server->config.max_body)
            return refuse(request, 413, 0, "the body is %llu bytes; this server takes at most %zu", declared,
                          server->config.max_body);
    }
    if (asked == METHOD_GET) return MHD_YES;
    bool known;
    const char *content_type =
        microhttpd.MHD_lookup_connection_value(connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
    request->kind = body_kind(content_type, &known);
    if (!known)
        return refuse(request, 415, 0,
                      "unsupported media type '%s': send an image (image/..., application/octet-stream), "
                      "multipart/form-data or application/json",
                      content_type);
    if (request->kind == SERVE_BODY_MULTIPART) {
        request->post = microhttpd.MHD_create_post_processor(connection, 16384, take_part, request);
        if (!request->post) return refuse(request, 400, 0, "malformed form: a multipart body needs a boundary");
    }
    if (receives_images(request->route) &&
        (request->kind == SERVE_BODY_IMAGE || request->kind == SERVE_BODY_MULTIPART)) {
        request->counted_as_image = true;
        atomic_fetch_add(&server->load.images_arriving, 1);
    }
    return MHD_YES;
}

/* Counts the request among those whose body is still arriving (receiving), or no longer. */
static void set_receiving(serve_server *server, serve_request *request, bool receiving) {
    if (request->receiving == receiving) return;
    pthread_mutex_lock(&server->flight_lock);
    request->receiving = receiving;
    if (receiving) server->receiving++;
    else server->receiving--;
    pthread_mutex_unlock(&server->flight_lock);
}

static enum MHD_Result on_request(void *user, struct MHD_Connection *connection, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **state) {
    serve_server *server = user;
    serve_request *request = *state;
    if (!request) {
        request = calloc(1, sizeof *request);
        if (!request) return MHD_NO;
        request->connection = connection;
        request->started = now_seconds();
        request->route = SERVE_ROUTE_UNKNOWN;
        *state = request;
        pthread_mutex_lock(&server->flight_lock);
        server->in_flight++;
        pthread_mutex_unlock(&server->flight_lock);
        enum MHD_Result begun = begin_request(server, request, url, method, version);
        if (!request->status) set_receiving(server, request, true);
        return begun;
    }
    if (*upload_data_size) {
        size_t size = *upload_data_size;
        *upload_data_size = 0;
        if (request->status) return MHD_YES; /* answered already: the rest is dropped */
        request->received += size;
        atomic_store(&server->last_received, now_seconds());
        if (request->received > server->config.max_body) {
            /* a body without a length that grew too long: answer now if libmicrohttpd lets us, else close */
            return refuse(request, 413, 0, "the body is over %zu bytes, the most this server takes",
                          server->config.max_body);
        }
        if (request->kind == SERVE_BODY_MULTIPART) {
            if (!request->bad_parts && microhttpd.MHD_post_process(request->post, upload_data, size) != MHD_YES)
                request->bad_parts = true;
        } else if (!append_body(request, upload_data, size)) {
            return refuse(request, 503, 1, "out of memory");
        }
        return MHD_YES;
    }
    set_receiving(server, request, false); /* received whole, or answered already */
    if (request->status) return MHD_YES;
    serve_reply reply = {0};
    route_answer(server, request, &reply);
    return send_reply(request, &reply, atomic_load(&server->draining));
}

static void on_completed(void *user, struct MHD_Connection *connection, void **state,
                         enum MHD_RequestTerminationCode code) {
    (void)connection, (void)code;
    serve_server *server = user;
    serve_request *request = *state;
    if (!request) return;
    *state = NULL;
    /* 499: the client went away before an answer (nginx's convention) */
    metrics_record_request(&server->metrics, request->route, request->status ? request->status : 499,
                           now_seconds() - request->started);
    if (request->counted_as_image) atomic_fetch_sub(&server->load.images_arriving, 1);
    if (request->post) microhttpd.MHD_destroy_post_processor(request->post);
    for (size_t i = 0; i < request->part_count; i++) {
        free(request->parts[i].name);
        free(request->parts[i].filename);
        free(request->parts[i].content_type);
        free(request->parts[i].data);
    }
    set_receiving(server, request, false);
    free(request->body);
    free(request);
    pthread_mutex_lock(&server->flight_lock);
    server->in_flight--;
    pthread_cond_broadcast(&server->flight_idle);
    pthread_mutex_unlock(&server->flight_lock);
}

/* ------------------------------------------------------- start and stop */

/* A model's name in the API: the folder's last component, or the hub id as given. */
static char *model_name(const char *argument) {
    struct stat info;
    size_t length = strlen(argument);
    while (length > 1 && argument[length - 1] == '/') length--;
    if (stat(argument, &info) == 0 && S_ISDIR(info.st_mode)) {
        const char *start = argument + length;
        while (start > argument && start[-1] != '/') start--;
        return strndup(start, (size_t)(argument + length - start));
    }
    return strndup(argument, length);
}

static void forward_library_log(void *user, glimpse_log_level level, const char *message) {
    if (level >= GLIMPSE_LOG_LEVEL_WARNING) serve_log(user, "warning: %s", message);
}

static glimpse_status load_models(serve_server *server) {
    const serve_config *config = &server->config;
    server->models = calloc(config->model_count, sizeof *server->models);
    if (!server->models) return ERROR_OOM();
    glimpse_load_params params = glimpse_load_default_params();
    params.precision = config->precision;
    for (size_t i = 0; i < config->model_count; i++) {
        serve_model *model = &server->models[i];
        double started = now_seconds();
        glimpse_status status = glimpse_model_load(config->models[i], &params, &model->model);
        if (status) return error_prefix(status, "cannot load model %s", config->models[i]);
        server->model_count = i + 1;
        glimpse_model_get_info(model->model, &model->info);
        model->name = model_name(config->models[i]);
        if (!model->name) return ERROR_OOM();
        for (size_t j = 0; j < i; j++)
            if (strcmp(server->models[j].name, model->name) == 0)
                return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "two models are named %s", model->name);
        serve_log(server, "loaded %s (%s) in %.0f ms", model->name, model->info.architecture,
                  (now_seconds() - started) * 1e3);
    }
    return GLIMPSE_STATUS_OK;
}

/* Opens --db read-only and finds the loaded model it was built with. */
static glimpse_status open_index(serve_server *server) {
    glimpse_index *index;
    glimpse_status status = glimpse_index_open(server->config.db, NULL, &index);
    if (status) return status;
    for (size_t i = 0; i < server->model_count; i++) {
        if (!glimpse_model_embedding_dim(server->models[i].model)) continue;
        if (glimpse_index_check_model(index, server->models[i].model) == GLIMPSE_STATUS_OK) {
            server->models[i].index = index;
            server->search_model = &server->models[i];
            return GLIMPSE_STATUS_OK;
        }
    }
    status = error_set(GLIMPSE_STATUS_WRONG_MODEL, "%s was built with %s: load that model with -m to search it",
                       server->config.db, glimpse_index_model_path(index));
    glimpse_index_free(index);
    return status;
}

/* The listening address; false if host is not a numeric address or "localhost". */
static bool parse_host(const char *host, int port, struct sockaddr_storage *address, bool *loopback, bool *ipv6) {
    memset(address, 0, sizeof *address);
    if (strcmp(host, "localhost") == 0) host = "127.0.0.1";
    struct sockaddr_in *v4 = (struct sockaddr_in *)address;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)address;
    if (inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons((uint16_t)port);
        *loopback = (ntohl(v4->sin_addr.s_addr) >> 24) == 127;
        *ipv6 = false;
        return true;
    }
    if (inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons((uint16_t)port);
        *loopback = IN6_IS_ADDR_LOOPBACK(&v6->sin6_addr);
        *ipv6 = true;
        return true;
    }
    return false;
}

glimpse_status serve_start(const serve_config *config, serve_server **out) {
    *out = NULL;
    if (!config || !config->model_count || !config->models)
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "no model to serve");
    if (config->port < 0 || config->port > 65535)
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "port %d is not a port", config->port);
    struct sockaddr_storage address;
    bool loopback, ipv6;
    const char *host = config->host ? config->host : "127.0.0.1";
    if (!parse_host(host, config->port, &address, &loopback, &ipv6))
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "host '%s' is not a numeric IPv4 or IPv6 address", host);
    if (!loopback && (!config->api_key || !config->api_key[0]))
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT,
                         "listening on %s, beyond this machine, needs an API key (--api-key-file)", host);
    const char *why = NULL;
    if (!microhttpd_load(&why)) return error_set(GLIMPSE_STATUS_UNSUPPORTED, "%s", why);
    serve_server *server = calloc(1, sizeof *server);
    if (!server) return ERROR_OOM();
    server->config = *config;
    server->config.host = host;
    if (server->config.max_batch < 1) server->config.max_batch = 1;
    if (config->api_key && config->api_key[0] && !(server->api_key = strdup(config->api_key))) {
        free(server);
        return ERROR_OOM();
    }
    metrics_init(&server->metrics);
    server->load.limit = config->queue_limit ? config->queue_limit : 1;
    server->load.metrics = &server->metrics;
    pthread_mutex_init(&server->flight_lock, NULL);
    pthread_cond_init(&server->flight_idle, NULL);
    glimpse_set_log_callback(forward_library_log, server);
    glimpse_status status = load_models(server);
    if (!status && config->db) status = open_index(server);
    for (size_t i = 0; !status && i < server->model_count; i++)
        status = queue_start(&server->models[i].queue, server->models[i].model, config->threads, config->max_batch,
                             config->batch_wait_ms, &server->load);
    if (status) {
        serve_free(server);
        return status;
    }
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ITC |
                     MHD_USE_ERROR_LOG | (ipv6 ? MHD_USE_IPv6 : 0);
    server->daemon = microhttpd.MHD_start_daemon(
        flags, (uint16_t)config->port, NULL, NULL, on_request, server, MHD_OPTION_EXTERNAL_LOGGER, log_from_microhttpd,
        server, MHD_OPTION_URI_LOG_CALLBACK, on_request_line, server, MHD_OPTION_SOCK_ADDR, &address,
        MHD_OPTION_STRICT_FOR_CLIENT, 0, /* Host and URL checked by begin_request */
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)config->timeout_seconds, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)config->max_connections, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
        (unsigned)(config->max_per_client && config->max_per_client < config->max_connections ? config->max_per_client : 0),
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, server, MHD_OPTION_END);
    if (!server->daemon) {
        serve_free(server);
        return error_set(GLIMPSE_STATUS_IO, "cannot listen on %s port %d (in use, or not an address of this machine)",
                         host, config->port);
    }
    const union MHD_DaemonInfo *info = microhttpd.MHD_get_daemon_info(server->daemon, MHD_DAEMON_INFO_BIND_PORT);
    server->port = info ? info->port : config->port;
    *out = server;
    return GLIMPSE_STATUS_OK;
}

int serve_port(const serve_server *server) { return server->port; }

size_t serve_drain(serve_server *server, double timeout_seconds) {
    atomic_store(&server->draining, true);
    if (server->daemon) {
        MHD_socket listening = microhttpd.MHD_quiesce_daemon(server->daemon);
        if (listening != MHD_INVALID_SOCKET) close(listening);
    }
    /* requests being answered are waited for; requests whose body is still arriving only while bytes keep
     * coming: a client that stopped sending half-way does not hold the stop for the whole timeout */
    double deadline = now_seconds() + timeout_seconds;
    pthread_mutex_lock(&server->flight_lock);
    for (;;) {
        double now = now_seconds();
        bool uploading = server->receiving && now - atomic_load(&server->last_received) < SERVE_DRAIN_IDLE_SECONDS;
        if (now >= deadline || !(server->in_flight > server->receiving || uploading)) break;
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += 100000000; /* looked at again every 0.1 s, or at once when a request ends */
        if (until.tv_nsec >= 1000000000) until.tv_sec++, until.tv_nsec -= 1000000000;
        pthread_cond_timedwait(&server->flight_idle, &server->flight_lock, &until);
    }
    size_t left = server->in_flight;
    pthread_mutex_unlock(&server->flight_lock);
    return left;
}

void serve_free(serve_server *server) {
    if (!server) return;
    if (server->daemon) microhttpd.MHD_stop_daemon(server->daemon); /* joins the connection threads */
    for (size_t i = 0; i < server->model_count; i++) {
        serve_model *model = &server->models[i];
        queue_stop(&model->queue);
        glimpse_index_free(model->index);
        glimpse_model_free(model->model);
        free(model->name);
    }
    glimpse_set_log_callback(NULL, NULL);
    free(server->models);
    free(server->api_key);
    metrics_destroy(&server->metrics);
    pthread_mutex_destroy(&server->flight_lock);
    pthread_cond_destroy(&server->flight_idle);
    free(server);
}
