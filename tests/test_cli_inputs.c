/* test_cli_inputs.c — inputs as people give them to the glimpse program:
 * '-' for standard input (the same embedding as the file, bounded, once),
 * folders walked with index's own rules (the files `glimpse index` takes there),
 * named pipes refused at once or read through '-', never waited on; and
 * videos given to embed and caption: one result per sampled frame with its
 * time, each frame's embedding equal to that of the frame the ffmpeg tool
 * extracts as a PNG at the same time. */
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include <cjson/cJSON.h>

#include "core/file.h"
#include "glimpse.h"

#define CLIP GLIMPSE_SOURCE_DIR "/examples/models/demo-clip"
#define BLIP GLIMPSE_SOURCE_DIR "/examples/models/demo-blip-caption"
#define PICTURE(n) GLIMPSE_SOURCE_DIR "/examples/pictures/0000" #n ".png"

static char folder[] = "/tmp/glimpse-inputs-XXXXXX";

typedef struct shell_result {
    int status;
    char *out, *err;
} shell_result;

/* Runs `sh -c` on the command (printf-style; the glimpse binary is $G), with
 * a 60-second timeout, and keeps its exit status, stdout and stderr. */
static shell_result shell(const char *format, ...) {
    char command[4096], line[8192];
    va_list args;
    va_start(args, format);
    vsnprintf(command, sizeof command, format, args);
    va_end(args);
    snprintf(line, sizeof line, "cd %s && G=%s timeout 60 sh -c '%s' >out.txt 2>err.txt", folder, GLIMPSE_BINARY,
             command);
    int status = system(line);
    shell_result result = {WIFEXITED(status) ? WEXITSTATUS(status) : -1, NULL, NULL};
    char path[512];
    uint8_t *bytes;
    size_t size;
    snprintf(path, sizeof path, "%s/out.txt", folder);
    result.out = file_read_all(path, 1 << 26, &bytes, &size) ? strdup("") : (char *)bytes;
    snprintf(path, sizeof path, "%s/err.txt", folder);
    result.err = file_read_all(path, 1 << 26, &bytes, &size) ? strdup("") : (char *)bytes;
    return result;
}

static void shell_free(shell_result *r) { free(r->out), free(r->err); }

/* Checks a command's exit status and the texts its stdout and stderr hold
 * (either NULL: not checked), and frees its result. */
static void expect_shell(shell_result r, int status, const char *in_stdout, const char *in_stderr) {
    assert_int_equal(r.status, status);
    if (in_stdout) assert_non_null(strstr(r.out, in_stdout));
    if (in_stderr) assert_non_null(strstr(r.err, in_stderr));
    shell_free(&r);
}

/* The JSON lines of stdout as an array (fails on a line that is not an object). */
static cJSON *json_lines(const char *text) {
    cJSON *all = cJSON_CreateArray();
    for (const char *line = text, *end; *line; line = end + 1) {
        end = strchr(line, '\n');
        assert_non_null(end);
        cJSON *object = cJSON_ParseWithLength(line, (size_t)(end - line));
        assert_true(cJSON_IsObject(object));
        cJSON_AddItemToArray(all, object);
    }
    return all;
}

static const char *string_of(const cJSON *line, const char *key) {
    return cJSON_GetStringValue(cJSON_GetObjectItem(line, key));
}

static char *embedding_text(const cJSON *line) {
    return cJSON_PrintUnformatted(cJSON_GetObjectItem(line, "embedding"));
}

static int setup(void **state) {
    (void)state;
    return mkdtemp(folder) ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    char command[600];
    snprintf(command, sizeof command, "rm -rf %s", folder);
    return system(command);
}

/* ----------------------------------------------------------- '-' */

