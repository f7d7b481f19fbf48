/* test_threads.c — one loaded model of each kind shared by 8 threads, each
 * with its own context, embedding and captioning at the same time: every
 * result is bit-identical to the single-threaded one. Uses the bundled demo
 * models, so it needs no fixtures; and core/prefetch's producer thread. */
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/file.h"
#include "core/prefetch.h"
#include "glimpse.h"

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
    char *clip_path = file_join(GLIMPSE_SOURCE_DIR, "models/demo-clip");
    char *blip_path = file_join(GLIMPSE_SOURCE_DIR, "models/demo-blip-caption");
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

static bool produce_number(void *user, void *item, const volatile bool *stopping) {
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

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_eight_threads_share_models),
                                       cmocka_unit_test(test_prefetch_keeps_order)};
    return cmocka_run_group_tests_name("threads", tests, NULL, NULL);
}
