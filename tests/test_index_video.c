/* test_index_video.c — videos in `glimpse index` and `glimpse search`, on
 * small videos made here by the `ffmpeg` tool from examples/pictures: one
 * entry per sampled frame whose embedding is the one `glimpse embed` gives
 * the same frame, times in search's output, a changed video replacing all its
 * frames, a broken one a failed entry, removal, the recorded sampling and
 * decoding, and stills embedded ahead of the towers exactly as embed does.
 * Skipped without the ffmpeg tool. */
#include <cjson/cJSON.h>
#include <math.h>
#include <setjmp.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "support.h"

#define MODEL GLIMPSE_SOURCE_DIR "/examples/models/demo-clip"
#define PICTURES GLIMPSE_SOURCE_DIR "/examples/pictures"

static char workspace[] = "/tmp/glimpse_index_video_XXXXXX";
static char folder[600], db[600], trip[600];

static bool have_ffmpeg(void) { return system("ffmpeg -hide_banner -version >/dev/null 2>&1") == 0; }

static void run_shell(const char *format, ...) {
    char command[4096];
    va_list arguments;
    va_start(arguments, format);
    vsnprintf(command, sizeof command, format, arguments);
    va_end(arguments);
    if (system(command) != 0) fail_msg("failed: %s", command);
}

/* An H.264 video at 10 frames a second showing each picture for 2 s. */
static void make_video(const char *path, const char *const *pictures, size_t count) {
    char inputs[2048] = "", filter[512] = "";
    for (size_t i = 0; i < count; i++) {
        size_t used = strlen(inputs);
        snprintf(inputs + used, sizeof inputs - used, " -loop 1 -t 2 -i %s/%s", PICTURES, pictures[i]);
        used = strlen(filter);
        snprintf(filter + used, sizeof filter - used, "[%zu:v]", i);
    }
    run_shell("ffmpeg -nostdin -hide_banner -loglevel error -y %s -filter_complex '%sconcat=n=%zu:v=1:a=0,"
              "format=yuv420p' -r 10 -c:v libx264 -preset ultrafast -threads 1 %s",
              inputs, filter, count, path);
}

static int setup(void **state) {
    (void)state;
    if (!have_ffmpeg()) return 0;
    if (!mkdtemp(workspace)) return -1;
    snprintf(folder, sizeof folder, "%s/library", workspace);
    snprintf(db, sizeof db, "%s/index.db", workspace);
    snprintf(trip, sizeof trip, "%s/trip.mp4", folder);
    mkdir(folder, 0755);
    run_shell("cp %s/00000.png %s/00001.png %s", PICTURES, PICTURES, folder);
    static const char *const two[] = {"00003.png", "00004.png"};
    make_video(trip, two, 2);
    /* a video cut short after its header: it fails, and is reported */
    run_shell("head -c 1200 %s > %s/broken.mp4", trip, folder);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    if (have_ffmpeg()) run_shell("rm -rf %s", workspace);
    return 0;
}

/* Runs the glimpse program with arguments (NULL-terminated); its stdout in *out. */
static int glimpse(char **out, ...) {
    const char *argv[32] = {GLIMPSE_BINARY};
    va_list arguments;
    va_start(arguments, out);
    size_t n = 1;
    for (const char *a; n < 31 && (a = va_arg(arguments, const char *));) argv[n++] = a;
    va_end(arguments);
    argv[n] = NULL;
    char *err = NULL, *ignored = NULL;
    int status = run_program(argv, out ? out : &ignored, &err);
    if (status != 0 && status != 1) fail_msg("%s %s: status %d: %s", argv[1], argv[2], status, err);
    free(err), free(ignored);
    return status;
}

