/* roof.c — the machine's roof for bench/run.sh, on THREADS threads:
 *  - fma_peak: each thread runs 16 independent chains of 512-bit fused
 *    multiply-adds (enough to hide the FMA latency on two pipes);
 *  - vnni_peak (where AVX-512 VNNI is): the same with vpdpbusd, 64 byte
 *    products added into 32-bit sums per instruction, counted as 2 operations
 *    each like a multiply-add (the int8 kernels' roof on a CPU without AMX);
 *  - bf16_peak (where AVX-512 BF16 is): the same with vdpbf16ps, 32 products
 *    of bfloat16 pairs added into float32 sums per instruction (the roof of
 *    the int8 models' attention, whose two products run on bfloat16);
 *  - amx_int8_peak, amx_bf16_peak (where AMX is, and Linux grants the tiles):
 *    tdpbusd / tdpbf16ps on 4 accumulator tiles from 4 source tiles held in
 *    place, 16 × 16 × 64 byte products (× 32 pairs of bfloat16) each;
 *  - bandwidth_read: each thread sums its share of a 1 GiB buffer, the way a
 *    caption step reads its weights (median of 5 passes);
 *  - core_to_core (on 2 threads or more): the one-way time of handing a
 *    cache line to another core, two threads on the first two CPUs this
 *    process may use taking turns to increase one counter (median of 5
 *    passes of 100,000 round trips): what a layer pays each time one core
 *    reads or overwrites rows another core has just written or read.
 * Prints one JSON line for each; with a second argument "bandwidth", only
 * the bandwidth (bench/run.sh measures it again beside each decoder bench);
 * with "core_to_core", only that (bench/steady.sh, beside each process: on a
 * virtual machine it changes as the host moves the virtual CPUs).
 *     cc -O2 -mavx512f -pthread bench/roof.c -o roof && ./roof THREADS [bandwidth|core_to_core]
 * (the VNNI, BF16 and AMX loops are compiled for their instructions by target
 * attributes and run only where cpuid says the CPU has them). */
#define _GNU_SOURCE
#include <cpuid.h>
#include <immintrin.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "roof_loops.h"

#define ITERATIONS 100000000L

static void *chains(void *result) {
    *(float *)result = roof_fma_chains(ITERATIONS); /* keeps the loop alive */
    return NULL;
}

static void *vnni_chains(void *result) {
    *(float *)result = roof_vnni_chains(ITERATIONS);
    return NULL;
}

static void *bf16_chains(void *result) {
    *(float *)result = roof_bf16_chains(ITERATIONS);
    return NULL;
}

#define TILE_ITERATIONS 20000000L

/* Palette 1, every tile 16 rows of 64 bytes. */
static const unsigned char tile_config[64] = {1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                              64, 0, 64, 0, 64, 0, 64, 0, 64, 0, 64, 0, 64, 0, 64, 0,
                                              0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                              16, 16, 16, 16, 16, 16, 16, 16};

/* Tiles 0-3 accumulate, 4-7 are the sources: 4 products a pass, each needing the one before on its tile.
 * (Plain assembly: the CPU is asked before any of it runs, so no target attribute is needed.) */
static void tiles_start(void) {
    static const unsigned char sources[16 * 64] = {1};
    __asm__ volatile("ldtilecfg %0" ::"m"(tile_config));
    __asm__ volatile("tilezero %%tmm0\n\ttilezero %%tmm1\n\ttilezero %%tmm2\n\ttilezero %%tmm3" ::);
    __asm__ volatile("tileloadd (%0,%1,1), %%tmm4\n\ttileloadd (%0,%1,1), %%tmm5\n\t"
                     "tileloadd (%0,%1,1), %%tmm6\n\ttileloadd (%0,%1,1), %%tmm7" ::"r"(sources),
                     "r"((long)64));
}

static void *tiles_end(void *result) {
    float sums[256];
    __asm__ volatile("tilestored %%tmm0, (%0,%1,1)" ::"r"(sums), "r"((long)64) : "memory");
    __asm__ volatile("tilerelease" ::);
    *(float *)result = sums[0]; /* keeps the loop alive */
    return NULL;
}

#define TILE_PRODUCTS(OP) OP " %%tmm6, %%tmm4, %%tmm0\n\t" OP " %%tmm7, %%tmm4, %%tmm1\n\t" \
                          OP " %%tmm6, %%tmm5, %%tmm2\n\t" OP " %%tmm7, %%tmm5, %%tmm3"