static void test_standard_input(void **state) {
    (void)state;
    shell_result file = shell("$G embed -m %s --json %s", CLIP, PICTURE(0));
    shell_result piped = shell("$G embed -m %s --json - < %s", CLIP, PICTURE(0));
    shell_result catted = shell("cat %s | $G embed -m %s --json -", PICTURE(0), CLIP);
    assert_int_equal(file.status, 0), assert_int_equal(piped.status, 0), assert_int_equal(catted.status, 0);
    cJSON *a = json_lines(file.out), *b = json_lines(piped.out), *c = json_lines(catted.out);
    assert_string_equal(string_of(cJSON_GetArrayItem(b, 0), "image"), "-");
    char *ea = embedding_text(cJSON_GetArrayItem(a, 0)), *eb = embedding_text(cJSON_GetArrayItem(b, 0)),
         *ec = embedding_text(cJSON_GetArrayItem(c, 0));
    assert_string_equal(ea, eb);
    assert_string_equal(ea, ec);
    free(ea), free(eb), free(ec);
    cJSON_Delete(a), cJSON_Delete(b), cJSON_Delete(c);
    shell_free(&file), shell_free(&piped), shell_free(&catted);

    /* rank takes it among files (standard input is read once, kept for a second decoding) */
    expect_shell(shell("$G rank -m %s -t square --json %s - < %s", CLIP, PICTURE(1), PICTURE(0)), 0,
                 "\"image\": \"-\"", NULL);

    /* empty, not an image, twice, or a terminal */
    expect_shell(shell("$G embed -m %s - < /dev/null", CLIP), 1, NULL, "standard input: empty file");
    expect_shell(shell("echo hello | $G classify -m %s -l a -l b -", CLIP), 1, NULL, "standard input");
    expect_shell(shell("$G embed -m %s - - < %s", CLIP, PICTURE(0)), 2, NULL, "once");
}

/* file_read_stream, which reads '-': bounded, whatever the writer sends. */
static void test_stream_limit(void **state) {
    (void)state;
    int ends[2];
    assert_int_equal(pipe(ends), 0);
    char bytes[100];
    memset(bytes, 'x', sizeof bytes);
    assert_int_equal(write(ends[1], bytes, sizeof bytes), (ssize_t)sizeof bytes);
    close(ends[1]);
    uint8_t *read;
    size_t size;
    assert_int_equal(file_read_stream(ends[0], "the pipe", 99, &read, &size), GLIMPSE_STATUS_TOO_LARGE);
    assert_non_null(strstr(glimpse_last_error(), "the pipe: more than 99 bytes"));
    close(ends[0]);
    assert_int_equal(pipe(ends), 0);
    assert_int_equal(write(ends[1], bytes, sizeof bytes), (ssize_t)sizeof bytes);
    close(ends[1]);
    assert_int_equal(file_read_stream(ends[0], "the pipe", 100, &read, &size), GLIMPSE_STATUS_OK);
    assert_int_equal(size, 100);
    assert_int_equal(read[100], 0);
    free(read);
    close(ends[0]);
}

/* ------------------------------------------------------------ folders */

static void copy_to(const char *from, const char *relative) {
    char command[1024];
    snprintf(command, sizeof command, "mkdir -p \"$(dirname \"%s/%s\")\" && cp %s \"%s/%s\"", folder, relative, from,
             folder, relative);
    assert_int_equal(system(command), 0);
}

