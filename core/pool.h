/* pool.h — the one place threads live: a fixed pool of workers created once
 * and a blocking parallel-for over task indices. No model knowledge. */
#ifndef GLIMPSE_CORE_POOL_H
#define GLIMPSE_CORE_POOL_H

#include <stddef.h>

#include "glimpse.h"

typedef struct pool pool;

#define POOL_MAX_THREADS 256

/* Every thread of a pool (the caller's turn included) owns this many floats
 * of scratch, aligned to 64 bytes, for kernels that rearrange their inputs
 * (the linear layer's panels: 48 rows × up to 5,461 features). */
#define POOL_SCRATCH_FLOATS ((size_t)1 << 18)

/* Runs task(argument, index, scratch) for index in [0, count). scratch is the
 * running thread's POOL_SCRATCH_FLOATS floats, or NULL when the pool is NULL. */
typedef void (*pool_task)(void *argument, size_t index, float *scratch);

/* Creates a pool of `threads` workers in total, the calling thread counted
 * (threads <= 0 means all online cores). Caller frees with pool_free. The
 * workers start at the first pool_for of more than one task (one that cannot
 * start leaves the pool smaller: pool_threads says how many it has). */
glimpse_status pool_create(int threads, pool **out);
void pool_free(pool *p);
int pool_threads(const pool *p);

/* A buffer of at least `bytes` bytes, 64-byte aligned, owned by the pool and
 * kept for its next uses (grown when a use needs more): what a step's tasks
 * share, such as a product's input quantized once. Valid until the next call
 * or pool_free; one user at a time, like the pool itself. NULL if it cannot
 * grow or p is NULL (the caller then does without). */
void *pool_shared_buffer(pool *p, size_t bytes);

/* Calls task for every index, spread over the workers and the caller, and
 * returns when all are done. A NULL pool runs everything on the caller.
 * Not reentrant: a task must not call pool_for on the same pool. */
void pool_for(pool *p, size_t count, pool_task task, void *argument);

/* Calls task for every index on the calling thread, with its scratch (NULL if p is NULL): for work too small
 * to share out that still wants the room. */
void pool_for_here(pool *p, size_t count, pool_task task, void *argument);

/* Which of p's threads owns scratch, a task's (0: the caller of pool_for, also for a NULL pool or scratch). */
int pool_thread_of(const pool *p, const float *scratch);

/* A pool of one thread whose scratch is thread `thread`'s of p, with a shared buffer of its own: what a task
 * of p's passes to the kernels it runs on its own (a share of a batch, through every layer), so that they use
 * its thread's scratch and nothing else (a one-thread p is its own). Made with p and freed with it; NULL only if
 * p is NULL or has no such thread. Only the thread that owns the scratch may use it, and never pool_free it. */
pool *pool_alone(pool *p, int thread);

/* Tells the CPU this is a spin-wait loop: x86's pause, Arm's yield, nothing elsewhere (the pool's own waits,
 * and tasks that wait on one another's parts). */
static inline void pool_spin_pause(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
    __asm__ __volatile__("yield");
#endif
}

#endif
