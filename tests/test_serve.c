/* test_serve.c — glimpse serve as a client meets it, over plain sockets: every
 * endpoint's answer against the library's own computation in this process
 * (embeddings, scores, captions and search results exactly equal), concurrent
 * image requests (batched) equal to one-at-a-time ones, the API key, clients
 * that disconnect, send half a body, send 100 MB or sit idle, a corpus of
 * generated malformed requests each answered 4xx while the server keeps
 * serving, and SIGTERM answering the request in flight and refusing new ones. */
#define _GNU_SOURCE /* memmem */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "core/file.h"
#include "output/json.h"
#include "tests/support.h"

#define CLIP_MODEL GLIMPSE_SOURCE_DIR "/examples/models/demo-clip"
#define CAPTION_MODEL GLIMPSE_SOURCE_DIR "/examples/models/demo-blip-caption"
#define PICTURES GLIMPSE_SOURCE_DIR "/examples/pictures"
#define PICTURE_COUNT 6
#define MAX_BODY 4000000
#define TIMEOUT_SECONDS 2
#define BOUNDARY "glimpseTestBoundary7MA4YWxk"

/* ------------------------------------------------------------ the server */

typedef struct server_process {
    pid_t pid;
    int port;
    char log[256];
} server_process;

static char folder[64];
static char index_path[128];
static server_process server;
static glimpse_model *clip, *captioner, *matcher, *asker, *tasker;
static glimpse_context *clip_ctx, *caption_ctx, *match_ctx, *ask_ctx, *task_ctx;
static char *matcher_path; /* the blip-itm-tiny fixture, also served when the fixtures are here */
static char *asker_path;   /* the blip2-opt-tiny fixture (BLIP-2: /v1/ask), likewise */
static char *tasker_path;  /* the florence2-tiny fixture (Florence-2: /v1/task), likewise */
static uint8_t *pictures[PICTURE_COUNT];
static size_t picture_sizes[PICTURE_COUNT];

static double now_seconds(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + now.tv_nsec * 1e-9;
}