static void *amx_int8_chains(void *result) {
    tiles_start();
    for (long n = 0; n < TILE_ITERATIONS; n++) __asm__ volatile(TILE_PRODUCTS("tdpbusd")::);
    return tiles_end(result);
}

static void *amx_bf16_chains(void *result) {
    tiles_start();
    for (long n = 0; n < TILE_ITERATIONS; n++) __asm__ volatile(TILE_PRODUCTS("tdpbf16ps")::);
    return tiles_end(result);
}

/* CPUID leaf 7: EDX bit 24 AMX-TILE, with bit 25 (AMX-INT8) or 22 (AMX-BF16); and Linux's leave to use the
 * tiles (arch_prctl ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA). */
static int amx_usable(unsigned feature_bit) {
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d & (1u << 24)) || !(d & (1u << feature_bit))) return 0;
    return syscall(SYS_arch_prctl, 0x1023L, 18L) == 0;
}

/* Runs body on every thread at once; the seconds they took together. */
static double run_threads(int threads, void *(*body)(void *)) {
    pthread_t id[256];
    float results[256];
    struct timespec start, end;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (int t = 0; t < threads; t++) pthread_create(&id[t], NULL, body, &results[t]);
    for (int t = 0; t < threads; t++) pthread_join(id[t], NULL);
    clock_gettime(CLOCK_MONOTONIC, &end);
    return (double)(end.tv_sec - start.tv_sec) + (double)(end.tv_nsec - start.tv_nsec) * 1e-9;
}

#define BUFFER_FLOATS ((size_t)1 << 28) /* 1 GiB */

typedef struct share {
    const float *start;
    size_t count;
    float result;
} share;

static void *read_share(void *argument) {
    share *part = argument;
    __m512 sum[8];
    for (int v = 0; v < 8; v++) sum[v] = _mm512_setzero_ps();
    for (size_t i = 0; i + 128 <= part->count; i += 128) {
        for (int line = 0; line < 8; line++) /* 4 KiB ahead: the hardware alone reaches less */
            _mm_prefetch((const char *)(part->start + i + 1024 + 16 * line), _MM_HINT_T0);
        for (int v = 0; v < 8; v++) sum[v] = _mm512_add_ps(sum[v], _mm512_loadu_ps(part->start + i + 16 * v));
    }
    for (int v = 1; v < 8; v++) sum[0] = _mm512_add_ps(sum[0], sum[v]);
    part->result = _mm512_reduce_add_ps(sum[0]);
    return NULL;
}

