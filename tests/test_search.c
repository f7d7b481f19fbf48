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
#include "glimpse.h"

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
    write_text(config,
               "{\"architectures\": [\"CLIPModel\"], \"model_type\": \"clip\", \"projection_dim\": 32,"
               " \"vision_config\": {\"hidden_size\": 64, \"intermediate_size\": 128, \"num_hidden_layers\": 2,"
               " \"num_attention_heads\": 4, \"image_size\": 64, \"patch_size\": 16, \"hidden_act\": \"gelu\"},"
               " \"text_config\": {\"hidden_size\": 64, \"intermediate_size\": 128, \"num_hidden_layers\": 2,"
               " \"num_attention_heads\": 4, \"vocab_size\": 600, \"max_position_embeddings\": 77,"
               " \"hidden_act\": \"gelu\", \"eos_token_id\": 599}}");
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

static glimpse_index_summary update(glimpse_index *index, glimpse_context *ctx, const char *folder, failures *f) {
    glimpse_index_params params = {.on_progress = NULL, .on_failure = note_failure, .user = f, .max_pixels = 0};
    glimpse_index_summary summary;
    if (glimpse_index_update(index, ctx, &folder, 1, &params, &summary)) fail_msg("update: %s", glimpse_last_error());
    return summary;
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
    snprintf(query_text, sizeof query_text, "2:a red circle - a blue square + %s", paths[3]);
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
    for (int i = 0; i < 10; i++) glimpse_image_free(images[i]), free(paths[i]);
    close_indexer(&x);
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
             "%s search --db %s -k 2 --json 'a red circle' '%s/00001.png' '2:a red circle - %s/00001.png' > %s",
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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_incremental_updates),
        cmocka_unit_test(test_wrong_model_is_refused),
        cmocka_unit_test(test_combined_queries),
        cmocka_unit_test(test_killed_and_resumed),
        cmocka_unit_test(test_command_line),
    };
    return cmocka_run_group_tests_name("search", tests, setup, teardown);
}