/* Runs the glimpse binary with argv (NULL-terminated, argv[0] ignored); its exit status. */
static int run_glimpse(const char *const *argv, const char *stderr_path) {
    pid_t child = fork();
    if (child == 0) {
        int err = open(stderr_path ? stderr_path : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int out = open("/dev/null", O_WRONLY);
        dup2(err, 2), dup2(out, 1);
        execv(GLIMPSE_BINARY, (char *const *)argv);
        _exit(127);
    }
    int status = 0;
    waitpid(child, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

/* Starts `glimpse serve ARGS... --port 0` and reads its port from stderr; false if it did not listen. */
static bool start_server(server_process *process, const char *const *arguments) {
    const char *argv[40] = {GLIMPSE_BINARY, "serve"};
    int argc = 2;
    for (const char *const *a = arguments; *a && argc < 36; a++) argv[argc++] = *a;
    argv[argc++] = "--port", argv[argc++] = "0";
    argv[argc] = NULL;
    static int started; /* each server its own log: a name shared with a running one read its port */
    snprintf(process->log, sizeof process->log, "%s/serve-%d.log", folder, ++started);
    process->pid = fork();
    if (process->pid == 0) {
        int err = open(process->log, O_WRONLY | O_CREAT | O_TRUNC, 0600), out = open("/dev/null", O_WRONLY);
        dup2(err, 2), dup2(out, 1);
        execv(GLIMPSE_BINARY, (char *const *)argv);
        _exit(127);
    }
    for (int attempt = 0; attempt < 3000; attempt++) { /* 60 s: a sanitizer build loads slowly */
        uint8_t *text;
        size_t size;
        if (file_read_all(process->log, 1 << 20, &text, &size) == GLIMPSE_STATUS_OK) {
            const char *at = strstr((const char *)text, "listening on http://127.0.0.1:");
            if (at) process->port = atoi(at + strlen("listening on http://127.0.0.1:"));
            free(text);
            if (at) return true;
        }
        int status;
        if (waitpid(process->pid, &status, WNOHANG) == process->pid) return false;
        usleep(20000);
    }
    return false;
}

static int stop_server(server_process *process) {
    kill(process->pid, SIGTERM);
    int status = 0;
    waitpid(process->pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* --------------------------------------------------------------- client */

static int connect_to(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct timeval timeout = {.tv_sec = 20};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    if (connect(fd, (struct sockaddr *)&address, sizeof address) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static bool send_all(int fd, const void *bytes, size_t size) {
    const char *p = bytes;
    while (size) {
        ssize_t n = send(fd, p, size, MSG_NOSIGNAL);
        if (n <= 0) return false;
        p += n, size -= (size_t)n;
    }
    return true;
}

typedef struct response {
    int status; /* 0: the connection closed without an answer */
    char *text; /* the whole answer, NUL-terminated */
    size_t size;
    const char *body;
} response;

/* Reads an answer until the server closes the connection. */
static response read_response(int fd) {
    response r = {0};
    size_t capacity = 1 << 16;
    r.text = malloc(capacity);
    for (;;) {
        if (r.size + 4096 > capacity) r.text = realloc(r.text, capacity *= 2);
        ssize_t n = recv(fd, r.text + r.size, capacity - r.size - 1, 0);
        if (n <= 0) break;
        r.size += (size_t)n;
    }
    r.text[r.size] = '\0';
    if (r.size > 12 && strncmp(r.text, "HTTP/1.", 7) == 0) r.status = atoi(r.text + 9);
    const char *end = strstr(r.text, "\r\n\r\n");
    r.body = end ? end + 4 : r.text + r.size;
    return r;
}

/* Sends bytes as they are on a new connection and reads the answer. */
static response exchange_raw(int port, const void *bytes, size_t size) {
    int fd = connect_to(port);
    assert_true(fd >= 0);
    send_all(fd, bytes, size);
    response r = read_response(fd);
    close(fd);
    return r;
}

/* A request with Connection: close; content_type NULL sends no body headers. */
static char *build_request(const char *method, const char *path, const char *content_type, const void *body,
                           size_t size, const char *extra_headers, size_t *length) {
    if (!extra_headers) extra_headers = "";
    size_t room = strlen(method) + strlen(path) + strlen(extra_headers) + (content_type ? strlen(content_type) : 0) + 256;
    char *request = malloc(room + size);
    int n = snprintf(request, room, "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n%s", method, path,
                     extra_headers);
    if (content_type)
        n += snprintf(request + n, room - (size_t)n, "Content-Type: %s\r\nContent-Length: %zu\r\n", content_type, size);
    n += snprintf(request + n, room - (size_t)n, "\r\n");
    if (size) memcpy(request + n, body, size);
    *length = (size_t)n + size;
    return request;
}

static response exchange_on(int port, const char *method, const char *path, const char *content_type,
                            const void *body, size_t size, const char *extra_headers) {
    size_t length;
    char *request = build_request(method, path, content_type, body, size, extra_headers, &length);
    response r = exchange_raw(port, request, length);
    free(request);
    return r;
}

static response exchange(const char *method, const char *path, const char *content_type, const void *body,
                         size_t size) {
    return exchange_on(server.port, method, path, content_type, body, size, NULL);
}

static void response_free(response *r) { free(r->text); }

/* The answer's JSON body (fails the test unless status is expected and the body parses). */
static cJSON *expect_json(response *r, int status) {
    if (r->status != status) fail_msg("expected %d, got %d: %s", status, r->status, r->text);
    cJSON *json = cJSON_Parse(r->body);
    if (!json) fail_msg("not JSON: %s", r->body);
    return json;
}

/* A multipart/form-data body being built. */
typedef struct form {
    char *bytes;
    size_t size;
} form;

static void form_add(form *f, const char *name, const char *filename, const void *data, size_t size) {
    char head[512];
    int n = filename ? snprintf(head, sizeof head,
                                "--" BOUNDARY "\r\nContent-Disposition: form-data; name=\"%s\"; filename=\"%s\"\r\n"
                                "Content-Type: application/octet-stream\r\n\r\n",
                                name, filename)
                     : snprintf(head, sizeof head, "--" BOUNDARY "\r\nContent-Disposition: form-data; name=\"%s\"\r\n\r\n",
                                name);
    f->bytes = realloc(f->bytes, f->size + (size_t)n + size + 64);
    memcpy(f->bytes + f->size, head, (size_t)n);
    memcpy(f->bytes + f->size + n, data, size);
    f->size += (size_t)n + size;
    memcpy(f->bytes + f->size, "\r\n", 2);
    f->size += 2;
}

static void form_text(form *f, const char *name, const char *text) { form_add(f, name, NULL, text, strlen(text)); }

static void form_end(form *f) {
    f->bytes = realloc(f->bytes, f->size + 64);
    f->size += (size_t)sprintf(f->bytes + f->size, "--" BOUNDARY "--\r\n");
}

static response post_form(const char *path, const form *f) {
    return exchange("POST", path, "multipart/form-data; boundary=" BOUNDARY, f->bytes, f->size);
}

/* ------------------------------------------------------------ reference */

static glimpse_image *decode(size_t picture) {
    glimpse_image *image;
    assert_int_equal(glimpse_image_load_memory(pictures[picture], picture_sizes[picture], NULL, &image), 0);
    return image;
}

static void reference_image_embedding(size_t picture, float *out) {
    glimpse_image *image = decode(picture);
    assert_int_equal(glimpse_embed_images(clip_ctx, &image, 1, out), 0);
    glimpse_image_free(image);
}

/* Every number of a JSON array equals expected exactly (as floats). */
static void assert_floats_equal(const cJSON *array, const float *expected, size_t count) {
    assert_true(cJSON_IsArray(array));
    assert_int_equal((size_t)cJSON_GetArraySize(array), count);
    size_t i = 0;
    const cJSON *item;
    cJSON_ArrayForEach(item, array) {
        if ((float)item->valuedouble != expected[i])
            fail_msg("value %zu: served %.9g, library %.9g", i, (float)item->valuedouble, expected[i]);
        i++;
    }
}

/* ------------------------------------------------------------- set up */

static int set_up(void **state) {
    (void)state;
    strcpy(folder, "/tmp/glimpse-serve-XXXXXX");
    if (!mkdtemp(folder)) return -1;
    snprintf(index_path, sizeof index_path, "%s/index.db", folder);
    const char *index_argv[] = {"glimpse", "index", "-m", CLIP_MODEL, "--db", index_path, PICTURES, NULL};
    if (run_glimpse(index_argv, NULL) != 0) return -1;
    for (int i = 0; i < PICTURE_COUNT; i++) {
        char path[512];
        snprintf(path, sizeof path, PICTURES "/%05d.png", i);
        if (file_read_all(path, 1 << 24, &pictures[i], &picture_sizes[i])) return -1;
    }
    matcher_path = fixture_path("blip-itm-tiny");
    asker_path = matcher_path ? fixture_path("blip2-opt-tiny") : NULL;
    tasker_path = asker_path ? fixture_path("florence2-tiny") : NULL;
    const char *arguments[] = {"-m", CLIP_MODEL, "-m", CAPTION_MODEL, "--db", index_path, "--threads", "2",
                               "--timeout", "2", "--max-body", "4000000", "--queue", "64",
                               matcher_path ? "-m" : NULL, matcher_path, asker_path ? "-m" : NULL, asker_path,
                               tasker_path ? "-m" : NULL, tasker_path, NULL};
    if (!start_server(&server, arguments)) {
        fprintf(stderr, "glimpse serve did not start (log: %s)\n", server.log);
        return -1;
    }
    glimpse_context_params params = glimpse_context_default_params();
    params.threads = 2;
    if (glimpse_model_load(CLIP_MODEL, NULL, &clip) || glimpse_model_load(CAPTION_MODEL, NULL, &captioner) ||
        glimpse_context_create(clip, &params, &clip_ctx) || glimpse_context_create(captioner, &params, &caption_ctx))
        return -1;
    if (matcher_path &&
        (glimpse_model_load(matcher_path, NULL, &matcher) || glimpse_context_create(matcher, &params, &match_ctx)))
        return -1;
    if (asker_path && (glimpse_model_load(asker_path, NULL, &asker) || glimpse_context_create(asker, &params, &ask_ctx)))
        return -1;
    if (tasker_path &&
        (glimpse_model_load(tasker_path, NULL, &tasker) || glimpse_context_create(tasker, &params, &task_ctx)))
        return -1;
    return 0;
}

static int tear_down(void **state) {
    (void)state;
    if (server.pid > 0) stop_server(&server);
    glimpse_context_free(clip_ctx), glimpse_context_free(caption_ctx), glimpse_context_free(match_ctx);
    glimpse_context_free(ask_ctx), glimpse_context_free(task_ctx);
    glimpse_model_free(clip), glimpse_model_free(captioner), glimpse_model_free(matcher), glimpse_model_free(asker);
    glimpse_model_free(tasker);
    free(matcher_path), free(asker_path), free(tasker_path);
    for (int i = 0; i < PICTURE_COUNT; i++) free(pictures[i]);
    char command[256];
    snprintf(command, sizeof command, "rm -rf %s", folder);
    return system(command) == 0 ? 0 : -1;
}

/* ------------------------------------------------------------ endpoints */

static void test_embed_equals_library(void **state) {
    (void)state;
    size_t dim = glimpse_model_embedding_dim(clip);
    float expected[1024];
    for (size_t p = 0; p < PICTURE_COUNT; p++) {
        reference_image_embedding(p, expected);
        response r = exchange("POST", "/v1/embed", "image/png", pictures[p], picture_sizes[p]);
        cJSON *json = expect_json(&r, 200);
        assert_string_equal(cJSON_GetObjectItem(json, "model")->valuestring, "demo-clip");
        assert_floats_equal(cJSON_GetObjectItem(json, "embedding"), expected, dim);
        cJSON_Delete(json), response_free(&r);
    }
    /* the same image as a multipart part */
    reference_image_embedding(3, expected);
    form f = {0};
    form_add(&f, "image", "3.png", pictures[3], picture_sizes[3]);
    form_end(&f);
    response r = post_form("/v1/embed?model=demo-clip", &f);
    cJSON *json = expect_json(&r, 200);
    assert_floats_equal(cJSON_GetObjectItem(json, "embedding"), expected, dim);
    cJSON_Delete(json), response_free(&r), free(f.bytes);
    /* a text */
    const char *text = "a yellow triangle above a red triangle";
    assert_int_equal(glimpse_embed_texts(clip_ctx, &text, 1, expected), 0);
    const char *body = "{\"text\": \"a yellow triangle above a red triangle\"}";
    r = exchange("POST", "/v1/embed", "application/json", body, strlen(body));
    json = expect_json(&r, 200);
    assert_floats_equal(cJSON_GetObjectItem(json, "embedding"), expected, dim);
    cJSON_Delete(json), response_free(&r);
}

typedef struct concurrent_client {
    size_t picture;
    int rounds;
    int failures;
    double largest_difference; /* from the embedding of the image alone */
} concurrent_client;

/* A batched embedding may differ from the image's alone in the last bits (the
 * kernels block rows by the batch's size, as glimpse embed's batches of 8 do):
 * within the parity tests' tolerance, and exactly equal when alone (above). */
#define BATCH_TOLERANCE 1e-5

static void *embed_repeatedly(void *argument) {
    concurrent_client *client = argument;
    float expected[1024];
    size_t dim = glimpse_model_embedding_dim(clip);
    /* computed before the requests, on this client's own context, so that the clients overlap at the server */
    glimpse_context *ctx;
    glimpse_context_params params = glimpse_context_default_params();
    params.threads = 2;
    glimpse_image *image;
    if (glimpse_context_create(clip, &params, &ctx) ||
        glimpse_image_load_memory(pictures[client->picture], picture_sizes[client->picture], NULL, &image) ||
        glimpse_embed_images(ctx, &image, 1, expected)) {
        client->failures++;
        return NULL;
    }
    glimpse_image_free(image);
    glimpse_context_free(ctx);
    for (int round = 0; round < client->rounds; round++) {
        response r = exchange("POST", "/v1/embed", "image/png", pictures[client->picture], picture_sizes[client->picture]);
        cJSON *json = r.status == 200 ? cJSON_Parse(r.body) : NULL;
        const cJSON *embedding = cJSON_GetObjectItem(json, "embedding");
        bool same = cJSON_GetArraySize(embedding) == (int)dim;
        for (size_t i = 0; same && i < dim; i++) {
            double difference = fabs(cJSON_GetArrayItem(embedding, (int)i)->valuedouble - expected[i]);
            if (difference > client->largest_difference) client->largest_difference = difference;
            same = difference <= BATCH_TOLERANCE;
        }
        if (!same) {
            fprintf(stderr, "client %zu round %d: %d %.200s\n", client->picture, round, r.status, r.body);
            client->failures++;
        }
        cJSON_Delete(json), response_free(&r);
    }
    return NULL;
}

/* 8 clients at once: whatever batches the server makes of them, each gets
 * exactly the embedding of its image alone. */
static void test_concurrent_embeddings_equal_alone(void **state) {
    (void)state;
    enum { CLIENTS = 8 };
    pthread_t threads[CLIENTS];
    concurrent_client clients[CLIENTS];
    for (int c = 0; c < CLIENTS; c++) {
        clients[c] = (concurrent_client){.picture = (size_t)c % PICTURE_COUNT, .rounds = 6};
        pthread_create(&threads[c], NULL, embed_repeatedly, &clients[c]);
    }
    int failures = 0;
    double largest = 0;
    for (int c = 0; c < CLIENTS; c++) {
        pthread_join(threads[c], NULL);
        failures += clients[c].failures;
        if (clients[c].largest_difference > largest) largest = clients[c].largest_difference;
    }
    fprintf(stderr, "8 clients: largest difference from an image embedded alone %.2g\n", largest);
    assert_int_equal(failures, 0);
    response r = exchange("GET", "/metrics", NULL, NULL, 0);
    assert_int_equal(r.status, 200);
    const char *count = strstr(r.body, "glimpse_batch_size_count ");
    const char *le1 = strstr(r.body, "glimpse_batch_size_bucket{le=\"1\"} ");
    assert_non_null(count), assert_non_null(le1);
    fprintf(stderr, "batches: %lld, of which one image: %lld\n", atoll(count + 25), atoll(le1 + 34));
    response_free(&r);
}

static void test_rank_equals_library(void **state) {
    (void)state;
    const char *texts[] = {"a green square", "a yellow triangle", "a red square"};
    glimpse_image *images[] = {decode(1), decode(2)};
    float image_embeddings[2 * 1024], text_embeddings[3 * 1024], logits[6];
    assert_int_equal(glimpse_embed_images(clip_ctx, images, 2, image_embeddings), 0);
    assert_int_equal(glimpse_embed_texts(clip_ctx, texts, 3, text_embeddings), 0);
    assert_int_equal(glimpse_score(clip, image_embeddings, 2, text_embeddings, 3, logits), 0);
    form f = {0};
    form_add(&f, "image", "1.png", pictures[1], picture_sizes[1]);
    form_add(&f, "image", "2.png", pictures[2], picture_sizes[2]);
    for (int t = 0; t < 3; t++) form_text(&f, "text", texts[t]);
    form_end(&f);
    response r = post_form("/v1/rank", &f);
    cJSON *json = expect_json(&r, 200);
    const cJSON *scores = cJSON_GetObjectItem(json, "scores");
    assert_int_equal(cJSON_GetArraySize(scores), 2);
    for (int i = 0; i < 2; i++) assert_floats_equal(cJSON_GetArrayItem(scores, i), logits + i * 3, 3);
    /* the ranking of "a yellow triangle": picture 2 first */
    const cJSON *ranking = cJSON_GetArrayItem(cJSON_GetObjectItem(json, "rankings"), 1);
    assert_string_equal(cJSON_GetObjectItem(ranking, "text")->valuestring, "a yellow triangle");
    const cJSON *first = cJSON_GetArrayItem(cJSON_GetObjectItem(ranking, "results"), 0);
    assert_int_equal(cJSON_GetObjectItem(first, "image")->valueint, logits[1] > logits[4] ? 0 : 1);
    cJSON_Delete(json), response_free(&r), free(f.bytes);
    glimpse_image_free(images[0]), glimpse_image_free(images[1]);
}

/* BLIP retrieval (the blip-itm-tiny fixture): ITM probabilities and ITC cosines as glimpse_match's. */
static void test_rank_blip_retrieval(void **state) {
    (void)state;
    if (!matcher) skip();
    const char *texts[] = {"a green square", "a yellow triangle"};
    glimpse_image *images[] = {decode(1), decode(2)};
    form f = {0};
    form_add(&f, "image", "1.png", pictures[1], picture_sizes[1]);
    form_add(&f, "image", "2.png", pictures[2], picture_sizes[2]);
    for (int t = 0; t < 2; t++) form_text(&f, "text", texts[t]);
    form_end(&f);
    for (int mode = 0; mode < 2; mode++) {
        float expected[4];
        assert_int_equal(glimpse_match(match_ctx, images, 2, texts, 2, mode ? GLIMPSE_MATCH_MODE_ITC : GLIMPSE_MATCH_MODE_ITM,
                                       expected), 0);
        response r = post_form(mode ? "/v1/rank?model=blip-itm-tiny&mode=itc" : "/v1/rank?model=blip-itm-tiny", &f);
        cJSON *json = expect_json(&r, 200);
        const cJSON *scores = cJSON_GetObjectItem(json, "scores");
        for (int i = 0; i < 2; i++) assert_floats_equal(cJSON_GetArrayItem(scores, i), expected + i * 2, 2);
        cJSON_Delete(json), response_free(&r);
    }
    free(f.bytes);
    glimpse_image_free(images[0]), glimpse_image_free(images[1]);
}

/* One caption through the server (options in the query string) against the library's. */
static void check_caption(size_t picture, const char *query, const glimpse_caption_params *params) {
    glimpse_image *image = decode(picture);
    glimpse_caption expected;
    assert_int_equal(glimpse_caption_images(caption_ctx, &image, 1, params, &expected), 0);
    glimpse_image_free(image);
    char path[256];
    snprintf(path, sizeof path, "/v1/caption%s", query);
    response r = exchange("POST", path, "image/png", pictures[picture], picture_sizes[picture]);
    cJSON *json = expect_json(&r, 200);
    assert_string_equal(cJSON_GetObjectItem(json, "caption")->valuestring, expected.text);
    const cJSON *ids = cJSON_GetObjectItem(json, "ids");
    assert_int_equal((size_t)cJSON_GetArraySize(ids), expected.id_count);
    for (size_t i = 0; i < expected.id_count; i++) assert_int_equal(cJSON_GetArrayItem(ids, (int)i)->valueint, expected.ids[i]);
    fprintf(stderr, "caption of %05zu.png%s: %s\n", picture, query, expected.text);
    glimpse_caption_free(&expected);
    cJSON_Delete(json), response_free(&r);
}

static void test_caption_equals_library(void **state) {
    (void)state;
    check_caption(0, "", NULL);
    glimpse_caption_params params = glimpse_caption_default_params();
    params.prompt = "a yellow";
    params.beams = 1;
    params.max_tokens = 6;
    check_caption(3, "?prompt=a+yellow&beams=1&max_tokens=6", &params);
    params = glimpse_caption_default_params();
    params.sample = true;
    params.seed = 7;
    params.top_k = 5;
    check_caption(5, "?sample=true&seed=7&top_k=5", &params);
}

/* /v1/ask with BLIP-2 (the blip2-opt-tiny fixture): the answer and ids glimpse_ask_images gives; a model that
 * cannot answer is refused. */
static void test_ask_equals_library(void **state) {
    (void)state;
    if (!asker) {
        fprintf(stderr, "skipped: no blip2-opt-tiny fixture\n");
        return;
    }
    const char *question = "what colour is the shape?";
    glimpse_image *image = decode(2);
    glimpse_caption expected;
    assert_int_equal(glimpse_ask_images(ask_ctx, &image, 1, question, NULL, &expected), 0);
    glimpse_image_free(image);
    response r = exchange("POST", "/v1/ask?model=blip2-opt-tiny&question=what+colour+is+the+shape%3F", "image/png",
                          pictures[2], picture_sizes[2]);
    cJSON *json = expect_json(&r, 200);
    assert_string_equal(cJSON_GetObjectItem(json, "question")->valuestring, question);
    assert_string_equal(cJSON_GetObjectItem(json, "answer")->valuestring, expected.text);
    const cJSON *ids = cJSON_GetObjectItem(json, "ids");
    assert_int_equal((size_t)cJSON_GetArraySize(ids), expected.id_count);
    for (size_t i = 0; i < expected.id_count; i++) assert_int_equal(cJSON_GetArrayItem(ids, (int)i)->valueint, expected.ids[i]);
    glimpse_caption_free(&expected);
    cJSON_Delete(json), response_free(&r);
    r = exchange("POST", "/v1/ask?model=demo-blip-caption&question=why", "image/png", pictures[2], picture_sizes[2]);
    assert_true(r.status >= 400 && r.status < 600);
    response_free(&r);
}

/* /v1/task with Florence-2 (the florence2-tiny fixture): what glimpse_run_task gives, ids and result. */
static void test_task_equals_library(void **state) {
    (void)state;
    if (!tasker) {
        fprintf(stderr, "skipped: no florence2-tiny fixture\n");
        return;
    }
    glimpse_image *image = decode(1);
    glimpse_caption_params p = glimpse_caption_default_params();
    p.max_tokens = 20, p.beams = 1;
    float region[4] = {2, 3, 40, 50};
    char tokens[64];
    assert_int_equal(glimpse_task_region(glimpse_image_width(image), glimpse_image_height(image), region, tokens, 64), 0);
    glimpse_task_result expected;
    assert_int_equal(glimpse_run_task(task_ctx, &image, 1, "<REGION_TO_DESCRIPTION>", tokens, &p, &expected), 0);
    glimpse_image_free(image);
    response r = exchange("POST", "/v1/task?task=%3CREGION_TO_DESCRIPTION%3E&region=2,3,40,50&max_tokens=20&beams=1",
                          "image/png", pictures[1], picture_sizes[1]);
    cJSON *json = expect_json(&r, 200), *result = cJSON_Parse(expected.json);
    assert_string_equal(cJSON_GetObjectItem(json, "model")->valuestring, "florence2-tiny");
    assert_string_equal(cJSON_GetObjectItem(json, "text")->valuestring, expected.text);
    const cJSON *ids = cJSON_GetObjectItem(json, "ids");
    assert_int_equal((size_t)cJSON_GetArraySize(ids), expected.id_count);
    for (size_t i = 0; i < expected.id_count; i++) assert_int_equal(cJSON_GetArrayItem(ids, (int)i)->valueint, expected.ids[i]);
    assert_true(cJSON_Compare(cJSON_GetObjectItem(json, "result"), result, true));
    cJSON_Delete(result), cJSON_Delete(json), response_free(&r);
    glimpse_task_result_free(&expected);
    /* /v1/ocr and /v1/detect pick the task as glimpse ocr and detect do */
    static const struct {
        const char *path, *task, *input;
    } named[] = {{"/v1/ocr?regions=true&max_tokens=20&beams=1", "<OCR_WITH_REGION>", NULL},
                 {"/v1/detect?q=a+cat&max_tokens=20&beams=1", "<CAPTION_TO_PHRASE_GROUNDING>", "a cat"},
                 {"/v1/detect?dense=1&max_tokens=20&beams=1", "<DENSE_REGION_CAPTION>", NULL}};
    for (size_t i = 0; i < sizeof named / sizeof named[0]; i++) {
        image = decode(1);
        assert_int_equal(glimpse_run_task(task_ctx, &image, 1, named[i].task, named[i].input, &p, &expected), 0);
        glimpse_image_free(image);
        r = exchange("POST", named[i].path, "image/png", pictures[1], picture_sizes[1]);
        json = expect_json(&r, 200);
        assert_string_equal(cJSON_GetObjectItem(json, "task")->valuestring, named[i].task);
        assert_string_equal(cJSON_GetObjectItem(json, "text")->valuestring, expected.text);
        cJSON_Delete(json), response_free(&r);
        glimpse_task_result_free(&expected);
    }
    /* /v1/caption's detail picks the caption task as glimpse caption --detail does */
    image = decode(1);
    assert_int_equal(glimpse_run_task(task_ctx, &image, 1, "<DETAILED_CAPTION>", NULL, &p, &expected), 0);
    glimpse_image_free(image);
    r = exchange("POST", "/v1/caption?detail=2&max_tokens=20&beams=1", "image/png", pictures[1], picture_sizes[1]);
    json = expect_json(&r, 200);
    assert_string_equal(cJSON_GetObjectItem(json, "caption")->valuestring, expected.answer);
    cJSON_Delete(json), response_free(&r);
    glimpse_task_result_free(&expected);
}

static void check_search_results(const cJSON *json, const glimpse_search_result *expected, size_t found) {
    const cJSON *results = cJSON_GetObjectItem(json, "results");
    assert_int_equal((size_t)cJSON_GetArraySize(results), found);
    for (size_t r = 0; r < found; r++) {
        const cJSON *result = cJSON_GetArrayItem(results, (int)r);
        assert_string_equal(cJSON_GetObjectItem(result, "path")->valuestring, expected[r].path);
        assert_true((float)cJSON_GetObjectItem(result, "score")->valuedouble == expected[r].score);
    }
}

static void test_search_equals_library(void **state) {
    (void)state;
    glimpse_index *index;
    assert_int_equal(glimpse_index_open(index_path, NULL, &index), 0);
    float query[1024];
    glimpse_search_result expected[4];
    size_t found;
    assert_int_equal(glimpse_embed_query(clip_ctx, "a yellow triangle + square - red", query), 0);
    assert_int_equal(glimpse_index_search(index, query, 4, expected, &found), 0);
    assert_int_equal(found, 4);
    response r = exchange("GET", "/v1/search?q=a%20yellow%20triangle%20%2B%20square%20-%20red&k=4", NULL, NULL, 0);
    cJSON *json = expect_json(&r, 200);
    check_search_results(json, expected, found);
    cJSON_Delete(json), response_free(&r);
    /* an image query */
    reference_image_embedding(4, query);
    assert_int_equal(glimpse_index_search(index, query, 3, expected, &found), 0);
    r = exchange("POST", "/v1/search?k=3", "image/png", pictures[4], picture_sizes[4]);
    json = expect_json(&r, 200);
    check_search_results(json, expected, found);
    cJSON_Delete(json), response_free(&r);
    /* words alone need an index that read them: this one did not, and the answer says how to build one */
    r = exchange("GET", "/v1/search?text_in=stop&k=3", NULL, NULL, 0);
    json = expect_json(&r, 400);
    const char *error = cJSON_GetStringValue(cJSON_GetObjectItem(json, "error"));
    assert_non_null(error);
    assert_non_null(strstr(error, "--ocr"));
    cJSON_Delete(json), response_free(&r);
    glimpse_index_free(index);
}

/* Every JSON answer is valid UTF-8, as the CLI's: a stored file name that is not UTF-8 goes out with U+FFFD
 * for its stray bytes and its raw bytes in "path_bytes", and a query of stray bytes is echoed repaired. */
static void test_search_answers_are_utf8(void **state) {
    (void)state;
    char library[600], latin1[700], plain[700], db[700];
    snprintf(library, sizeof library, "%s/latin1", folder);
    assert_int_equal(mkdir(library, 0700), 0);
    snprintf(latin1, sizeof latin1, "%s/caf\xe9.png", library); /* "café" in Latin-1: not UTF-8 */
    snprintf(plain, sizeof plain, "%s/plain.png", library);
    snprintf(db, sizeof db, "%s/latin1.db", folder);
    FILE *out = fopen(latin1, "wb");
    assert_non_null(out);
    assert_int_equal(fwrite(pictures[0], 1, picture_sizes[0], out), picture_sizes[0]);
    fclose(out);
    out = fopen(plain, "wb");
    assert_non_null(out);
    assert_int_equal(fwrite(pictures[1], 1, picture_sizes[1], out), picture_sizes[1]);
    fclose(out);
    const char *index_argv[] = {"glimpse", "index", "-m", CLIP_MODEL, "--db", db, library, NULL};
    assert_int_equal(run_glimpse(index_argv, NULL), 0);
    server_process other = {0};
    const char *arguments[] = {"-m", CLIP_MODEL, "--db", db, NULL};
    assert_true(start_server(&other, arguments));
    response r = exchange_on(other.port, "GET", "/v1/search?q=a%20red%20circle&k=2", NULL, NULL, 0, NULL);
    assert_true(json_utf8_valid(r.body));
    cJSON *json = expect_json(&r, 200);
    const cJSON *results = cJSON_GetObjectItem(json, "results");
    assert_int_equal(cJSON_GetArraySize(results), 2);
    int repaired = 0;
    for (int i = 0; i < 2; i++) {
        const cJSON *result = cJSON_GetArrayItem(results, i);
        const char *path = cJSON_GetObjectItem(result, "path")->valuestring;
        const cJSON *bytes = cJSON_GetObjectItem(result, "path_bytes");
        if (strcmp(path, plain) == 0) {
            assert_null(bytes);
            continue;
        }
        repaired++;
        assert_non_null(strstr(path, "/caf\xef\xbf\xbd.png")); /* U+FFFD for the stray byte */
        assert_int_equal((size_t)cJSON_GetArraySize(bytes), strlen(latin1));
        for (size_t b = 0; b < strlen(latin1); b++)
            assert_int_equal(cJSON_GetArrayItem(bytes, (int)b)->valueint, (unsigned char)latin1[b]);
    }
    assert_int_equal(repaired, 1);
    cJSON_Delete(json), response_free(&r);
    r = exchange_on(other.port, "GET", "/v1/search?q=%ff%fe&k=1", NULL, NULL, 0, NULL);
    assert_true(json_utf8_valid(r.body));
    json = expect_json(&r, 200);
    assert_string_equal(cJSON_GetObjectItem(json, "query")->valuestring, "\xef\xbf\xbd\xef\xbf\xbd");
    cJSON_Delete(json), response_free(&r);
    r = exchange_on(other.port, "GET", "/v1/search?q=%40caf%e9.png", NULL, NULL, 0, NULL); /* refused, named */
    assert_true(json_utf8_valid(r.body));
    json = expect_json(&r, 400);
    cJSON_Delete(json), response_free(&r);
    assert_int_equal(stop_server(&other), 0);
}

/* immich's machine-learning protocol: the embedding as a JSON string under "clip". */
static void test_immich_predict(void **state) {
    (void)state;
    size_t dim = glimpse_model_embedding_dim(clip);
    float expected[1024];
    reference_image_embedding(2, expected);
    form f = {0};
    form_text(&f, "entries", "{\"clip\": {\"visual\": {\"modelName\": \"demo-clip\"}}}");
    form_add(&f, "image", "blob", pictures[2], picture_sizes[2]);
    form_end(&f);
    response r = post_form("/predict", &f);
    cJSON *json = expect_json(&r, 200);
    cJSON *embedding = cJSON_Parse(cJSON_GetObjectItem(json, "clip")->valuestring);
    assert_floats_equal(embedding, expected, dim);
    assert_int_equal(cJSON_GetObjectItem(json, "imageHeight")->valueint, 224);
    assert_int_equal(cJSON_GetObjectItem(json, "imageWidth")->valueint, 224);
    cJSON_Delete(embedding), cJSON_Delete(json), response_free(&r), free(f.bytes);
    const char *text = "a red square";
    assert_int_equal(glimpse_embed_texts(clip_ctx, &text, 1, expected), 0);
    f = (form){0};
    form_text(&f, "entries", "{\"clip\": {\"textual\": {\"modelName\": \"demo-clip\", \"options\": {\"language\": \"en\"}}}}");
    form_text(&f, "text", text);
    form_end(&f);
    r = post_form("/predict", &f);
    json = expect_json(&r, 200);
    embedding = cJSON_Parse(cJSON_GetObjectItem(json, "clip")->valuestring);
    assert_floats_equal(embedding, expected, dim);
    assert_null(cJSON_GetObjectItem(json, "imageHeight"));
    cJSON_Delete(embedding), cJSON_Delete(json), response_free(&r), free(f.bytes);
    r = exchange("GET", "/ping", NULL, NULL, 0);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "pong");
    response_free(&r);
}

/* ---------------------------------------------------------- /v1/explain */

/* A served grid ([[row] per row]) equals the library's map exactly. */
static void assert_grid_equal(const cJSON *grid, const glimpse_explanation *e, const float *expected) {
    assert_int_equal(cJSON_GetArraySize(grid), e->grid_height);
    for (int row = 0; row < e->grid_height; row++)
        assert_floats_equal(cJSON_GetArrayItem(grid, row), expected + (size_t)row * (size_t)e->grid_width,
                            (size_t)e->grid_width);
}

/* The served maps ("maps" of kind name, or "words" in order) equal the library's of that kind. */
static void assert_maps_equal(const cJSON *json, const glimpse_explanation *e) {
    const cJSON *size = cJSON_GetObjectItem(json, "grid_size");
    assert_int_equal(cJSON_GetArrayItem(size, 0)->valueint, e->grid_height);
    assert_int_equal(cJSON_GetArrayItem(size, 1)->valueint, e->grid_width);
    const cJSON *words = cJSON_GetObjectItem(json, "words"), *maps = cJSON_GetObjectItem(json, "maps");
    int word = 0, other = 0;
    for (size_t m = 0; m < e->map_count; m++) {
        const glimpse_explain_map *map = &e->maps[m];
        if (map->kind == GLIMPSE_EXPLAIN_MAP_CROSS_ATTENTION && strcmp(map->label, "[text]") != 0) {
            const cJSON *served = cJSON_GetArrayItem(words, word++);
            assert_string_equal(cJSON_GetObjectItem(served, "word")->valuestring, map->label);
            assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(served, "tokens")), map->token_count);
            assert_grid_equal(cJSON_GetObjectItem(served, "grid"), e, map->grid);
            const cJSON *queries = cJSON_GetObjectItem(served, "queries"); /* BLIP-2's words */
            assert_int_equal(queries ? cJSON_GetArraySize(queries) : 0, map->query_count);
            if (map->queries) assert_floats_equal(queries, map->queries, map->query_count);
        } else {
            assert_grid_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(maps, other++), "grid"), e, map->grid);
        }
    }
    assert_int_equal(cJSON_GetArraySize(words), word);
    assert_int_equal(cJSON_GetArraySize(maps), other);
    assert_true(word + other > 0);
}

static void test_explain_equals_library(void **state) {
    (void)state;
    const char *text = "a red square";
    glimpse_image *image = decode(3);
    glimpse_explain_params params = glimpse_explain_default_params();
    glimpse_explanation *e;
    /* CLIP and a text, as a form, with the contact sheet */
    assert_int_equal(glimpse_explain_clip(clip_ctx, image, text, &params, &e), 0);
    form f = {0};
    form_add(&f, "image", "blob", pictures[3], picture_sizes[3]);
    form_text(&f, "text", text);
    form_text(&f, "png", "1");
    form_end(&f);
    response r = post_form("/v1/explain?model=demo-clip", &f);
    cJSON *json = expect_json(&r, 200);
    assert_string_equal(cJSON_GetObjectItem(json, "model")->valuestring, "demo-clip");
    assert_string_equal(cJSON_GetObjectItem(json, "text")->valuestring, text);
    assert_true((float)cJSON_GetObjectItem(json, "score")->valuedouble == e->score);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(json, "maps")), 2); /* rollout, occlusion */
    assert_maps_equal(json, e);
    void *png;
    size_t png_size;
    assert_int_equal(glimpse_explain_render_png(e, image, GLIMPSE_EXPLAIN_SHEET, 256, NULL, &png, &png_size), 0);
    const char *served_png = cJSON_GetObjectItem(json, "png")->valuestring;
    assert_int_equal(strlen(served_png), (png_size + 2) / 3 * 4);
    assert_int_equal(strncmp(served_png, "iVBORw0KGgo", 11), 0); /* the PNG signature */
    free(png), glimpse_explanation_free(e), cJSON_Delete(json), response_free(&r), free(f.bytes);
    /* one layer and head, no occlusion, no text: the image as the body, options in the query */
    params.layer = 0, params.head = 1, params.occlusion = false;
    assert_int_equal(glimpse_explain_clip(clip_ctx, image, NULL, &params, &e), 0);
    r = exchange("POST", "/v1/explain?model=demo-clip&layer=0&head=1&occlusion=false", "image/png", pictures[3],
                 picture_sizes[3]);
    json = expect_json(&r, 200);
    assert_null(cJSON_GetObjectItem(json, "png"));
    assert_null(cJSON_GetObjectItem(json, "text"));
    assert_maps_equal(json, e);
    glimpse_explanation_free(e), cJSON_Delete(json), response_free(&r);
    /* the captioner: its caption, ids and a map per word */
    params = glimpse_explain_default_params();
    assert_int_equal(glimpse_explain_caption(caption_ctx, image, NULL, &params, &e), 0);
    r = exchange("POST", "/v1/explain?model=demo-blip-caption", "image/png", pictures[3], picture_sizes[3]);
    json = expect_json(&r, 200);
    assert_string_equal(cJSON_GetObjectItem(json, "caption")->valuestring, e->text);
    const cJSON *ids = cJSON_GetObjectItem(json, "ids");
    assert_int_equal(cJSON_GetArraySize(ids), e->id_count);
    for (size_t i = 0; i < e->id_count; i++) assert_int_equal(cJSON_GetArrayItem(ids, (int)i)->valueint, e->ids[i]);
    assert_maps_equal(json, e);
    glimpse_explanation_free(e), cJSON_Delete(json), response_free(&r);
    if (matcher) { /* BLIP ITM (the fixture): the match probability, a map per word and the whole text's */
        assert_int_equal(glimpse_explain_match(match_ctx, image, text, &params, &e), 0);
        f = (form){0};
        form_add(&f, "image", "blob", pictures[3], picture_sizes[3]);
        form_text(&f, "text", text);
        form_end(&f);
        r = post_form("/v1/explain?model=blip-itm-tiny", &f);
        json = expect_json(&r, 200);
        assert_true((float)cJSON_GetObjectItem(json, "probability")->valuedouble == e->score);
        assert_maps_equal(json, e);
        glimpse_explanation_free(e), cJSON_Delete(json), response_free(&r), free(f.bytes);
        r = exchange("POST", "/v1/explain?model=blip-itm-tiny", "image/png", pictures[3], picture_sizes[3]);
        json = expect_json(&r, 400); /* a match needs its text */
        cJSON_Delete(json), response_free(&r);
    }
    if (asker) { /* BLIP-2 (the fixture): an answer's words, each with its weights on the query tokens */
        const char *question = "what colour is the shape?";
        assert_int_equal(glimpse_explain_answer(ask_ctx, image, question, NULL, &params, &e), 0);
        r = exchange("POST", "/v1/explain?model=blip2-opt-tiny&question=what+colour+is+the+shape%3F", "image/png",
                     pictures[3], picture_sizes[3]);
        json = expect_json(&r, 200);
        assert_string_equal(cJSON_GetObjectItem(json, "question")->valuestring, question);
        const char *answer = cJSON_GetObjectItem(json, "answer")->valuestring;
        assert_non_null(strstr(e->text, answer)); /* without the whitespace around it */
        assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(json, "ids")), e->id_count);
        assert_maps_equal(json, e);
        glimpse_explanation_free(e), cJSON_Delete(json), response_free(&r);
        assert_int_equal(glimpse_explain_caption(ask_ctx, image, NULL, &params, &e), 0);
        r = exchange("POST", "/v1/explain?model=blip2-opt-tiny", "image/png", pictures[3], picture_sizes[3]);
        json = expect_json(&r, 200);
        assert_string_equal(cJSON_GetObjectItem(json, "caption")->valuestring, e->text);
        assert_maps_equal(json, e);
        glimpse_explanation_free(e), cJSON_Delete(json), response_free(&r);
    }
    glimpse_image_free(image);
    /* bad requests: 4xx with a message */
    static const struct {
        const char *path;
        int status;
    } bad[] = {{"/v1/explain?model=demo-blip-caption&text=a", 400}, {"/v1/explain?model=nothing", 404},
               {"/v1/explain?model=demo-blip-caption&question=why", 400},
               {"/v1/explain?layer=abc", 400}, {"/v1/explain?layer=64", 400}, {"/v1/explain?head=-2", 400},
               {"/v1/explain?occlusion=maybe", 400}, {"/v1/explain?png=2", 400}, {"/v1/explain?panel=1", 400},
               {"/v1/explain?model=demo-blip-caption&beams=0", 400}};
    for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
        r = exchange("POST", bad[b].path, "image/png", pictures[0], picture_sizes[0]);
        json = expect_json(&r, bad[b].status);
        assert_true(cJSON_IsString(cJSON_GetObjectItem(json, "error")));
        cJSON_Delete(json), response_free(&r);
    }
    r = exchange("POST", "/v1/explain", "image/png", "not a picture", 13);
    json = expect_json(&r, 400);
    cJSON_Delete(json), response_free(&r);
    r = exchange("POST", "/v1/explain", NULL, NULL, 0);
    json = expect_json(&r, 400);
    cJSON_Delete(json), response_free(&r);
}

