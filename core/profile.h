/* profile.h — where a forward pass's time goes, for `glimpse bench --profile`:
 * process-wide counters of the wall time the calling thread spends in each
 * kind of work (products, attention, norms, activations) and, inside those,
 * waiting for the pool's last worker. Off unless profile_enable or
 * GLIMPSE_PROFILE=1 turns it on; when off each probe is one load and branch. */
#ifndef GLIMPSE_CORE_PROFILE_H
#define GLIMPSE_CORE_PROFILE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

typedef enum profile_kind {
    PROFILE_PRODUCTS,     /* linear layers (kernel_linear) */
    PROFILE_ATTENTION,    /* scores, softmax and weighted values (kernel_attention*) */
    PROFILE_NORMS,        /* LayerNorm over rows (apart from a product: kernel_linear_after) */
    PROFILE_ACTIVATIONS,  /* GELU and its kin over rows */
    PROFILE_THREAD_WAITS, /* the caller waiting for the last worker of a parallel step (inside the kinds above) */
    PROFILE_KINDS
} profile_kind;

extern atomic_bool profile_on;

/* Turns the counters on or off (GLIMPSE_PROFILE=1 turns them on at the first probe). */
void profile_enable(bool on);

/* Nanoseconds on a monotonic clock when profiling, else 0: pass to profile_stop. */
uint64_t profile_start(void);
void profile_stop(profile_kind kind, uint64_t started);

/* Leaves this thread's probes out of the counters (on) or counts them again (off): a worker that runs its own
 * share of a batch through every layer, while the caller runs and counts another. */
void profile_mute(bool on);

/* Seconds counted per kind since the process started (or profile_enable). */
void profile_read(double seconds[PROFILE_KINDS]);

/* Counted apart from the kinds, which it contains: captions' decoding (their decoder steps and search, from
 * the first step to the last token; not the vision tower nor the image's keys and values), the time
 * `glimpse bench --captions` divides decoder tokens by. Seconds since the process started (or profile_enable). */
void profile_stop_decoding(uint64_t started);
double profile_read_decoding(void);

#endif
