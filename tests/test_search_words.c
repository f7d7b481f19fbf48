/* test_search_words.c — an index searchable by the words in its pictures (glimpse_index_params.words and
 * glimpse_index_search_filtered): words read once per picture and kept across updates, read again for a
 * changed file, kept by a moved one, forgotten with a deleted one; case and diacritics folded; a label found
 * as a phrase; filters with and without a query embedding (the query's scores equal glimpse_index_search's);
 * an index without words and another reader refused; FTS5 operators in the filter taken as plain words. The
 * words come from a source made here (three kinds of picture by their pixels), so that what each picture
 * must match is known without a model; Florence-2's own source is tested with the family. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "glimpse.h"
#include "support.h"

static char model[512], library[600];

#define PICTURES 6

static void run_or_fail(const char *command) {
    if (system(command) != 0) fail_msg("command failed: %s", command);
}

static int setup(void **state) {
    if (workspace_setup(state)) return -1;
    const char *workspace = test_workspace();
    char command[2048];
    char *folder = snapshot_from_config(workspace, TINY_CLIP_CONFIG, "model", "");
    snprintf(model, sizeof model, "%s", folder);
    free(folder);
    snprintf(library, sizeof library, "%s/library", workspace);
    snprintf(command, sizeof command, "%s --out %s --seed 5 --count %d", GLIMPSE_MAKE_PICTURES, library, PICTURES);
    run_or_fail(command);
    return 0;
}

/* The kind of a picture (0, 1, 2): an FNV-1a hash of its pixels. */
static int kind_of(const glimpse_image *image) {
    const uint8_t *p = glimpse_image_pixels(image);
    size_t n = (size_t)glimpse_image_width(image) * (size_t)glimpse_image_height(image) * 3;
    uint64_t hash = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) hash = (hash ^ p[i]) * 0x100000001b3ull;
    return (int)(hash % 3);
}

static const char *const texts[3] = {"INVOICE 2023\nCrème brûlée", "receipt 2023", "happy birthday"};
static const char *const labels[3] = {"dog\nhot dog", "cat", "person\ncake"};

typedef struct reader {
    int calls;
    const char *identity;
} reader;

static glimpse_status read_words(void *user, glimpse_image *image, char **text, char **objects) {
    reader *r = user;
    r->calls++;
    int kind = kind_of(image);
    if (text) *text = strdup(texts[kind]);
    if (objects) *objects = strdup(labels[kind]);
    return GLIMPSE_STATUS_OK;
}

/* The kind of the picture file at path. */
static int kind_of_file(const char *path) {
    glimpse_image *image;
    assert_int_equal(glimpse_image_load_file(path, NULL, &image), GLIMPSE_STATUS_OK);
    int kind = kind_of(image);
    glimpse_image_free(image);
    return kind;
}

static glimpse_index_summary update(glimpse_index *index, glimpse_context *ctx, reader *r) {
    glimpse_words_source words = {read_words, r, r->identity};
    glimpse_index_params params = {.words = &words, .read_text = true, .read_objects = true};
    glimpse_index_summary summary;
    const char *root = library;
    if (glimpse_index_update(index, ctx, &root, 1, &params, &summary)) fail_msg("update: %s", glimpse_last_error());
    return summary;
}

/* The paths a filter finds (query NULL), sorted into one string of lines, and whether each is of `kind`. */
static size_t found_of_kind(glimpse_index *index, const char *text_in, const char *object, int kind) {
    glimpse_search_filter filter = {text_in, object};
    glimpse_search_result results[PICTURES + 2];
    size_t found = 0;
    if (glimpse_index_search_filtered(index, NULL, PICTURES + 2, &filter, results, &found))
        fail_msg("search: %s", glimpse_last_error());
    for (size_t i = 0; i < found; i++) assert_int_equal(kind_of_file(results[i].path), kind);
    return found;
}

static size_t pictures_of_kind(int kind) {
    size_t n = 0;
    for (int i = 0; i < PICTURES; i++) {
        char path[700];
        snprintf(path, sizeof path, "%s/%05d.png", library, i);
        if (access(path, F_OK) == 0) n += kind_of_file(path) == kind;
    }
    return n;
}

