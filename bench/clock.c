/* clock.c — the cores' clock under each kind of work, and what each does a cycle: how much of a product's
 * distance from bench/roof.c's loops is the clock the processor gives it, and how much the kernel's own.
 *
 * On 1 and then on every one of THREADS threads (pinned to the first CPUs this process may use), each thread runs
 * one kind of work alone for SECONDS, in slices of a millisecond or more; after each slice it times a chain of
 * dependent additions (one a cycle, 160,000 of them, 45 µs at 3.5 GHz), whose rate is the clock its core ran the
 * slice at (a chain of multiplications, 3 cycles each, gave the same clock within 1% on a Zen 5). The kinds: idle
 * (sleeping), bench/roof.c's FMA and VNNI loops (16 chains of 512-bit multiply-adds each, in registers), and
 * kernel_linear's float32 and int8 products (a thread's own, on a pool of one: nothing crosses between the cores)
 * at 768 → 768 on 50 and 200 rows, ViT-B/32's width at a picture and at the 4 pictures a thread takes of a batch of
 * 8. Prints a markdown table: each kind's median clock over the threads' samples, its work a second on each core
 * (GFLOP/s, GOP/s for int8), what that is a cycle, and its fraction of the loop of its kind, a second and a cycle.
 *     cc -O2 -I. -Iinclude -Ibuild bench/clock.c build/libglimpse_core.a -lm -pthread -ldl -o clock
 *     ./clock THREADS [SECONDS]          (bench/clock.sh builds it and writes the page) */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/cpu.h"
#include "core/kernels.h"
#include "core/pool.h"
#include "core/quantize.h"
#include "roof_loops.h"

#define MAX_THREADS 64
#define MAX_SAMPLES 100000
#define CHAIN_LOOPS 20000 /* × 8 additions */
#define LOOP_ITERATIONS 100000L
#define IN 768
#define OUT 768

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* GHz: 160,000 dependent additions timed. */
static double chain_clock(void) {
    long x = 0;
    double start = now();
    for (long i = 0; i < CHAIN_LOOPS; i++)
        __asm__ volatile("add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\t"
                         "add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0"
                         : "+r"(x));
    return 8.0 * CHAIN_LOOPS / (now() - start) * 1e-9;
}

/* The loops' slices: 100,000 passes of bench/roof.c's loops; the operations done. */
static double fma_loop(void) {
    volatile float keep = roof_fma_chains(LOOP_ITERATIONS);
    (void)keep;
    return (double)LOOP_ITERATIONS * ROOF_CHAINS * 16 * 2;
}

static double vnni_loop(void) {
    volatile float keep = roof_vnni_chains(LOOP_ITERATIONS);
    (void)keep;
    return (double)LOOP_ITERATIONS * ROOF_CHAINS * 64 * 2;
}

typedef enum kind { IDLE, FMA_LOOP, VNNI_LOOP, PRODUCT_F32, PRODUCT_INT8 } kind;

/* The int8 kinds (VNNI's), which count operations rather than floating-point ones. */
static bool int8_kind(kind k) { return k == VNNI_LOOP || k == PRODUCT_INT8; }

#define MOST_ROWS 200
typedef struct work {
    const char *name;
    kind kind;
    size_t rows; /* a product's, at most MOST_ROWS */
} work;

/* (each loop before the products measured against it) */
static const work works[] = {
    {"idle", IDLE, 0},
    {"FMA loop", FMA_LOOP, 0},
    {"VNNI loop", VNNI_LOOP, 0},
    {"float32 product 768 → 768, 50 rows", PRODUCT_F32, 50},
    {"float32 product 768 → 768, 200 rows", PRODUCT_F32, MOST_ROWS},
    {"int8 product 768 → 768, 50 rows", PRODUCT_INT8, 50},
    {"int8 product 768 → 768, 200 rows", PRODUCT_INT8, MOST_ROWS},
};
#define WORKS (sizeof works / sizeof *works)

