/* test_search.c — the photo-library index: new, changed, touched, deleted,
 * renamed and copied files; broken files among good ones; a `glimpse index`
 * killed with SIGKILL mid-run and a second run that finishes with every file
 * indexed exactly once; combined queries against the order computed
 * directly from the embeddings; the wrong-model refusal. Uses a small
 * random-weight CLIP and pictures made here, so it needs no fixtures. */
#include <math.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include <cjson/cJSON.h>

#include "core/file.h"
#include "search/vectors.h"
#include "glimpse.h"
#include "support.h"

static char workspace[] = "/tmp/glimpse-search-XXXXXX";
static char model_a[512], model_b[512];

static void run_or_fail(const char *command) {
    if (system(command) != 0) fail_msg("command failed: %s", command);
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* A small CLIP of the published layout, random weights (seed decides). */
static void make_model(const char *folder, int seed) {
    char config[600], command[2048];
    snprintf(config, sizeof config, "%s/config-%d.json", workspace, seed);
    write_text(config, TINY_CLIP_CONFIG);
    snprintf(command, sizeof command, "%s %s %s --seed %d > /dev/null", GLIMPSE_MAKE_MODEL, config, folder, seed);
    run_or_fail(command);
}

static void make_pictures(const char *folder, int seed, int count) {
    char command[2048];
    snprintf(command, sizeof command, "%s --out %s --seed %d --count %d", GLIMPSE_MAKE_PICTURES, folder, seed, count);
    run_or_fail(command);
}

/* Model A, a context of it, and the index at a path opened with it. */
typedef struct indexer {
    glimpse_model *model;
    glimpse_context *ctx;
    glimpse_index *index;
} indexer;

static indexer open_indexer(const char *db) {
    indexer x;
    assert_int_equal(glimpse_model_load(model_a, NULL, &x.model), GLIMPSE_STATUS_OK);
    assert_int_equal(glimpse_context_create(x.model, NULL, &x.ctx), GLIMPSE_STATUS_OK);
    assert_int_equal(glimpse_index_open(db, x.model, &x.index), GLIMPSE_STATUS_OK);
    return x;
}

static void close_indexer(indexer *x) {
    glimpse_index_free(x->index);
    glimpse_context_free(x->ctx);
    glimpse_model_free(x->model);
}

#define PATH_CAPACITY 600

/* A library of count pictures drawn with seed in workspace/NAME, and its index's path workspace/DB_NAME. */
static void make_library(const char *name, const char *db_name, int seed, int count, char library[PATH_CAPACITY],
                         char db[PATH_CAPACITY]) {
    snprintf(library, PATH_CAPACITY, "%s/%s", workspace, name);
    snprintf(db, PATH_CAPACITY, "%s/%s", workspace, db_name);
    make_pictures(library, seed, count);
}

static int setup(void **state) {
    (void)state;
    if (!mkdtemp(workspace)) return -1;
    snprintf(model_a, sizeof model_a, "%s/model-a", workspace);
    snprintf(model_b, sizeof model_b, "%s/model-b", workspace);
    make_model(model_a, 1);
    make_model(model_b, 2);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    char command[1024];
    snprintf(command, sizeof command, "rm -rf %s", workspace);
    return system(command) == 0 ? 0 : -1;
}

typedef struct failures {
    int count;
    char all[2048]; /* every failure: "path | reason" lines */
} failures;

static void note_failure(void *user, const char *path, const char *reason) {
    failures *f = user;
    f->count++;
    size_t used = strlen(f->all);
    snprintf(f->all + used, sizeof f->all - used, "%s | %s\n", path, reason);
}

static glimpse_index_summary update_paths(glimpse_index *index, glimpse_context *ctx, const char *const *paths,
                                          size_t count, failures *f) {
    glimpse_index_params params = {.on_progress = NULL, .on_failure = note_failure, .user = f, .max_pixels = 0};
    glimpse_index_summary summary;
    if (glimpse_index_update(index, ctx, paths, count, &params, &summary))
        fail_msg("update: %s", glimpse_last_error());
    return summary;
}

static glimpse_index_summary update(glimpse_index *index, glimpse_context *ctx, const char *folder, failures *f) {
    return update_paths(index, ctx, &folder, 1, f);
}

#define EXPECT(s, a, u, m, r, n, fl)                                                                                   \
    do {                                                                                                               \
        if ((s).added != (a) || (s).updated != (u) || (s).moved != (m) || (s).removed != (r) ||                      \
            (s).unchanged != (n) || (s).failed != (fl))                                                              \
            fail_msg("summary added %zu updated %zu moved %zu removed %zu unchanged %zu failed %zu", (s).added,       \
                     (s).updated, (s).moved, (s).removed, (s).unchanged, (s).failed);                                \
    } while (0)

static void test_incremental_updates(void **state) {
    (void)state;
    char library[PATH_CAPACITY], db[PATH_CAPACITY], command[2048];
    make_library("library", "incremental.db", 11, 12, library, db);
    snprintf(command, sizeof command,
             "mkdir -p %s/nested/deeper && mv %s/00010.png %s/00011.png %s/nested/deeper/ && "
             "printf 'not an image' > %s/notes.png && head -c 300 %s/00000.png > %s/broken.png && "
             "cp %s/00001.png %s/IMAGE.JPG.txt",
             library, library, library, library, library, library, library, library, library);
    run_or_fail(command);
    indexer x = open_indexer(db);
    glimpse_model *model = x.model;
    glimpse_context *ctx = x.ctx;
    glimpse_index *index = x.index;
    failures f = {0};
    /* 12 pictures (two in a nested folder), two broken files reported and skipped, one non-image name ignored */
    glimpse_index_summary s = update(index, ctx, library, &f);
    EXPECT(s, 12, 0, 0, 0, 0, 2);
    assert_int_equal(f.count, 2);
    assert_non_null(strstr(f.all, "broken.png | "));
    assert_non_null(strstr(f.all, "notes.png: not an image"));
    assert_int_equal(glimpse_index_count(index), 12);
    /* nothing changed: nothing embedded */
    s = update(index, ctx, library, &f);
    EXPECT(s, 0, 0, 0, 0, 12, 2);
    /* touched (same bytes), rewritten (new content), renamed, deleted, copied */
    snprintf(command, sizeof command,
             "touch -d '2001-01-01' %s/00002.png && cp %s/00004.png %s/00003.png && mv %s/00005.png %s/renamed.png && "
             "rm %s/00006.png && cp %s/00007.png %s/copy.png && rm %s/broken.png %s/notes.png",
             library, library, library, library, library, library, library, library, library, library);
    run_or_fail(command);
    s = update(index, ctx, library, &f);
    EXPECT(s, 1, 1, 1, 1, 9, 0);
    assert_int_equal(glimpse_index_count(index), 12);
    /* the renamed file kept its embedding and is found under its new name */
    char renamed[700];
    snprintf(renamed, sizeof renamed, "%s/renamed.png", library);
    glimpse_image *image;
    float query[32];
    assert_int_equal(glimpse_image_load_file(renamed, NULL, &image), GLIMPSE_STATUS_OK);
    assert_int_equal(glimpse_embed_images(ctx, &image, 1, query), GLIMPSE_STATUS_OK);
    glimpse_image_free(image);
    glimpse_search_result results[3];
    size_t found;
    assert_int_equal(glimpse_index_search(index, query, 3, results, &found), GLIMPSE_STATUS_OK);
    assert_int_equal(found, 3);
    char *real = realpath(renamed, NULL);
    assert_string_equal(results[0].path, real);
    free(real);
    glimpse_model_info info;
    glimpse_model_get_info(model, &info);
    assert_float_equal(results[0].score, info.logit_scale, 1e-4); /* cosine 1 with itself */
    close_indexer(&x);
}

/* A reader kept open (glimpse serve --db, a Python Index) sees each state another process commits: its
 * searches after an added and a deleted picture answer from the new rows, never calling a healthy index
 * damaged for the vector file it mapped before. */
static void test_long_lived_reader_sees_each_commit(void **state) {
    (void)state;
    char library[PATH_CAPACITY], db[PATH_CAPACITY], other[PATH_CAPACITY], command[2048];
    make_library("live", "live.db", 21, 6, library, db);
    snprintf(other, sizeof other, "%s/live-more", workspace);
    make_pictures(other, 22, 1);
    indexer x = open_indexer(db);
    failures f = {0};
    glimpse_index_summary s = update(x.index, x.ctx, library, &f);
    EXPECT(s, 6, 0, 0, 0, 0, 0);
    glimpse_index *reader;
    assert_int_equal(glimpse_index_open(db, x.model, &reader), GLIMPSE_STATUS_OK);
    float query[32];
    assert_int_equal(glimpse_embed_query(x.ctx, "a red circle", query), GLIMPSE_STATUS_OK);
    glimpse_search_result results[10];
    size_t found;
    assert_int_equal(glimpse_index_search(reader, query, 10, results, &found), GLIMPSE_STATUS_OK);
    assert_int_equal(found, 6);
    /* a picture added by another handle (another process, for SQLite) */
    snprintf(command, sizeof command, "cp %s/00000.png %s/added.png", other, library);
    run_or_fail(command);
    s = update(x.index, x.ctx, library, &f);
    EXPECT(s, 1, 0, 0, 0, 6, 0);
    if (glimpse_index_search(reader, query, 10, results, &found)) fail_msg("after an addition: %s", glimpse_last_error());
    assert_int_equal(found, 7);
    bool seen = false;
    for (size_t r = 0; r < found; r++) seen = seen || strstr(results[r].path, "/added.png");
    assert_true(seen);
    /* and one deleted */
    snprintf(command, sizeof command, "rm %s/00001.png", library);
    run_or_fail(command);
    s = update(x.index, x.ctx, library, &f);
    EXPECT(s, 0, 0, 0, 1, 6, 0);
    if (glimpse_index_search(reader, query, 10, results, &found)) fail_msg("after a removal: %s", glimpse_last_error());
    assert_int_equal(found, 6);
    for (size_t r = 0; r < found; r++) assert_null(strstr(results[r].path, "/00001.png"));
    glimpse_index_free(reader);
    close_indexer(&x);
}

/* Refreshing one folder judges only that folder: the entries of another
 * folder that is gone for now (a drive unplugged, a folder renamed) stay,
 * and come back unchanged with it. */
static void test_other_roots_are_not_judged(void **state) {
    (void)state;
    char first[PATH_CAPACITY], second[PATH_CAPACITY], db[PATH_CAPACITY], away[PATH_CAPACITY + 8],
        command[4 * PATH_CAPACITY];
    make_library("root-a", "roots.db", 21, 3, first, db);
    make_library("root-b", "roots.db", 22, 4, second, db);
    snprintf(away, sizeof away, "%s-away", second);
    indexer x = open_indexer(db);
    failures f = {0};
    const char *both[2] = {first, second};
    glimpse_index_summary s = update_paths(x.index, x.ctx, both, 2, &f);
    EXPECT(s, 7, 0, 0, 0, 0, 0);
    /* B unplugged; A refreshed, with one of its files deleted */
    snprintf(command, sizeof command, "mv %s %s && rm %s/00000.png", second, away, first);
    run_or_fail(command);
    s = update(x.index, x.ctx, first, &f);
    EXPECT(s, 0, 0, 0, 1, 2, 0);
    assert_int_equal(glimpse_index_count(x.index), 6);
    /* B back: nothing to embed again */
    snprintf(command, sizeof command, "mv %s %s", away, second);
    run_or_fail(command);
    s = update_paths(x.index, x.ctx, both, 2, &f);
    EXPECT(s, 0, 0, 0, 0, 6, 0);
    close_indexer(&x);
}

static void note_root_failure(void *user, const char *path, glimpse_status status, const char *reason) {
    failures *f = user;
    f->count++;
    size_t used = strlen(f->all);
    snprintf(f->all + used, sizeof f->all - used, "%s | %d | %s\n", path, (int)status, reason);
}

/* A path that does not exist is reported; the others are indexed all the same. */
static void test_missing_root_does_not_cancel(void **state) {
    (void)state;
    char library[PATH_CAPACITY], db[PATH_CAPACITY], command[4 * PATH_CAPACITY], output[PATH_CAPACITY + 8];
    make_library("present", "missing-root.db", 23, 3, library, db);
    indexer x = open_indexer(db);
    failures f = {0};
    const char *paths[2] = {library, "/nonexistent/glimpse-photos"};
    glimpse_index_params params = {.on_failure = note_failure, .user = &f, .on_root_failure = note_root_failure};
    glimpse_index_summary s;
    assert_int_equal(glimpse_index_update(x.index, x.ctx, paths, 2, &params, &s), GLIMPSE_STATUS_OK);
    EXPECT(s, 3, 0, 0, 0, 0, 0);
    assert_int_equal(s.roots_failed, 1);
    assert_int_equal(f.count, 1);
    char expected[128];
    snprintf(expected, sizeof expected, "/nonexistent/glimpse-photos | %d | ", (int)GLIMPSE_STATUS_NOT_FOUND);
    assert_non_null(strstr(f.all, expected));
    close_indexer(&x);
    /* the command line indexes the rest, names the missing path and exits 1 */
    snprintf(output, sizeof output, "%s.out", db);
    snprintf(command, sizeof command, "%s index -m %s --db %s-cli --quiet %s /nonexistent/glimpse-photos > %s 2>&1",
             GLIMPSE_BINARY, model_a, db, library, output);
    int status = system(command);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 1);
    uint8_t *text;
    size_t size;
    assert_int_equal(file_read_all(output, 1 << 16, &text, &size), GLIMPSE_STATUS_OK);
    assert_non_null(strstr((char *)text, "/nonexistent/glimpse-photos: No such file or directory"));
    assert_non_null(strstr((char *)text, "added 3, updated 0, moved 0, removed 0, unchanged 0, failed 0; 3 images"));
    free(text);
}

