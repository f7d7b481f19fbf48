/* test_threads.c — one loaded model of each kind shared by 8 threads, each
 * with its own context, embedding and captioning at the same time: every
 * result is bit-identical to the single-threaded one. Uses the bundled demo
 * models, so it needs no fixtures; core/prefetch's producer thread; the pool's pinning; the int8
 * product's tasks, which prepare their shared input part by part for one another; and an int8 batch shared out
 * by sequences over the threads (encoder_stack_forward). */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/encoder_layer.h"
#include "core/file.h"
#include "core/kernels.h"
#include "core/pool.h"
#include "core/prefetch.h"
#include "core/quantize.h"
#include "glimpse.h"
#include "tests/support.h"

#define IMAGES 6
#define DIM_MAX 512

static glimpse_model *clip, *blip;
static glimpse_image *images[IMAGES];
static const char *texts[3] = {"a red circle", "a blue square above a green triangle", "a yellow shape"};

typedef struct result {
    float image_embeddings[IMAGES * DIM_MAX];
    float text_embeddings[3 * DIM_MAX];
    char captions[IMAGES][160];
    int32_t ids[IMAGES][32];
    size_t id_counts[IMAGES];
    int status;
} result;

static void *work(void *argument) {
    result *r = argument;
    glimpse_context *embedder = NULL, *captioner = NULL;
    glimpse_context_params params = glimpse_context_default_params();
    params.threads = 1;
    r->status = glimpse_context_create(clip, &params, &embedder);
    if (!r->status) r->status = glimpse_context_create(blip, &params, &captioner);
    for (int round = 0; round < 2 && !r->status; round++) {
        r->status = glimpse_embed_images(embedder, images, IMAGES, r->image_embeddings);
        if (!r->status) r->status = glimpse_embed_texts(embedder, texts, 3, r->text_embeddings);
        glimpse_caption_params caption_params = glimpse_caption_model_params(blip);
        caption_params.beams = round ? 1 : 2; /* greedy and beams both, interleaved with embedding */
        glimpse_caption captions[IMAGES];
        if (!r->status)
            r->status = glimpse_caption_images(captioner, images, IMAGES, &caption_params,
                                               captions);
        for (int i = 0; i < IMAGES && !r->status; i++) {
            snprintf(r->captions[i], sizeof r->captions[i], "%s", captions[i].text);
            r->id_counts[i] = captions[i].id_count < 32 ? captions[i].id_count : 32;
            memcpy(r->ids[i], captions[i].ids, r->id_counts[i] * sizeof(int32_t));
            glimpse_caption_free(&captions[i]);
        }
    }
    glimpse_context_free(embedder);
    glimpse_context_free(captioner);
    return NULL;
}

static void test_eight_threads_share_models(void **state) {
    (void)state;
    char *clip_path = file_join(GLIMPSE_SOURCE_DIR, "examples/models/demo-clip");
    char *blip_path = file_join(GLIMPSE_SOURCE_DIR, "examples/models/demo-blip-caption");
    assert_int_equal(glimpse_model_load(clip_path, NULL, &clip), GLIMPSE_STATUS_OK);
    assert_int_equal(glimpse_model_load(blip_path, NULL, &blip), GLIMPSE_STATUS_OK);
    assert_true(glimpse_model_embedding_dim(clip) <= DIM_MAX);
    for (int i = 0; i < IMAGES; i++) {
        char path[128];
        snprintf(path, sizeof path, "examples/pictures/%05d.png", i);
        char *full = file_join(GLIMPSE_SOURCE_DIR, path);
        assert_int_equal(glimpse_image_load_file(full, NULL, &images[i]), GLIMPSE_STATUS_OK);
        free(full);
    }
    static result alone, together[8];
    work(&alone);
    assert_int_equal(alone.status, GLIMPSE_STATUS_OK);
    pthread_t threads[8];
    for (int t = 0; t < 8; t++) pthread_create(&threads[t], NULL, work, &together[t]);
    for (int t = 0; t < 8; t++) pthread_join(threads[t], NULL);
    size_t dim = glimpse_model_embedding_dim(clip);
    for (int t = 0; t < 8; t++) {
        assert_int_equal(together[t].status, GLIMPSE_STATUS_OK);
        assert_memory_equal(together[t].image_embeddings, alone.image_embeddings, IMAGES * dim * sizeof(float));
        assert_memory_equal(together[t].text_embeddings, alone.text_embeddings, 3 * dim * sizeof(float));
        for (int i = 0; i < IMAGES; i++) {
            assert_string_equal(together[t].captions[i], alone.captions[i]);
            assert_int_equal(together[t].id_counts[i], alone.id_counts[i]);
            assert_memory_equal(together[t].ids[i], alone.ids[i], alone.id_counts[i] * sizeof(int32_t));
        }
    }
    for (int i = 0; i < IMAGES; i++) glimpse_image_free(images[i]);
    glimpse_model_free(clip);
    glimpse_model_free(blip);
    free(clip_path), free(blip_path);
}