static void test_words_found_and_kept(void **state) {
    (void)state;
    char db[700];
    snprintf(db, sizeof db, "%s/words.db", test_workspace());
    glimpse_model *m;
    glimpse_context *ctx;
    glimpse_index *index;
    assert_int_equal(glimpse_model_load(model, NULL, &m), GLIMPSE_STATUS_OK);
    assert_int_equal(glimpse_context_create(m, NULL, &ctx), GLIMPSE_STATUS_OK);
    assert_int_equal(glimpse_index_open(db, m, &index), GLIMPSE_STATUS_OK);
    /* before any words: refused, saying how to build them */
    glimpse_search_filter filter = {"invoice", NULL};
    glimpse_search_result results[PICTURES + 2];
    size_t found;
    const char *root = library;
    glimpse_index_summary summary;
    assert_int_equal(glimpse_index_update(index, ctx, &root, 1, NULL, &summary), GLIMPSE_STATUS_OK);
    assert_int_equal(glimpse_index_search_filtered(index, NULL, 3, &filter, results, &found),
                     GLIMPSE_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(glimpse_last_error(), "--ocr"));

    reader r = {0, "reader-a"};
    summary = update(index, ctx, &r);
    assert_int_equal(summary.read, PICTURES);
    assert_int_equal(r.calls, PICTURES);
    size_t kind0 = pictures_of_kind(0), kind1 = pictures_of_kind(1);
    assert_true(kind0 > 0 && kind1 > 0); /* the seed's pictures hold each kind tested */
    /* case and diacritics folded, words in any order */
    assert_int_equal(found_of_kind(index, "creme INVOICE", NULL, 0), kind0);
    assert_int_equal(found_of_kind(index, "brulee 2023", NULL, 0), kind0);
    assert_int_equal(found_of_kind(index, "2023 receipt", NULL, 1), kind1);
    assert_int_equal(found_of_kind(index, "invoice receipt", NULL, 0), 0);
    /* a label as a phrase; a word of a label */
    assert_int_equal(found_of_kind(index, NULL, "hot dog", 0), kind0);
    assert_int_equal(found_of_kind(index, NULL, "dog hot", 0), 0);
    assert_int_equal(found_of_kind(index, "2023", "cat", 1), kind1);
    /* FTS5's operators and quotes are words here, never syntax */
    assert_int_equal(found_of_kind(index, "invoice\" OR \"receipt", NULL, 0), 0);
    assert_int_equal(found_of_kind(index, "NEAR(invoice*", NULL, 0), 0);
    /* no words and no query: refused */
    glimpse_search_filter empty = {"  ,; ", ""};
    assert_int_equal(glimpse_index_search_filtered(index, NULL, 3, &empty, results, &found),
                     GLIMPSE_STATUS_INVALID_ARGUMENT);

    /* with a query: ranked by it, each score glimpse_index_search's for the same picture */
    float query[32];
    assert_true(glimpse_model_embedding_dim(m) == 32);
    const char *text = "a picture";
    assert_int_equal(glimpse_embed_texts(ctx, &text, 1, query), GLIMPSE_STATUS_OK);
    glimpse_search_result all[PICTURES];
    size_t all_found;
    assert_int_equal(glimpse_index_search(index, query, PICTURES, all, &all_found), GLIMPSE_STATUS_OK);
    char *all_paths[PICTURES];
    for (size_t i = 0; i < all_found; i++) all_paths[i] = strdup(all[i].path);
    glimpse_search_filter year = {"2023", NULL};
    assert_int_equal(glimpse_index_search_filtered(index, query, PICTURES, &year, results, &found), GLIMPSE_STATUS_OK);
    assert_int_equal(found, kind0 + kind1);
    for (size_t i = 0; i < found; i++) {
        if (i) assert_true(results[i].score <= results[i - 1].score);
        size_t j = 0;
        while (j < all_found && strcmp(all_paths[j], results[i].path) != 0) j++;
        assert_true(j < all_found);
        assert_true(fabsf(all[j].score - results[i].score) <= 1e-5f * fmaxf(1, fabsf(all[j].score)));
    }
    for (size_t i = 0; i < all_found; i++) free(all_paths[i]);

    /* a second update reads nothing; another reader is refused */
    r.calls = 0;
    summary = update(index, ctx, &r);
    assert_int_equal(summary.read, 0);
    assert_int_equal(r.calls, 0);
    reader other = {0, "reader-b"};
    glimpse_words_source words = {read_words, &other, other.identity};
    glimpse_index_params params = {.words = &words, .read_text = true};
    assert_int_equal(glimpse_index_update(index, ctx, &root, 1, &params, &summary), GLIMPSE_STATUS_WRONG_MODEL);
    assert_non_null(strstr(glimpse_last_error(), "reader-a"));

    /* moved: kept without reading; changed: read again; deleted: forgotten */
    char from[700], to[700], command[1600];
    snprintf(from, sizeof from, "%s/00000.png", library);
    snprintf(to, sizeof to, "%s/moved.png", library);
    assert_int_equal(rename(from, to), 0);
    snprintf(command, sizeof command, "cp %s/00001.png %s/00002.png && rm %s/00003.png", library, library, library);
    run_or_fail(command);
    r.calls = 0;
    summary = update(index, ctx, &r);
    assert_int_equal(summary.moved, 1);
    assert_int_equal(summary.read, 1);
    assert_int_equal(r.calls, 1);
    int moved_kind = kind_of_file(to);
    glimpse_search_filter by_kind = {moved_kind == 2 ? "birthday" : "2023", NULL};
    assert_int_equal(glimpse_index_search_filtered(index, NULL, PICTURES, &by_kind, results, &found),
                     GLIMPSE_STATUS_OK);
    bool seen = false;
    for (size_t i = 0; i < found; i++) seen |= strcmp(results[i].path, to) == 0;
    assert_true(seen);
    assert_int_equal(found_of_kind(index, "creme", NULL, 0), pictures_of_kind(0) + (moved_kind == 0));
    assert_int_equal(found_of_kind(index, "receipt", NULL, 1), pictures_of_kind(1) + (moved_kind == 1));
    glimpse_index_free(index);
    glimpse_context_free(ctx);
    glimpse_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_words_found_and_kept),
    };
    return cmocka_run_group_tests(tests, setup, workspace_teardown);
}