static double seconds_since(const struct timespec *start) {
    struct timespec end;
    clock_gettime(CLOCK_MONOTONIC, &end);
    return (double)(end.tv_sec - start->tv_sec) + (double)(end.tv_nsec - start->tv_nsec) * 1e-9;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void bandwidth(int threads) {
    float *buffer = malloc(BUFFER_FLOATS * sizeof *buffer);
    if (!buffer) return;
    for (size_t i = 0; i < BUFFER_FLOATS; i++) buffer[i] = 1.0f;
    pthread_t id[256];
    share parts[256];
    double times[5];
    for (int pass = 0; pass < 5; pass++) {
        struct timespec start;
        clock_gettime(CLOCK_MONOTONIC, &start);
        for (int t = 0; t < threads; t++) {
            parts[t].start = buffer + BUFFER_FLOATS / (size_t)threads * (size_t)t;
            parts[t].count = BUFFER_FLOATS / (size_t)threads;
            pthread_create(&id[t], NULL, read_share, &parts[t]);
        }
        for (int t = 0; t < threads; t++) pthread_join(id[t], NULL);
        times[pass] = seconds_since(&start);
    }
    qsort(times, 5, sizeof *times, by_value);
    printf("{\"runtime\": \"roof\", \"stage\": \"bandwidth_read\", \"threads\": %d, \"gbytes_per_s\": %.1f}\n",
           threads, (double)BUFFER_FLOATS * sizeof(float) / times[2] / 1e9);
    free(buffer);
}

#define HANDOFFS 100000L

static _Alignas(64) atomic_long handoff_counter;
static int handoff_cpus[2];

/* Pins the calling thread to one CPU; 0 if it cannot. */
static int pin_to(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

/* The second thread: answers each odd count with the next even one. */
static void *handoff_answer(void *ok) {
    *(int *)ok = pin_to(handoff_cpus[1]);
    for (long n = 1; n < 2 * HANDOFFS; n += 2) {
        while (atomic_load_explicit(&handoff_counter, memory_order_acquire) != n) __builtin_ia32_pause();
        atomic_store_explicit(&handoff_counter, n + 1, memory_order_release);
    }
    return NULL;
}

static void core_to_core(int threads) {
    cpu_set_t allowed;
    if (threads < 2 || sched_getaffinity(0, sizeof allowed, &allowed) != 0 || CPU_COUNT(&allowed) < 2) return;
    for (int cpu = 0, found = 0; cpu < CPU_SETSIZE && found < 2; cpu++)
        if (CPU_ISSET(cpu, &allowed)) handoff_cpus[found++] = cpu;
    double times[5];
    int ok = pin_to(handoff_cpus[0]);
    for (int pass = 0; pass < 5 && ok; pass++) {
        atomic_store(&handoff_counter, 0);
        pthread_t other;
        int other_ok = 0;
        if (pthread_create(&other, NULL, handoff_answer, &other_ok) != 0) {
            ok = 0;
            break;
        }
        struct timespec start;
        clock_gettime(CLOCK_MONOTONIC, &start);
        for (long n = 0; n < 2 * HANDOFFS; n += 2) {
            atomic_store_explicit(&handoff_counter, n + 1, memory_order_release);
            while (atomic_load_explicit(&handoff_counter, memory_order_acquire) != n + 2) __builtin_ia32_pause();
        }
        times[pass] = seconds_since(&start);
        pthread_join(other, NULL);
        ok = other_ok;
    }
    pthread_setaffinity_np(pthread_self(), sizeof allowed, &allowed); /* (this thread free again, as it came) */
    if (!ok) return; /* (CPUs this process may not pin to: no figure rather than a wrong one) */
    qsort(times, 5, sizeof *times, by_value);
    printf("{\"runtime\": \"roof\", \"stage\": \"core_to_core\", \"threads\": 2, \"cpus\": \"%d,%d\", \"ns\": %.1f}\n",
           handoff_cpus[0], handoff_cpus[1], times[2] / (2.0 * HANDOFFS) * 1e9);
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 1;
    if (threads < 1 || threads > 256) return 2;
    if (argc > 2) {
        if (strcmp(argv[2], "core_to_core") == 0) core_to_core(threads);
        else if (strcmp(argv[2], "bandwidth") == 0) bandwidth(threads);
        else {
            fprintf(stderr, "roof: the second argument is bandwidth or core_to_core, not %s\n", argv[2]);
            return 2;
        }
        return 0;
    }
    double seconds = run_threads(threads, chains);
    printf("{\"runtime\": \"roof\", \"stage\": \"fma_peak\", \"threads\": %d, \"gflops\": %.1f}\n", threads,
           (double)threads * ITERATIONS * ROOF_CHAINS * 16 * 2 / seconds / 1e9);
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512vnni")) {
        seconds = run_threads(threads, vnni_chains);
        printf("{\"runtime\": \"roof\", \"stage\": \"vnni_peak\", \"threads\": %d, \"gops\": %.1f}\n", threads,
               (double)threads * ITERATIONS * ROOF_CHAINS * 64 * 2 / seconds / 1e9);
    }
    if (__builtin_cpu_supports("avx512bf16")) {
        seconds = run_threads(threads, bf16_chains);
        printf("{\"runtime\": \"roof\", \"stage\": \"bf16_peak\", \"threads\": %d, \"gflops\": %.1f}\n", threads,
               (double)threads * ITERATIONS * ROOF_CHAINS * 32 * 2 / seconds / 1e9);
    }
    if (amx_usable(25)) {
        seconds = run_threads(threads, amx_int8_chains);
        printf("{\"runtime\": \"roof\", \"stage\": \"amx_int8_peak\", \"threads\": %d, \"gops\": %.1f}\n", threads,
               (double)threads * TILE_ITERATIONS * 4 * 16 * 16 * 64 * 2 / seconds / 1e9);
    }
    if (amx_usable(22)) {
        seconds = run_threads(threads, amx_bf16_chains);
        printf("{\"runtime\": \"roof\", \"stage\": \"amx_bf16_peak\", \"threads\": %d, \"gflops\": %.1f}\n",
               threads, (double)threads * TILE_ITERATIONS * 4 * 16 * 16 * 32 * 2 / seconds / 1e9);
    }
    bandwidth(threads);
    core_to_core(threads);
    return 0;
}
