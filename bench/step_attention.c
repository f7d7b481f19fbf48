/* step_attention.c — a decoder step's self-attention alone: one query a head over every layer's own cache
 * (written first, so its pages are real), as a Llama/Qwen2 step runs it after `keys` positions; the medians of
 * 15 passes over the layers, with their spread. For a change to core/attention.c, built against the parent's
 * and the change's build trees and run in turn:
 *     cc -O2 -I. -Iinclude -Ibuild bench/step_attention.c build/libglimpse_core.a -lm -pthread -ldl -o step_attention
 *     ./step_attention THREADS HEADS KV_HEADS HEAD_DIM LAYERS KEYS...
 * e.g. Qwen2-0.5B's 14 query heads on 2 key/value heads of 64: `./step_attention 2 14 2 64 24 761 1785`.
 * One JSON line per count of keys. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "core/kernels.h"
#include "core/pool.h"

#define PASSES 15

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int compare(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    if (argc < 7) {
        fprintf(stderr, "usage: %s THREADS HEADS KV_HEADS HEAD_DIM LAYERS KEYS...\n", argv[0]);
        return 2;
    }
    int threads = atoi(argv[1]);
    size_t heads = (size_t)atol(argv[2]), kv_heads = (size_t)atol(argv[3]), head_dim = (size_t)atol(argv[4]);
    size_t layers = (size_t)atol(argv[5]), most = 0;
    for (int a = 6; a < argc; a++)
        if ((size_t)atol(argv[a]) > most) most = (size_t)atol(argv[a]);
    if (!threads || !heads || !kv_heads || heads % kv_heads || !head_dim || !layers || !most) {
        fprintf(stderr, "%s: heads must be a multiple of kv_heads, every count above 0\n", argv[0]);
        return 2;
    }
    size_t q_width = heads * head_dim, kv_width = kv_heads * head_dim, layer_floats = most * kv_width;
    float *k = malloc(layers * layer_floats * sizeof(float)), *v = malloc(layers * layer_floats * sizeof(float));
    float *q = malloc(q_width * sizeof(float)), *out = malloc(q_width * sizeof(float));
    float *scores = malloc(heads * most * sizeof(float));
    pool *workers = NULL;
    if (!k || !v || !q || !out || !scores || pool_create(threads, &workers)) {
        fprintf(stderr, "%s: out of memory\n", argv[0]);
        return 1;
    }
    for (size_t i = 0; i < layers * layer_floats; i++)
        k[i] = sinf(0.37f * (float)(i % 10007)), v[i] = cosf(0.11f * (float)(i % 9973));
    for (size_t i = 0; i < q_width; i++) q[i] = sinf(1.3f * (float)i);
    float scale = 1.0f / sqrtf((float)head_dim);
    for (int a = 6; a < argc; a++) {
        size_t keys = (size_t)atol(argv[a]);
        double times[PASSES];
        for (int p = 0; p < PASSES; p++) {
            double start = now();
            for (size_t l = 0; l < layers; l++)
                kernel_attention_grouped(out, q_width, NULL, q, q_width, k + l * layer_floats, v + l * layer_floats,
                                         kv_width, 1, keys, heads, heads / kv_heads, head_dim, scale,
                                         KERNEL_MASK_CAUSAL, scores, workers);
            times[p] = now() - start;
        }
        qsort(times, PASSES, sizeof times[0], compare);
        double bytes = 2.0 * (double)layers * (double)keys * (double)kv_width * sizeof(float);
        printf("{\"stage\": \"step_attention\", \"threads\": %d, \"heads\": %zu, \"kv_heads\": %zu, \"head_dim\": %zu, "
               "\"layers\": %zu, \"keys\": %zu, \"median_ms\": %.3f, \"min_ms\": %.3f, \"max_ms\": %.3f, "
               "\"cache_gbytes_per_s\": %.1f}\n",
               threads, heads, kv_heads, head_dim, layers, keys, 1e3 * times[PASSES / 2], 1e3 * times[0],
               1e3 * times[PASSES - 1], bytes / times[PASSES / 2] / 1e9);
    }
    pool_free(workers);
    free(k), free(v), free(q), free(out), free(scores);
    return 0;
}
