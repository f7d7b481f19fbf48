/* internal.h — what the parts of glimpse serve share: the server and its
 * models, a request as received (body, multipart parts), a reply, the work
 * queue that batches image embeddings, and the metrics. Not installed. */
#ifndef GLIMPSE_SERVE_INTERNAL_H
#define GLIMPSE_SERVE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "glimpse.h"
#include "serve/serve.h"

struct MHD_Connection;
struct MHD_Daemon;
struct MHD_PostProcessor;
struct cJSON;

/* ---------------------------------------------------------------- metrics */

typedef enum serve_route {
    SERVE_ROUTE_EMBED,
    SERVE_ROUTE_RANK,
    SERVE_ROUTE_CAPTION,
    SERVE_ROUTE_ASK,
    SERVE_ROUTE_CHAT,   /* OpenAI's /v1/chat/completions */
    SERVE_ROUTE_TASK,
    SERVE_ROUTE_OCR,    /* Florence-2's <OCR> tasks, as glimpse ocr */
    SERVE_ROUTE_DETECT, /* Florence-2's object tasks, as glimpse detect */
    SERVE_ROUTE_EXPLAIN,
    SERVE_ROUTE_SEARCH,
    SERVE_ROUTE_PREDICT, /* immich's /predict */
    SERVE_ROUTE_PING,    /* immich's / and /ping */
    SERVE_ROUTE_HEALTH,
    SERVE_ROUTE_MODELS,
    SERVE_ROUTE_METRICS,
    SERVE_ROUTE_UNKNOWN, /* no such path (404) */
    SERVE_ROUTE_COUNT
} serve_route;

/* The route's label in /metrics ("embed", ...). */
const char *serve_route_label(serve_route route);

#define SERVE_LATENCY_BUCKETS 14
#define SERVE_MAX_BATCH 64

typedef struct serve_metrics {
    pthread_mutex_t lock;
    unsigned long long requests[SERVE_ROUTE_COUNT][600];              /* by HTTP status */
    unsigned long long latency[SERVE_ROUTE_COUNT][SERVE_LATENCY_BUCKETS]; /* cumulative at render */
    double latency_sum[SERVE_ROUTE_COUNT];
    unsigned long long latency_count[SERVE_ROUTE_COUNT];
    unsigned long long batches[SERVE_MAX_BATCH + 1]; /* by size */
    unsigned long long rejected_overload;            /* 503: the queue was full */
} serve_metrics;

void metrics_init(serve_metrics *metrics);
void metrics_destroy(serve_metrics *metrics);
void metrics_record_request(serve_metrics *metrics, serve_route route, int status, double seconds);
void metrics_record_batch(serve_metrics *metrics, size_t size);
/* The Prometheus text exposition (version 0.0.4); caller frees; NULL when out of memory. */
char *metrics_render(serve_metrics *metrics, size_t queue_depth, size_t in_flight, size_t *length);

/* ------------------------------------------------------------ work queue */

typedef struct serve_job serve_job;
/* A job's work, run by its model's worker thread with the worker's context. */
typedef glimpse_status (*serve_job_run)(serve_job *job, glimpse_context *ctx);

struct serve_job {
    serve_job_run run;     /* NULL: embed image into embedding, batched with other such jobs */
    void *data;            /* the route's inputs and outputs for run */
    glimpse_image *image;  /* run NULL: borrowed */
    float *embedding;      /* run NULL: embedding_dim floats written */
    glimpse_status status; /* set when done */
    char error[512];       /* glimpse_last_error() of the worker when status is not OK */
    bool done;
    pthread_cond_t finished; /* signalled to the one request waiting for this job */
    serve_job *next;
};

/* What every queue shares: the bound on waiting jobs, and how many image
 * requests are on their way (received, not yet queued) so that a batch does
 * not wait for images nobody is sending. */
typedef struct serve_load {
    atomic_size_t queued;      /* jobs waiting in every queue */
    size_t limit;
    atomic_int images_arriving;
    serve_metrics *metrics;
} serve_load;

/* One model's jobs and the worker thread that runs them, one at a time (or a
 * batch of image embeddings at a time) on the worker's context. */
typedef struct serve_queue {
    pthread_mutex_t lock;
    pthread_cond_t work;
    serve_job *head, *tail;
    bool stopping, started;
    pthread_t thread;
    glimpse_context *ctx;
    size_t embedding_dim;
    int max_batch;
    double batch_wait_seconds;
    serve_load *load;
} serve_queue;

glimpse_status queue_start(serve_queue *queue, const glimpse_model *model, int threads, int max_batch,
                           double batch_wait_ms, serve_load *load);
/* Queues job (false, leaving it alone, when the shared limit is reached). */
bool queue_submit(serve_queue *queue, serve_job *job);
/* Blocks until the worker has run job. */
void queue_wait(serve_queue *queue, serve_job *job);
/* Runs what is queued, then stops the worker and frees its context. */
void queue_stop(serve_queue *queue);