/* The rows of path in the index at database: frames in order, embeddings [rows, 64] and times. */
static size_t stored_frames(const char *database, const char *path, float *embeddings, double *times,
                            size_t capacity) {
    sqlite3 *handle;
    sqlite3_stmt *statement;
    assert_int_equal(sqlite3_open_v2(database, &handle, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(handle, "SELECT embedding, time FROM images WHERE path = ? ORDER BY frame",
                                        -1, &statement, NULL),
                     SQLITE_OK);
    sqlite3_bind_text(statement, 1, path, -1, SQLITE_STATIC);
    size_t n = 0;
    while (sqlite3_step(statement) == SQLITE_ROW && n < capacity) {
        assert_int_equal(sqlite3_column_bytes(statement, 0), 64 * sizeof(float));
        if (embeddings) memcpy(embeddings + n * 64, sqlite3_column_blob(statement, 0), 64 * sizeof(float));
        times[n++] = sqlite3_column_type(statement, 1) == SQLITE_NULL ? -1 : sqlite3_column_double(statement, 1);
    }
    sqlite3_finalize(statement);
    sqlite3_close(handle);
    return n;
}

/* `glimpse embed --json` of one input: each line's embedding and time. */
static size_t embed_lines(const char *input, const char *option, float *embeddings, double *times, size_t capacity) {
    char *out = NULL;
    assert_int_equal(option ? glimpse(&out, "embed", "-m", MODEL, "--json", option, input, NULL)
                            : glimpse(&out, "embed", "-m", MODEL, "--json", input, NULL),
                     0);
    size_t n = 0;
    for (char *line = strtok(out, "\n"); line && n < capacity; line = strtok(NULL, "\n"), n++) {
        cJSON *json = cJSON_Parse(line);
        assert_non_null(json);
        const cJSON *values = cJSON_GetObjectItem(json, "embedding"), *time = cJSON_GetObjectItem(json, "time");
        assert_int_equal(cJSON_GetArraySize(values), 64);
        for (int d = 0; d < 64; d++) embeddings[n * 64 + d] = (float)cJSON_GetArrayItem(values, d)->valuedouble;
        times[n] = time ? time->valuedouble : -1;
        cJSON_Delete(json);
    }
    free(out);
    return n;
}

/* The largest difference between two embeddings. */
static double largest_difference(const float *a, const float *b) {
    double largest = 0;
    for (int d = 0; d < 64; d++) largest = fmax(largest, fabs((double)a[d] - b[d]));
    return largest;
}

static void test_videos_indexed_as_frames(void **state) {
    (void)state;
    if (!have_ffmpeg()) skip();
    char *out = NULL;
    /* the broken video fails (exit status 1), the rest is indexed */
    assert_int_equal(glimpse(&out, "index", "-m", MODEL, "--db", db, "--json", folder, NULL), 1);
    assert_non_null(strstr(out, "\"added\": 3"));
    assert_non_null(strstr(out, "\"failed\": 1"));
    assert_non_null(strstr(out, "broken.mp4"));
    free(out);
    /* each frame stored is the frame embed samples, with the same embedding (printed to 7 digits) and time */
    float stored[8 * 64], embedded[8 * 64];
    double stored_times[8], embedded_times[8];
    size_t frames = stored_frames(db, trip, stored, stored_times, 8);
    assert_int_equal(embed_lines(trip, NULL, embedded, embedded_times, 8), frames);
    assert_true(frames >= 2);
    for (size_t f = 0; f < frames; f++) {
        assert_true(fabs(stored_times[f] - embedded_times[f]) < 1e-9);
        assert_true(largest_difference(stored + f * 64, embedded + f * 64) < 1e-6);
    }
    printf("trip.mp4: %zu frames at 0 .. %.1f s, each the embedding glimpse embed gives it\n", frames,
           stored_times[frames - 1]);
    /* a still picture, decoded ahead of the towers, is embedded as embed embeds it */
    char still[700];
    snprintf(still, sizeof still, "%s/00001.png", folder);
    assert_int_equal(stored_frames(db, still, stored, stored_times, 8), 1);
    assert_true(stored_times[0] < 0);
    assert_int_equal(embed_lines(still, NULL, embedded, embedded_times, 8), 1);
    assert_true(largest_difference(stored, embedded) < 1e-6);
    /* search names the frames by their time, in text and JSON */
    assert_int_equal(glimpse(&out, "search", "--db", db, "-k", "4", "a red square", NULL), 0);
    assert_non_null(strstr(out, "trip.mp4 @ 0:0"));
    free(out);
    assert_int_equal(glimpse(&out, "search", "--db", db, "-k", "4", "--json", "a red square", NULL), 0);
    assert_non_null(strstr(out, "trip.mp4\", \"time\": "));
    free(out);
    /* --like the video: k other pictures, its own frames not counted against k (issue 35, item 4) */
    assert_int_equal(glimpse(&out, "search", "--db", db, "-k", "2", "--json", "--like", trip, NULL), 0);
    size_t results = 0;
    for (const char *at = out; (at = strstr(at, "\"image\": ")); at++) results++;
    assert_int_equal(results, 2);
    assert_null(strstr(out, "trip.mp4\", \"time\""));
    free(out);
    /* stats count the video once, with its frames and the sampling recorded */
    assert_int_equal(glimpse(&out, "index", "--db", db, "--stats", "--json", NULL), 0);
    assert_non_null(strstr(out, "\"images\": 3")); /* two stills and the video */
    assert_non_null(strstr(out, "\"failed\": 0")); /* the broken video was never stored */
    assert_non_null(strstr(out, "\"videos\": 1"));
    assert_non_null(strstr(out, "\"video_sampling\": \"every 2 s\""));
    assert_non_null(strstr(out, "\"decode\": \"exact\""));
    free(out);
    /* another sampling, or fast decoding, on this index is refused */
    assert_int_equal(glimpse(&out, "index", "-m", MODEL, "--db", db, "--every", "1", folder, NULL), 1);
    assert_string_equal(out, ""); /* a refused run sums nothing up (issue 35) */
    free(out);
    assert_int_equal(glimpse(NULL, "index", "-m", MODEL, "--db", db, "--fast-decode", folder, NULL), 1);
    /* a changed video replaces every frame it had */
    static const char *const three[] = {"00005.png", "00002.png", "00003.png"};
    make_video(trip, three, 3);
    run_shell("touch -d '2001-01-01' %s", trip);
    float changed[8 * 64];
    assert_int_equal(glimpse(&out, "index", "-m", MODEL, "--db", db, "--json", folder, NULL), 1);
    assert_non_null(strstr(out, "\"updated\": 1"));
    free(out);
    size_t now = stored_frames(db, trip, changed, stored_times, 8);
    assert_int_equal(embed_lines(trip, NULL, embedded, embedded_times, 8), now);
    assert_true(now > frames);
    for (size_t f = 0; f < now; f++) assert_true(largest_difference(changed + f * 64, embedded + f * 64) < 1e-6);
    /* the video removed is one entry removed, every frame gone */
    assert_int_equal(glimpse(&out, "index", "--db", db, "--remove", trip, NULL), 0);
    assert_non_null(strstr(out, "1"));
    free(out);
    assert_int_equal(stored_frames(db, trip, NULL, stored_times, 8), 0);
}

/* A video that was indexed and no longer decodes is a failed entry: out of
 * the results, all its frames, until it reads again. */
static void test_video_that_breaks_is_failed(void **state) {
    (void)state;
    if (!have_ffmpeg()) skip();
    char *out = NULL, other_db[700], clip[700];
    snprintf(other_db, sizeof other_db, "%s/breaks.db", workspace);
    snprintf(clip, sizeof clip, "%s/clip", workspace);
    run_shell("mkdir -p %s && cp %s %s/clip.mp4", clip, trip, clip);
    assert_int_equal(glimpse(NULL, "index", "-m", MODEL, "--db", other_db, clip, NULL), 0);
    run_shell("truncate -s 1200 %s/clip.mp4 && touch -d '2002-02-02' %s/clip.mp4", clip, clip);
    assert_int_equal(glimpse(&out, "index", "-m", MODEL, "--db", other_db, "--json", clip, NULL), 1);
    assert_non_null(strstr(out, "\"failed\": 1"));
    free(out);
    assert_int_equal(glimpse(&out, "search", "--db", other_db, "--json", "a red square", NULL), 0);
    assert_null(strstr(out, "clip.mp4"));
    free(out);
    assert_int_equal(glimpse(&out, "index", "--db", other_db, "--stats", "--json", NULL), 0);
    assert_non_null(strstr(out, "\"images\": 1, \"failed\": 1"));
    free(out);
}

/* A video cut short (its index first, the frames after the cut gone): embed gives its frames before the cut,
 * each with "damaged": true, says so on stderr and exits 1; it is a failed file for index, its frames before the
 * cut left out (issue 35, item 5). The whole video's frames are not marked. */
static void test_cut_video_is_damaged(void **state) {
    (void)state;
    if (!have_ffmpeg()) skip();
    char cut_db[700], cut[700], whole[700];
    snprintf(cut_db, sizeof cut_db, "%s/cut.db", workspace);
    snprintf(cut, sizeof cut, "%s/cut", workspace);
    snprintf(whole, sizeof whole, "%s/whole.mp4", workspace);
    run_shell("mkdir -p %s && ffmpeg -nostdin -hide_banner -loglevel error -y -i %s -c copy -movflags +faststart %s"
              " && head -c $(( $(stat -c %%s %s) * 7 / 10 )) %s > %s/cut.mp4",
              cut, trip, whole, whole, whole, cut);
    char *out = NULL, *err = NULL, video[800];
    snprintf(video, sizeof video, "%s/cut.mp4", cut);
    const char *embed[] = {GLIMPSE_BINARY, "embed", "-m", MODEL, "--json", video, NULL};
    assert_int_equal(run_program(embed, &out, &err), 1);
    assert_non_null(strstr(out, "\"time\": 0, \"damaged\": true")); /* the frames before the cut */
    int lines = 0, marked = 0;
    for (const char *at = out; (at = strchr(at, '\n')); at++) lines++;
    for (const char *at = out; (at = strstr(at, "\"damaged\": true")); at++) marked++;
    assert_true(lines >= 1);
    assert_int_equal(marked, lines);
    assert_non_null(strstr(err, "cut short"));
    free(out), free(err);
    const char *embed_whole[] = {GLIMPSE_BINARY, "embed", "-m", MODEL, "--json", whole, NULL};
    assert_int_equal(run_program(embed_whole, &out, &err), 0);
    assert_non_null(strstr(out, "\"time\": 0, \"embedding\""));
    assert_null(strstr(out, "damaged"));
    assert_null(strstr(err, "cut short"));
    free(out), free(err);
    const char *index[] = {GLIMPSE_BINARY, "index", "-m", MODEL, "--db", cut_db, "--json", cut, NULL};
    assert_int_equal(run_program(index, &out, &err), 1);
    assert_non_null(strstr(out, "\"failed\": 1"));
    assert_non_null(strstr(out, "\"added\": 0"));
    assert_non_null(strstr(err, "cut short"));
    free(out), free(err);
    /* the whole video is indexed as before */
    run_shell("cp %s %s/cut.mp4 && touch -d '2003-03-03' %s/cut.mp4", whole, cut, cut);
    assert_int_equal(glimpse(&out, "index", "-m", MODEL, "--db", cut_db, "--json", cut, NULL), 0);
    assert_non_null(strstr(out, "\"failed\": 0"));
    free(out);
}

/* duplicates: "1 group", not "1 groups"; its --help lists only what it takes (no -m: it loads no model) (issue 35). */
static void test_duplicates_words(void **state) {
    (void)state;
    if (!have_ffmpeg()) skip();
    char *out = NULL, twins[700], twins_db[700];
    snprintf(twins, sizeof twins, "%s/twins", workspace);
    snprintf(twins_db, sizeof twins_db, "%s/twins.db", workspace);
    run_shell("mkdir -p %s && cp %s/00000.png %s/a.png && cp %s/00000.png %s/b.png && cp %s/00004.png %s/c.png", twins,
              PICTURES, twins, PICTURES, twins, PICTURES, twins);
    assert_int_equal(glimpse(NULL, "index", "-m", MODEL, "--db", twins_db, twins, NULL), 0);
    assert_int_equal(glimpse(&out, "duplicates", "--db", twins_db, NULL), 0);
    assert_non_null(strstr(out, "1 group of near-identical pictures"));
    free(out);
    assert_int_equal(glimpse(&out, "duplicates", "--help", NULL), 0);
    assert_null(strstr(out, "--model"));
    assert_null(strstr(out, "--int8"));
    free(out);
}

/* --fast-decode: recorded by a new index, JPEGs decoded in the DCT domain
 * (the embeddings glimpse embed --fast-decode gives), kept by later runs. */
static void test_fast_decode_recorded(void **state) {
    (void)state;
    if (!have_ffmpeg()) skip();
    char *out = NULL, fast_db[700], photos[700], photo[800];
    snprintf(fast_db, sizeof fast_db, "%s/fast.db", workspace);
    snprintf(photos, sizeof photos, "%s/photos", workspace);
    snprintf(photo, sizeof photo, "%s/photo.jpg", photos);
    /* a photograph large enough for the DCT scaling to take effect (1/4 at 224 pixels) */
    run_shell("mkdir -p %s && ffmpeg -nostdin -hide_banner -loglevel error -y -i %s/00002.png "
              "-vf scale=1200:800 -q:v 3 %s",
              photos, PICTURES, photo);
    assert_int_equal(glimpse(NULL, "index", "-m", MODEL, "--db", fast_db, "--fast-decode", photos, NULL), 0);
    assert_int_equal(glimpse(&out, "index", "--db", fast_db, "--stats", "--json", NULL), 0);
    assert_non_null(strstr(out, "\"decode\": \"fast\""));
    free(out);
    float stored[64], fast[64], exact[64];
    double time;
    assert_int_equal(stored_frames(fast_db, photo, stored, &time, 1), 1);
    assert_int_equal(embed_lines(photo, "--fast-decode", fast, &time, 1), 1);
    assert_int_equal(embed_lines(photo, NULL, exact, &time, 1), 1);
    assert_true(largest_difference(stored, fast) < 1e-6);
    assert_true(largest_difference(fast, exact) > 0); /* not the exact path */
    double cosine = 0;
    for (int d = 0; d < 64; d++) cosine += (double)fast[d] * exact[d];
    printf("--fast-decode on a 1200x800 JPEG: cosine %.6f to the exact path (demo-clip)\n", cosine);
    assert_true(cosine > 0.99);
    /* a later run without the option keeps the recorded choice (the CLI reads it back) */
    assert_int_equal(glimpse(NULL, "index", "-m", MODEL, "--db", fast_db, photos, NULL), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_videos_indexed_as_frames),
        cmocka_unit_test(test_video_that_breaks_is_failed),
        cmocka_unit_test(test_fast_decode_recorded),
        cmocka_unit_test(test_cut_video_is_damaged),
        cmocka_unit_test(test_duplicates_words),
    };
    if (!have_ffmpeg()) {
        fprintf(stderr, "test_index_video: no ffmpeg tool, skipped\n");
        return 77;
    }
    return cmocka_run_group_tests_name("index_video", tests, setup, teardown);
}
