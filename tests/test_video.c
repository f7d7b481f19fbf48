/* test_video.c — video frames against the ffmpeg tool: videos made here at
 * test time by `ffmpeg` from examples/pictures (H.264 in several colour and
 * rotation variants, H.265 8 and 10 bit, VP9, AV1, MJPEG), each frame that
 * vision/video_reader.c samples compared byte for byte with the rgb24 frame the
 * tool gives for the same frame number (its select filter) and, for H.264,
 * for the same time (-ss). Then hostile videos: cut short, garbage after the
 * header, absurd sizes and rates, claimed durations of years, thousands of
 * streams: a clear error or a bounded result, never a hang. Skips (77)
 * without the ffmpeg tool. */
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>
#include <math.h>

#include "core/file.h"
#include "glimpse.h"
#include "vision/video_reader.h"

#define CASES "video_cases"

/* The pictures as a 3-second slideshow at 10 frames a second, half a second each. */
#define SLIDESHOW "-framerate 2 -i " GLIMPSE_SOURCE_DIR "/examples/pictures/%05d.png -r 10 -fps_mode cfr"

typedef struct video_case {
    const char *name;    /* file name under CASES */
    const char *options; /* what ffmpeg makes it with, after the input */
    const char *from;    /* or: the case it is a copy of, with a display matrix of rotate degrees */
    int rotate;
} video_case;

static const video_case cases[] = {
    {"h264.mp4", "-vf scale=224:160 -c:v libx264 -preset ultrafast -pix_fmt yuv420p", NULL, 0},
    {"h264_bt709.mp4", "-c:v libx264 -preset ultrafast -pix_fmt yuv420p -colorspace bt709 -color_primaries bt709 "
                       "-color_trc bt709", NULL, 0},
    {"h264_full_range.mp4", "-c:v libx264 -preset ultrafast -pix_fmt yuvj420p", NULL, 0},
    {"h264_444_odd.mkv", "-vf scale=223:149 -c:v libx264 -preset ultrafast -pix_fmt yuv444p", NULL, 0},
    {"h264_444_odd.mov", "-vf scale=223:149 -c:v libx264 -preset ultrafast -pix_fmt yuv444p", NULL, 0},
    {"h264_rotate90.mp4", NULL, "h264.mp4", 90},
    {"h264_rotate180.mp4", NULL, "h264.mp4", 180},
    {"h264_rotate270.mp4", NULL, "h264.mp4", 270},
    {"h264_444_odd_rotate90.mov", NULL, "h264_444_odd.mov", 90},
    {"h265.mp4", "-c:v libx265 -preset ultrafast -pix_fmt yuv420p -x265-params log-level=none", NULL, 0},
    {"h265_10bit.mp4", "-c:v libx265 -preset ultrafast -pix_fmt yuv420p10le -x265-params log-level=none", NULL, 0},
    {"h265_10bit_rotate270.mp4", NULL, "h265_10bit.mp4", 270},
    {"vp9.webm", "-c:v libvpx-vp9 -deadline realtime -cpu-used 8 -pix_fmt yuv420p", NULL, 0},
    {"vp9_odd.webm", "-vf scale=223:149 -c:v libvpx-vp9 -deadline realtime -cpu-used 8 -pix_fmt yuv420p", NULL, 0},
    {"av1.mkv", "-c:v libaom-av1 -cpu-used 8 -pix_fmt yuv420p", NULL, 0},
    {"mjpeg.avi", "-c:v mjpeg -pix_fmt yuvj420p", NULL, 0},
    {"mjpeg_422.mov", "-vf scale=222:150 -c:v mjpeg -pix_fmt yuvj422p", NULL, 0},
};
#define CASE_COUNT (sizeof cases / sizeof cases[0])

static bool have_ffmpeg(void) { return system("ffmpeg -hide_banner -version >/dev/null 2>&1") == 0; }

static char *case_path(const char *name) {
    char *path = malloc(strlen(CASES) + strlen(name) + 2);
    sprintf(path, "%s/%s", CASES, name);
    return path;
}