static void test_service_endpoints(void **state) {
    (void)state;
    response r = exchange("GET", "/health", NULL, NULL, 0);
    cJSON *json = expect_json(&r, 200);
    assert_string_equal(cJSON_GetObjectItem(json, "status")->valuestring, "ok");
    cJSON_Delete(json), response_free(&r);
    r = exchange("GET", "/v1/models", NULL, NULL, 0);
    json = expect_json(&r, 200);
    const cJSON *models = cJSON_GetObjectItem(json, "models");
    assert_int_equal(cJSON_GetArraySize(models), 2 + (matcher != NULL) + (asker != NULL) + (tasker != NULL));
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(models, 0), "name")->valuestring, "demo-clip");
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(models, 0), "architecture")->valuestring, "CLIPModel");
    assert_int_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(models, 0), "embedding_dim")->valueint,
                     (int)glimpse_model_embedding_dim(clip));
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(models, 1), "name")->valuestring, "demo-blip-caption");
    cJSON_Delete(json), response_free(&r);
    r = exchange("POST", "/v1/ask", "image/png", pictures[0], picture_sizes[0]); /* no question: a clear 400 */
    json = expect_json(&r, 400);
    assert_non_null(strstr(cJSON_GetObjectItem(json, "error")->valuestring, "needs a question"));
    cJSON_Delete(json), response_free(&r);
    /* /v1/task: the task named, the region four numbers, and a model that runs tasks */
    static const struct {
        const char *path;
        int status;
        const char *error;
    } tasks[] = {{"/v1/task", 400, "needs a task"},
                 {"/v1/task?task=%3COD%3E&region=1,2,3", 400, "four numbers"},
                 {"/v1/task?task=%3COD%3E&region=1,2,3,4&text=x", 400, "not both"},
                 {"/v1/task?task=%3COD%3E&model=demo-clip", 400, "cannot run tasks"},
                 {"/v1/caption?detail=4", 400, "1, 2 or 3"},
                 {"/v1/caption?detail=2&model=demo-blip-caption", 400, "cannot run tasks"},
                 {"/v1/task?task=%3COD%3E", 501, "run tasks"}};
    for (size_t i = 0; i < sizeof tasks / sizeof tasks[0] - (tasker != NULL); i++) { /* 501: no task model */
        r = exchange("POST", tasks[i].path, "image/png", pictures[0], picture_sizes[0]);
        json = expect_json(&r, tasks[i].status);
        const char *error = cJSON_GetStringValue(cJSON_GetObjectItem(json, "error"));
        if (!error || !strstr(error, tasks[i].error)) fail_msg("%s: %s", tasks[i].path, error ? error : "no error");
        cJSON_Delete(json), response_free(&r);
    }
    r = exchange("GET", "/metrics", NULL, NULL, 0);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.text, "Content-Type: text/plain; version=0.0.4"));
    for (const char *const *name = (const char *const[]){"glimpse_requests_total{route=\"embed\",code=\"200\"}",
                                                         "glimpse_request_duration_seconds_bucket{route=\"embed\",le=",
                                                         "glimpse_request_errors_total{route=\"ask\"} 1",
                                                         "glimpse_batch_size_count", "glimpse_queue_depth 0",
                                                         "glimpse_requests_in_flight 1", NULL};
         *name; name++)
        if (!strstr(r.body, *name)) fail_msg("/metrics lacks %s:\n%s", *name, r.body);
    response_free(&r);
}

