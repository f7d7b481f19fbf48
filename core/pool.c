/* pool.c — fixed thread pool with a parallel-for. Tasks are handed out by a
 * ticket (the job's number and the next index, taken by compare-and-swap) so
 * uneven tasks balance themselves and a worker that wakes late can never take
 * a task of a job it did not read. The caller returns as soon as every task
 * has finished: it never waits for a worker that took none (one the system
 * had not yet run, or had put on the caller's own core), which would make a
 * forward pass two to three times slower when it happens. Between jobs a
 * worker first spins for a short while (POOL_SPIN_NS) watching for the next
 * one, then sleeps on a condition variable; the caller waits for the last
 * task the same way. A forward pass is a chain of short parallel steps (a
 * ViT-B/32 image: ~60 of 0.1–1 ms), and a futex sleep and wake-up at each
 * step cost 9% of the time in a virtual machine. */
#define _GNU_SOURCE /* sched_getaffinity, sched_getcpu, pthread_setaffinity_np */
#include "core/pool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "core/memory.h"
#include "core/profile.h"

struct pool {
    int threads;              /* including the caller */
    pthread_t *workers;       /* threads - 1 of them */
    void *scratch_block;      /* one allocation for every thread's scratch */
    float *scratch;           /* threads × POOL_SCRATCH_FLOATS, 64-byte aligned; the caller's first */
    void *shared;             /* pool_shared_buffer's, shared_bytes long, 64-byte aligned */
    struct pool *alone;       /* pool_alone's pools, one a thread, made with a pool of more than one (theirs NULL) */
    size_t shared_bytes;
    int started;              /* workers that took their scratch slot */
    int spawned;              /* whether the workers were started: at the first job of more than one task */
    int pinned;               /* whether the workers are pinned, worker i to cpus[i] */
    int cpus[POOL_MAX_THREADS];
    pthread_mutex_t lock;
    pthread_cond_t wake;      /* a new job or shutdown */
    pthread_cond_t done;      /* the current job's last task finished */
    atomic_ulong generation;  /* the current job's number, published after its fields */
    atomic_int shutting_down;
    /* the current job: written by the caller only while its ticket is closed */
    _Atomic(pool_task) task;
    _Atomic(void *) argument;
    atomic_size_t count;
    atomic_uint_least64_t ticket; /* (job number mod 2^32) << 32 | next index; TICKET_CLOSED while written */
    atomic_size_t finished;       /* tasks of the current job done */
};

#define TICKET_CLOSED 0xffffffffu

/* Takes and runs tasks of job `job` (task, argument and count as read for
 * it) until none is left. A stale reading (the caller has moved on to a later
 * job) takes nothing: the ticket's job number no longer matches. */
static void run_tasks(pool *p, uint32_t job, pool_task task, void *argument, size_t count, float *scratch) {
    uint64_t ticket = atomic_load(&p->ticket);
    for (;;) {
        uint64_t index = ticket & 0xffffffffu;
        if ((uint32_t)(ticket >> 32) != job || index >= count) return;
        if (!atomic_compare_exchange_weak(&p->ticket, &ticket, ticket + 1)) continue; /* (ticket reloaded) */
        task(argument, (size_t)index, scratch);
        if (atomic_fetch_add(&p->finished, 1) + 1 == count) {
            pthread_mutex_lock(&p->lock); /* the caller checks finished under the lock before it sleeps */
            pthread_cond_signal(&p->done);
            pthread_mutex_unlock(&p->lock);
        }
        ticket = atomic_load(&p->ticket);
    }
}

/* How long a thread spins for the next job (or the last worker) before sleeping. */
#define POOL_SPIN_NS 200000

static long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000 + t.tv_nsec;
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
        pool_spin_pause();
    }
}

static int job_or_shutdown(pool *p, unsigned long seen) {
    return atomic_load(&p->shutting_down) || atomic_load(&p->generation) != seen;
}

static int job_finished(pool *p, unsigned long count) { return atomic_load(&p->finished) == count; }