/* Runs a shell command and returns what it wrote on stdout (NULL if it failed). */
static uint8_t *command_output(const char *command, size_t *size) {
    FILE *pipe = popen(command, "r");
    if (!pipe) return NULL;
    size_t capacity = 1 << 16, length = 0;
    uint8_t *bytes = malloc(capacity);
    size_t got;
    while ((got = fread(bytes + length, 1, capacity - length, pipe)) > 0) {
        length += got;
        if (length == capacity) bytes = realloc(bytes, capacity *= 2);
    }
    if (pclose(pipe) != 0) {
        free(bytes);
        return NULL;
    }
    *size = length;
    return bytes;
}

static int make_cases(void **state) {
    (void)state;
    if (!have_ffmpeg()) return 0;
    mkdir(CASES, 0755);
    for (size_t i = 0; i < CASE_COUNT; i++) {
        char *path = case_path(cases[i].name);
        char command[1024];
        if (cases[i].from) {
            char *from = case_path(cases[i].from);
            snprintf(command, sizeof command,
                     "ffmpeg -nostdin -hide_banner -loglevel error -y -i %s -c copy -metadata:s:v:0 rotate=%d %s", from,
                     cases[i].rotate, path);
            free(from);
        } else {
            snprintf(command, sizeof command, "ffmpeg -nostdin -hide_banner -loglevel error -y -threads 1 %s %s %s",
                     SLIDESHOW, cases[i].options, path);
        }
        if (system(command) != 0) fprintf(stderr, "test_video: could not make %s: %s\n", path, command);
        free(path);
    }
    return 0;
}

/* The frames the reader samples, every `every` seconds. */
typedef struct sampled {
    glimpse_image *frames[64];
    double seconds[64];
    int64_t numbers[64];
    size_t count;
} sampled;

static glimpse_status sample(const char *path, double every, double scenes, sampled *out) {
    memset(out, 0, sizeof *out);
    const uint8_t *map;
    size_t size;
    glimpse_status status = file_map(path, &map, &size);
    if (status) return status;
    video_params params = video_default_params();
    params.every_seconds = every;
    params.scene_threshold = scenes;
    video_reader *reader;
    status = video_open(map, size, path, &params, &reader);
    while (!status && out->count < 64) {
        size_t i = out->count;
        status = video_next(reader, &out->frames[i], &out->seconds[i], &out->numbers[i]);
        if (status || !out->frames[i]) break;
        out->count++;
    }
    video_close(reader);
    file_unmap(map, size);
    return status;
}

static void sampled_free(sampled *s) {
    for (size_t i = 0; i < s->count; i++) glimpse_image_free(s->frames[i]);
}

static bool same_frame(const glimpse_image *frame, const uint8_t *reference, size_t reference_size) {
    size_t bytes = (size_t)glimpse_image_width(frame) * (size_t)glimpse_image_height(frame) * 3;
    return reference_size == bytes && memcmp(glimpse_image_pixels(frame), reference, bytes) == 0;
}

/* Every sampled frame equals ffmpeg's rgb24 of the same frame number. */
static void test_frames_equal_ffmpeg(void **state) {
    (void)state;
    if (!have_ffmpeg()) skip();
    int compared = 0;
    for (size_t i = 0; i < CASE_COUNT; i++) {
        char *path = case_path(cases[i].name);
        sampled s;
        glimpse_status status = sample(path, 0.3, 0, &s);
        if (status) fprintf(stderr, "%s: %s\n", path, glimpse_last_error());
        assert_int_equal(status, GLIMPSE_STATUS_OK);
        assert_int_equal(s.count, 10); /* 3 seconds, every 0.3: 0, 0.3, ..., 2.7 */
        for (size_t f = 0; f < s.count; f++) assert_true(fabs(s.seconds[f] - 0.3 * (double)f) < 1e-6);
        /* one ffmpeg run gives all the sampled frames, in order */
        char select[1024] = "", command[2048];
        for (size_t f = 0; f < s.count; f++)
            snprintf(select + strlen(select), sizeof select - strlen(select), "%seq(n\\,%lld)", f ? "+" : "",
                     (long long)s.numbers[f]);
        snprintf(command, sizeof command,
                 "ffmpeg -nostdin -hide_banner -loglevel error -i %s -vf select='%s' -fps_mode passthrough "
                 "-pix_fmt rgb24 -f rawvideo -",
                 path, select);
        size_t size;
        uint8_t *reference = command_output(command, &size);
        assert_non_null(reference);
        size_t frame_bytes = (size_t)glimpse_image_width(s.frames[0]) * (size_t)glimpse_image_height(s.frames[0]) * 3;
        assert_int_equal(size, frame_bytes * s.count);
        int differing = 0;
        for (size_t f = 0; f < s.count; f++)
            differing += !same_frame(s.frames[f], reference + f * frame_bytes, frame_bytes);
        printf("%-26s %dx%d, %zu frames at %.1f..%.1f s: %d differ from ffmpeg's rgb24\n", cases[i].name,
               glimpse_image_width(s.frames[0]), glimpse_image_height(s.frames[0]), s.count, s.seconds[0],
               s.seconds[s.count - 1], differing);
        assert_int_equal(differing, 0);
        compared += (int)s.count;
        free(reference);
        sampled_free(&s);
        free(path);
    }
    printf("%d frames identical to the ffmpeg tool's\n", compared);
}