/* An API key is asked of every request but /health; a bind beyond loopback without one is refused. */
static void test_api_key(void **state) {
    (void)state;
    char key_path[256];
    snprintf(key_path, sizeof key_path, "%s/key", folder);
    FILE *key = fopen(key_path, "w");
    fputs("correct-horse-battery-staple\n", key);
    fclose(key);
    chmod(key_path, 0600);
    server_process keyed;
    const char *arguments[] = {"-m", CLIP_MODEL, "--api-key-file", key_path, "--threads", "1", NULL};
    assert_true(start_server(&keyed, arguments));
    const char *body = "{\"text\": \"a red circle\"}";
    const char *headers[] = {NULL, "Authorization: Bearer wrong-horse-battery-staple\r\n",
                             "Authorization: Bearer correct-horse-battery-stapl\r\n",
                             "Authorization: Bearer correct-horse-battery-staple\r\n",
                             "X-API-Key: correct-horse-battery-staple\r\n"};
    const int expected[] = {401, 401, 401, 200, 200};
    for (int i = 0; i < 5; i++) {
        response r = exchange_on(keyed.port, "POST", "/v1/embed", "application/json", body, strlen(body), headers[i]);
        if (r.status != expected[i]) fail_msg("key case %d: %d %s", i, r.status, r.text);
        /* a missing key and a wrong one are told apart (issue 35) */
        if (r.status == 401) assert_non_null(strstr(r.body, i ? "is not this server's" : "is required"));
        response_free(&r);
    }
    /* /predict is keyed too, unless --open-predict: immich's client sends no key */
    const char *predict = "{\"entries\": {}}";
    response p = exchange_on(keyed.port, "POST", "/predict", "application/json", predict, strlen(predict), NULL);
    assert_int_equal(p.status, 401);
    response_free(&p);
    server_process open_predict;
    const char *open_arguments[] = {"-m", CLIP_MODEL, "--api-key-file", key_path, "--open-predict", "--threads", "1",
                                    NULL};
    assert_true(start_server(&open_predict, open_arguments));
    p = exchange_on(open_predict.port, "POST", "/predict", "application/json", predict, strlen(predict), NULL);
    if (p.status == 401 || p.status < 400) fail_msg("/predict with --open-predict: %d %s", p.status, p.text);
    response_free(&p);
    p = exchange_on(open_predict.port, "POST", "/v1/embed", "application/json", body, strlen(body), NULL);
    assert_int_equal(p.status, 401);
    response_free(&p);
    assert_int_equal(stop_server(&open_predict), 0);
    response r = exchange_on(keyed.port, "GET", "/health", NULL, NULL, 0, NULL);
    assert_int_equal(r.status, 200);
    response_free(&r);
    assert_int_equal(stop_server(&keyed), 0);
    char log[256];
    snprintf(log, sizeof log, "%s/refused.log", folder);
    const char *open_argv[] = {"glimpse", "serve", "-m", CLIP_MODEL, "--host", "0.0.0.0", NULL};
    assert_int_not_equal(run_glimpse(open_argv, log), 0);
    uint8_t *text;
    size_t size;
    assert_int_equal(file_read_all(log, 1 << 20, &text, &size), 0);
    assert_non_null(strstr((char *)text, "needs an API key"));
    free(text);
}