static void test_wrong_model_is_refused(void **state) {
    (void)state;
    char library[PATH_CAPACITY], db[PATH_CAPACITY];
    make_library("small", "small.db", 12, 2, library, db);
    glimpse_model *a, *b;
    assert_int_equal(glimpse_model_load(model_a, NULL, &a), GLIMPSE_STATUS_OK);
    assert_int_equal(glimpse_model_load(model_b, NULL, &b), GLIMPSE_STATUS_OK);
    glimpse_index *index;
    assert_int_equal(glimpse_index_open(db, a, &index), GLIMPSE_STATUS_OK);
    glimpse_context *ctx_b;
    assert_int_equal(glimpse_context_create(b, NULL, &ctx_b), GLIMPSE_STATUS_OK);
    const char *paths[1] = {library};
    glimpse_index_summary summary;
    assert_int_equal(glimpse_index_update(index, ctx_b, paths, 1, NULL, &summary), GLIMPSE_STATUS_WRONG_MODEL);
    glimpse_index_free(index);
    assert_int_equal(glimpse_index_open(db, b, &index), GLIMPSE_STATUS_WRONG_MODEL);
    assert_non_null(strstr(glimpse_last_error(), "another model"));
    assert_int_equal(glimpse_index_open(db, NULL, &index), GLIMPSE_STATUS_OK); /* for searching, no model needed */
    char *real = realpath(model_a, NULL);
    assert_string_equal(glimpse_index_model_path(index), real);
    free(real);
    glimpse_index_free(index);
    char absent[700];
    snprintf(absent, sizeof absent, "%s/absent.db", workspace);
    assert_int_equal(glimpse_index_open(absent, NULL, &index), GLIMPSE_STATUS_NOT_FOUND);
    /* the command line says so too */
    char command[2048];
    snprintf(command, sizeof command, "%s search --db %s -m %s 'a red circle' 2>&1 | grep -q 'another model'",
             GLIMPSE_BINARY, db, model_b);
    run_or_fail(command);
    glimpse_context_free(ctx_b);
    glimpse_model_free(a);
    glimpse_model_free(b);
}

