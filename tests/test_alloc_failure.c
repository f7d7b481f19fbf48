/* test_alloc_failure.c — makes the library's allocations fail one by one
 * through a whole load-and-caption run (and a load-and-embed run): every
 * failure must come back as a status, nothing may crash, and nothing the
 * library allocated may leak. The library's calls to malloc, calloc,
 * realloc, strdup, aligned_alloc, posix_memalign and free are routed here
 * with the linker's --wrap;
 * allocations made inside other shared libraries are not counted. */
#include <errno.h>
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
#include "glimpse.h"

void *__real_malloc(size_t size);
void *__real_calloc(size_t count, size_t size);
void *__real_realloc(void *pointer, size_t size);
char *__real_strdup(const char *text);
void *__real_aligned_alloc(size_t alignment, size_t size);
int __real_posix_memalign(void **out, size_t alignment, size_t size);
void __real_free(void *pointer);

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static long countdown = -1; /* fail when it reaches 0; -1 = never */
static long allocations;    /* made since the counter was reset */
static int failed_one;

/* The live allocations the library made, to find leaks. */
/* A run makes under 1,300 allocations, so 65,536 slots stay mostly empty; the table is cleared before each
 * run (at 8 MiB it was, 1,950 times, a tenth of the test's time under AddressSanitizer). */
#define LIVE_CAPACITY (1 << 16)
static void **live;
static size_t live_count, slots_taken; /* slots_taken: live ones and tombstones */

static size_t slot_of(void *pointer) { return ((uintptr_t)pointer >> 4) * 2654435761u % LIVE_CAPACITY; }

static void live_add(void *pointer) {
    if (!live || !pointer) return;
    size_t i = slot_of(pointer);
    while (live[i] && live[i] != (void *)1) i = (i + 1) % LIVE_CAPACITY;
    if (!live[i] && ++slots_taken > LIVE_CAPACITY / 2) { /* a run that allocates this much needs a larger table */
        fprintf(stderr, "test_alloc_failure: more than %d allocations in one run\n", LIVE_CAPACITY / 2);
        abort();
    }
    live[i] = pointer;
    live_count++;
}

static void live_remove(void *pointer) {
    if (!live || !pointer) return;
    for (size_t i = slot_of(pointer); live[i]; i = (i + 1) % LIVE_CAPACITY)
        if (live[i] == pointer) {
            live[i] = (void *)1; /* tombstone */
            live_count--;
            return;
        }
}

static int should_fail(void) {
    allocations++;
    if (countdown < 0) return 0;
    if (countdown-- == 0) {
        failed_one = 1;
        return 1;
    }
    return 0;
}

void *__wrap_malloc(size_t size) {
    pthread_mutex_lock(&lock);
    void *p = should_fail() ? NULL : __real_malloc(size);
    live_add(p);
    pthread_mutex_unlock(&lock);
    return p;
}

void *__wrap_calloc(size_t count, size_t size) {
    pthread_mutex_lock(&lock);
    void *p = should_fail() ? NULL : __real_calloc(count, size);
    live_add(p);
    pthread_mutex_unlock(&lock);
    return p;
}

void *__wrap_realloc(void *pointer, size_t size) {
    pthread_mutex_lock(&lock);
    void *p = should_fail() ? NULL : __real_realloc(pointer, size);
    if (p) {
        live_remove(pointer);
        live_add(p);
    }
    pthread_mutex_unlock(&lock);
    return p;
}

void *__wrap_aligned_alloc(size_t alignment, size_t size) {
    pthread_mutex_lock(&lock);
    void *p = should_fail() ? NULL : __real_aligned_alloc(alignment, size);
    live_add(p);
    pthread_mutex_unlock(&lock);
    return p;
}

int __wrap_posix_memalign(void **out, size_t alignment, size_t size) {
    pthread_mutex_lock(&lock);
    int status = should_fail() ? ENOMEM : __real_posix_memalign(out, alignment, size);
    if (!status) live_add(*out);
    pthread_mutex_unlock(&lock);
    return status;
}

char *__wrap_strdup(const char *text) {
    pthread_mutex_lock(&lock);
    char *p = should_fail() ? NULL : __real_strdup(text);
    live_add(p);
    pthread_mutex_unlock(&lock);
    return p;
}

void __wrap_free(void *pointer) {
    pthread_mutex_lock(&lock);
    live_remove(pointer);
    pthread_mutex_unlock(&lock);
    __real_free(pointer);
}

typedef glimpse_status (*scenario)(void);

/* A demo model, a context and one of its pictures, each made only if what came before was. */
typedef struct demo {
    glimpse_model *model;
    glimpse_context *ctx;
    glimpse_image *image;
} demo;