/* ---------------------------------------------------------------- faults */

static void assert_serving(void) {
    response r = exchange("GET", "/health", NULL, NULL, 0);
    if (r.status != 200) fail_msg("the server stopped serving: %d %s", r.status, r.text);
    response_free(&r);
}

/* Whether the server has closed fd (recv sees the end, or an error). */
static bool closed_by_server(int fd) {
    char byte;
    return recv(fd, &byte, 1, 0) <= 0;
}

static void test_faulty_clients(void **state) {
    (void)state;
    double started = now_seconds();
    /* disconnect mid-body */
    int fd = connect_to(server.port);
    const char *head = "POST /v1/embed HTTP/1.1\r\nHost: x\r\nContent-Type: image/png\r\nContent-Length: 5000\r\n\r\n";
    send_all(fd, head, strlen(head));
    send_all(fd, pictures[0], 100);
    close(fd);
    assert_serving();
    /* 100 MB announced: 413 at once, without the body being read */
    fd = connect_to(server.port);
    head = "POST /v1/embed HTTP/1.1\r\nHost: x\r\nContent-Type: image/png\r\nContent-Length: 104857600\r\n\r\n";
    send_all(fd, head, strlen(head));
    response r = read_response(fd);
    close(fd);
    assert_int_equal(r.status, 413);
    assert_non_null(strstr(r.body, "\"error\""));
    response_free(&r);
    /* a chunked body (no length) growing past the limit: refused before 100 MB are read */
    fd = connect_to(server.port);
    head = "POST /v1/embed HTTP/1.1\r\nHost: x\r\nContent-Type: image/png\r\nTransfer-Encoding: chunked\r\n\r\n";
    send_all(fd, head, strlen(head));
    static char chunk[1 << 20];
    char chunk_head[32];
    size_t sent = 0;
    for (int i = 0; i < 100; i++) {
        int n = sprintf(chunk_head, "%x\r\n", (unsigned)sizeof chunk);
        if (!send_all(fd, chunk_head, (size_t)n) || !send_all(fd, chunk, sizeof chunk) || !send_all(fd, "\r\n", 2)) break;
        sent += sizeof chunk;
    }
    r = read_response(fd);
    close(fd);
    fprintf(stderr, "chunked body past the limit: %zu MB sent, answer %d\n", sent >> 20, r.status);
    assert_true(sent < 100u << 20);
    assert_true(r.status == 413 || r.status == 0);
    response_free(&r);
    /* half a body, and a connection that sends nothing: the others are served meanwhile, and both are closed */
    int half = connect_to(server.port), idle = connect_to(server.port);
    head = "POST /v1/embed HTTP/1.1\r\nHost: x\r\nContent-Type: image/png\r\nContent-Length: 2000\r\n\r\n";
    send_all(half, head, strlen(head));
    static const char filler[1000];
    send_all(half, filler, sizeof filler);
    struct timeval patience = {.tv_sec = TIMEOUT_SECONDS + 4};
    setsockopt(half, SOL_SOCKET, SO_RCVTIMEO, &patience, sizeof patience);
    setsockopt(idle, SOL_SOCKET, SO_RCVTIMEO, &patience, sizeof patience);
    for (int i = 0; i < 3; i++) test_embed_equals_library(NULL);
    double waited = now_seconds();
    assert_true(closed_by_server(half));
    assert_true(closed_by_server(idle));
    fprintf(stderr, "half-sent and idle connections closed after %.1f s more\n", now_seconds() - waited);
    close(half), close(idle);
    assert_serving();
    fprintf(stderr, "faults took %.1f s\n", now_seconds() - started);
}