/* Combined queries rank as the embeddings say directly. */
static void test_combined_queries(void **state) {
    (void)state;
    char library[PATH_CAPACITY], db[PATH_CAPACITY];
    make_library("query", "query.db", 13, 10, library, db);
    indexer x = open_indexer(db);
    glimpse_model *model = x.model;
    glimpse_context *ctx = x.ctx;
    glimpse_index *index = x.index;
    failures f = {0};
    update(index, ctx, library, &f);
    /* the images, embedded directly */
    glimpse_image *images[10];
    char *paths[10];
    for (int i = 0; i < 10; i++) {
        char path[700];
        snprintf(path, sizeof path, "%s/%05d.png", library, i);
        paths[i] = realpath(path, NULL);
        assert_int_equal(glimpse_image_load_file(path, NULL, &images[i]), GLIMPSE_STATUS_OK);
    }
    float image_embeddings[10 * 32];
    assert_int_equal(glimpse_embed_images(ctx, images, 10, image_embeddings), GLIMPSE_STATUS_OK);
    const char *texts[2] = {"a red circle", "a blue square"};
    float text_embeddings[2 * 32], picture[32];
    assert_int_equal(glimpse_embed_texts(ctx, texts, 2, text_embeddings), GLIMPSE_STATUS_OK);
    memcpy(picture, image_embeddings + 3 * 32, sizeof picture);
    /* "2:a red circle - a blue square + PICTURE" by hand */
    char query_text[1024];
    snprintf(query_text, sizeof query_text, "2:a red circle - a blue square + @%s", paths[3]);
    assert_int_equal(glimpse_query_needs_images(query_text), 1);
    assert_int_equal(glimpse_query_needs_images("a red circle + a blue square"), 0);
    float expected[32], query[32];
    double norm = 0;
    for (int d = 0; d < 32; d++) {
        expected[d] = 2 * text_embeddings[d] - text_embeddings[32 + d] + picture[d];
        norm += (double)expected[d] * expected[d];
    }
    for (int d = 0; d < 32; d++) expected[d] = (float)(expected[d] / sqrt(norm));
    assert_int_equal(glimpse_embed_query(ctx, query_text, query), GLIMPSE_STATUS_OK);
    for (int d = 0; d < 32; d++) assert_float_equal(query[d], expected[d], 1e-5);
    glimpse_model_info info;
    glimpse_model_get_info(model, &info);
    float scores[10];
    for (int i = 0; i < 10; i++) {
        double dot = 0;
        for (int d = 0; d < 32; d++) dot += (double)expected[d] * image_embeddings[i * 32 + d];
        scores[i] = (float)(dot * info.logit_scale);
    }
    glimpse_search_result results[10];
    size_t found;
    assert_int_equal(glimpse_index_search(index, query, 10, results, &found), GLIMPSE_STATUS_OK);
    assert_int_equal(found, 10);
    for (size_t r = 0; r < found; r++) {
        int i = 0;
        while (strcmp(paths[i], results[r].path) != 0) i++;
        assert_float_equal(results[r].score, scores[i], 1e-4);
        if (r) assert_true(results[r - 1].score >= results[r].score);
    }
    /* malformed queries */
    assert_int_equal(glimpse_embed_query(ctx, "a red circle + ", query), GLIMPSE_STATUS_INVALID_ARGUMENT);
    assert_int_equal(glimpse_embed_query(ctx, "a cat - a cat", query), GLIMPSE_STATUS_INVALID_ARGUMENT);
    /* image parts are explicit: @PATH, ~ expanded; a missing one is an error, a file name as text too */
    float by_path[32];
    char home_query[64];
    snprintf(query_text, sizeof query_text, "@%s", paths[3]);
    assert_int_equal(glimpse_embed_query(ctx, query_text, by_path), GLIMPSE_STATUS_OK);
    const char *home = getenv("HOME");
    char *saved_home = home ? strdup(home) : NULL;
    setenv("HOME", library, 1);
    snprintf(home_query, sizeof home_query, "@~/%05d.png", 3);
    assert_int_equal(glimpse_query_needs_images(home_query), 1);
    assert_int_equal(glimpse_embed_query(ctx, home_query, query), GLIMPSE_STATUS_OK);
    for (int d = 0; d < 32; d++) assert_float_equal(query[d], by_path[d], 1e-6);
    if (saved_home) setenv("HOME", saved_home, 1);
    free(saved_home);
    assert_int_equal(glimpse_embed_query(ctx, "a red circle + @/nonexistent/nope.png", query),
                     GLIMPSE_STATUS_NOT_FOUND);
    assert_non_null(strstr(glimpse_last_error(), "no image file /nonexistent/nope.png"));
    assert_int_equal(glimpse_embed_query(ctx, "photos/nope.png", query), GLIMPSE_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(glimpse_last_error(), "write @photos/nope.png"));
    snprintf(query_text, sizeof query_text, "2:snow + %s", paths[3]); /* an existing file without @ is refused too */
    assert_int_equal(glimpse_embed_query(ctx, query_text, query), GLIMPSE_STATUS_INVALID_ARGUMENT);
    assert_int_equal(glimpse_query_needs_images(query_text), 0);
    assert_int_equal(glimpse_embed_query(ctx, "@@home + a photo named dog.jpg", query), GLIMPSE_STATUS_OK);
    for (int i = 0; i < 10; i++) glimpse_image_free(images[i]), free(paths[i]);
    close_indexer(&x);
    /* the command line exits non-zero, naming the file */
    char command[2048];
    snprintf(command, sizeof command, "%s search --db %s '@%s/nope.png' 2>&1 | grep -q 'no image file %s/nope.png'",
             GLIMPSE_BINARY, db, library, library);
    run_or_fail(command);
    snprintf(command, sizeof command, "%s search --db %s '@%s/nope.png' > /dev/null 2>&1", GLIMPSE_BINARY, db, library);
    assert_int_not_equal(system(command), 0);
}

