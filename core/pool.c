/* pool.c — fixed thread pool with a parallel-for. Workers sleep on a
 * condition variable between jobs; tasks are handed out by an atomic counter
 * so uneven tasks balance themselves. */
#include "pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "error.h"

struct pool {
    int threads;              /* including the caller */
    pthread_t *workers;       /* threads - 1 of them */
    pthread_mutex_t lock;
    pthread_cond_t wake;      /* a new job or shutdown */
    pthread_cond_t done;      /* a worker finished its share */
    unsigned long generation; /* bumped for every job */
    int shutting_down;
    int busy_workers;
    /* the current job */
    pool_task task;
    void *argument;
    size_t count;
    atomic_size_t next;
};

static void run_share(pool *p) {
    for (;;) {
        size_t index = atomic_fetch_add(&p->next, 1);
        if (index >= p->count) break;
        p->task(p->argument, index);
    }
}

static void *worker_main(void *argument) {
    pool *p = argument;
    unsigned long seen = 0;
    pthread_mutex_lock(&p->lock);
    for (;;) {
        while (!p->shutting_down && p->generation == seen) pthread_cond_wait(&p->wake, &p->lock);
        if (p->shutting_down) break;
        seen = p->generation;
        pthread_mutex_unlock(&p->lock);
        run_share(p);
        pthread_mutex_lock(&p->lock);
        if (--p->busy_workers == 0) pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

glimpse_status pool_create(int threads, pool **out) {
    *out = NULL;
    if (threads <= 0) {
        long online = sysconf(_SC_NPROCESSORS_ONLN);
        threads = online > 0 ? (int)online : 1;
    }
    if (threads > 256) return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "thread count %d is over 256", threads);
    pool *p = calloc(1, sizeof *p);
    if (!p) return ERROR_OOM();
    p->threads = threads;
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->done, NULL);
    if (threads > 1) {
        p->workers = calloc((size_t)threads - 1, sizeof *p->workers);
        if (!p->workers) {
            pool_free(p);
            return ERROR_OOM();
        }
        for (int i = 0; i < threads - 1; i++) {
            if (pthread_create(&p->workers[i], NULL, worker_main, p) != 0) {
                p->threads = i + 1; /* only the ones started get joined */
                pool_free(p);
                return error_set(GLIMPSE_STATUS_INTERNAL, "could not start worker thread %d", i + 1);
            }
        }
    }
    *out = p;
    return GLIMPSE_OK;
}

void pool_free(pool *p) {
    if (!p) return;
    if (p->workers) {
        pthread_mutex_lock(&p->lock);
        p->shutting_down = 1;
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->lock);
        for (int i = 0; i < p->threads - 1; i++) pthread_join(p->workers[i], NULL);
        free(p->workers);
    }
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->wake);
    pthread_cond_destroy(&p->done);
    free(p);
}

int pool_threads(const pool *p) { return p ? p->threads : 1; }

void pool_for(pool *p, size_t count, pool_task task, void *argument) {
    if (count == 0) return;
    if (!p || p->threads == 1 || count == 1) {
        for (size_t i = 0; i < count; i++) task(argument, i);
        return;
    }
    pthread_mutex_lock(&p->lock);
    p->task = task;
    p->argument = argument;
    p->count = count;
    atomic_store(&p->next, 0);
    p->busy_workers = p->threads - 1;
    p->generation++;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->lock);
    run_share(p);
    pthread_mutex_lock(&p->lock);
    while (p->busy_workers > 0) pthread_cond_wait(&p->done, &p->lock);
    pthread_mutex_unlock(&p->lock);
}