typedef struct thread_job {
    const work *work;
    int cpu;
    double seconds;
    const kernel_weight *f32, *int8;
    atomic_int *ready;
    int threads;
    /* out */
    double *samples; /* clocks, GHz */
    size_t count;
    double done, busy; /* operations, and the seconds the slices took */
    int failed;
} thread_job;

/* One slice of work of a millisecond or more; the operations done. */
static double slice(const thread_job *job, pool *threads, const float *in, float *out) {
    double ops = 0, start = now();
    do {
        switch (job->work->kind) {
        case IDLE: {
            struct timespec pause = {0, 1000000};
            nanosleep(&pause, NULL);
            break;
        }
        case FMA_LOOP: ops += fma_loop(); break;
        case VNNI_LOOP: ops += vnni_loop(); break;
        case PRODUCT_F32:
        case PRODUCT_INT8:
            kernel_linear(out, OUT, in, IN, job->work->kind == PRODUCT_F32 ? job->f32 : job->int8, NULL,
                          job->work->rows, IN, OUT, false, threads);
            ops += 2.0 * (double)job->work->rows * IN * OUT;
            break;
        }
    } while (now() - start < 1e-3);
    return ops;
}

static void *run(void *argument) {
    thread_job *job = argument;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(job->cpu, &set);
    pool *threads = NULL;
    float *in = malloc(MOST_ROWS * IN * sizeof(float)), *out = malloc(MOST_ROWS * OUT * sizeof(float));
    job->samples = malloc(MAX_SAMPLES * sizeof(double));
    job->failed = pthread_setaffinity_np(pthread_self(), sizeof set, &set) != 0 || !in || !out || !job->samples ||
                  pool_create(1, &threads) != GLIMPSE_STATUS_OK;
    for (size_t i = 0; in && i < MOST_ROWS * IN; i++) in[i] = (float)((i * 7) % 13) * 0.1f - 0.6f;
    atomic_fetch_add(job->ready, 1);
    while (atomic_load(job->ready) < job->threads) { /* (all start together) */
    }
    if (!job->failed) {
        slice(job, threads, in, out); /* (warm: weights in the caches, the pool's scratch touched) */
        double start = now();
        while (now() - start < job->seconds && job->count < MAX_SAMPLES) {
            double before = now();
            job->done += slice(job, threads, in, out);
            job->busy += now() - before;
            job->samples[job->count++] = chain_clock();
        }
    }
    pool_free(threads);
    free(in);
    free(out);
    return NULL;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef struct result {
    double clock, rate; /* GHz (median of every sample); operations a second on each core (mean of the cores) */
    int measured;
} result;

static result measure(const work *w, int threads, const int *cpus, double seconds, const kernel_weight *f32,
                      const kernel_weight *int8) {
    thread_job jobs[MAX_THREADS];
    pthread_t ids[MAX_THREADS];
    atomic_int ready = 0;
    result r = {0};
    int started = 0;
    for (int t = 0; t < threads; t++) {
        jobs[t] = (thread_job){.work = w, .cpu = cpus[t], .seconds = seconds, .f32 = f32, .int8 = int8,
                               .ready = &ready, .threads = threads};
        if (pthread_create(&ids[t], NULL, run, &jobs[t]) != 0) break;
        started++;
    }
    if (started < threads) atomic_fetch_add(&ready, threads - started); /* (let the started ones go) */
    for (int t = 0; t < started; t++) pthread_join(ids[t], NULL);
    size_t total = 0;
    int failed = started < threads;
    for (int t = 0; t < started; t++) total += jobs[t].count, failed |= jobs[t].failed;
    double *all = malloc((total ? total : 1) * sizeof(double));
    if (!failed && all && total) {
        size_t n = 0;
        for (int t = 0; t < threads; t++) {
            memcpy(all + n, jobs[t].samples, jobs[t].count * sizeof(double));
            n += jobs[t].count;
            r.rate += jobs[t].busy > 0 ? jobs[t].done / jobs[t].busy / threads : 0;
        }
        qsort(all, total, sizeof *all, by_value);
        r.clock = all[total / 2];
        r.measured = 1;
    }
    free(all);
    for (int t = 0; t < started; t++) free(jobs[t].samples);
    return r;
}

int main(int argc, char **argv) {
    int most = argc > 1 ? atoi(argv[1]) : 0;
    double seconds = argc > 2 ? atof(argv[2]) : 2.0;
    if (most < 1 || most > MAX_THREADS || !(seconds > 0 && seconds < 600)) {
        fprintf(stderr, "usage: clock THREADS [SECONDS]   (THREADS 1-%d; SECONDS a kind of work, default 2)\n",
                MAX_THREADS);
        return 2;
    }
    if (!cpu_has_avx512()) {
        fprintf(stderr, "clock: this processor has no AVX-512, whose loops and kernels this measures\n");
        return 2;
    }
    cpu_set_t allowed;
    int cpus[MAX_THREADS], found = 0;
    if (sched_getaffinity(0, sizeof allowed, &allowed) == 0)
        for (int cpu = 0; cpu < CPU_SETSIZE && found < most; cpu++)
            if (CPU_ISSET(cpu, &allowed)) cpus[found++] = cpu;
    if (found < most) {
        fprintf(stderr, "clock: this process may run on %d CPUs, fewer than the %d threads asked\n", found, most);
        return 2;
    }
    float *weights = malloc((size_t)IN * OUT * sizeof(float));
    if (!weights) return 1;
    for (size_t i = 0; i < (size_t)IN * OUT; i++) weights[i] = (float)((i * 31) % 17) * 0.01f - 0.08f;
    kernel_weight f32 = kernel_weight_f32(weights), int8 = f32;
    kernel_q8 q;
    int have_int8 = cpu_has_avx512_vnni() && kernel_q8_quantize(&q, &f32, OUT, IN, q8_layout_best(), NULL) == 0;
    int8.q8 = have_int8 ? &q : NULL;

    int counts[2] = {1, most};
    printf("| work | threads | clock (GHz) | a core, a second | a core, a cycle | of its loop, a second | "
           "of its loop, a cycle |\n|---|---|---|---|---|---|---|\n");
    for (int c = 0; c < (most > 1 ? 2 : 1); c++) {
        result fma = {0}, vnni = {0}; /* the loops', on as many threads */
        for (size_t k = 0; k < WORKS; k++) {
            const work *w = &works[k];
            if (int8_kind(w->kind) && !have_int8) continue;
            const result r = measure(w, counts[c], cpus, seconds, &f32, &int8);
            if (!r.measured) {
                fprintf(stderr, "clock: %s on %d threads could not run (threads, memory or pinning)\n", w->name,
                        counts[c]);
                return 1;
            }
            const char *unit = int8_kind(w->kind) ? "GOP/s" : "GFLOP/s";
            printf("| %s | %d | %.2f |", w->name, counts[c], r.clock);
            if (w->kind == IDLE) {
                printf(" – | – | – | – |\n");
                continue;
            }
            double per_cycle = r.rate / (r.clock * 1e9);
            printf(" %.1f %s | %.1f |", r.rate * 1e-9, unit, per_cycle);
            if (w->kind == FMA_LOOP) fma = r;
            if (w->kind == VNNI_LOOP) vnni = r;
            /* (on AMX, int8 products of 16 rows or more run on the tiles, whose loop this does not run) */
            const result *loop = w->kind == PRODUCT_F32                             ? &fma
                                 : w->kind == PRODUCT_INT8 && !cpu_has_amx_int8() ? &vnni
                                                                                   : NULL;
            if (!loop || !loop->measured) {
                printf(" – | – |\n");
                continue;
            }
            printf(" %.0f%% | %.0f%% |\n", 100 * r.rate / loop->rate,
                   100 * per_cycle / (loop->rate / (loop->clock * 1e9)));
        }
    }
    if (have_int8 && cpu_has_amx_int8())
        printf("\nThe int8 products ran on AMX's tiles (bench/roof.c measures their loop), not against the VNNI "
               "loop.\n");
    if (have_int8) kernel_q8_free(&q);
    free(weights);
    return 0;
}
