/* serve.h — the engine of `glimpse serve`: glimpse's models as an HTTP/1.1
 * service (libmicrohttpd), with dynamic batching of image embeddings, limits,
 * an API key, Prometheus metrics and a draining stop. Library code: it never
 * prints or exits; what it has to say goes to config.log. The CLI
 * (tools/cli_serve.c) parses the command line and handles signals. */
#ifndef GLIMPSE_SERVE_SERVE_H
#define GLIMPSE_SERVE_SERVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "glimpse.h"

typedef struct serve_server serve_server;

/* A line for the operator (a model loaded, a request failed inside, a
 * library warning); valid during the call; called from any thread. */
typedef void (*serve_log_callback)(void *user, const char *message);

typedef struct serve_config {
    const char *const *models; /* snapshot folders or hub ids; each loaded once, shared by all requests */
    size_t model_count;
    const char *db;            /* a search index for /v1/search (opened read-only); NULL = none */
    const char *host;          /* a numeric IPv4 or IPv6 address, or "localhost"; default 127.0.0.1 */
    int port;                  /* 0 = a free port, which serve_port tells */
    const char *api_key;       /* required of every request but /health and /ping; NULL = none, which
                                  serve_start allows on a loopback address only */
    size_t max_body;           /* bytes of a request body; more is 413 */
    size_t queue_limit;        /* requests waiting for a model at once; more is 503 with Retry-After */
    int threads;               /* worker threads of each model's context; 0 = all cores */
    unsigned timeout_seconds;  /* a connection silent this long is closed */
    unsigned max_connections;  /* connections at once (one thread each); more are refused */
    unsigned max_per_client;   /* connections at once from one client address (so that one client holding
                                  connections open cannot take them all); 0 or max_connections and more: no
                                  bound but max_connections */
    int max_batch;             /* image embeddings run together; 1 = one at a time */
    double batch_wait_ms;      /* how long the first image of a batch waits for others */
    glimpse_precision precision;
    uint64_t max_pixels;       /* images larger are refused (413) before decoding */
    serve_log_callback log;
    void *log_user;
    bool open_predict;         /* /predict needs no API key (immich's machine-learning client sends none) */
    const char *local_images;  /* /v1/chat/completions may read pictures named by path (file:// URLs) under this
                                  folder; NULL (the default): only pictures sent in the request */
} serve_config;

serve_config serve_default_config(void);

/* Loads the models, opens the index, starts the workers and listens. On
 * failure *out is NULL and glimpse_last_error() says why. */
glimpse_status serve_start(const serve_config *config, serve_server **out);
/* The port listened on (the one chosen when config.port was 0). */
int serve_port(const serve_server *server);
/* Stops accepting connections, answers requests arriving on open ones with
 * 503, and waits (at most timeout_seconds) for the requests in flight to be
 * answered. Returns how many were still in flight at the deadline. */
size_t serve_drain(serve_server *server, double timeout_seconds);
/* Stops everything and frees the server (NULL is fine). */
void serve_free(serve_server *server);

#endif