/* ------------------------------------------------------------ the server */

typedef struct serve_model {
    char *name; /* the folder's last component, or the hub id, as given */
    glimpse_model *model;
    glimpse_model_info info;
    serve_queue queue;
    glimpse_index *index; /* the --db index when built with this model; used by the worker only */
} serve_model;

struct serve_server {
    serve_config config;
    char *api_key;
    serve_model *models;
    size_t model_count;
    serve_model *search_model; /* the model of the index, NULL without --db */
    struct MHD_Daemon *daemon;
    int port;
    serve_load load;
    serve_metrics metrics;
    atomic_bool draining;
    pthread_mutex_t flight_lock;
    pthread_cond_t flight_idle;
    size_t in_flight; /* requests whose headers arrived and whose answer is not yet sent */
    size_t receiving; /* those of them whose body is still arriving */
    _Atomic double last_received; /* when body bytes last arrived on any connection (now_seconds) */
};

/* Formats a line and hands it to config.log. */
void serve_log(const serve_server *server, const char *format, ...) __attribute__((format(printf, 2, 3)));

/* ---------------------------------------------------- requests and replies */

typedef enum serve_body_kind {
    SERVE_BODY_NONE,      /* no body (GET), or an empty one */
    SERVE_BODY_JSON,      /* application/json */
    SERVE_BODY_IMAGE,     /* image/... or application/octet-stream: the bytes of one image */
    SERVE_BODY_MULTIPART, /* multipart/form-data, or application/x-www-form-urlencoded: parts */
} serve_body_kind;

typedef struct serve_part {
    char *name, *filename, *content_type; /* filename and content_type NULL when not given */
    char *data;                           /* size bytes, then a NUL */
    size_t size;
} serve_part;

/* A drain waits for a request whose body is still arriving only while bytes came within this many seconds. */
#define SERVE_DRAIN_IDLE_SECONDS 2.0

#define SERVE_MAX_PARTS 64

typedef struct serve_request {
    serve_route route;
    struct MHD_Connection *connection;
    serve_body_kind kind;
    char *body; /* SERVE_BODY_JSON and SERVE_BODY_IMAGE: the body, NUL-terminated */
    size_t size, capacity;
    serve_part parts[SERVE_MAX_PARTS];
    size_t part_count;
    struct MHD_PostProcessor *post;
    bool bad_parts; /* too many parts, or parts the post processor refused */
    bool counted_as_image; /* load.images_arriving counts this request */
    bool receiving;        /* the server's receiving counts this request */
    size_t received;       /* body bytes received */
    double started;        /* when the headers arrived (monotonic seconds) */
    int status;            /* the status answered; 0 until then */
} serve_request;

typedef struct serve_reply {
    int status;
    char *body; /* malloc'd */
    size_t size;
    const char *content_type;
    unsigned retry_after; /* seconds, 0 = no header */
    /* A body written as it is made (server-sent events) instead of body: read fills buffer with up to capacity
     * bytes, waiting for them, and returns how many, or -1 at the end; end frees stream once the answer is over
     * (sent, or the client gone). */
    void *stream;
    long (*stream_read)(void *stream, char *buffer, size_t capacity);
    void (*stream_end)(void *stream);
} serve_reply;

/* What the routes share (routes.c): the model named, or the first that can `what` (NULL with the reply set);
 * a job run on a model's worker and waited for (false with the reply set); an image decoded within the
 * server's pixel limit; a JSON reply (taking root); the HTTP status of a library failure. */
serve_model *route_choose_model(serve_server *server, const char *name, glimpse_capability what, serve_reply *reply);
bool route_run_job(serve_server *server, serve_request *request, serve_model *model, serve_job *job,
                   serve_reply *reply);
bool route_decode_image(serve_server *server, const char *bytes, size_t size, glimpse_image **image,
                        serve_reply *reply);
void route_reply_json(serve_reply *reply, int status, struct cJSON *root);
int route_status_of(glimpse_status status);
/* POST /v1/chat/completions (chat_completions.c). */
void answer_chat(serve_server *server, serve_request *request, serve_reply *reply);

/* Answers the request whose body has been received in full (routes.c). */
void route_answer(serve_server *server, serve_request *request, serve_reply *reply);
/* reply = {"error": message} with status. */
void reply_error(serve_reply *reply, int status, const char *format, ...) __attribute__((format(printf, 3, 4)));
/* The value of a query-string argument, else of a multipart field; NULL if neither. */
const char *request_argument(const serve_request *request, const char *name);
/* The name of the first text argument (a query-string argument, or a form field other than a picture's: not
 * named "image", no file name) that holds a NUL byte, which would cut it short as a C string; NULL if none. */
const char *request_nul_argument(const serve_request *request);

#endif