static void test_folders_walked_as_index_walks_them(void **state) {
    (void)state;
    copy_to(PICTURE(0), "photos/b.png");
    copy_to(PICTURE(1), "photos/a.PNG");
    copy_to(PICTURE(2), "photos/trip/day 1/c.png");
    copy_to(PICTURE(3), "photos/notes.txt");         /* not an image's name: not taken */
    copy_to(PICTURE(4), "photos/.hidden/d.png");     /* taken, as index takes it */
    char fifo[600];
    snprintf(fifo, sizeof fifo, "%s/photos/pipe.png", folder);
    assert_int_equal(mkfifo(fifo, 0600), 0); /* a named pipe with an image's name: reported, never opened */
    char photos[600];
    snprintf(photos, sizeof photos, "%s/photos", folder);

    /* what `glimpse index` finds there: every image it holds, by search */
    shell_result indexed = shell("$G index -m %s --db photos.db photos >/dev/null; "
                                 "$G search --db photos.db -k 100 --json square",
                                 CLIP);
    assert_int_equal(indexed.status, 0);
    assert_non_null(strstr(indexed.err, "pipe.png: not a regular file"));
    cJSON *search = json_lines(indexed.out);
    cJSON *found = cJSON_GetObjectItem(cJSON_GetArrayItem(search, 0), "results");
    int count = cJSON_GetArraySize(found);
    assert_int_equal(count, 4);

    shell_result r = shell("$G classify -m %s -l square -l triangle --json photos", CLIP);
    assert_int_equal(r.status, 1); /* the pipe, reported; the pictures classified */
    assert_non_null(strstr(r.err, "pipe.png: not a regular file"));
    cJSON *lines = json_lines(r.out);
    assert_int_equal(cJSON_GetArraySize(lines), count);
    const char *previous = "";
    for (int i = 0; i < count; i++) {
        /* the same files, named from the folder as given, sorted */
        const char *name = string_of(cJSON_GetArrayItem(lines, i), "image");
        assert_true(strcmp(previous, name) < 0);
        previous = name;
        char absolute[700];
        snprintf(absolute, sizeof absolute, "%s/%s", folder, name);
        bool indexed_too = false;
        for (int j = 0; j < count; j++)
            indexed_too |= strcmp(string_of(cJSON_GetArrayItem(found, j), "image"), absolute) == 0;
        assert_true(indexed_too);
    }
    cJSON_Delete(lines);
    cJSON_Delete(search);
    shell_free(&indexed);
    shell_free(&r);

    /* rank, embed and caption take folders too; a folder without images is an error */
    expect_shell(shell("$G rank -m %s -t square --json photos/trip", CLIP), 0, "photos/trip/day 1/c.png", NULL);
    expect_shell(shell("$G caption -m %s photos/trip %s", BLIP, PICTURE(5)), 0, "photos/trip/day 1/c.png\t", NULL);
    char empty[600];
    snprintf(empty, sizeof empty, "%s/empty", folder);
    mkdir(empty, 0755);
    r = shell("$G embed -m %s empty %s", CLIP, PICTURE(0));
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, "empty: no image files in this folder"));
    assert_int_equal(strlen(r.out) > 0, 1); /* the picture is still embedded */
    shell_free(&r);
}

/* -------------------------------------------------------------- pipes */

static void test_named_pipes_never_wait(void **state) {
    (void)state;
    char fifo[600];
    snprintf(fifo, sizeof fifo, "%s/waiting.png", folder);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    /* no writer: refused at once (the library opens without blocking) */
    glimpse_image *image;
    assert_int_equal(glimpse_image_load_file(fifo, NULL, &image), GLIMPSE_STATUS_IO);
    assert_non_null(strstr(glimpse_last_error(), "named pipe"));
    shell_result r = shell("$G embed -m %s waiting.png %s", CLIP, PICTURE(0));
    assert_int_equal(r.status, 1); /* not 124: timeout's code */
    assert_non_null(strstr(r.err, "waiting.png: a named pipe"));
    shell_free(&r);
    /* index, given it by name, refuses it too */
    expect_shell(shell("$G index -m %s --db pipe.db waiting.png", CLIP), 1, "failed 1", NULL);
    /* with a writer: read through '-' */
    expect_shell(shell("cat %s > waiting.png & $G embed -m %s --json - < waiting.png", PICTURE(0), CLIP), 0,
                 "\"image\": \"-\"", NULL);
}

/* ------------------------------------------------------------- videos */

/* A shell prefix that runs the command after it with every soname of `library` (libheif: libheif.so.1, ...) that
 * the system knows replaced, in `folder`, by a file that is not a library, found first. */
