/* fma_peak.c — the machine's float32 FMA roof for bench/run.sh: each thread
 * runs 16 independent chains of 512-bit fused multiply-adds (enough to hide
 * the FMA latency on two pipes) for a fixed count; prints one JSON line.
 *     cc -O2 -mavx512f -pthread bench/fma_peak.c -o fma_peak && ./fma_peak THREADS */
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

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 1;
    if (threads < 1 || threads > 256) return 2;
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
    return 0;
}