/* prefetch: items made on the producer thread come out in order, with a
 * queue smaller than the work, the same as made on the caller's thread; a
 * stop before the end disposes of every item made and never taken. */
typedef struct counter {
    int next, limit;
    int made, disposed;
} counter;

static bool produce_number(void *user, void *item, const atomic_bool *stopping) {
    counter *c = user;
    if (*stopping || c->next >= c->limit) return false;
    int *value = malloc(sizeof *value); /* owned by the item: disposed of if never taken */
    *value = c->next++;
    *(int **)item = value;
    __atomic_add_fetch(&c->made, 1, __ATOMIC_SEQ_CST);
    return true;
}

static void dispose_number(void *user, void *item) {
    counter *c = user;
    free(*(int **)item);
    __atomic_add_fetch(&c->disposed, 1, __ATOMIC_SEQ_CST);
}

/* Each task records how many CPUs the thread running it may use, and whether that thread is the caller. */
typedef struct affinity_probe {
    pthread_t caller;
    int worker_cpus, worker_cpu, caller_cpus, worker_ran;
    pthread_mutex_t lock;
} affinity_probe;

static void probe_affinity(void *argument, size_t index, float *scratch) {
    (void)index, (void)scratch;
    affinity_probe *probe = argument;
    cpu_set_t set;
    assert_int_equal(sched_getaffinity(0, sizeof set, &set), 0);
    int cpus = CPU_COUNT(&set), cpu = -1;
    for (int i = 0; i < CPU_SETSIZE && cpu < 0; i++)
        if (CPU_ISSET(i, &set)) cpu = i;
    struct timespec pause = {0, 2000000}; /* long enough that the worker takes some of the tasks */
    nanosleep(&pause, NULL);
    pthread_mutex_lock(&probe->lock);
    if (pthread_equal(pthread_self(), probe->caller))
        probe->caller_cpus = cpus;
    else
        probe->worker_cpus = cpus, probe->worker_cpu = cpu, probe->worker_ran = 1;
    pthread_mutex_unlock(&probe->lock);
}

/* With GLIMPSE_PIN_THREADS=1, where the process may use two CPUs, a 2-thread pool pins its worker to one CPU
 * and leaves the caller's own affinity alone; by default the worker is not pinned. */
static void test_pool_pins_its_workers(void **state) {
    (void)state;
    cpu_set_t allowed;
    assert_int_equal(sched_getaffinity(0, sizeof allowed, &allowed), 0);
    if (CPU_COUNT(&allowed) < 2) {
        print_message("one CPU only: nothing to pin, the check is skipped\n");
        return;
    }
    for (int pin = 1; pin >= 0; pin--) {
        if (pin)
            setenv("GLIMPSE_PIN_THREADS", "1", 1);
        else
            unsetenv("GLIMPSE_PIN_THREADS");
        pool *threads = NULL;
        assert_int_equal(pool_create(2, &threads), GLIMPSE_STATUS_OK);
        affinity_probe probe = {.caller = pthread_self()};
        pthread_mutex_init(&probe.lock, NULL);
        for (int attempt = 0; attempt < 100 && !probe.worker_ran; attempt++) pool_for(threads, 16, probe_affinity, &probe);
        pool_free(threads);
        pthread_mutex_destroy(&probe.lock);
        assert_true(probe.worker_ran);
        assert_int_equal(probe.caller_cpus, CPU_COUNT(&allowed)); /* the caller is never pinned */
        if (pin) {
            assert_int_equal(probe.worker_cpus, 1);
            assert_true(CPU_ISSET(probe.worker_cpu, &allowed));
        } else {
            assert_int_equal(probe.worker_cpus, CPU_COUNT(&allowed));
        }
    }
}

