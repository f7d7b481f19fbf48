/* batching.c — each model's work queue and its worker thread. Jobs run one
 * at a time on the worker's context, except image embeddings: the worker
 * takes every image embedding waiting (up to max_batch) and runs them as one
 * glimpse_embed_images batch. A first image waits at most batch_wait for
 * company, and not at all when no other image request is being received. */
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "serve/internal.h"

static double now_seconds(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + now.tv_nsec * 1e-9;
}

static void finish(serve_queue *queue, serve_job *job, glimpse_status status) {
    job->status = status;
    if (status) snprintf(job->error, sizeof job->error, "%s", glimpse_last_error());
    pthread_mutex_lock(&queue->lock);
    job->done = true;
    pthread_cond_signal(&job->finished); /* its waiter owns the job again once this lock is released */
    pthread_mutex_unlock(&queue->lock);
}

/* Removes and returns the first waiting image embedding, or NULL. Lock held. */
static serve_job *take_image_job(serve_queue *queue) {
    serve_job **link = &queue->head, *previous = NULL;
    for (serve_job *job = queue->head; job; previous = job, link = &job->next, job = job->next) {
        if (job->run) continue;
        *link = job->next;
        if (queue->tail == job) queue->tail = previous;
        job->next = NULL;
        atomic_fetch_sub(&queue->load->queued, 1);
        return job;
    }
    return NULL;
}

/* Runs a batch of image embeddings; when the batch fails as a whole, each
 * image again alone, so that one bad image fails only its own request. */
static void run_images(serve_queue *queue, serve_job **jobs, size_t count) {
    glimpse_image *images[SERVE_MAX_BATCH];
    for (size_t i = 0; i < count; i++) images[i] = jobs[i]->image;
    size_t dim = queue->embedding_dim;
    /* a job belongs to its request again once finished: nothing of it is read after finish() */
    float *batch = count > 1 ? malloc(count * dim * sizeof(float)) : NULL;
    metrics_record_batch(queue->load->metrics, count);
    if (count == 1) {
        finish(queue, jobs[0], glimpse_embed_images(queue->ctx, images, 1, jobs[0]->embedding));
    } else if (batch && glimpse_embed_images(queue->ctx, images, count, batch) == GLIMPSE_STATUS_OK) {
        for (size_t i = 0; i < count; i++) {
            memcpy(jobs[i]->embedding, batch + i * dim, dim * sizeof(float));
            finish(queue, jobs[i], GLIMPSE_STATUS_OK);
        }
    } else {
        for (size_t i = 0; i < count; i++)
            finish(queue, jobs[i], glimpse_embed_images(queue->ctx, &images[i], 1, jobs[i]->embedding));
    }
    free(batch);
}

static void *worker(void *argument) {
    serve_queue *queue = argument;
    pthread_mutex_lock(&queue->lock);
    for (;;) {
        while (!queue->head && !queue->stopping) pthread_cond_wait(&queue->work, &queue->lock);
        if (!queue->head) break; /* stopping, nothing left */
        serve_job *job = queue->head;
        if (job->run) {
            queue->head = job->next;
            if (!queue->head) queue->tail = NULL;
            atomic_fetch_sub(&queue->load->queued, 1);
            pthread_mutex_unlock(&queue->lock);
            finish(queue, job, job->run(job, queue->ctx));
            pthread_mutex_lock(&queue->lock);
            continue;
        }
        serve_job *batch[SERVE_MAX_BATCH];
        size_t count = 0;
        double deadline = now_seconds() + queue->batch_wait_seconds;
        for (;;) {
            serve_job *next;
            while (count < (size_t)queue->max_batch && (next = take_image_job(queue))) batch[count++] = next;
            if (count >= (size_t)queue->max_batch || queue->stopping) break;
            if (atomic_load(&queue->load->images_arriving) <= 0) break;
            double left = deadline - now_seconds();
            if (left <= 0) break;
            struct timespec until;
            clock_gettime(CLOCK_REALTIME, &until);
            long nanoseconds = until.tv_nsec + (long)(left * 1e9);
            until.tv_sec += nanoseconds / 1000000000L;
            until.tv_nsec = nanoseconds % 1000000000L;
            pthread_cond_timedwait(&queue->work, &queue->lock, &until);
        }
        pthread_mutex_unlock(&queue->lock);
        run_images(queue, batch, count);
        pthread_mutex_lock(&queue->lock);
    }
    pthread_mutex_unlock(&queue->lock);
    return NULL;
}

glimpse_status queue_start(serve_queue *queue, const glimpse_model *model, int threads, int max_batch,
                           double batch_wait_ms, serve_load *load) {
    memset(queue, 0, sizeof *queue);
    pthread_mutex_init(&queue->lock, NULL);
    pthread_cond_init(&queue->work, NULL);
    queue->embedding_dim = glimpse_model_embedding_dim(model);
    queue->max_batch = max_batch < 1 ? 1 : max_batch > SERVE_MAX_BATCH ? SERVE_MAX_BATCH : max_batch;
    queue->batch_wait_seconds = batch_wait_ms > 0 ? batch_wait_ms / 1e3 : 0;
    queue->load = load;
    glimpse_context_params params = glimpse_context_default_params();
    params.threads = threads;
    glimpse_status status = glimpse_context_create(model, &params, &queue->ctx);
    if (status) return status;
    if (pthread_create(&queue->thread, NULL, worker, queue)) {
        glimpse_context_free(queue->ctx);
        queue->ctx = NULL;
        return GLIMPSE_STATUS_OUT_OF_MEMORY;
    }
    queue->started = true;
    return GLIMPSE_STATUS_OK;
}

bool queue_submit(serve_queue *queue, serve_job *job) {
    if (atomic_fetch_add(&queue->load->queued, 1) >= queue->load->limit) {
        atomic_fetch_sub(&queue->load->queued, 1);
        return false;
    }
    job->done = false;
    job->next = NULL;
    pthread_cond_init(&job->finished, NULL);
    pthread_mutex_lock(&queue->lock);
    if (queue->tail)
        queue->tail->next = job;
    else
        queue->head = job;
    queue->tail = job;
    pthread_cond_signal(&queue->work);
    pthread_mutex_unlock(&queue->lock);
    return true;
}

void queue_wait(serve_queue *queue, serve_job *job) {
    pthread_mutex_lock(&queue->lock);
    while (!job->done) pthread_cond_wait(&job->finished, &queue->lock);
    pthread_mutex_unlock(&queue->lock);
    pthread_cond_destroy(&job->finished);
}

void queue_stop(serve_queue *queue) {
    if (!queue->load) return; /* never started */
    if (queue->started) {
        pthread_mutex_lock(&queue->lock);
        queue->stopping = true;
        pthread_cond_broadcast(&queue->work);
        pthread_mutex_unlock(&queue->lock);
        pthread_join(queue->thread, NULL);
        queue->started = false;
    }
    glimpse_context_free(queue->ctx);
    queue->ctx = NULL;
    pthread_mutex_destroy(&queue->lock);
    pthread_cond_destroy(&queue->work);
}