static void *worker_main(void *argument) {
    pool *p = argument;
    unsigned long seen = 0;
    pthread_mutex_lock(&p->lock);
    int slot = ++p->started;
    float *scratch = p->scratch + (size_t)slot * POOL_SCRATCH_FLOATS;
    pthread_mutex_unlock(&p->lock);
    if (p->pinned) { /* best effort: a refusal (a cgroup's cpuset changed meanwhile) leaves the thread unpinned */
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(p->cpus[slot - 1], &set);
        pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    }
    for (;;) {
        if (!spin_until(job_or_shutdown, p, seen)) {
            pthread_mutex_lock(&p->lock);
            while (!job_or_shutdown(p, seen)) pthread_cond_wait(&p->wake, &p->lock);
            pthread_mutex_unlock(&p->lock);
        }
        if (atomic_load(&p->shutting_down)) break;
        seen = atomic_load(&p->generation);
        run_tasks(p, (uint32_t)seen, atomic_load(&p->task), atomic_load(&p->argument), atomic_load(&p->count),
                  scratch);
    }
    return NULL;
}

/* Pins the workers, one CPU each, when GLIMPSE_PIN_THREADS=1 and the process may run on at least as many CPUs
 * as the pool has threads: the caller's current CPU is left to the caller, the workers take the others in
 * order (cpus[i] for worker i). The caller itself is never pinned (its affinity is the application's); the
 * scheduler moves it off a worker's CPU, as the workers can no longer move. Off by default: pinning keeps two
 * spinning threads from sharing one core while the other idles, but on a loaded 2-core VM pinned workers
 * measure no steadier (ViT-B/32 batch 1, 10 alternating processes: median 121 ms pinned, 117 ms not), and
 * a library that pins threads takes a choice from the application. Returns whether it pinned. */
static int pin_workers(int threads, int *cpus) {
    const char *setting = getenv("GLIMPSE_PIN_THREADS");
    if (threads < 2 || !setting || strcmp(setting, "1") != 0) return 0;
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0 || CPU_COUNT(&allowed) < threads) return 0;
    int own = sched_getcpu(), taken = 0;
    for (int cpu = 0; cpu < CPU_SETSIZE && taken < threads - 1; cpu++)
        if (CPU_ISSET(cpu, &allowed) && cpu != own) cpus[taken++] = cpu;
    return taken == threads - 1; /* (fewer: own was not in the allowed set, the reading raced a migration) */
}

glimpse_status pool_create(int threads, pool **out) {
    *out = NULL;
    if (threads <= 0) {
        long online = sysconf(_SC_NPROCESSORS_ONLN);
        threads = online > 0 ? (int)online : 1;
    }
    if (threads > POOL_MAX_THREADS) return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "thread count %d is over 256", threads);
    pool *p = calloc(1, sizeof *p);
    if (!p) return ERROR_OOM();
    p->threads = threads;
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->done, NULL);
    /* (on huge pages: 1 MiB a thread, whose 4 KiB faults in the first forward took ViT-B/32's `glimpse embed` of
     * one photograph from 154 to 167 ms in a virtual machine) */
    p->scratch_block = memory_large((size_t)threads * POOL_SCRATCH_FLOATS * sizeof(float) + 64);
    if (!p->scratch_block) {
        p->threads = 1; /* no workers to join */
        pool_free(p);
        return ERROR_OOM();
    }
    p->scratch = (float *)(((uintptr_t)p->scratch_block + 63) & ~(uintptr_t)63);
    if (threads > 1) {
        p->pinned = pin_workers(threads, p->cpus);
        p->workers = calloc((size_t)threads - 1, sizeof *p->workers);
        p->alone = calloc((size_t)threads, sizeof *p->alone);
        if (!p->workers || !p->alone) {
            pool_free(p);
            return ERROR_OOM();
        }
        for (int i = 0; i < threads; i++)
            p->alone[i].threads = 1, p->alone[i].scratch = p->scratch + (size_t)i * POOL_SCRATCH_FLOATS;
    }
    *out = p;
    return GLIMPSE_STATUS_OK;
}