/* The same frames again by time: `ffmpeg -ss T` gives the frame at T. */
static void test_times_equal_ffmpeg_seek(void **state) {
    (void)state;
    const char *names[] = {"h264.mp4", "vp9.webm", "h265_10bit_rotate270.mp4"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        char *path = case_path(names[i]);
        sampled s;
        assert_int_equal(sample(path, 0.7, 0, &s), GLIMPSE_STATUS_OK);
        assert_int_equal(s.count, 5); /* 0, 0.7, 1.4, 2.1, 2.8 */
        for (size_t f = 0; f < s.count; f++) {
            char command[1024];
            snprintf(command, sizeof command,
                     "ffmpeg -nostdin -hide_banner -loglevel error -ss %.6f -i %s -frames:v 1 -pix_fmt rgb24 "
                     "-f rawvideo -",
                     s.seconds[f], path);
            size_t size;
            uint8_t *reference = command_output(command, &size);
            assert_non_null(reference);
            assert_true(same_frame(s.frames[f], reference, size));
            free(reference);
        }
        printf("%-26s frames at 0, 0.7, ... 2.8 s identical to ffmpeg -ss\n", names[i]);
        sampled_free(&s);
        free(path);
    }
}

/* Scene sampling takes the first frame and each cut of the slideshow (a new
 * picture every half second; the cuts' thumbnails differ by 0.04 to 0.16),
 * and nothing in between: the same frames as the ffmpeg tool's own scene
 * detection (select='gt(scene,0.02)') finds. */
static void test_scenes(void **state) {
    (void)state;
    char *path = case_path("h264.mp4");
    sampled s;
    assert_int_equal(sample(path, 1, 0.03, &s), GLIMPSE_STATUS_OK);
    char command[1024];
    snprintf(command, sizeof command,
             "ffmpeg -hide_banner -nostdin -i %s -vf \"select='gt(scene\\,0.02)',showinfo\" -f null - 2>&1 | "
             "grep -o 'pts_time:[0-9.]*' | cut -d: -f2",
             path);
    size_t size;
    char *cuts = (char *)command_output(command, &size);
    assert_non_null(cuts);
    cuts = realloc(cuts, size + 1);
    cuts[size] = '\0';
    size_t found = 1;
    for (char *line = strtok(cuts, "\n"); line; line = strtok(NULL, "\n"), found++) {
        assert_true(found < s.count);
        assert_true(fabs(s.seconds[found] - atof(line)) < 1e-6);
    }
    printf("scenes: %zu frames, at 0 and where ffmpeg's scene detection finds the %zu cuts\n", s.count, found - 1);
    assert_int_equal(found, s.count);
    assert_int_equal(s.count, 6);
    assert_true(s.seconds[0] == 0);
    free(cuts);
    sampled_free(&s);
    /* a threshold over every cut's change from the first picture: the first frame only */
    assert_int_equal(sample(path, 1, 0.9, &s), GLIMPSE_STATUS_OK);
    assert_int_equal(s.count, 1);
    sampled_free(&s);
    free(path);
}

/* ------------------------------------------------------------- hostile */

static uint8_t *read_case(const char *name, size_t *size) {
    char *path = case_path(name);
    uint8_t *bytes;
    assert_int_equal(file_read_all(path, (size_t)1 << 30, &bytes, size), GLIMPSE_STATUS_OK);
    free(path);
    return bytes;
}