static glimpse_status demo_open(const char *model_folder, const char *picture, demo *d) {
    *d = (demo){.model = NULL, .ctx = NULL, .image = NULL};
    char *model_path = file_join(GLIMPSE_SOURCE_DIR, model_folder);
    char *image_path = file_join(GLIMPSE_SOURCE_DIR, picture);
    glimpse_status status = model_path && image_path ? GLIMPSE_STATUS_OK : GLIMPSE_STATUS_OUT_OF_MEMORY;
    if (!status) status = glimpse_model_load(model_path, NULL, &d->model);
    if (!status) status = glimpse_context_create(d->model, NULL, &d->ctx);
    if (!status) status = glimpse_image_load_file(image_path, NULL, &d->image);
    free(model_path), free(image_path);
    return status;
}

static void demo_close(demo *d) {
    glimpse_image_free(d->image);
    glimpse_context_free(d->ctx);
    glimpse_model_free(d->model);
}

static glimpse_status load_and_caption(void) {
    demo d;
    glimpse_status status = demo_open("examples/models/demo-blip-caption", "examples/pictures/00000.png", &d);
    glimpse_caption caption = {0};
    glimpse_caption_params params = glimpse_caption_model_params(d.model);
    params.beams = 2;
    if (!status) status = glimpse_caption_images(d.ctx, &d.image, 1, &params, &caption);
    glimpse_caption_free(&caption);
    demo_close(&d);
    return status;
}

static glimpse_status load_and_embed(void) {
    demo d;
    glimpse_status status = demo_open("examples/models/demo-clip", "examples/pictures/00001.png", &d);
    float embedding[512];
    const char *text = "a green square";
    if (!status) status = glimpse_embed_images(d.ctx, &d.image, 1, embedding);
    if (!status) status = glimpse_embed_texts(d.ctx, &text, 1, embedding);
    demo_close(&d);
    return status;
}

/* Explanations: a greedy caption's streamed maps with its raw tensors, a beam search's, a CLIP match's, and
 * their pictures and file. */
static glimpse_status load_and_explain(void) {
    demo captioner, clip;
    glimpse_explanation *greedy = NULL, *beams = NULL, *match = NULL;
    void *png = NULL;
    size_t size = 0;
    glimpse_explain_params params = glimpse_explain_default_params();
    params.want_raw = true;
    glimpse_caption_params search = glimpse_caption_default_params();
    search.beams = 1;
    glimpse_status status = demo_open("examples/models/demo-blip-caption", "examples/pictures/00000.png", &captioner);
    if (!status) status = glimpse_explain_caption(captioner.ctx, captioner.image, &search, &params, &greedy);
    search.beams = 2;
    if (!status) status = glimpse_explain_caption(captioner.ctx, captioner.image, &search, NULL, &beams);
    if (!status)
        status = glimpse_explain_render_png(beams, captioner.image, GLIMPSE_EXPLAIN_SHEET, 64, NULL, &png, &size);
    free(png);
    if (!status) status = demo_open("examples/models/demo-clip", "examples/pictures/00001.png", &clip);
    else clip = (demo){NULL, NULL, NULL};
    if (!status) status = glimpse_explain_clip(clip.ctx, clip.image, "a green square", &params, &match);
    if (!status) status = glimpse_explain_write_safetensors(match, "/dev/null");
    glimpse_explanation_free(greedy), glimpse_explanation_free(beams), glimpse_explanation_free(match);
    demo_close(&captioner), demo_close(&clip);
    return status;
}

static void fail_each_allocation(scenario run, const char *name) {
    live = __real_calloc(LIVE_CAPACITY, sizeof *live);
    slots_taken = 0;
    countdown = -1;
    allocations = 0;
    assert_int_equal(run(), GLIMPSE_STATUS_OK); /* the whole run works, and we learn its length */
    long total = allocations;
    assert_int_equal(live_count, 0);
    long reported = 0;
    for (long n = 0; n < total; n++) {
        pthread_mutex_lock(&lock);
        countdown = n;
        failed_one = 0;
        live_count = slots_taken = 0;
        memset(live, 0, LIVE_CAPACITY * sizeof *live);
        pthread_mutex_unlock(&lock);
        glimpse_status status = run();
        pthread_mutex_lock(&lock);
        countdown = -1;
        size_t leaked = live_count;
        pthread_mutex_unlock(&lock);
        if (failed_one && status == GLIMPSE_STATUS_OK)
            fail_msg("%s: allocation %ld failed but the run reported success", name, n);
        if (failed_one) reported++;
        if (leaked) fail_msg("%s: allocation %ld failed and %zu allocations leaked", name, n, leaked);
    }
    fprintf(stderr, "%s: each of %ld allocations failed in turn: %ld failures reported as a status, no crash, no leak\n",
            name, total, reported);
    __real_free(live);
    live = NULL;
}

static void test_load_and_caption(void **state) {
    (void)state;
    fail_each_allocation(load_and_caption, "load and caption");
}

static void test_load_and_embed(void **state) {
    (void)state;
    fail_each_allocation(load_and_embed, "load and embed");
}

static void test_load_and_explain(void **state) {
    (void)state;
    fail_each_allocation(load_and_explain, "load and explain");
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_load_and_caption),
                                       cmocka_unit_test(test_load_and_embed),
                                       cmocka_unit_test(test_load_and_explain)};
    return cmocka_run_group_tests_name("allocation failure", tests, NULL, NULL);
}