static void test_prefetch_keeps_order(void **state) {
    (void)state;
    for (int ahead = 0; ahead < 2; ahead++) {
        counter c = {.limit = 1000};
        prefetch *p;
        assert_int_equal(prefetch_start(sizeof(int *), 3, ahead, produce_number, dispose_number, &c, &p), 0);
        int *value, expected = 0;
        while (prefetch_next(p, &value)) {
            assert_int_equal(*value, expected++);
            free(value);
        }
        assert_int_equal(expected, 1000);
        assert_false(prefetch_next(p, &value)); /* the end stays the end */
        prefetch_stop(p);
        assert_int_equal(c.disposed, 0);
    }
    /* stopped after a few: what was made and not taken is disposed of */
    counter c = {.limit = 1000};
    prefetch *p;
    assert_int_equal(prefetch_start(sizeof(int *), 4, true, produce_number, dispose_number, &c, &p), 0);
    int *value;
    for (int i = 0; i < 5; i++) {
        assert_true(prefetch_next(p, &value));
        assert_int_equal(*value, i);
        free(value);
    }
    prefetch_stop(p);
    assert_int_equal(c.made, 5 + c.disposed);
    assert_true(c.made < 1000);
}

/* An int8 product over a 2-thread pool, whose column tasks prepare the quantized input's parts as they reach
 * them and wait for the parts the other task took (linear.c's q8_part_ready), gives what one thread gives, bit
 * for bit, every time (weights in the layout this CPU's models get); under ThreadSanitizer (scripts/test.sh) a part
 * read before it is published is a race. */
static void test_int8_tasks_share_prepared_parts(void **state) {
    (void)state;
    const size_t shapes[][3] = {{50, 768, 300}, {77, 200, 520}, {400, 200, 300}, {130, 1540, 260}};
    pool *two, *one;
    assert_int_equal(pool_create(2, &two), GLIMPSE_STATUS_OK);
    assert_int_equal(pool_create(1, &one), GLIMPSE_STATUS_OK);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        size_t rows = shapes[s][0], in = shapes[s][1], out = shapes[s][2];
        float *x = test_random_array(rows * in), *w = test_random_array(out * in), *b = test_random_array(out);
        float *alone = malloc(rows * out * sizeof *alone), *shared = malloc(rows * out * sizeof *shared);
        kernel_weight weight = kernel_weight_f32(w);
        kernel_q8 q;
        assert_int_equal(kernel_q8_quantize(&q, &weight, out, in, q8_layout_best(), NULL), GLIMPSE_STATUS_OK);
        weight.q8 = &q;
        kernel_linear(alone, out, x, in, &weight, b, rows, in, out, false, one);
        for (int round = 0; round < 20; round++) {
            memset(shared, 0, rows * out * sizeof *shared);
            kernel_linear(shared, out, x, in, &weight, b, rows, in, out, false, two);
            assert_memory_equal(shared, alone, rows * out * sizeof *shared);
        }
        kernel_q8_free(&q);
        free(x), free(w), free(b), free(alone), free(shared);
    }
    pool_free(two);
    pool_free(one);
}

/* encoder_stack_forward on int8 layers: a batch shared out by sequences over 2 threads gives every row bit for
 * bit as the layers over the whole batch on one thread do, every row or the pooled ones, causal or not; a
 * batch whose sequences cannot be shared evenly, a float32 stack and a one-thread pool are not shared out. Under
 * ThreadSanitizer, a share that touched another's rows or scratch is a race. */
