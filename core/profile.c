/* profile.c — the counters of profile.h: one atomic sum of nanoseconds per
 * kind of work, added to by whichever thread drives a forward pass. */
#include "core/profile.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

atomic_bool profile_on;
static atomic_uint_fast64_t totals[PROFILE_KINDS], decoding;
static atomic_int environment_read;
static _Thread_local bool muted;

void profile_mute(bool on) { muted = on; }

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

void profile_enable(bool on) {
    atomic_store(&environment_read, 1);
    for (int k = 0; k < PROFILE_KINDS; k++) atomic_store(&totals[k], 0);
    atomic_store(&decoding, 0);
    atomic_store(&profile_on, on);
}

uint64_t profile_start(void) {
    if (!atomic_load_explicit(&environment_read, memory_order_relaxed)) {
        const char *value = getenv("GLIMPSE_PROFILE");
        if (!atomic_exchange(&environment_read, 1) && value && strcmp(value, "1") == 0) atomic_store(&profile_on, true);
    }
    return atomic_load_explicit(&profile_on, memory_order_relaxed) && !muted ? now_ns() : 0;
}

void profile_stop(profile_kind kind, uint64_t started) {
    if (started) atomic_fetch_add_explicit(&totals[kind], now_ns() - started, memory_order_relaxed);
}

void profile_read(double seconds[PROFILE_KINDS]) {
    for (int k = 0; k < PROFILE_KINDS; k++) seconds[k] = (double)atomic_load(&totals[k]) * 1e-9;
}

void profile_stop_decoding(uint64_t started) {
    if (started) atomic_fetch_add_explicit(&decoding, now_ns() - started, memory_order_relaxed);
}

double profile_read_decoding(void) { return (double)atomic_load(&decoding) * 1e-9; }