/* ------------------------------------------------- malformed requests */

typedef struct corpus {
    char **requests;
    size_t *sizes;
    char **names;
    bool *may_close; /* a request line libmicrohttpd cannot parse: it closes the connection without a status */
    size_t count, capacity;
} corpus;

static void corpus_add(corpus *c, const char *name, char *request, size_t size) {
    if (c->count == c->capacity) {
        c->capacity = c->capacity ? c->capacity * 2 : 256;
        c->requests = realloc(c->requests, c->capacity * sizeof *c->requests);
        c->sizes = realloc(c->sizes, c->capacity * sizeof *c->sizes);
        c->names = realloc(c->names, c->capacity * sizeof *c->names);
        c->may_close = realloc(c->may_close, c->capacity * sizeof *c->may_close);
    }
    c->requests[c->count] = request;
    c->sizes[c->count] = size;
    c->may_close[c->count] = false;
    c->names[c->count++] = strdup(name);
}

static void corpus_raw(corpus *c, const char *name, const char *text) { corpus_add(c, name, strdup(text), strlen(text)); }

static void corpus_request(corpus *c, const char *name, const char *method, const char *path, const char *content_type,
                           const void *body, size_t size) {
    size_t length;
    char *request = build_request(method, path, content_type, body, size, NULL, &length);
    corpus_add(c, name, request, length);
}

static void corpus_json(corpus *c, const char *name, const char *path, const char *json) {
    corpus_request(c, name, "POST", path, "application/json", json, strlen(json));
}

static void corpus_form(corpus *c, const char *name, const char *path, const form *f) {
    corpus_request(c, name, "POST", path, "multipart/form-data; boundary=" BOUNDARY, f->bytes, f->size);
}

/* Request lines and headers libmicrohttpd or the server must refuse. */
static void add_header_cases(corpus *c) {
    /* request lines libmicrohttpd 0.9.75 cannot parse: it closes the connection without a status */
    static const char *const request_lines[] = {"GARBAGE\r\n\r\n", "GET\r\n\r\n", "GET /he alth HTTP/1.1\r\nHost: x\r\n\r\n"};
    for (size_t i = 0; i < sizeof request_lines / sizeof request_lines[0]; i++) {
        char name[32];
        snprintf(name, sizeof name, "request line case %zu", i);
        corpus_raw(c, name, request_lines[i]);
        c->may_close[c->count - 1] = true;
    }
    static const char *const cases[] = {
        "GET /health HTTP/1.1\r\n\r\n", /* HTTP/1.1 without Host */
        "GET /health HTTP/1.1\r\nHost: x\r\nNoColonHere\r\n\r\n",
        "POST /v1/embed HTTP/1.1\r\nHost: x\r\nContent-Type: image/png\r\nContent-Length: abc\r\n\r\n",
        "POST /v1/embed HTTP/1.1\r\nHost: x\r\nContent-Type: image/png\r\nContent-Length: -5\r\n\r\n",
        "POST /v1/embed HTTP/1.1\r\nHost: x\r\nContent-Type: image/png\r\nContent-Length: 99999999999999999999999\r\n\r\n",
        "POST /v1/embed HTTP/1.1\r\nHost: x\r\nContent-Type: image/png\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nab\r\n0\r\n\r\n",
        "POST /v1/embed HTTP/1.1\r\nHost: x\r\nContent-Type: image/png\r\nTransfer-Encoding: chunked\r\n\r\n"
        "fffffffffffffffffffff\r\nab\r\n0\r\n\r\n",
        "GET /health HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n",
        "GET /health HTTP/1.1 extra\r\nHost: x\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char name[32];
        snprintf(name, sizeof name, "header case %zu", i);
        corpus_raw(c, name, cases[i]);
    }
    /* a URL and a header longer than the connection's memory */
    size_t long_size = 70000;
    char *long_request = malloc(long_size + 64);
    int n = sprintf(long_request, "GET /");
    memset(long_request + n, 'a', long_size);
    strcpy(long_request + n + long_size, " HTTP/1.1\r\nHost: x\r\n\r\n");
    corpus_add(c, "a 70 kB URL", long_request, strlen(long_request));
    char *long_header = malloc(long_size + 64);
    n = sprintf(long_header, "GET /health HTTP/1.1\r\nHost: x\r\nX-Long: ");
    memset(long_header + n, 'b', long_size);
    strcpy(long_header + n + long_size, "\r\n\r\n");
    corpus_add(c, "a 70 kB header", long_header, strlen(long_header));
}

static void add_route_cases(corpus *c) {
    static const char *const methods[] = {"PUT", "DELETE", "PATCH", "OPTIONS", "TRACE"};
    static const char *const paths[] = {"/v1/embed", "/v1/rank", "/v1/caption", "/v1/search", "/predict", "/health"};
    for (size_t m = 0; m < sizeof methods / sizeof methods[0]; m++)
        for (size_t p = 0; p < sizeof paths / sizeof paths[0]; p++) {
            char name[64];
            snprintf(name, sizeof name, "%s %s", methods[m], paths[p]);
            corpus_request(c, name, methods[m], paths[p], NULL, NULL, 0);
        }
    static const char *const unknown[] = {"/v2/embed", "/v1/embed/", "/v1/", "/../etc/passwd", "/%2e%2e/etc/passwd",
                                          "/v1/embedding", "/metrics/x", "//v1/embed"};
    for (size_t p = 0; p < sizeof unknown / sizeof unknown[0]; p++) corpus_request(c, unknown[p], "GET", unknown[p], NULL, NULL, 0);
    corpus_request(c, "GET /v1/embed", "GET", "/v1/embed", NULL, NULL, 0);
    corpus_request(c, "GET /predict", "GET", "/predict", NULL, NULL, 0);
}

static void add_media_type_cases(corpus *c) {
    static const char *const types[] = {"text/plain", "application/xml", "multipart/mixed; boundary=x", "video/mp4",
                                        "application/x-tar", "multipart/form-data", "multipart/form-data; charset=utf-8"};
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        char name[96];
        snprintf(name, sizeof name, "embed as %s", types[t]);
        corpus_request(c, name, "POST", "/v1/embed", types[t], "hello", 5);
    }
    corpus_request(c, "embed without a body", "POST", "/v1/embed", NULL, NULL, 0);
    corpus_request(c, "caption without a body", "POST", "/v1/caption", NULL, NULL, 0);
}

static void add_json_cases(corpus *c) {
    /* every proper prefix of a good body (no prefix of a JSON object is JSON) */
    const char *good = "{\"text\": \"a red square\", \"model\": \"demo-clip\"}";
    for (size_t n = 0; n < strlen(good); n++) {
        char name[48], *prefix = strndup(good, n);
        snprintf(name, sizeof name, "JSON prefix of %zu bytes", n);
        corpus_json(c, name, "/v1/embed", prefix);
        free(prefix);
    }
    static const char *const values[] = {"0", "1.5", "-1", "true", "false", "null", "[]", "{}", "[\"a\"]", "{\"a\": 1}", "1e999"};
    for (size_t v = 0; v < sizeof values / sizeof values[0]; v++) {
        char body[128], name[64];
        snprintf(body, sizeof body, "{\"text\": %s}", values[v]);
        snprintf(name, sizeof name, "text %s", values[v]);
        corpus_json(c, name, "/v1/embed", body);
        snprintf(body, sizeof body, "{\"text\": \"a\", \"model\": %s}", values[v]);
        snprintf(name, sizeof name, "model %s", values[v]);
        corpus_json(c, name, "/v1/embed", body);
    }
    static const char *const others[] = {"[\"a red square\"]", "\"a red square\"", "42", "{}", "{\"texts\": [\"a\"]}",
                                         "{\"text\": \"a\", \"model\": \"no-such-model\"}",
                                         "{\"text\": \"a\", \"model\": \"demo-blip-caption\"}", "{\"text\" \"a\"}",
                                         "{'text': 'a'}", "{\"text\": \"a\",}", "\xff\xfe{\"text\": \"a\"}"};
    for (size_t o = 0; o < sizeof others / sizeof others[0]; o++) {
        char name[32];
        snprintf(name, sizeof name, "JSON case %zu", o);
        corpus_json(c, name, "/v1/embed", others[o]);
    }
    size_t depth = 5000;
    char *deep = malloc(2 * depth + 1);
    memset(deep, '[', depth), memset(deep + depth, ']', depth), deep[2 * depth] = '\0';
    corpus_json(c, "arrays nested 5000 deep", "/v1/embed", deep);
    free(deep);
}