static void broken_library(char *prefix, size_t room, const char *folder, const char *library) {
    snprintf(prefix, room,
             "mkdir -p %s && for name in $(/sbin/ldconfig -p | grep -o \"%s\\\\.so\\\\.[0-9]*\" | sort -u); do "
             "echo not a library > %s/$name; done && LD_LIBRARY_PATH=$PWD/%s",
             folder, library, folder, folder);
}

static void test_videos(void **state) {
    (void)state;
    if (system("ffmpeg -hide_banner -version >/dev/null 2>&1") != 0) skip();
    shell_result made = shell("ffmpeg -nostdin -loglevel error -y -framerate 2 -i %s/examples/pictures/%%05d.png "
                              "-r 10 -fps_mode cfr -c:v libx264 -preset ultrafast -pix_fmt yuv420p trip.mp4",
                              GLIMPSE_SOURCE_DIR);
    assert_int_equal(made.status, 0);
    shell_free(&made);
    shell_result r = shell("$G embed -m %s --json --every 1 trip.mp4 %s", CLIP, PICTURE(0));
    assert_int_equal(r.status, 0);
    /* the frames the ffmpeg tool extracts at 0, 1 and 2 s as PNGs, embedded in the same batch */
    shell_result frames = shell("for t in 0 1 2; do ffmpeg -nostdin -loglevel error -y -ss $t -i trip.mp4 -frames:v 1 "
                                "-pix_fmt rgb24 frame$t.png || exit 1; done; $G embed -m %s --json frame0.png "
                                "frame1.png frame2.png %s",
                                CLIP, PICTURE(0));
    assert_int_equal(frames.status, 0);
    cJSON *lines = json_lines(r.out), *frame_lines = json_lines(frames.out);
    assert_int_equal(cJSON_GetArraySize(lines), 4); /* 0, 1 and 2 s, then the picture */
    for (int i = 0; i < 4; i++) {
        cJSON *line = cJSON_GetArrayItem(lines, i);
        if (i < 3) {
            assert_string_equal(string_of(line, "image"), "trip.mp4");
            assert_true(cJSON_GetNumberValue(cJSON_GetObjectItem(line, "time")) == (double)i);
        } else {
            assert_null(cJSON_GetObjectItem(line, "time"));
        }
        char *expected = embedding_text(cJSON_GetArrayItem(frame_lines, i)), *got = embedding_text(line);
        assert_string_equal(got, expected);
        free(expected), free(got);
    }
    cJSON_Delete(lines), cJSON_Delete(frame_lines);
    shell_free(&r), shell_free(&frames);

    /* captions carry the time too: PATH @ M:SS.s in plain output */
    r = shell("$G caption -m %s --every 1.5 trip.mp4", BLIP);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "trip.mp4 @ 0:00.0\t"));
    assert_non_null(strstr(r.out, "trip.mp4 @ 0:01.5\t"));
    shell_free(&r);
    r = shell("$G caption -m %s --json --scenes - < trip.mp4", BLIP);
    assert_int_equal(r.status, 0);
    lines = json_lines(r.out);
    assert_true(cJSON_GetArraySize(lines) >= 2); /* the start, and at least the clearest cut */
    assert_non_null(cJSON_GetObjectItem(cJSON_GetArrayItem(lines, 0), "time"));
    cJSON_Delete(lines);
    shell_free(&r);

    /* commands that take images say what a video is */
    expect_shell(shell("$G rank -m %s -t square trip.mp4 %s", CLIP, PICTURE(0)), 1,
                 NULL, "trip.mp4: a video; this command takes images");
    /* a broken video is named, the rest goes on */
    r = shell("head -c 3000 trip.mp4 > cut.mp4; $G embed -m %s cut.mp4 %s", CLIP, PICTURE(0));
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, "cut.mp4"));
    assert_int_equal(strchr(r.out, '\n') != NULL, 1);
    shell_free(&r);

    /* FFmpeg's libraries are opened at the first video, not linked (vision/ffmpeg_library.c): where they cannot be
     * opened (here a libavutil that is not a library, found first), pictures are still read and each video says
     * which library and package it needs */
    char broken[512];
    broken_library(broken, sizeof broken, "broken-ffmpeg", "libavutil");
    r = shell("%s $G embed -m %s trip.mp4 %s", broken, CLIP, PICTURE(0));
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, "trip.mp4: reading videos with FFmpeg needs libavutil.so."));
    assert_non_null(strstr(r.err, "on Debian it is the package libavutil"));
    assert_non_null(strstr(r.out, "00000.png\t")); /* the picture's embedding, one line */
    assert_int_equal(strchr(r.out, '\n') == strrchr(r.out, '\n') && strchr(r.out, '\n'), 1);
    shell_free(&r);

    /* libheif too is opened at the first ISO media file (vision/heif_library.c): where it cannot be, a HEIC
     * picture says which library and package it needs, while an MP4 (an ftyp box too, told apart by its brands
     * without libheif) and a PNG are read */
    if (!glimpse_has_feature(GLIMPSE_FEATURE_HEIF) || system("command -v heif-enc >/dev/null 2>&1") != 0) {
        printf("(skipped the HEIC half: a build without HEIF, or no heif-enc, Debian's libheif-examples)\n");
        return;
    }
    r = shell("heif-enc -q 60 -o photo.heic %s >/dev/null && $G embed -m %s photo.heic", PICTURE(0), CLIP);
    assert_int_equal(r.status, 0); /* (with libheif: an embedding) */
    assert_non_null(strstr(r.out, "photo.heic\t"));
    shell_free(&r);
    broken_library(broken, sizeof broken, "broken-heif", "libheif");
    r = shell("%s $G embed -m %s photo.heic trip.mp4 %s", broken, CLIP, PICTURE(0));
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, "photo.heic: reading HEIF/AVIF pictures needs libheif.so."));
    assert_non_null(strstr(r.err, "on Debian it is the package libheif"));
    assert_null(strstr(r.out, "photo.heic"));
    assert_non_null(strstr(r.out, "trip.mp4 @ "));
    assert_non_null(strstr(r.out, "00000.png\t"));
    shell_free(&r);
}