static void write_case(const char *name, const uint8_t *bytes, size_t size) {
    char *path = case_path(name);
    FILE *file = fopen(path, "wb");
    assert_non_null(file);
    assert_int_equal(fwrite(bytes, 1, size, file), size);
    fclose(file);
    free(path);
}

static void put_le32(uint8_t *at, uint32_t value) {
    for (int i = 0; i < 4; i++) at[i] = (uint8_t)(value >> (8 * i));
}

/* The offset of the first occurrence of needle (of length n) at or after from, or size. */
static size_t find_bytes(const uint8_t *bytes, size_t size, size_t from, const void *needle, size_t n) {
    for (size_t i = from; i + n <= size; i++)
        if (memcmp(bytes + i, needle, n) == 0) return i;
    return size;
}

/* Reads every frame (every 0.1 s) within 30 seconds of wall time (SIGALRM
 * ends the test otherwise): either an error that names the file, or at
 * most max_frames frames. */
static size_t expect_bounded(const char *name, size_t max_frames, bool must_fail) {
    char *path = case_path(name);
    alarm(30);
    sampled s;
    glimpse_status status = sample(path, 0.1, 0, &s);
    alarm(0);
    if (status)
        printf("%-28s %s: %s\n", name, glimpse_status_string(status), glimpse_last_error());
    else
        printf("%-28s read, %zu frames\n", name, s.count);
    if (status) assert_non_null(strstr(glimpse_last_error(), path));
    if (must_fail) assert_int_not_equal(status, GLIMPSE_STATUS_OK);
    assert_true(s.count <= max_frames);
    sampled_free(&s);
    free(path);
    return s.count;
}