static void add_image_cases(corpus *c) {
    /* a picture cut short at 24 points: no decoder may take it */
    for (int cut = 0; cut < 24; cut++) {
        size_t size = picture_sizes[0] * (size_t)cut / 40;
        char name[48];
        snprintf(name, sizeof name, "PNG cut at %zu bytes", size);
        corpus_request(c, name, "POST", "/v1/embed", "image/png", pictures[0], size);
    }
    static const char *const not_images[] = {"hello", "GIF89a", "\xff\xd8\xff", "\x89PNG\r\n\x1a\n", "RIFF\x10\0\0\0WEBP",
                                             "BM\x10\0\0\0", "P6\n99999 99999\n255\n"};
    for (size_t i = 0; i < sizeof not_images / sizeof not_images[0]; i++) {
        char name[48];
        snprintf(name, sizeof name, "not an image %zu", i);
        corpus_request(c, name, "POST", "/v1/embed", "application/octet-stream", not_images[i], strlen(not_images[i]));
        snprintf(name, sizeof name, "caption of not an image %zu", i);
        corpus_request(c, name, "POST", "/v1/caption", "image/jpeg", not_images[i], strlen(not_images[i]));
    }
    /* a PNG whose header claims 100000 x 100000 pixels: over the pixel limit before decoding */
    unsigned char huge[sizeof "\x89PNG\r\n\x1a\n" - 1 + 25];
    memcpy(huge, pictures[0], 33);
    const unsigned char side[4] = {0x00, 0x01, 0x86, 0xa0};
    memcpy(huge + 16, side, 4), memcpy(huge + 20, side, 4);
    corpus_request(c, "PNG of 10^10 pixels", "POST", "/v1/embed", "image/png", huge, sizeof huge);
}

/* A form of text fields (name, value pairs up to a NULL name) posted to path. */
static void corpus_fields(corpus *c, const char *name, const char *path, const char *const *fields) {
    form f = {0};
    for (; fields[0]; fields += 2)
        if (fields[1]) form_text(&f, fields[0], fields[1]);
    form_end(&f);
    corpus_form(c, name, path, &f);
    free(f.bytes);
}

static void add_form_cases(corpus *c) {
    form good = {0};
    form_add(&good, "image", "0.png", pictures[0], picture_sizes[0]);
    form_end(&good);
    /* boundaries mangled: the part cannot be found */
    static const struct {
        const char *from, *to;
    } mangles[] = {{"--" BOUNDARY "\r\nContent-Disposition", "--" BOUNDARY "X\r\nContent-Disposition"},
                   {"name=\"image\"", "name=\"picture\""},
                   {"Content-Disposition: form-data; name=\"image\"; filename=\"0.png\"\r\n", ""},
                   {"--" BOUNDARY "\r\n", "--wrongboundary\r\n"},
                   {"--" BOUNDARY "\r\n", BOUNDARY "\r\n"},
                   {"\r\n\r\n", "\r\n"}};
    for (size_t m = 0; m < sizeof mangles / sizeof mangles[0]; m++) {
        char *at = memmem(good.bytes, good.size, mangles[m].from, strlen(mangles[m].from));
        assert_non_null(at);
        size_t before = (size_t)(at - good.bytes), from = strlen(mangles[m].from), to = strlen(mangles[m].to);
        char *body = malloc(good.size + to);
        memcpy(body, good.bytes, before);
        memcpy(body + before, mangles[m].to, to);
        memcpy(body + before + to, at + from, good.size - before - from);
        char name[48];
        snprintf(name, sizeof name, "multipart mangle %zu", m);
        corpus_request(c, name, "POST", "/v1/embed", "multipart/form-data; boundary=" BOUNDARY, body,
                       good.size - from + to);
        free(body);
    }
    corpus_request(c, "multipart, other boundary in the header", "POST", "/v1/embed",
                   "multipart/form-data; boundary=somethingelse", good.bytes, good.size);
    corpus_request(c, "multipart, empty body", "POST", "/v1/embed", "multipart/form-data; boundary=" BOUNDARY, "", 0);
    free(good.bytes);
    form f = {0};
    form_add(&f, "image", "empty.png", "", 0);
    form_end(&f);
    corpus_form(c, "an empty image part", "/v1/embed", &f);
    free(f.bytes);
    f = (form){0};
    for (int i = 0; i < 70; i++) form_text(&f, "text", "a red square");
    form_end(&f);
    corpus_form(c, "70 parts", "/v1/rank", &f);
    free(f.bytes);
    /* rank without images, without texts, with a broken image, a bad mode */
    corpus_fields(c, "rank without images", "/v1/rank", (const char *const[]){"text", "a red square", NULL});
    f = (form){0};
    form_add(&f, "image", "0.png", pictures[0], picture_sizes[0]);
    form_end(&f);
    corpus_form(c, "rank without texts", "/v1/rank", &f);
    corpus_form(c, "rank with a mode", "/v1/rank?mode=best", &f);
    corpus_form(c, "caption by a CLIP model", "/v1/caption?model=demo-clip", &f);
    corpus_form(c, "embed by a captioner", "/v1/embed?model=demo-blip-caption", &f);
    corpus_form(c, "embed by no model", "/v1/embed?model=nothing", &f);
    free(f.bytes);
    f = (form){0};
    form_add(&f, "image", "x.png", "not a picture", 13);
    form_text(&f, "text", "a red square");
    form_end(&f);
    corpus_form(c, "rank with a broken image", "/v1/rank", &f);
    free(f.bytes);
    corpus_json(c, "rank as JSON", "/v1/rank", "{\"text\": \"a\"}");
}

static void add_predict_cases(corpus *c) {
    static const char *const entries[] = {
        NULL, "", "not json", "[]", "{}", "{\"clip\": {}}", "{\"clip\": []}", "{\"clip\": {\"visual\": {}}}",
        "{\"clip\": {\"visual\": {\"modelName\": 5}}}", "{\"clip\": {\"visual\": {\"modelName\": \"ViT-B-32__openai\"}}}",
        "{\"clip\": {\"visual\": {\"modelName\": \"demo-blip-caption\"}}}",
        "{\"clip\": {\"audio\": {\"modelName\": \"demo-clip\"}}}",
        "{\"facial-recognition\": {\"detection\": {\"modelName\": \"buffalo_l\"}}}",
        "{\"clip\": {\"visual\": {\"modelName\": \"demo-clip\"}}, \"ocr\": {}}",
        "{\"clip\": {\"visual\": {\"modelName\": \"demo-clip\"}, \"textual\": {\"modelName\": \"demo-clip\"}}}",
        "{\"clip\": {\"textual\": {\"modelName\": \"demo-clip\"}}}", /* no text */
        "{\"clip\": {\"visual\": \"demo-clip\"}}"};
    for (size_t e = 0; e < sizeof entries / sizeof entries[0]; e++) {
        char name[48];
        snprintf(name, sizeof name, "predict entries case %zu", e);
        corpus_fields(c, name, "/predict", (const char *const[]){"entries", entries[e], NULL});
    }
    corpus_fields(c, "predict visual without an image", "/predict",
                  (const char *const[]){"entries", "{\"clip\": {\"visual\": {\"modelName\": \"demo-clip\"}}}", "text",
                                        "a red square", NULL});
    corpus_json(c, "predict as JSON", "/predict", "{\"entries\": {}}");
}

static void add_option_cases(corpus *c) {
    static const char *const queries[] = {
        "beams=0", "beams=17", "beams=abc", "beams=", "beams=3x", "max_tokens=0", "max_tokens=501", "min_tokens=-1",
        "min_tokens=9&max_tokens=3", "temperature=0", "temperature=nan", "temperature=1e9", "top_p=0", "top_p=2",
        "top_k=-1", "seed=-1", "seed=99999999999999999999", "sample=maybe", "sample=true&beams=3",
        "repetition_penalty=0", "repetition_penalty=inf", "length_penalty=11", "model=nothing"};
    for (size_t q = 0; q < sizeof queries / sizeof queries[0]; q++) {
        char path[128];
        snprintf(path, sizeof path, "/v1/caption?%s", queries[q]);
        corpus_request(c, path, "POST", path, "image/png", pictures[1], picture_sizes[1]);
    }
    static const char *const searches[] = {"/v1/search", "/v1/search?q=", "/v1/search?q=a&k=0", "/v1/search?q=a&k=-1",
                                           "/v1/search?q=a&k=abc", "/v1/search?q=a&k=100000",
                                           "/v1/search?q=%40%2Fetc%2Fpasswd", "/v1/search?q=dog.jpg",
                                           "/v1/search?q=a+%2B+%40~%2F.ssh%2Fid_rsa", "/v1/search?q=2%3A"};
    for (size_t s = 0; s < sizeof searches / sizeof searches[0]; s++)
        corpus_request(c, searches[s], "GET", searches[s], NULL, NULL, 0);
    size_t long_size = 5000;
    char *path = malloc(long_size + 32);
    int n = sprintf(path, "/v1/search?q=");
    memset(path + n, 'a', long_size), path[n + long_size] = '\0';
    corpus_request(c, "a 5000-byte query", "GET", path, NULL, NULL, 0);
    free(path);
    corpus_request(c, "search POST without an image", "POST", "/v1/search", "application/json", "{\"q\": \"a\"}", 10);
}

static void test_malformed_requests(void **state) {
    (void)state;
    corpus c = {0};
    add_header_cases(&c);
    add_route_cases(&c);
    add_media_type_cases(&c);
    add_json_cases(&c);
    add_image_cases(&c);
    add_form_cases(&c);
    add_predict_cases(&c);
    add_option_cases(&c);
    fprintf(stderr, "%zu malformed requests\n", c.count);
    assert_true(c.count >= 200);
    int wrong = 0;
    for (size_t i = 0; i < c.count; i++) {
        response r = exchange_raw(server.port, c.requests[i], c.sizes[i]);
        if ((r.status < 400 || r.status > 499) && !(r.status == 0 && c.may_close[i])) {
            fprintf(stderr, "malformed request '%s' answered %d: %.300s\n", c.names[i], r.status, r.text);
            wrong++;
        }
        response_free(&r);
        if (i % 20 == 19) assert_serving();
        free(c.requests[i]), free(c.names[i]);
    }
    free(c.requests), free(c.sizes), free(c.names), free(c.may_close);
    assert_int_equal(wrong, 0);
    assert_serving();
    test_embed_equals_library(NULL);
}

/* Every refusal is the server's one JSON error with one status line: those it makes itself and those
 * libmicrohttpd makes while reading the headers, which the server answers in its place (0.9.75's own answer sent
 * its status line and headers twice, then HTML), and a body that is not a picture we can read is 400 whether it
 * is a cut PNG or no picture at all (issue 35, item 9). */