/* libmicrohttpd is opened when `glimpse serve` starts (serve/microhttpd_library.c): where it cannot be, every
 * other command runs and serve says which library and package it needs */
static void test_server_library_opened_by_serve(void **state) {
    (void)state;
    if (!glimpse_has_feature(GLIMPSE_FEATURE_SERVER)) skip();
    char broken[512];
    broken_library(broken, sizeof broken, "broken-microhttpd", "libmicrohttpd");
    shell_result r = shell("%s $G serve -m %s --port 0", broken, CLIP);
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, "glimpse serve needs libmicrohttpd.so.12, which cannot be loaded"));
    assert_non_null(strstr(r.err, "on Debian it is the package libmicrohttpd12"));
    shell_free(&r);
    expect_shell(shell("%s $G embed -m %s %s", broken, CLIP, PICTURE(0)), 0, "00000.png\t", NULL);
}

/* libtiff is opened at the first TIFF (vision/tiff_library.c): where it cannot be, a TIFF picture says which
 * library and package it needs, and the other pictures are read */
static void test_tiff_library_opened_by_a_tiff(void **state) {
    (void)state;
    if (!glimpse_has_feature(GLIMPSE_FEATURE_TIFF) ||
        system("/usr/bin/python3 -c 'import PIL' >/dev/null 2>&1") != 0) {
        printf("(skipped: a build without TIFF, or no Pillow to write one: Debian's python3-pil)\n");
        return;
    }
    shell_result r = shell("/usr/bin/python3 -c \"import sys; from PIL import Image; "
                           "Image.open(sys.argv[1]).save(sys.argv[2])\" %s photo.tif && $G embed -m %s photo.tif",
                           PICTURE(1), CLIP);
    assert_int_equal(r.status, 0); /* (with libtiff: an embedding) */
    assert_non_null(strstr(r.out, "photo.tif\t"));
    shell_free(&r);
    char broken[512];
    broken_library(broken, sizeof broken, "broken-tiff", "libtiff");
    r = shell("%s $G embed -m %s photo.tif %s", broken, CLIP, PICTURE(0));
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, "photo.tif: reading TIFF pictures needs libtiff.so.6, which cannot be loaded"));
    assert_non_null(strstr(r.err, "on Debian it is the package libtiff6"));
    assert_null(strstr(r.out, "photo.tif"));
    assert_non_null(strstr(r.out, "00000.png\t"));
    shell_free(&r);
}