/* Tiny videos (32×32, 10 frames at 5 a second) and ways of breaking them. */
static void test_hostile_videos(void **state) {
    (void)state;
    assert_int_equal(system("cd " CASES " && ffmpeg -nostdin -hide_banner -loglevel error -y -f lavfi "
                            "-i testsrc=size=32x32:rate=5:duration=2 -c:v mjpeg tiny.avi && "
                            "ffmpeg -nostdin -hide_banner -loglevel error -y -i tiny.avi -c:v libx264 -preset "
                            "ultrafast tiny.mkv && ffmpeg -nostdin -hide_banner -loglevel error -y -i tiny.avi "
                            "-c:v libx264 -preset ultrafast tiny.mp4 && ffmpeg -nostdin -hide_banner -loglevel "
                            "error -y -i tiny.avi -c:v libx264 -preset ultrafast -movflags +faststart fast.mp4"),
                     0);
    expect_bounded("tiny.avi", 10, false);
    size_t size, fast_size, mkv_size;
    uint8_t *avi = read_case("tiny.avi", &size);
    uint8_t *fast = read_case("fast.mp4", &fast_size);
    uint8_t *mkv = read_case("tiny.mkv", &mkv_size);
    uint8_t *copy = malloc(size + 65536);

    /* cut short: the index at the end is gone; the index first, the frames cut */
    size_t mp4_size;
    uint8_t *mp4 = read_case("tiny.mp4", &mp4_size);
    write_case("cut_no_index.mp4", mp4, mp4_size * 6 / 10);
    expect_bounded("cut_no_index.mp4", 0, true);
    write_case("cut_frames.mp4", fast, fast_size * 85 / 100);
    assert_true(expect_bounded("cut_frames.mp4", 9, false) >= 1); /* the frames before the cut */
    write_case("cut_first_frame.mp4", fast, fast_size * 6 / 10);
    expect_bounded("cut_first_frame.mp4", 0, true);
    write_case("cut_header.mkv", mkv, 300);
    expect_bounded("cut_header.mkv", 0, true);
    write_case("cut_avi.avi", avi, size / 2);
    expect_bounded("cut_avi.avi", 10, false);

    /* garbage after a valid header */
    uint32_t noise = 12345;
    for (size_t i = 0; i < 65536; i++) copy[i] = (uint8_t)((noise = noise * 1103515245 + 12345) >> 16);
    memcpy(copy, mkv, 400);
    write_case("garbage.mkv", copy, 65536);
    expect_bounded("garbage.mkv", 10, false);
    memcpy(copy, avi, 0x200);
    write_case("garbage.avi", copy, 65536);
    expect_bounded("garbage.avi", 10, false);

    /* absurd sizes: every JPEG frame and the AVI headers claim 65500×65500 */
    memcpy(copy, avi, size);
    put_le32(copy + 0x40, 65500), put_le32(copy + 0x44, 65500);
    int patched = 0;
    for (size_t at = 0; (at = find_bytes(copy, size, at, "\xff\xc0", 2)) + 9 <= size; at += 2, patched++)
        copy[at + 5] = copy[at + 6] = copy[at + 7] = copy[at + 8] = 0xff;
    assert_true(patched >= 10);
    write_case("huge_frames.avi", copy, size);
    expect_bounded("huge_frames.avi", 0, true);

    /* frame rates of zero and of four billion a second; four billion frames (years) */
    size_t vids = find_bytes(avi, size, 0, "vids", 4);
    assert_true(vids + 36 <= size);
    memcpy(copy, avi, size);
    put_le32(copy + vids + 24, 0);
    put_le32(copy + 0x20, 0);
    write_case("rate_zero.avi", copy, size);
    expect_bounded("rate_zero.avi", 10, false);
    memcpy(copy, avi, size);
    put_le32(copy + vids + 20, 1), put_le32(copy + vids + 24, 0xffffffffu);
    write_case("rate_huge.avi", copy, size);
    expect_bounded("rate_huge.avi", 10, false);
    memcpy(copy, avi, size);
    put_le32(copy + vids + 32, 0xffffffffu), put_le32(copy + 0x30, 0xffffffffu);
    put_le32(copy + vids + 20, 1000000), put_le32(copy + vids + 24, 1);
    write_case("years.avi", copy, size);
    expect_bounded("years.avi", 10, false);
    /* a Matroska duration of 31,700 years */
    size_t duration = find_bytes(mkv, mkv_size, 0, "\x44\x89\x88", 3);
    assert_true(duration + 11 <= mkv_size);
    memcpy(copy, mkv, mkv_size);
    /* 1e15 milliseconds, a big-endian double */
    const uint8_t huge_double[8] = {0x43, 0x0c, 0x6b, 0xf5, 0x26, 0x34, 0x00, 0x00};
    memcpy(copy + duration + 3, huge_double, 8);
    write_case("years.mkv", copy, mkv_size);
    expect_bounded("years.mkv", 10, false);

    /* a thousand video streams */
    char command[16384] = "cd " CASES " && ffmpeg -nostdin -hide_banner -loglevel error -y -i tiny.mkv";
    for (int i = 0; i < 1000; i++) strcat(command, " -map 0:v");
    strcat(command, " -c copy many_streams.mkv");
    assert_int_equal(system(command), 0);
    expect_bounded("many_streams.mkv", 0, true);
    assert_non_null(strstr(glimpse_last_error(), "streams"));

    /* a limit on pixels below the video's size is refused from the header */
    char *path = case_path("tiny.mkv");
    video_params params = video_default_params();
    params.max_pixels = 1000;
    video_reader *reader;
    assert_int_equal(video_open(mkv, mkv_size, path, &params, &reader), GLIMPSE_STATUS_TOO_LARGE);
    printf("tiny.mkv under 1000 pixels: %s\n", glimpse_last_error());
    free(path);

    /* images are not videos; videos are */
    assert_true(video_probe(mkv, mkv_size) && video_probe(avi, size) && video_probe(fast, fast_size));
    glimpse_image *picture;
    assert_int_equal(glimpse_image_load_file(GLIMPSE_SOURCE_DIR "/examples/pictures/00000.png", NULL, &picture), 0);
    glimpse_image_free(picture);
    size_t png_size;
    uint8_t *png;
    assert_int_equal(file_read_all(GLIMPSE_SOURCE_DIR "/examples/pictures/00000.png", 1 << 24, &png, &png_size), 0);
    assert_false(video_probe(png, png_size));
    free(png);
    free(mp4), free(fast), free(mkv), free(avi), free(copy);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_frames_equal_ffmpeg),
        cmocka_unit_test(test_times_equal_ffmpeg_seek),
        cmocka_unit_test(test_scenes),
        cmocka_unit_test(test_hostile_videos),
    };
    if (!have_ffmpeg()) {
        fprintf(stderr, "test_video: no ffmpeg tool, skipped\n");
        return 77;
    }
    return cmocka_run_group_tests(tests, make_cases, NULL);
}
