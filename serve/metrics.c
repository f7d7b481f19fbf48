/* metrics.c — glimpse serve's counters in Prometheus' text format: requests
 * by route and status, latency histograms, queue depth, requests in flight,
 * batch sizes, errors and overload refusals. Counting only; no I/O. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve/internal.h"

static const char *const route_labels[SERVE_ROUTE_COUNT] = {
    "embed", "rank", "caption", "ask", "chat", "task", "ocr", "detect", "explain", "search", "predict", "ping", "health", "models", "metrics", "unknown"};

/* upper bounds of the latency buckets, seconds (the last is +Inf) */
static const double latency_bounds[SERVE_LATENCY_BUCKETS - 1] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                                                 0.25,  0.5,    1,     2.5,  5,     10};

const char *serve_route_label(serve_route route) {
    return route < SERVE_ROUTE_COUNT ? route_labels[route] : "unknown";
}

void metrics_init(serve_metrics *metrics) {
    memset(metrics, 0, sizeof *metrics);
    pthread_mutex_init(&metrics->lock, NULL);
}

void metrics_destroy(serve_metrics *metrics) { pthread_mutex_destroy(&metrics->lock); }

void metrics_record_request(serve_metrics *metrics, serve_route route, int status, double seconds) {
    if (route >= SERVE_ROUTE_COUNT) route = SERVE_ROUTE_UNKNOWN;
    if (status < 100 || status > 599) status = 500;
    size_t bucket = 0;
    while (bucket < SERVE_LATENCY_BUCKETS - 1 && seconds > latency_bounds[bucket]) bucket++;
    pthread_mutex_lock(&metrics->lock);
    metrics->requests[route][status]++;
    metrics->latency[route][bucket]++;
    metrics->latency_sum[route] += seconds;
    metrics->latency_count[route]++;
    if (status == 503) metrics->rejected_overload++;
    pthread_mutex_unlock(&metrics->lock);
}

void metrics_record_batch(serve_metrics *metrics, size_t size) {
    if (size > SERVE_MAX_BATCH) size = SERVE_MAX_BATCH;
    pthread_mutex_lock(&metrics->lock);
    metrics->batches[size]++;
    pthread_mutex_unlock(&metrics->lock);
}

/* A growing text buffer; failed stays set once an allocation fails. */
typedef struct text_buffer {
    char *text;
    size_t length, capacity;
    bool failed;
} text_buffer;

static void append(text_buffer *buffer, const char *format, ...) __attribute__((format(printf, 2, 3)));
static void append(text_buffer *buffer, const char *format, ...) {
    if (buffer->failed) return;
    for (;;) {
        va_list args;
        va_start(args, format);
        size_t room = buffer->capacity - buffer->length;
        int n = vsnprintf(buffer->text ? buffer->text + buffer->length : NULL, room, format, args);
        va_end(args);
        if (n < 0) {
            buffer->failed = true;
            return;
        }
        if ((size_t)n < room) {
            buffer->length += (size_t)n;
            return;
        }
        size_t capacity = buffer->capacity ? buffer->capacity * 2 : 4096;
        while (capacity - buffer->length <= (size_t)n) capacity *= 2;
        char *grown = realloc(buffer->text, capacity);
        if (!grown) {
            buffer->failed = true;
            return;
        }
        buffer->text = grown;
        buffer->capacity = capacity;
    }
}

char *metrics_render(serve_metrics *metrics, size_t queue_depth, size_t in_flight, size_t *length) {
    text_buffer out = {0};
    pthread_mutex_lock(&metrics->lock);
    append(&out, "# HELP glimpse_requests_total HTTP requests answered, by route and status.\n"
                 "# TYPE glimpse_requests_total counter\n");
    for (int r = 0; r < SERVE_ROUTE_COUNT; r++)
        for (int status = 100; status < 600; status++)
            if (metrics->requests[r][status])
                append(&out, "glimpse_requests_total{route=\"%s\",code=\"%d\"} %llu\n", route_labels[r], status,
                       metrics->requests[r][status]);
    append(&out, "# HELP glimpse_request_errors_total Requests answered with a 4xx or 5xx status, by route.\n"
                 "# TYPE glimpse_request_errors_total counter\n");
    for (int r = 0; r < SERVE_ROUTE_COUNT; r++) {
        unsigned long long errors = 0;
        for (int status = 400; status < 600; status++) errors += metrics->requests[r][status];
        if (metrics->latency_count[r]) append(&out, "glimpse_request_errors_total{route=\"%s\"} %llu\n", route_labels[r], errors);
    }
    append(&out, "# HELP glimpse_request_duration_seconds Time from a request's headers to its answer.\n"
                 "# TYPE glimpse_request_duration_seconds histogram\n");
    for (int r = 0; r < SERVE_ROUTE_COUNT; r++) {
        if (!metrics->latency_count[r]) continue;
        unsigned long long cumulative = 0;
        for (int b = 0; b < SERVE_LATENCY_BUCKETS; b++) {
            cumulative += metrics->latency[r][b];
            if (b < SERVE_LATENCY_BUCKETS - 1)
                append(&out, "glimpse_request_duration_seconds_bucket{route=\"%s\",le=\"%g\"} %llu\n", route_labels[r],
                       latency_bounds[b], cumulative);
            else
                append(&out, "glimpse_request_duration_seconds_bucket{route=\"%s\",le=\"+Inf\"} %llu\n",
                       route_labels[r], cumulative);
        }
        append(&out, "glimpse_request_duration_seconds_sum{route=\"%s\"} %.6f\n", route_labels[r],
               metrics->latency_sum[r]);
        append(&out, "glimpse_request_duration_seconds_count{route=\"%s\"} %llu\n", route_labels[r],
               metrics->latency_count[r]);
    }
    append(&out, "# HELP glimpse_batch_size Image embeddings run together, per batch.\n"
                 "# TYPE glimpse_batch_size histogram\n");
    unsigned long long cumulative = 0, sum = 0;
    static const int batch_bounds[] = {1, 2, 4, 8, 16, 32, 64};
    size_t next = 0;
    for (int size = 1; size <= SERVE_MAX_BATCH; size++) {
        cumulative += metrics->batches[size];
        sum += metrics->batches[size] * (unsigned long long)size;
        if (next < sizeof batch_bounds / sizeof batch_bounds[0] && size == batch_bounds[next])
            append(&out, "glimpse_batch_size_bucket{le=\"%d\"} %llu\n", batch_bounds[next++], cumulative);
    }
    append(&out, "glimpse_batch_size_bucket{le=\"+Inf\"} %llu\nglimpse_batch_size_sum %llu\nglimpse_batch_size_count %llu\n",
           cumulative, sum, cumulative);
    append(&out, "# HELP glimpse_overload_rejections_total Requests refused with 503 (queue full or draining).\n"
                 "# TYPE glimpse_overload_rejections_total counter\nglimpse_overload_rejections_total %llu\n",
           metrics->rejected_overload);
    pthread_mutex_unlock(&metrics->lock);
    append(&out, "# HELP glimpse_queue_depth Requests waiting for a model's worker.\n"
                 "# TYPE glimpse_queue_depth gauge\nglimpse_queue_depth %zu\n", queue_depth);
    append(&out, "# HELP glimpse_requests_in_flight Requests received and not yet answered.\n"
                 "# TYPE glimpse_requests_in_flight gauge\nglimpse_requests_in_flight %zu\n", in_flight);
    if (out.failed) {
        free(out.text);
        return NULL;
    }
    *length = out.length;
    return out.text;
}