/* libglimpse-faiss, and FAISS with it, is opened at `glimpse search --faiss` (tools/cli_faiss.c): a glimpse that
 * loads none (here one copied away from its build folder, with a file that is not a library first on the path)
 * says so at --faiss, naming it, while every other command runs */
static void test_faiss_library_opened_by_search(void **state) {
    (void)state;
    if (!glimpse_has_feature(GLIMPSE_FEATURE_FAISS)) skip();
    const char *lonely = "mkdir -p lonely broken-faiss && cp $G lonely/glimpse && "
                         "echo not a library > broken-faiss/libglimpse-faiss.so.0 && "
                         "LD_LIBRARY_PATH=$PWD/broken-faiss lonely/glimpse";
    shell_result r = shell("%s search --faiss nowhere cat", lonely);
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, "glimpse search --faiss needs libglimpse-faiss.so.0, which cannot be loaded ("));
    assert_non_null(strstr(r.err, "broken-faiss/libglimpse-faiss.so.0"));
    assert_null(strstr(r.err, "on Debian")); /* (ours: no package to name) */
    shell_free(&r);
    expect_shell(shell("%s embed -m %s %s", lonely, CLIP, PICTURE(0)), 0, "00000.png\t", NULL);
    /* the build's glimpse finds the one beside it, whatever the path holds */
    expect_shell(shell("LD_LIBRARY_PATH=$PWD/broken-faiss $G search --faiss nowhere cat"), 1, NULL,
                 "nowhere: no such FAISS index folder");
}

/* OpenBLAS is opened where products need it (core/openblas.c), on the plain paths (GLIMPSE_NO_AVX512 here, a CPU
 * without AVX-512 elsewhere): where it cannot be, a model refuses to load naming the library and its package; on
 * the AVX-512 kernels nothing needs it */
static void test_openblas_opened_for_the_plain_paths(void **state) {
    (void)state;
    char broken[512];
    broken_library(broken, sizeof broken, "broken-openblas", "libopenblas");
    shell_result r = shell("%s GLIMPSE_NO_AVX512=1 $G embed -m %s %s", broken, CLIP, PICTURE(0));
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, "demo-clip: running a model without AVX-512 (this CPU lacks it, or "
                                  "GLIMPSE_NO_AVX512 is set) needs libopenblas.so.0, which cannot be loaded"));
    assert_non_null(strstr(r.err, "on Debian it is the package libopenblas0"));
    assert_null(strstr(r.out, "00000.png"));
    shell_free(&r);
    expect_shell(shell("GLIMPSE_NO_AVX512=1 $G embed -m %s %s", CLIP, PICTURE(0)), 0, "00000.png\t",
                 NULL); /* (with OpenBLAS) */
    if (system("grep -qw avx512f /proc/cpuinfo") != 0) return;
    expect_shell(shell("%s $G embed -m %s %s", broken, CLIP, PICTURE(0)), 0, "00000.png\t", NULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_standard_input),
        cmocka_unit_test(test_server_library_opened_by_serve),
        cmocka_unit_test(test_faiss_library_opened_by_search),
        cmocka_unit_test(test_tiff_library_opened_by_a_tiff),
        cmocka_unit_test(test_openblas_opened_for_the_plain_paths),
        cmocka_unit_test(test_stream_limit),
        cmocka_unit_test(test_folders_walked_as_index_walks_them),
        cmocka_unit_test(test_named_pipes_never_wait),
        cmocka_unit_test(test_videos),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