static long rows_in(const char *db) {
    sqlite3 *handle;
    long rows = -1;
    if (sqlite3_open_v2(db, &handle, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK) {
        sqlite3_busy_timeout(handle, 2000);
        sqlite3_stmt *statement;
        if (sqlite3_prepare_v2(handle, "SELECT COUNT(*), COUNT(DISTINCT path) FROM images", -1, &statement, NULL) ==
            SQLITE_OK) {
            if (sqlite3_step(statement) == SQLITE_ROW && sqlite3_column_int64(statement, 0) == sqlite3_column_int64(statement, 1))
                rows = (long)sqlite3_column_int64(statement, 0);
            sqlite3_finalize(statement);
        }
    }
    sqlite3_close(handle);
    return rows;
}

/* kill -9 in the middle of indexing loses nothing committed; the next run finishes. */
static void test_killed_and_resumed(void **state) {
    (void)state;
    char library[PATH_CAPACITY], db[PATH_CAPACITY];
    const int total = 240;
    make_library("many", "killed.db", 14, total, library, db);
    pid_t child = fork();
    if (child == 0) {
        if (!freopen("/dev/null", "w", stdout) || !freopen("/dev/null", "w", stderr)) _exit(126);
        execl(GLIMPSE_BINARY, GLIMPSE_BINARY, "index", "-m", model_a, "--db", db, "--threads", "1", library, (char *)NULL);
        _exit(127);
    }
    /* wait until some batches are committed, then kill without warning */
    long before = 0;
    struct timespec pause = {0, 2 * 1000 * 1000};
    for (int tries = 0; tries < 20000; tries++) {
        before = file_is_regular(db) ? rows_in(db) : 0;
        if (before >= 16) break;
        nanosleep(&pause, NULL);
    }
    kill(child, SIGKILL);
    int status;
    waitpid(child, &status, 0);
    assert_true(WIFSIGNALED(status)); /* it was really killed mid-run */
    long after_kill = rows_in(db);
    assert_true(after_kill >= before);
    assert_true(after_kill < total);
    /* the database is intact, and a second run completes the job */
    char command[2048];
    snprintf(command, sizeof command, "%s index -m %s --db %s --json %s > %s/resume.json", GLIMPSE_BINARY, model_a, db,
             library, workspace);
    run_or_fail(command);
    assert_int_equal(rows_in(db), total);
    snprintf(command, sizeof command, "%s/resume.json", workspace);
    uint8_t *json;
    size_t size;
    assert_int_equal(file_read_all(command, 4096, &json, &size), GLIMPSE_STATUS_OK);
    char expected[128];
    snprintf(expected, sizeof expected, "\"unchanged\": %ld", after_kill);
    assert_non_null(strstr((char *)json, expected)); /* nothing already committed was embedded again */
    free(json);
    sqlite3 *handle;
    assert_int_equal(sqlite3_open_v2(db, &handle, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *statement;
    assert_int_equal(sqlite3_prepare_v2(handle, "PRAGMA integrity_check", -1, &statement, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(statement), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(statement, 0), "ok");
    sqlite3_finalize(statement);
    sqlite3_close(handle);
}

/* Sets the writer row of an index as a process would that had started updating it. */
static void set_writer(const char *db, long pid) {
    char host[256] = "", sql[512];
    gethostname(host, sizeof host - 1);
    snprintf(sql, sizeof sql, "INSERT OR REPLACE INTO writer VALUES (1, %ld, '%s', %lld)", pid, host,
             (long long)time(NULL));
    sqlite3 *handle;
    assert_int_equal(sqlite3_open(db, &handle), SQLITE_OK);
    assert_int_equal(sqlite3_exec(handle, sql, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(handle);
}

/* The "added" count of a `glimpse index --json` output file. */
static long added_in(const char *path) {
    uint8_t *json;
    size_t size;
    long added = -1;
    if (file_read_all(path, 1 << 16, &json, &size) != GLIMPSE_STATUS_OK) return -1;
    const char *key = "\"added\": ", *at = strstr((char *)json, key);
    if (at) added = strtol(at + strlen(key), NULL, 10);
    free(json);
    return added;
}

/* Two `glimpse index` runs on one index: the second is refused while the
 * first runs, a writer that died does not block, nothing is embedded twice. */
static void test_one_writer_at_a_time(void **state) {
    (void)state;
    char library[PATH_CAPACITY], db[PATH_CAPACITY], command[4 * PATH_CAPACITY], first[PATH_CAPACITY + 8],
        second[PATH_CAPACITY + 8];
    const int total = 160;
    make_library("busy", "busy.db", 24, total, library, db);
    snprintf(first, sizeof first, "%s.first", db);
    snprintf(second, sizeof second, "%s.second", db);
    indexer x = open_indexer(db); /* creates the tables */
    close_indexer(&x);
    /* a live process holds it: refused, with a message, nothing embedded */
    set_writer(db, (long)getpid());
    snprintf(command, sizeof command, "%s index -m %s --db %s --json %s > %s 2>&1", GLIMPSE_BINARY, model_a, db,
             library, second);
    int status = system(command);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 1);
    uint8_t *text;
    size_t size;
    assert_int_equal(file_read_all(second, 1 << 16, &text, &size), GLIMPSE_STATUS_OK);
    char expected[128];
    snprintf(expected, sizeof expected, "is being updated by another glimpse index (process %ld on ", (long)getpid());
    assert_non_null(strstr((char *)text, expected));
    free(text);
    assert_int_equal(rows_in(db), 0);
    /* a writer that died (killed, crashed) does not block */
    pid_t dead = fork();
    if (dead == 0) _exit(0);
    waitpid(dead, NULL, 0);
    set_writer(db, (long)dead);
    /* two runs at once */
    pid_t child = fork();
    if (child == 0) {
        if (!freopen(first, "w", stdout) || !freopen("/dev/null", "w", stderr)) _exit(126);
        execl(GLIMPSE_BINARY, GLIMPSE_BINARY, "index", "-m", model_a, "--db", db, "--json", "--threads", "1", library,
              (char *)NULL);
        _exit(127);
    }
    struct timespec pause = {0, 1000 * 1000};
    for (int tries = 0; tries < 10000 && rows_in(db) < 1; tries++) nanosleep(&pause, NULL);
    snprintf(command, sizeof command, "%s index -m %s --db %s --json %s > %s 2>&1", GLIMPSE_BINARY, model_a, db,
             library, second);
    int second_status = system(command);
    waitpid(child, &status, 0);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    assert_int_equal(rows_in(db), total);
    long second_added = added_in(second);
    assert_int_equal(added_in(first) + (second_added > 0 ? second_added : 0), total); /* nothing embedded twice */
    if (WEXITSTATUS(second_status) != 0) { /* refused while the first ran (the usual case) */
        assert_int_equal(file_read_all(second, 1 << 16, &text, &size), GLIMPSE_STATUS_OK);
        assert_non_null(strstr((char *)text, "is being updated by another glimpse index"));
        free(text);
    }
    sqlite3 *handle;
    sqlite3_stmt *statement;
    assert_int_equal(sqlite3_open(db, &handle), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(handle, "SELECT COUNT(*) FROM writer", -1, &statement, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(statement), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int(statement, 0), 0); /* left to the next writer */
    sqlite3_finalize(statement);
    sqlite3_close(handle);
}

/* Whether path exists. */
static bool exists(const char *path) { return access(path, F_OK) == 0; }

/* An index on read-only media, or not writable by the one searching, is
 * searched without a write: no -wal or -shm file, the file unchanged. */
static void test_read_only_index(void **state) {
    (void)state;
    char library[PATH_CAPACITY], folder[PATH_CAPACITY], db[PATH_CAPACITY + 16], command[4 * PATH_CAPACITY],
        side[PATH_CAPACITY + 16], output[PATH_CAPACITY + 16];
    make_library("ro-library", "ro", 25, 4, library, folder);
    snprintf(db, sizeof db, "%s/photos.db", folder);
    snprintf(output, sizeof output, "%s.out", folder);
    snprintf(command, sizeof command, "mkdir -p %s && %s index -m %s --db %s --quiet %s > /dev/null", folder,
             GLIMPSE_BINARY, model_a, db, library);
    run_or_fail(command);
    uint8_t *before, *after;
    size_t before_size, after_size;
    assert_int_equal(file_read_all(db, 1 << 24, &before, &before_size), GLIMPSE_STATUS_OK);
    /* the folder writable: nothing written all the same */
    glimpse_index *index;
    assert_int_equal(glimpse_index_open(db, NULL, &index), GLIMPSE_STATUS_OK);
    float query[32] = {1.0f};
    glimpse_search_result results[4];
    size_t found;
    assert_int_equal(glimpse_index_search(index, query, 4, results, &found), GLIMPSE_STATUS_OK);
    assert_int_equal(found, 4);
    snprintf(side, sizeof side, "%s-wal", db);
    assert_false(exists(side));
    snprintf(side, sizeof side, "%s-shm", db);
    assert_false(exists(side));
    /* and refuses to update */
    glimpse_model *model;
    glimpse_context *ctx;
    assert_int_equal(glimpse_model_load(model_a, NULL, &model), GLIMPSE_STATUS_OK);
    assert_int_equal(glimpse_context_create(model, NULL, &ctx), GLIMPSE_STATUS_OK);
    assert_int_equal(glimpse_index_check_model(index, model), GLIMPSE_STATUS_OK);
    const char *paths[1] = {library};
    glimpse_index_summary summary;
    assert_int_equal(glimpse_index_update(index, ctx, paths, 1, NULL, &summary), GLIMPSE_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(glimpse_last_error(), "read-only"));
    glimpse_index_free(index);
    glimpse_context_free(ctx);
    glimpse_model_free(model);
    snprintf(command, sizeof command, "%s search --db %s -k 4 'a red circle' > %s", GLIMPSE_BINARY, db, output);
    run_or_fail(command);
    assert_false(exists(side));
    assert_int_equal(file_read_all(db, 1 << 24, &after, &after_size), GLIMPSE_STATUS_OK);
    assert_true(before_size == after_size && memcmp(before, after, before_size) == 0);
    free(after);
    /* on a read-only mount (a mount namespace of our own; root ignores file modes, not EROFS) */
    if (system("unshare -m true 2>/dev/null") != 0) {
        fprintf(stderr, "note: no mount namespace here; the read-only mount case was not run\n");
        free(before);
        return;
    }
    snprintf(command, sizeof command,
             "unshare -m sh -c 'mount --bind -o ro %s %s && ! touch %s/probe 2>/dev/null && "
             "%s search --db %s -k 4 \"a red circle\" > %s 2>&1'",
             folder, folder, folder, GLIMPSE_BINARY, db, output);
    run_or_fail(command);
    uint8_t *text;
    size_t size;
    assert_int_equal(file_read_all(output, 1 << 16, &text, &size), GLIMPSE_STATUS_OK);
    int lines = 0;
    for (size_t i = 0; i < size; i++) lines += text[i] == '\n';
    assert_non_null(strstr((char *)text, "ro-library/0000"));
    assert_int_equal(lines, 5); /* the query, then 4 results */
    free(text);
    assert_int_equal(file_read_all(db, 1 << 24, &after, &after_size), GLIMPSE_STATUS_OK);
    assert_true(before_size == after_size && memcmp(before, after, before_size) == 0);
    free(before), free(after);
}

/* The command line: index with a progress-free summary, search texts,
 * images and combinations, JSON in the rank format. */
static void test_command_line(void **state) {
    (void)state;
    char library[PATH_CAPACITY], db[PATH_CAPACITY], command[4096], output[700];
    snprintf(output, sizeof output, "%s/cli.out", workspace);
    make_library("cli", "cli.db", 15, 5, library, db);
    snprintf(command, sizeof command, "%s index -m %s --db %s --quiet %s > %s", GLIMPSE_BINARY, model_a, db, library,
             output);
    run_or_fail(command);
    uint8_t *text;
    size_t size;
    assert_int_equal(file_read_all(output, 1 << 16, &text, &size), GLIMPSE_STATUS_OK);
    assert_non_null(strstr((char *)text, "added 5, updated 0, moved 0, removed 0, unchanged 0, failed 0; 5 images"));
    free(text);
    /* no -m: the index knows its model; a text, an image and a combination */
    snprintf(command, sizeof command,
             "%s search --db %s -k 2 --json 'a red circle' '@%s/00001.png' '2:a red circle - @%s/00001.png' > %s",
             GLIMPSE_BINARY, db, library, library, output);
    run_or_fail(command);
    assert_int_equal(file_read_all(output, 1 << 16, &text, &size), GLIMPSE_STATUS_OK);
    int lines = 0;
    for (char *line = (char *)text; *line;) {
        char *end = strchr(line, '\n');
        assert_non_null(end);
        cJSON *json = cJSON_ParseWithLength(line, (size_t)(end - line));
        assert_non_null(json);
        const cJSON *results = cJSON_GetObjectItem(json, "results");
        assert_non_null(cJSON_GetObjectItem(json, "text"));
        assert_int_equal(cJSON_GetArraySize(results), 2);
        double first = cJSON_GetObjectItem(cJSON_GetArrayItem(results, 0), "score")->valuedouble;
        double second = cJSON_GetObjectItem(cJSON_GetArrayItem(results, 1), "score")->valuedouble;
        assert_true(first >= second);
        if (lines == 1) /* the image query finds the image itself first */
            assert_non_null(strstr(cJSON_GetObjectItem(cJSON_GetArrayItem(results, 0), "image")->valuestring, "00001.png"));
        cJSON_Delete(json);
        lines++;
        line = end + 1;
    }
    assert_int_equal(lines, 3);
    free(text);
    /* an index that does not exist */
    snprintf(command, sizeof command, "%s search --db %s/none.db x 2>&1 | grep -q 'no such index'", GLIMPSE_BINARY,
             workspace);
    run_or_fail(command);
}

/* The path of the search's best result for the stored picture's own embedding (NULL if none). */
static char *best_match(glimpse_index *index, glimpse_context *ctx, const char *picture) {
    glimpse_image *image;
    float query[32];
    assert_int_equal(glimpse_image_load_file(picture, NULL, &image), GLIMPSE_STATUS_OK);
    assert_int_equal(glimpse_embed_images(ctx, &image, 1, query), GLIMPSE_STATUS_OK);
    glimpse_image_free(image);
    glimpse_search_result result;
    size_t found = 0;
    assert_int_equal(glimpse_index_search(index, query, 1, &result, &found), GLIMPSE_STATUS_OK);
    return found ? strdup(result.path) : NULL;
}

/* A stored file that no longer decodes (or reads) is reported, left out of
 * search results while its entry is kept, and tried again by the next run:
 * back as it was, it is found again without being embedded again. */
static void test_stale_entries(void **state) {
    (void)state;
    char library[PATH_CAPACITY], db[PATH_CAPACITY], command[4 * PATH_CAPACITY], picture[PATH_CAPACITY + 16];
    make_library("stale", "stale.db", 31, 4, library, db);
    snprintf(picture, sizeof picture, "%s/00002.png", library);
    indexer x = open_indexer(db);
    failures f = {0};
    glimpse_index_summary s = update(x.index, x.ctx, library, &f);
    EXPECT(s, 4, 0, 0, 0, 0, 0);
    char *real = realpath(picture, NULL), *best = best_match(x.index, x.ctx, picture);
    assert_string_equal(best, real);
    free(best);
    /* the file is damaged: reported, kept, no longer returned */
    snprintf(command, sizeof command, "cp %s %s.good && head -c 200 %s.good > %s", picture, picture, picture, picture);
    run_or_fail(command);
    s = update(x.index, x.ctx, library, &f);
    EXPECT(s, 0, 0, 0, 0, 3, 1);
    assert_non_null(strstr(f.all, "00002.png | "));
    assert_non_null(strstr(f.all, "left out of search results"));
    assert_int_equal(glimpse_index_count(x.index), 4);
    assert_int_equal(rows_in(db), 4);
    snprintf(command, sizeof command, "%s.good", picture);
    best = best_match(x.index, x.ctx, command);
    assert_non_null(best);
    assert_string_not_equal(best, real);
    free(best);
    /* still failing: tried again, still out */
    s = update(x.index, x.ctx, library, &f);
    EXPECT(s, 0, 0, 0, 0, 3, 1);
    /* repaired with the same bytes: back, not embedded again */
    snprintf(command, sizeof command, "mv %s.good %s", picture, picture);
    run_or_fail(command);
    s = update(x.index, x.ctx, library, &f);
    EXPECT(s, 0, 0, 0, 0, 4, 0);
    best = best_match(x.index, x.ctx, picture);
    assert_string_equal(best, real);
    free(best);
    if (geteuid() != 0) { /* unreadable, size and time unchanged (root reads every file) */
        snprintf(command, sizeof command, "chmod 000 %s", picture);
        run_or_fail(command);
        s = update(x.index, x.ctx, library, &f);
        EXPECT(s, 0, 0, 0, 0, 3, 1);
        snprintf(command, sizeof command, "chmod 644 %s", picture);
        run_or_fail(command);
    }
    free(real);
    close_indexer(&x);
}

static void note_log(void *user, glimpse_log_level level, const char *message) {
    failures *f = user;
    if (level < GLIMPSE_LOG_LEVEL_WARNING) return;
    f->count++;
    size_t used = strlen(f->all);
    snprintf(f->all + used, sizeof f->all - used, "%s\n", message);
}

/* Silent changes of meaning are refused: a snapshot without
 * preprocessor_config.json (loudly preprocessed with defaults) cannot
 * index, and an index keeps the precision it was built at. */
static void test_meaning_is_kept(void **state) {
    (void)state;
    char library[PATH_CAPACITY], db[PATH_CAPACITY], bare[PATH_CAPACITY], command[4 * PATH_CAPACITY];
    make_library("meaning", "meaning.db", 32, 3, library, db);
    snprintf(bare, sizeof bare, "%s/model-bare", workspace);
    snprintf(command, sizeof command, "cp -r %s %s && rm %s/preprocessor_config.json", model_a, bare, bare);
    run_or_fail(command);
    failures logged = {0};
    glimpse_set_log_callback(note_log, &logged);
    glimpse_model *model;
    assert_int_equal(glimpse_model_load(bare, NULL, &model), GLIMPSE_STATUS_OK);
    glimpse_set_log_callback(NULL, NULL);
    assert_int_equal(logged.count, 1);
    assert_non_null(strstr(logged.all, "no preprocessor_config.json"));
    glimpse_model_info info;
    assert_int_equal(glimpse_model_get_info(model, &info), GLIMPSE_STATUS_OK);
    assert_true(info.preprocessor_defaults);
    glimpse_index *index;
    assert_int_equal(glimpse_index_open(db, model, &index), GLIMPSE_STATUS_WRONG_MODEL);
    assert_non_null(strstr(glimpse_last_error(), "preprocessor_config.json"));
    glimpse_model_free(model);
    /* float32 index: an int8 model is refused, and the reverse */
    indexer x = open_indexer(db);
    failures f = {0};
    update(x.index, x.ctx, library, &f);
    assert_int_equal(glimpse_index_precision(x.index), GLIMPSE_PRECISION_FLOAT32);
    close_indexer(&x);
    glimpse_load_params params = glimpse_load_default_params();
    params.precision = GLIMPSE_PRECISION_INT8;
    assert_int_equal(glimpse_model_load(model_a, &params, &model), GLIMPSE_STATUS_OK);
    assert_int_equal(glimpse_index_open(db, model, &index), GLIMPSE_STATUS_WRONG_MODEL);
    assert_non_null(strstr(glimpse_last_error(), "holds float32 embeddings"));
    assert_int_equal(glimpse_index_open(db, NULL, &index), GLIMPSE_STATUS_OK);
    assert_int_equal(glimpse_index_check_model(index, model), GLIMPSE_STATUS_WRONG_MODEL);
    glimpse_index_free(index);
    char int8_db[PATH_CAPACITY + 8];
    snprintf(int8_db, sizeof int8_db, "%s-int8", db);
    assert_int_equal(glimpse_index_open(int8_db, model, &index), GLIMPSE_STATUS_OK);
    assert_int_equal(glimpse_index_precision(index), GLIMPSE_PRECISION_INT8);
    glimpse_index_free(index);
    glimpse_model_free(model);
    assert_int_equal(glimpse_model_load(model_a, NULL, &model), GLIMPSE_STATUS_OK);
    assert_int_equal(glimpse_index_open(int8_db, model, &index), GLIMPSE_STATUS_WRONG_MODEL);
    assert_non_null(strstr(glimpse_last_error(), "holds int8 embeddings"));
    glimpse_model_free(model);
    /* the command line: index refuses the bare snapshot; search takes the index's precision by itself */
    snprintf(command, sizeof command, "%s index -m %s --db %s %s 2>&1 | grep -q 'no preprocessor_config.json'",
             GLIMPSE_BINARY, bare, db, library);
    run_or_fail(command);
    snprintf(command, sizeof command, "%s index -m %s --int8 --db %s --quiet %s > /dev/null && %s search --db %s -k 1 "
             "'a red circle' > /dev/null", GLIMPSE_BINARY, model_a, int8_db, library, GLIMPSE_BINARY, int8_db);
    run_or_fail(command);
    snprintf(command, sizeof command, "%s index -m %s --db %s --quiet %s 2>&1 | grep -q 'holds int8 embeddings'",
             GLIMPSE_BINARY, model_a, int8_db, library);
    run_or_fail(command);
}

static void count_root(void *user, const char *path, size_t images, bool present) {
    failures *f = user;
    f->count++;
    size_t used = strlen(f->all);
    snprintf(f->all + used, sizeof f->all - used, "%s | %zu | %d\n", strrchr(path, '/') + 1, images, (int)present);
}

typedef struct progress_record {
    failures failed; /* first: note_failure takes the same user */
    size_t calls, first_done, first_total;
} progress_record;

static bool record_progress(void *user, size_t done, size_t total) {
    progress_record *p = user;
    if (!p->calls++) p->first_done = done, p->first_total = total;
    return false;
}

/* Management: other extensions and cases, --exclude, stats and roots, remove, prune. */
static void test_library_management(void **state) {
    (void)state;
    char library[PATH_CAPACITY], db[PATH_CAPACITY], other[PATH_CAPACITY], command[8 * PATH_CAPACITY];
    make_library("manage", "manage.db", 33, 4, library, db);
    make_library("manage-other", "manage.db", 34, 2, other, db);
    /* the decoders go by the bytes: a PNG saved as .JFIF, .JPG or .gif is a picture all the same */
    snprintf(command, sizeof command,
             "cd %s && cp 00000.png browser.JFIF && cp 00001.png camera.JPG && cp 00002.png anim.gif && "
             "mkdir .thumbnails && cp 00003.png .thumbnails/small.png",
             library);
    run_or_fail(command);
    indexer x = open_indexer(db);
    progress_record progress = {0};
    const char *exclude[2] = {"*.gif", ".thumbnails"};
    const char *both[2] = {library, other};
    glimpse_index_params params = {.on_progress = record_progress, .on_failure = note_failure, .user = &progress,
                                   .exclude = exclude, .exclude_count = 2};
    glimpse_index_summary s;
    assert_int_equal(glimpse_index_update(x.index, x.ctx, both, 2, &params, &s), GLIMPSE_STATUS_OK);
    EXPECT(s, 8, 0, 0, 0, 0, 0);
    /* progress starts at 0 of the total, so that a display times the first batch from the start */
    assert_true(progress.calls >= 2);
    assert_int_equal(progress.first_done, 0);
    assert_int_equal(progress.first_total, 8);
    /* without the patterns the two come in; with them again they go */
    params.on_progress = NULL;
    params.exclude_count = 0;
    assert_int_equal(glimpse_index_update(x.index, x.ctx, both, 1, &params, &s), GLIMPSE_STATUS_OK);
    EXPECT(s, 2, 0, 0, 0, 6, 0);
    params.exclude_count = 2;
    assert_int_equal(glimpse_index_update(x.index, x.ctx, both, 1, &params, &s), GLIMPSE_STATUS_OK);
    EXPECT(s, 0, 0, 0, 2, 6, 0);
    glimpse_index_stats stats;
    assert_int_equal(glimpse_index_get_stats(x.index, &stats), GLIMPSE_STATUS_OK);
    assert_int_equal(stats.images, 8);
    assert_int_equal(stats.failed, 0);
    assert_int_equal(stats.dim, 32);
    assert_int_equal(stats.precision, GLIMPSE_PRECISION_FLOAT32);
    assert_true(stats.file_bytes > 0);
    failures roots = {0};
    assert_int_equal(glimpse_index_list_roots(x.index, count_root, &roots), GLIMPSE_STATUS_OK);
    assert_int_equal(roots.count, 2);
    assert_non_null(strstr(roots.all, "manage | 6 | 1\n"));
    assert_non_null(strstr(roots.all, "manage-other | 2 | 1\n"));
    /* remove a file, then a folder (a prefix of another folder's name takes nothing from it) */
    size_t removed;
    snprintf(command, sizeof command, "%s/browser.JFIF", library);
    assert_int_equal(glimpse_index_remove(x.index, command, &removed), GLIMPSE_STATUS_OK);
    assert_int_equal(removed, 1);
    assert_int_equal(glimpse_index_remove(x.index, library, &removed), GLIMPSE_STATUS_OK);
    assert_int_equal(removed, 5);
    assert_int_equal(glimpse_index_count(x.index), 2);
    /* the library indexed again (all 6 back); the other unplugged: kept by updates, forgotten by prune only */
    assert_int_equal(glimpse_index_update(x.index, x.ctx, both, 1, &params, &s), GLIMPSE_STATUS_OK);
    EXPECT(s, 6, 0, 0, 0, 0, 0);
    snprintf(command, sizeof command, "mv %s %s-away", other, other);
    run_or_fail(command);
    assert_int_equal(glimpse_index_update(x.index, x.ctx, both, 1, &params, &s), GLIMPSE_STATUS_OK);
    assert_int_equal(glimpse_index_count(x.index), 8);
    memset(&roots, 0, sizeof roots);
    assert_int_equal(glimpse_index_list_roots(x.index, count_root, &roots), GLIMPSE_STATUS_OK);
    assert_non_null(strstr(roots.all, "manage-other | 2 | 0\n"));
    assert_int_equal(glimpse_index_prune(x.index, &removed), GLIMPSE_STATUS_OK);
    assert_int_equal(removed, 2);
    assert_int_equal(glimpse_index_count(x.index), 6);
    memset(&roots, 0, sizeof roots);
    assert_int_equal(glimpse_index_list_roots(x.index, count_root, &roots), GLIMPSE_STATUS_OK);
    assert_int_equal(roots.count, 1);
    close_indexer(&x);
    /* a read-only handle refuses changes */
    glimpse_index *reader;
    assert_int_equal(glimpse_index_open(db, NULL, &reader), GLIMPSE_STATUS_OK);
    assert_int_equal(glimpse_index_prune(reader, &removed), GLIMPSE_STATUS_INVALID_ARGUMENT);
    glimpse_index_free(reader);
}

/* The command line's management, JSON error objects and non-UTF-8 names. */
static void test_management_command_line(void **state) {
    (void)state;
    char library[PATH_CAPACITY], db[PATH_CAPACITY], command[8 * PATH_CAPACITY], output[PATH_CAPACITY + 8];
    make_library("manage-cli", "manage-cli.db", 35, 3, library, db);
    snprintf(output, sizeof output, "%s.out", db);
    /* a name that is not UTF-8 (Latin-1 e-acute), and a broken file */
    snprintf(command, sizeof command, "cd %s && cp 00000.png \"$(printf 'caf\\351.png')\" && echo no > broken.jpg",
             library);
    run_or_fail(command);
    snprintf(command, sizeof command, "%s index -m %s --db %s --json %s > %s", GLIMPSE_BINARY, model_a, db, library,
             output);
    assert_int_not_equal(system(command), 0); /* a broken file: exit status 1 */
    uint8_t *text;
    size_t size;
    assert_int_equal(file_read_all(output, 1 << 16, &text, &size), GLIMPSE_STATUS_OK);
    char *newline = strchr((char *)text, '\n');
    assert_non_null(newline);
    cJSON *error = cJSON_ParseWithLength((char *)text, (size_t)(newline - (char *)text));
    assert_non_null(error);
    assert_non_null(strstr(cJSON_GetObjectItem(error, "image")->valuestring, "broken.jpg"));
    assert_non_null(cJSON_GetObjectItem(error, "error"));
    cJSON_Delete(error);
    assert_non_null(strstr(newline + 1, "\"added\": 4"));
    free(text);
    /* the search result of the Latin-1 name carries its bytes */
    snprintf(command, sizeof command, "%s search --db %s -k 4 --json 'a red circle' > %s", GLIMPSE_BINARY, db, output);
    run_or_fail(command);
    assert_int_equal(file_read_all(output, 1 << 16, &text, &size), GLIMPSE_STATUS_OK);
    cJSON *json = cJSON_Parse((char *)text);
    assert_non_null(json);
    int with_bytes = 0;
    const cJSON *result;
    cJSON_ArrayForEach(result, cJSON_GetObjectItem(json, "results")) {
        const cJSON *bytes = cJSON_GetObjectItem(result, "path_bytes");
        if (!bytes) continue;
        with_bytes++;
        char name[PATH_CAPACITY * 2] = "";
        int n = 0;
        const cJSON *byte;
        cJSON_ArrayForEach(byte, bytes) name[n++] = (char)byte->valueint;
        name[n] = '\0';
        assert_true(access(name, R_OK) == 0); /* the bytes reopen the file */
        assert_non_null(strstr(name, "caf\351.png"));
    }
    assert_int_equal(with_bytes, 1);
    cJSON_Delete(json);
    free(text);
    /* --stats, --list, --remove, --prune */
    snprintf(command, sizeof command, "%s index --db %s --stats --json > %s", GLIMPSE_BINARY, db, output);
    run_or_fail(command);
    assert_int_equal(file_read_all(output, 1 << 16, &text, &size), GLIMPSE_STATUS_OK);
    json = cJSON_Parse((char *)text);
    assert_non_null(json);
    assert_int_equal(cJSON_GetObjectItem(json, "images")->valueint, 4);
    assert_string_equal(cJSON_GetObjectItem(json, "precision")->valuestring, "float32");
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(json, "roots")), 1);
    cJSON_Delete(json);
    free(text);
    snprintf(command, sizeof command, "%s index --db %s --list | grep -c png | grep -qx 4", GLIMPSE_BINARY, db);
    run_or_fail(command);
    snprintf(command, sizeof command, "%s index --db %s --remove %s/00001.png | grep -q 'removed 1; 3 images'",
             GLIMPSE_BINARY, db, library);
    run_or_fail(command);
    snprintf(command, sizeof command, "rm %s/00002.png && %s index --db %s --prune | grep -q 'removed 1; 2 images'",
             library, GLIMPSE_BINARY, db);
    run_or_fail(command);
    snprintf(command, sizeof command, "%s index --db %s --stats %s > /dev/null 2>&1", GLIMPSE_BINARY, db, library);
    assert_int_equal(WEXITSTATUS(system(command)), 2); /* --stats takes no paths */
}

#define DEMO_FILES 10

typedef struct groups_seen {
    int count;
    int group_of[DEMO_FILES]; /* -1: in no group */
    const char *const *names; /* real paths of the files, in order */
} groups_seen;

static void note_group(void *user, const char *const *paths, const float *similarity, size_t count) {
    groups_seen *g = user;
    assert_float_equal(similarity[0], 1.0f, 1e-5);
    for (size_t m = 0; m < count; m++) {
        int i = 0;
        while (i < DEMO_FILES && strcmp(g->names[i], paths[m]) != 0) i++;
        assert_true(i < DEMO_FILES);
        assert_int_equal(g->group_of[i], -1); /* in one group only */
        g->group_of[i] = g->count;
    }
    g->count++;
}

/* Near-duplicates and --like with the demo CLIP: copies re-encoded and
 * resized by Pillow join their originals; the groups are exactly the
 * connected pairs at the threshold, computed here from the embeddings. */
static void test_similar_pictures(void **state) {
    (void)state;
    if (system("/usr/bin/python3 -c 'import PIL' 2> /dev/null") != 0) {
        skip(); /* Pillow makes the copies */
        return;
    }
    char library[PATH_CAPACITY], db[PATH_CAPACITY], command[4 * PATH_CAPACITY], demo[PATH_CAPACITY];
    make_library("similar", "similar.db", 36, 8, library, db);
    snprintf(demo, sizeof demo, "%s/examples/models/demo-clip", GLIMPSE_SOURCE_DIR);
    snprintf(command, sizeof command,
             "cd %s && /usr/bin/python3 -c \"from PIL import Image\n"
             "Image.open('00000.png').convert('RGB').save('00000-copy.jpg', quality=70)\n"
             "Image.open('00001.png').resize((150, 150), Image.BICUBIC).save('00001-small.png')\"",
             library);
    run_or_fail(command);
    const char *names[DEMO_FILES] = {"00000.png", "00001.png", "00002.png", "00003.png",     "00004.png",
                                     "00005.png", "00006.png", "00007.png", "00000-copy.jpg", "00001-small.png"};
    glimpse_model *model;
    glimpse_context *ctx;
    glimpse_index *index;
    assert_int_equal(glimpse_model_load(demo, NULL, &model), GLIMPSE_STATUS_OK);
    assert_int_equal(glimpse_context_create(model, NULL, &ctx), GLIMPSE_STATUS_OK);
    assert_int_equal(glimpse_index_open(db, model, &index), GLIMPSE_STATUS_OK);
    failures f = {0};
    glimpse_index_summary s = update(index, ctx, library, &f);
    EXPECT(s, DEMO_FILES, 0, 0, 0, 0, 0);
    size_t dim = glimpse_model_embedding_dim(model);
    float embeddings[DEMO_FILES * 64], stored[64];
    assert_true(dim <= 64);
    char *real[DEMO_FILES];
    for (int i = 0; i < DEMO_FILES; i++) {
        char path[PATH_CAPACITY + 32];
        snprintf(path, sizeof path, "%s/%s", library, names[i]);
        real[i] = realpath(path, NULL);
        glimpse_image *image;
        assert_int_equal(glimpse_image_load_file(path, NULL, &image), GLIMPSE_STATUS_OK);
        assert_int_equal(glimpse_embed_images(ctx, &image, 1, embeddings + i * dim), GLIMPSE_STATUS_OK);
        glimpse_image_free(image);
        /* the stored embedding, found by any spelling of the path */
        assert_int_equal(glimpse_index_embedding(index, path, stored), GLIMPSE_STATUS_OK);
        for (size_t d = 0; d < dim; d++) assert_float_equal(stored[d], embeddings[i * dim + d], 1e-6);
    }
    assert_int_equal(glimpse_index_embedding(index, "/nonexistent.png", stored), GLIMPSE_STATUS_NOT_FOUND);
    const float thresholds[2] = {GLIMPSE_INDEX_DUPLICATE_COSINE, 0.999f};
    for (int t = 0; t < 2; t++) {
        /* the expected groups: connected components of the pairs at the threshold */
        int component[DEMO_FILES];
        for (int i = 0; i < DEMO_FILES; i++) component[i] = i;
        for (bool changed = true; changed;) {
            changed = false;
            for (int i = 0; i < DEMO_FILES; i++)
                for (int j = 0; j < DEMO_FILES; j++) {
                    double dot = 0;
                    for (size_t d = 0; d < dim; d++) dot += (double)embeddings[i * dim + d] * embeddings[j * dim + d];
                    if (dot >= thresholds[t] && component[j] < component[i]) component[i] = component[j], changed = true;
                }
        }
        groups_seen seen = {.count = 0, .names = (const char *const *)real};
        for (int i = 0; i < DEMO_FILES; i++) seen.group_of[i] = -1;
        size_t groups = 0;
        assert_int_equal(glimpse_index_duplicates(index, thresholds[t], note_group, &seen, &groups), GLIMPSE_STATUS_OK);
        assert_int_equal(groups, (size_t)seen.count);
        for (int i = 0; i < DEMO_FILES; i++)
            for (int j = 0; j < DEMO_FILES; j++) {
                bool together = component[i] == component[j];
                if (i != j) assert_int_equal(together, seen.group_of[i] >= 0 && seen.group_of[i] == seen.group_of[j]);
            }
        /* the copies are with their originals at both thresholds */
        assert_true(seen.group_of[8] >= 0 && seen.group_of[8] == seen.group_of[0]);
        assert_true(seen.group_of[9] >= 0 && seen.group_of[9] == seen.group_of[1]);
    }
    glimpse_index_free(index);
    glimpse_context_free(ctx);
    glimpse_model_free(model);
    /* the command line: --like a stored picture leaves it out and finds its copy first; duplicates as JSON */
    snprintf(command, sizeof command,
             "%s search --db %s -k 1 --like %s/00000.png | grep -q '00000-copy.jpg' && "
             "%s duplicates --db %s --threshold 0.999 --json | grep -q '00001-small.png'",
             GLIMPSE_BINARY, db, library, GLIMPSE_BINARY, db);
    run_or_fail(command);
    snprintf(command, sizeof command, "%s search --db %s -k 1 --like %s/00000.png | grep -q ' [^ ]*/00000.png$'",
             GLIMPSE_BINARY, db, library);
    assert_int_not_equal(system(command), 0); /* not itself */
    /* --html: the page's two thumbnails are Pillow's bicubic resizes of their pictures to 200 pixels, bit for bit */
    snprintf(command, sizeof command,
             "%s search --db %s -k 2 --html %s/page.html 'a red circle' > /dev/null && "
             "%s duplicates --db %s --html %s/groups.html > /dev/null && grep -q '00000-copy.jpg' %s/groups.html && "
             "/usr/bin/python3 -c \"import re, base64, io, sys\n"
             "from PIL import Image\n"
             "page = open(sys.argv[1]).read()\n"
             "same = []\n"
             "for data, path in re.findall(r'base64,([^\\\"]+)\\\".*?<br>([^<]+)</figcaption>', page, re.S):\n"
             "    thumbnail = Image.open(io.BytesIO(base64.b64decode(data))).convert('RGB')\n"
             "    picture = Image.open(path).convert('RGB')\n"
             "    w, h = picture.size\n"
             "    side = max(w, h)\n"
             "    expected = picture.resize((w * 200 // side, h * 200 // side), Image.BICUBIC) if side > 200 else picture\n"
             "    same.append(list(thumbnail.getdata()) == list(expected.getdata()))\n"
             "sys.exit(0 if len(same) == 2 and all(same) else 1)\" %s/page.html",
             GLIMPSE_BINARY, db, workspace, GLIMPSE_BINARY, db, workspace, workspace, workspace);
    run_or_fail(command);
    /* rank --html: a row of the ranking's thumbnails per text */
    snprintf(command, sizeof command,
             "%s rank -m %s -t 'a red circle' -t 'a blue square' --top 2 --html %s/rank.html %s/00000.png "
             "%s/00001.png %s/00002.png > /dev/null && test $(grep -o '<img' %s/rank.html | wc -l) -eq 4 && "
             "test $(grep -o '<h2>' %s/rank.html | wc -l) -eq 2",
             GLIMPSE_BINARY, demo, workspace, library, library, library, workspace, workspace);
    run_or_fail(command);
    for (int i = 0; i < DEMO_FILES; i++) free(real[i]);
}

/* The search's top 5 for the query, as "path score" lines. */
static void top_five(const char *db, glimpse_context *ctx, const char *query_text, char *out, size_t size) {
    glimpse_index *index;
    assert_int_equal(glimpse_index_open(db, NULL, &index), GLIMPSE_STATUS_OK);
    float query[32];
    assert_int_equal(glimpse_embed_query(ctx, query_text, query), GLIMPSE_STATUS_OK);
    glimpse_search_result results[5];
    size_t found;
    assert_int_equal(glimpse_index_search(index, query, 5, results, &found), GLIMPSE_STATUS_OK);
    out[0] = '\0';
    for (size_t r = 0; r < found; r++) {
        size_t used = strlen(out);
        snprintf(out + used, size - used, "%s %.9g\n", results[r].path, results[r].score);
    }
    glimpse_index_free(index);
}

/* The vector file beside the index (FILE.vectors) gives the same answers as
 * the rows in SQLite, and one that is not the index's current one (an
 * update since, a crash in the middle) is not used. */
static void test_vector_file(void **state) {
    (void)state;
    char library[PATH_CAPACITY], db[PATH_CAPACITY], vectors[PATH_CAPACITY + 16], command[4 * PATH_CAPACITY];
    make_library("vectors", "vectors.db", 37, 20, library, db);
    snprintf(vectors, sizeof vectors, "%s.vectors", db);
    indexer x = open_indexer(db);
    failures f = {0};
    update(x.index, x.ctx, library, &f);
    assert_true(file_is_regular(vectors));
    char with[2048], without[2048];
    top_five(db, x.ctx, "a red circle", with, sizeof with);
    snprintf(command, sizeof command, "mv %s %s.old", vectors, vectors);
    run_or_fail(command);
    top_five(db, x.ctx, "a red circle", without, sizeof without);
    assert_string_equal(with, without);
    /* a new picture that ranks first; the old vector file put back is stale and not used */
    snprintf(command, sizeof command, "cp %s/00003.png %s/extra.png", library, library);
    run_or_fail(command);
    update(x.index, x.ctx, library, &f);
    char picture[PATH_CAPACITY + 16];
    snprintf(picture, sizeof picture, "@%s/extra.png", library);
    top_five(db, x.ctx, picture, with, sizeof with);
    assert_non_null(strstr(with, "extra.png"));
    snprintf(command, sizeof command, "mv %s.old %s", vectors, vectors);
    run_or_fail(command);
    top_five(db, x.ctx, picture, without, sizeof without);
    assert_string_equal(with, without);
    close_indexer(&x);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_incremental_updates),
        cmocka_unit_test(test_long_lived_reader_sees_each_commit),
        cmocka_unit_test(test_other_roots_are_not_judged),
        cmocka_unit_test(test_missing_root_does_not_cancel),
        cmocka_unit_test(test_wrong_model_is_refused),
        cmocka_unit_test(test_combined_queries),
        cmocka_unit_test(test_killed_and_resumed),
        cmocka_unit_test(test_one_writer_at_a_time),
        cmocka_unit_test(test_read_only_index),
        cmocka_unit_test(test_command_line),
        cmocka_unit_test(test_stale_entries),
        cmocka_unit_test(test_meaning_is_kept),
        cmocka_unit_test(test_library_management),
        cmocka_unit_test(test_management_command_line),
        cmocka_unit_test(test_similar_pictures),
        cmocka_unit_test(test_vector_file),
    };
    return cmocka_run_group_tests_name("search", tests, setup, teardown);
}