static void test_encoder_stack_shares(void **state) {
    (void)state;
    pool *two, *one;
    assert_int_equal(pool_create(2, &two), GLIMPSE_STATUS_OK);
    assert_int_equal(pool_create(1, &one), GLIMPSE_STATUS_OK);
    enum { LAYERS = 2 };
    const size_t hidden = 64, heads = 4, inter = 256, rows = 158, longest = 44;
    const size_t lengths[4] = {40, 36, 44, 38}, pooled[4] = {39, 0, 20, 37}, uneven[3] = {120, 18, 20};
    size_t per_layer = 4 * hidden * hidden + 2 * hidden * inter;
    float *weights = test_random_array(LAYERS * per_layer), *biases = test_random_array(6 * hidden + inter);
    float *ones = malloc(hidden * sizeof *ones), *zeros = calloc(hidden, sizeof *zeros);
    for (size_t i = 0; i < hidden; i++) ones[i] = 1.0f;
    for (size_t i = 0; i < LAYERS * per_layer; i++) weights[i] *= 0.15f;
    encoder_layer layers[LAYERS];
    for (size_t l = 0; l < LAYERS; l++)
        test_wire_layer(&layers[l], weights + l * per_layer, biases, ones, zeros, hidden, inter, false);
    assert_int_equal(encoder_stack_shares(layers, LAYERS, NULL, lengths, 4, two), 1); /* float32 */
    encoder_shape shape = {hidden, heads, inter, 1e-5f, ACTIVATION_QUICK_GELU, KERNEL_MASK_NONE};
    q8_set set = {0};
    assert_int_equal(encoder_layers_fuse_q8(layers, LAYERS, &shape, &set), GLIMPSE_STATUS_OK);
    assert_int_equal(encoder_layers_add_twins(layers, LAYERS, &shape, q8_set_add_twin, &set), GLIMPSE_STATUS_OK);
    assert_int_equal(encoder_stack_shares(layers, LAYERS, NULL, lengths, 4, two), 2);
    assert_int_equal(encoder_stack_shares(layers, LAYERS, NULL, lengths, 4, one), 1);
    assert_int_equal(encoder_stack_shares(layers, LAYERS, NULL, uneven, 3, two), 1);
    float *memory = malloc(encoder_scratch_floats(&shape, rows, longest) * sizeof(float));
    encoder_scratch scratch;
    encoder_scratch_carve(&scratch, memory, &shape, rows, longest);
    float *input = test_random_array(rows * hidden), *alone = malloc(rows * hidden * sizeof(float));
    float *shared = malloc(rows * hidden * sizeof(float));
    for (int m = 0; m < 2; m++)
        for (int p = 0; p < 2; p++) {
            shape.mask = m ? KERNEL_MASK_CAUSAL : KERNEL_MASK_NONE;
            memcpy(alone, input, rows * hidden * sizeof(float));
            encoder_stack_forward(alone, NULL, layers, LAYERS, p ? pooled : NULL, &shape, lengths, 4, &scratch, one);
            if (memcmp(alone, input, rows * hidden * sizeof(float)) == 0) fail_msg("the layers changed nothing");
            for (int round = 0; round < 3; round++) {
                memcpy(shared, input, rows * hidden * sizeof(float));
                encoder_stack_forward(shared, NULL, layers, LAYERS, p ? pooled : NULL, &shape, lengths, 4, &scratch,
                                      two);
                if (memcmp(alone, shared, rows * hidden * sizeof(float)) != 0)
                    fail_msg("mask %d pooled %d round %d: the shared batch differs", m, p, round);
            }
        }
    free(memory), free(input), free(alone), free(shared);
    q8_set_free(&set);
    free(weights), free(biases), free(ones), free(zeros);
    pool_free(two), pool_free(one);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_eight_threads_share_models),
                                       cmocka_unit_test(test_pool_pins_its_workers),
                                       cmocka_unit_test(test_prefetch_keeps_order),
                                       cmocka_unit_test(test_int8_tasks_share_prepared_parts),
                                       cmocka_unit_test(test_encoder_stack_shares)};
    return cmocka_run_group_tests_name("threads", tests, NULL, NULL);
}