static void test_refusals_are_json(void **state) {
    (void)state;
    static const struct {
        const char *request;
        int status;
    } cases[] = {
        {"GET /health HTTP/1.1\r\nConnection: close\r\n\r\n", 400},
        {"GET /he alth HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 400},
        /* refused by libmicrohttpd */
        {"GET /health HTTP/1.1\r\nHost: x\r\nnot a header line\r\n\r\n", 400},
        {"POST /v1/embed HTTP/1.1\r\nHost: x\r\nContent-Type: image/png\r\nContent-Length: -5\r\n\r\n", 400},
        {"POST /v1/embed HTTP/1.1\r\nHost: x\r\nContent-Type: image/png\r\nContent-Length: abc\r\n\r\n", 400},
        {"POST /v1/embed HTTP/1.1\r\nHost: x\r\nContent-Type: image/png\r\nContent-Length: 99999999999999999999999\r\n\r\n",
         413},
        {"POST /v1/embed HTTP/1.1\r\nHost: x\r\nContent-Type: image/png\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nab\r\n"
         "0\r\n\r\n", 400},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        response r = exchange_raw(server.port, cases[i].request, strlen(cases[i].request));
        const char *second = r.text ? strstr(r.text, "\r\nHTTP/1.1 ") : NULL;
        if (second) fail_msg("case %zu: two status lines: %s", i, r.text);
        if (r.text && strstr(r.text, "<html")) fail_msg("case %zu: an HTML answer: %s", i, r.text);
        cJSON *json = expect_json(&r, cases[i].status);
        assert_true(cJSON_IsString(cJSON_GetObjectItem(json, "error")));
        cJSON_Delete(json), response_free(&r);
    }
    response cut = exchange("POST", "/v1/embed", "image/png", pictures[0], picture_sizes[0] / 3);
    response text = exchange("POST", "/v1/embed", "image/png", "hello, not a picture", 20);
    cJSON *a = expect_json(&cut, 400), *b = expect_json(&text, 400);
    assert_non_null(strstr(cJSON_GetObjectItem(a, "error")->valuestring, "not an image glimpse can read"));
    assert_non_null(strstr(cJSON_GetObjectItem(b, "error")->valuestring, "not an image glimpse can read"));
    cJSON_Delete(a), cJSON_Delete(b), response_free(&cut), response_free(&text);
}

/* A text holding a NUL character would reach the library cut short at it (C strings): in a JSON string (\u0000),
 * a form field or a query argument it is refused with 400, while "\\u0000" (a backslash, then five letters) is text. */
static void test_texts_with_nul_are_refused(void **state) {
    (void)state;
    static const char nul_json[] = "{\"text\": \"a red\\u0000 circle\"}";
    static const char escaped_json[] = "{\"text\": \"a red\\\\u0000 circle\"}";
    response json = exchange("POST", "/v1/embed", "application/json", nul_json, strlen(nul_json));
    response escaped = exchange("POST", "/v1/embed", "application/json", escaped_json, strlen(escaped_json));
    form f = {0};
    form_add(&f, "image", "a.png", pictures[0], picture_sizes[0]);
    form_add(&f, "text", NULL, "a red\0 circle", 14);
    form_end(&f);
    response field = post_form("/v1/rank", &f);
    response query = exchange("GET", "/v1/search?q=a%20red%00%20circle", NULL, NULL, 0);
    cJSON *a = expect_json(&json, 400), *b = expect_json(&escaped, 200), *c = expect_json(&field, 400);
    cJSON *d = expect_json(&query, 400);
    assert_non_null(strstr(cJSON_GetObjectItem(a, "error")->valuestring, "\\u0000"));
    assert_non_null(cJSON_GetObjectItem(b, "embedding"));
    assert_non_null(strstr(cJSON_GetObjectItem(c, "error")->valuestring, "'text' holds a NUL byte"));
    assert_non_null(strstr(cJSON_GetObjectItem(d, "error")->valuestring, "'q' holds a NUL byte"));
    cJSON_Delete(a), cJSON_Delete(b), cJSON_Delete(c), cJSON_Delete(d);
    response_free(&json), response_free(&escaped), response_free(&field), response_free(&query);
    free(f.bytes);
}

/* A client that sent half a request and then nothing does not hold a SIGTERM for the drain's 30 s: the server
 * stops within a few seconds (issue 35, item 9). */
static void test_sigterm_not_held_by_a_stalled_upload(void **state) {
    (void)state;
    server_process other;
    const char *arguments[] = {"-m", CLIP_MODEL, "--threads", "1", NULL};
    assert_true(start_server(&other, arguments));
    int fd = connect_to(other.port);
    if (fd < 0) {
        stop_server(&other); /* not left running by the failure */
        fail_msg("cannot connect to the server on port %d", other.port);
    }
    const char *head = "POST /v1/embed HTTP/1.1\r\nHost: x\r\nContent-Type: image/png\r\nContent-Length: 5000\r\n\r\nabc";
    send_all(fd, head, strlen(head));
    usleep(300000);
    double started = now_seconds();
    int status = stop_server(&other);
    double took = now_seconds() - started;
    close(fd);
    printf("SIGTERM with a stalled upload open: stopped in %.1f s\n", took);
    assert_int_equal(status, 0);
    assert_true(took < 10);
}

/* A connection from source_address (a loopback one: 127.0.0.2 is this machine too, another client to the server)
 * to 127.0.0.1:port; -1 if refused. */
static int connect_from(const char *source_address, int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in source = {.sin_family = AF_INET}, address = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, source_address, &source.sin_addr);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct timeval timeout = {.tv_sec = 20};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    if (bind(fd, (struct sockaddr *)&source, sizeof source) != 0 ||
        connect(fd, (struct sockaddr *)&address, sizeof address) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Whether the server has closed fd by now (an end of stream or a reset waiting to be read), without waiting. */
static bool closed_already(int fd) {
    char byte;
    ssize_t n = recv(fd, &byte, 1, MSG_DONTWAIT | MSG_PEEK);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

/* One client holding connections open (each a request head never finished, as a slow-loris client keeps them)
 * gets --max-per-client of them; the rest are closed at once, and another client is still served. */
static void test_one_client_cannot_take_every_connection(void **state) {
    (void)state;
    server_process other;
    const char *arguments[] = {"-m", CLIP_MODEL, "--threads", "1", "--max-connections", "24", "--max-per-client", "8",
                               NULL};
    assert_true(start_server(&other, arguments));
    int held[20];
    const char *head = "GET /health HTTP/1.1\r\nHost: x\r\n";
    for (int i = 0; i < 20; i++) {
        held[i] = connect_from("127.0.0.1", other.port);
        if (held[i] >= 0) send_all(held[i], head, strlen(head));
    }
    usleep(500000);
    int open = 0;
    for (int i = 0; i < 20; i++) open += held[i] >= 0 && !closed_already(held[i]);
    int another = connect_from("127.0.0.2", other.port);
    const char *request = "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    response r = {0};
    if (another >= 0 && send_all(another, request, strlen(request))) r = read_response(another);
    if (another >= 0) close(another);
    for (int i = 0; i < 20; i++)
        if (held[i] >= 0) close(held[i]);
    int status = stop_server(&other);
    printf("20 connections held open by one client: %d kept, another client answered %d\n", open, r.status);
    assert_int_equal(open, 8);
    assert_int_equal(r.status, 200);
    assert_int_equal(status, 0);
    response_free(&r);
}

/* -------------------------------------------------------------- SIGTERM */

/* A request in flight when SIGTERM comes is answered; new connections are refused; the exit is clean. */
static void test_sigterm_drains(void **state) {
    (void)state;
    float expected[1024];
    reference_image_embedding(5, expected);
    int fd = connect_to(server.port);
    char head[256];
    int n = snprintf(head, sizeof head,
                     "POST /v1/embed HTTP/1.1\r\nHost: x\r\nContent-Type: image/png\r\nContent-Length: %zu\r\n\r\n",
                     picture_sizes[5]);
    send_all(fd, head, (size_t)n);
    send_all(fd, pictures[5], picture_sizes[5] / 2);
    /* until the server counts it in flight (beside the /metrics request asking) */
    double started = now_seconds();
    for (bool counted = false; !counted && now_seconds() - started < 30;) {
        response r = exchange("GET", "/metrics", NULL, NULL, 0);
        counted = strstr(r.body, "glimpse_requests_in_flight 2") != NULL;
        response_free(&r);
        if (!counted) usleep(20000);
    }
    kill(server.pid, SIGTERM);
    /* until new connections are refused (one that gets in first is answered 503 or closed) */
    bool refused = false;
    for (started = now_seconds(); !refused && now_seconds() - started < 30;) {
        int probe = connect_to(server.port);
        refused = probe < 0;
        if (probe >= 0) close(probe), usleep(20000);
    }
    assert_true(refused);
    send_all(fd, pictures[5] + picture_sizes[5] / 2, picture_sizes[5] - picture_sizes[5] / 2);
    response r = read_response(fd);
    close(fd);
    cJSON *json = expect_json(&r, 200);
    assert_floats_equal(cJSON_GetObjectItem(json, "embedding"), expected, glimpse_model_embedding_dim(clip));
    cJSON_Delete(json), response_free(&r);
    int status = 0;
    started = now_seconds();
    while (waitpid(server.pid, &status, WNOHANG) == 0 && now_seconds() - started < 10) usleep(20000);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    server.pid = 0;
}

int main(void) {
    /* the library in this process as glimpse serve runs it: on AMX's tiles unless the variable says otherwise */
    setenv("GLIMPSE_FLOAT32_TILES", "always", 0);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_embed_equals_library),   cmocka_unit_test(test_concurrent_embeddings_equal_alone),
        cmocka_unit_test(test_rank_equals_library),    cmocka_unit_test(test_rank_blip_retrieval),
        cmocka_unit_test(test_caption_equals_library), cmocka_unit_test(test_explain_equals_library),
        cmocka_unit_test(test_search_equals_library),  cmocka_unit_test(test_immich_predict),
        cmocka_unit_test(test_search_answers_are_utf8),
        cmocka_unit_test(test_service_endpoints),      cmocka_unit_test(test_ask_equals_library), /* (after: it
                                                          adds to /v1/ask's error count, which the other checks) */
        cmocka_unit_test(test_task_equals_library),
        cmocka_unit_test(test_api_key),
        cmocka_unit_test(test_faulty_clients),         cmocka_unit_test(test_malformed_requests),
        cmocka_unit_test(test_refusals_are_json), cmocka_unit_test(test_texts_with_nul_are_refused),      cmocka_unit_test(test_sigterm_not_held_by_a_stalled_upload),
        cmocka_unit_test(test_one_client_cannot_take_every_connection),
        cmocka_unit_test(test_sigterm_drains),
    };
    signal(SIGPIPE, SIG_IGN);
    return cmocka_run_group_tests_name("serve", tests, set_up, tear_down);
}