/* Starts the workers, at the pool's first job of more than one task: a pool that never has one (a model's load
 * with nothing to share out, a context that only ever runs one-row steps) starts no thread. A worker that
 * cannot start leaves the pool with those before it: the jobs then run on fewer threads. */
static void spawn_workers(pool *p) {
    p->spawned = 1;
    for (int i = 0; i < p->threads - 1; i++)
        if (pthread_create(&p->workers[i], NULL, worker_main, p) != 0) {
            p->threads = i + 1; /* (only the ones started get joined) */
            return;
        }
}

void pool_free(pool *p) {
    if (!p) return;
    if (p->workers && p->spawned) {
        pthread_mutex_lock(&p->lock);
        atomic_store(&p->shutting_down, 1);
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->lock);
        for (int i = 0; i < p->threads - 1; i++) pthread_join(p->workers[i], NULL);
    }
    free(p->workers);
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->wake);
    pthread_cond_destroy(&p->done);
    free(p->scratch_block);
    free(p->shared);
    for (int i = 0; p->alone && i < p->threads; i++) free(p->alone[i].shared);
    free(p->alone);
    free(p);
}

int pool_thread_of(const pool *p, const float *scratch) {
    if (!p || !scratch) return 0;
    size_t thread = (size_t)(scratch - p->scratch) / POOL_SCRATCH_FLOATS;
    return thread < (size_t)p->threads ? (int)thread : 0;
}

pool *pool_alone(pool *p, int thread) {
    if (!p || thread < 0 || thread >= p->threads) return NULL;
    return p->alone ? &p->alone[thread] : p;
}

void *pool_shared_buffer(pool *p, size_t bytes) {
    if (!p) return NULL;
    if (bytes <= p->shared_bytes) return p->shared;
    size_t grown = (bytes > SIZE_MAX / 2 ? bytes : bytes + bytes / 2 + 63) / 64 * 64; /* room for a little more */
    if (grown < bytes) return NULL;
    void *buffer = aligned_alloc(64, grown);
    if (!buffer) return NULL;
    free(p->shared);
    p->shared = buffer, p->shared_bytes = grown;
    return buffer;
}

int pool_threads(const pool *p) { return p ? p->threads : 1; }

void pool_for_here(pool *p, size_t count, pool_task task, void *argument) {
    for (size_t i = 0; i < count; i++) task(argument, i, p ? p->scratch : NULL);
}

void pool_for(pool *p, size_t count, pool_task task, void *argument) {
    if (count == 0) return;
    if (p && !p->spawned && p->threads > 1 && count > 1) spawn_workers(p);
    if (!p || p->threads == 1 || count == 1 || count >= TICKET_CLOSED) { /* (no parallel step has 2^32 tasks) */
        pool_for_here(p, count, task, argument);
        return;
    }
    /* every task of the last job has finished (pool_for returned): close the ticket, so that a worker still
     * holding a stale reading takes nothing, then write the job and publish it */
    pthread_mutex_lock(&p->lock);
    unsigned long generation = atomic_load(&p->generation) + 1;
    uint64_t job = (uint32_t)generation;
    atomic_store(&p->ticket, job << 32 | TICKET_CLOSED);
    atomic_store(&p->task, task);
    atomic_store(&p->argument, argument);
    atomic_store(&p->count, count);
    atomic_store(&p->finished, 0);
    atomic_store(&p->ticket, job << 32);
    atomic_store(&p->generation, generation); /* publishes the job to spinning workers */
    pthread_cond_broadcast(&p->wake);         /* and wakes the sleeping ones */
    pthread_mutex_unlock(&p->lock);
    run_tasks(p, (uint32_t)job, task, argument, count, p->scratch);
    uint64_t waiting = profile_start();
    if (!spin_until(job_finished, p, count)) {
        pthread_mutex_lock(&p->lock);
        while (!job_finished(p, count)) pthread_cond_wait(&p->done, &p->lock);
        pthread_mutex_unlock(&p->lock);
    }
    profile_stop(PROFILE_THREAD_WAITS, waiting);
}
