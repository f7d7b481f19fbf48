/* roof.c — the machine's roof for bench/run.sh, on THREADS threads:
 *  - fma_peak: each thread runs 16 independent chains of 512-bit fused
 *    multiply-adds (enough to hide the FMA latency on two pipes);
 *  - bandwidth_read: each thread sums its share of a 1 GiB buffer, the way a
 *    caption step reads its weights (median of 5 passes).
 * Prints one JSON line for each; with a second argument "bandwidth", only
 * the bandwidth (bench/run.sh measures it again beside each decoder bench).
 *     cc -O2 -mavx512f -pthread bench/roof.c -o roof && ./roof THREADS [bandwidth] */
#include <immintrin.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define ITERATIONS 100000000L
#define CHAINS 16

static void *chains(void *result) {
    __m512 acc[CHAINS];
    for (int i = 0; i < CHAINS; i++) acc[i] = _mm512_set1_ps((float)i * 1e-3f);
    const __m512 a = _mm512_set1_ps(0.9999f), b = _mm512_set1_ps(1e-5f);
    for (long n = 0; n < ITERATIONS; n++)
#pragma GCC unroll 16
        for (int i = 0; i < CHAINS; i++) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
    float sum = 0;
    for (int i = 0; i < CHAINS; i++) sum += _mm512_reduce_add_ps(acc[i]);
    *(float *)result = sum; /* keeps the loop alive */
    return NULL;
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

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 1;
    if (threads < 1 || threads > 256) return 2;
    if (argc > 2) {
        bandwidth(threads);
        return 0;
    }
    pthread_t id[256];
    float results[256];
    struct timespec start, end;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (int t = 0; t < threads; t++) pthread_create(&id[t], NULL, chains, &results[t]);
    for (int t = 0; t < threads; t++) pthread_join(id[t], NULL);
    clock_gettime(CLOCK_MONOTONIC, &end);
    double seconds = (double)(end.tv_sec - start.tv_sec) + (double)(end.tv_nsec - start.tv_nsec) * 1e-9;
    double flops = (double)threads * ITERATIONS * CHAINS * 16 * 2;
    printf("{\"runtime\": \"roof\", \"stage\": \"fma_peak\", \"threads\": %d, \"gflops\": %.1f}\n", threads,
           flops / seconds / 1e9);
    bandwidth(threads);
    return 0;
}
