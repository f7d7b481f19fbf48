/* prefetch.c — a producer thread and a bounded ring of items behind one
 * mutex and two condition variables; see prefetch.h. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/prefetch.h"

struct prefetch {
    size_t item_size, capacity;
    unsigned char *ring; /* capacity items */
    size_t head, count;  /* the oldest item, and how many are waiting */
    bool ended;          /* the producer returned false */
    atomic_bool stopping; /* written by the caller, read by the producer outside the lock */
    bool ahead;      /* a thread runs the producer */
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t filled, emptied;
    prefetch_produce produce;
    prefetch_dispose dispose;
    void *user;
    unsigned char *scratch; /* one item the producer fills outside the lock */
};

static void *producer(void *argument) {
    prefetch *p = argument;
    for (;;) {
        memset(p->scratch, 0, p->item_size);
        bool more = !p->stopping && p->produce(p->user, p->scratch, &p->stopping);
        pthread_mutex_lock(&p->lock);
        if (!more) {
            p->ended = true;
            pthread_cond_broadcast(&p->filled);
            pthread_mutex_unlock(&p->lock);
            return NULL;
        }
        while (p->count == p->capacity && !p->stopping) pthread_cond_wait(&p->emptied, &p->lock);
        if (p->stopping) {
            pthread_mutex_unlock(&p->lock);
            if (p->dispose) p->dispose(p->user, p->scratch);
            continue; /* the loop sees stopping and ends */
        }
        memcpy(p->ring + ((p->head + p->count) % p->capacity) * p->item_size, p->scratch, p->item_size);
        p->count++;
        pthread_cond_signal(&p->filled);
        pthread_mutex_unlock(&p->lock);
    }
}

glimpse_status prefetch_start(size_t item_size, size_t capacity, bool ahead, prefetch_produce produce,
                              prefetch_dispose dispose, void *user, prefetch **out) {
    *out = NULL;
    prefetch *p = calloc(1, sizeof *p);
    if (!p) return ERROR_OOM();
    p->item_size = item_size;
    p->capacity = capacity ? capacity : 1;
    p->ring = malloc(p->capacity * item_size);
    p->scratch = malloc(item_size);
    p->produce = produce, p->dispose = dispose, p->user = user;
    p->ahead = ahead;
    if (!p->ring || !p->scratch) {
        free(p->ring), free(p->scratch), free(p);
        return ERROR_OOM();
    }
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->filled, NULL);
    pthread_cond_init(&p->emptied, NULL);
    if (ahead && pthread_create(&p->thread, NULL, producer, p) != 0) p->ahead = false; /* run on the caller's */
    *out = p;
    return GLIMPSE_STATUS_OK;
}

bool prefetch_next(prefetch *p, void *item) {
    if (!p->ahead) {
        if (p->ended) return false;
        memset(item, 0, p->item_size);
        if (p->produce(p->user, item, &p->stopping)) return true;
        p->ended = true;
        return false;
    }
    pthread_mutex_lock(&p->lock);
    while (!p->count && !p->ended) pthread_cond_wait(&p->filled, &p->lock);
    bool got = p->count > 0;
    if (got) {
        memcpy(item, p->ring + p->head * p->item_size, p->item_size);
        p->head = (p->head + 1) % p->capacity;
        p->count--;
        pthread_cond_signal(&p->emptied);
    }
    pthread_mutex_unlock(&p->lock);
    return got;
}

void prefetch_stop(prefetch *p) {
    if (!p) return;
    if (p->ahead) {
        pthread_mutex_lock(&p->lock);
        p->stopping = true;
        pthread_cond_broadcast(&p->emptied);
        pthread_mutex_unlock(&p->lock);
        pthread_join(p->thread, NULL);
    }
    for (; p->count; p->count--, p->head = (p->head + 1) % p->capacity)
        if (p->dispose) p->dispose(p->user, p->ring + p->head * p->item_size);
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->filled);
    pthread_cond_destroy(&p->emptied);
    free(p->ring), free(p->scratch), free(p);
}
