/* pool.c — fixed thread pool with a parallel-for. Tasks are handed out by an
 * atomic counter so uneven tasks balance themselves. Between jobs a worker
 * first spins for a short while (POOL_SPIN_NS) watching for the next one,
 * then sleeps on a condition variable; the caller waits for the last worker
 * the same way. A forward pass is a chain of short parallel steps (a ViT-B/32
 * image: ~60 of 0.1–1 ms), and a futex sleep and wake-up at each step cost
 * 9% of the time in a virtual machine. */
#include "core/pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "core/profile.h"

struct pool {
    int threads;              /* including the caller */
    pthread_t *workers;       /* threads - 1 of them */
    void *scratch_block;      /* one allocation for every thread's scratch */
    float *scratch;           /* threads × POOL_SCRATCH_FLOATS, 64-byte aligned; the caller's first */
    int started;              /* workers that took their scratch slot */
    pthread_mutex_t lock;
    pthread_cond_t wake;      /* a new job or shutdown */
    pthread_cond_t done;      /* a worker finished its share */
    atomic_ulong generation; /* bumped for every job */
    atomic_int shutting_down;
    atomic_int busy_workers;
    /* the current job */
    pool_task task;
    void *argument;
    size_t count;
    atomic_size_t next;
};

static void run_share(pool *p, float *scratch) {
    for (;;) {
        size_t index = atomic_fetch_add(&p->next, 1);
        if (index >= p->count) break;
        p->task(p->argument, index, scratch);
    }
}

/* How long a thread spins for the next job (or the last worker) before sleeping. */
#define POOL_SPIN_NS 200000

static long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Tells the CPU this is a spin-wait loop: x86's pause, Arm's yield, nothing elsewhere. */
static inline void spin_pause(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
    __asm__ __volatile__("yield");
#endif
}

/* Spins until done(p, value) or POOL_SPIN_NS pass; returns done's last answer. */
static int spin_until(int (*done)(pool *, unsigned long), pool *p, unsigned long value) {
    long long deadline = 0;
    for (unsigned spins = 0;; spins++) {
        if (done(p, value)) return 1;
        if ((spins & 63) == 0) {
            long long now = now_ns();
            if (!deadline) deadline = now + POOL_SPIN_NS;
            else if (now > deadline) return 0;
        }
        spin_pause();
    }
}

static int job_or_shutdown(pool *p, unsigned long seen) {
    return atomic_load(&p->shutting_down) || atomic_load(&p->generation) != seen;
}

static int workers_finished(pool *p, unsigned long unused) {
    (void)unused;
    return atomic_load(&p->busy_workers) == 0;
}

static void *worker_main(void *argument) {
    pool *p = argument;
    unsigned long seen = 0;
    pthread_mutex_lock(&p->lock);
    float *scratch = p->scratch + (size_t)++p->started * POOL_SCRATCH_FLOATS;
    pthread_mutex_unlock(&p->lock);
    for (;;) {
        if (!spin_until(job_or_shutdown, p, seen)) {
            pthread_mutex_lock(&p->lock);
            while (!job_or_shutdown(p, seen)) pthread_cond_wait(&p->wake, &p->lock);
            pthread_mutex_unlock(&p->lock);
        }
        if (atomic_load(&p->shutting_down)) break;
        seen = atomic_load(&p->generation);
        run_share(p, scratch);
        if (atomic_fetch_sub(&p->busy_workers, 1) == 1) {
            pthread_mutex_lock(&p->lock); /* the caller checks busy_workers under the lock before it sleeps */
            pthread_cond_signal(&p->done);
            pthread_mutex_unlock(&p->lock);
        }
    }
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
    p->scratch_block = malloc((size_t)threads * POOL_SCRATCH_FLOATS * sizeof(float) + 64);
    if (!p->scratch_block) {
        p->threads = 1; /* no workers to join */
        pool_free(p);
        return ERROR_OOM();
    }
    p->scratch = (float *)(((uintptr_t)p->scratch_block + 63) & ~(uintptr_t)63);
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
    return GLIMPSE_STATUS_OK;
}

void pool_free(pool *p) {
    if (!p) return;
    if (p->workers) {
        pthread_mutex_lock(&p->lock);
        atomic_store(&p->shutting_down, 1);
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->lock);
        for (int i = 0; i < p->threads - 1; i++) pthread_join(p->workers[i], NULL);
        free(p->workers);
    }
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->wake);
    pthread_cond_destroy(&p->done);
    free(p->scratch_block);
    free(p);
}

int pool_threads(const pool *p) { return p ? p->threads : 1; }

void pool_for(pool *p, size_t count, pool_task task, void *argument) {
    if (count == 0) return;
    if (!p || p->threads == 1 || count == 1) {
        for (size_t i = 0; i < count; i++) task(argument, i, p ? p->scratch : NULL);
        return;
    }
    pthread_mutex_lock(&p->lock);
    p->task = task;
    p->argument = argument;
    p->count = count;
    atomic_store(&p->next, 0);
    atomic_store(&p->busy_workers, p->threads - 1);
    atomic_fetch_add(&p->generation, 1); /* publishes the job to spinning workers */
    pthread_cond_broadcast(&p->wake);    /* and wakes the sleeping ones */
    pthread_mutex_unlock(&p->lock);
    run_share(p, p->scratch);
    uint64_t waiting = profile_start();
    if (!spin_until(workers_finished, p, 0)) {
        pthread_mutex_lock(&p->lock);
        while (!workers_finished(p, 0)) pthread_cond_wait(&p->done, &p->lock);
        pthread_mutex_unlock(&p->lock);
    }
    profile_stop(PROFILE_THREAD_WAITS, waiting);
}
