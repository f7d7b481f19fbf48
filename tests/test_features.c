/* test_features.c — what a build says about its optional parts (GLIMPSE_WITH_*):
 * glimpse_has_feature and glimpse_build_features agree with each other and with
 * `glimpse --version`, and in a build without a part its inputs and calls give
 * UNSUPPORTED with the message naming the option, the CLI's commands exit 1
 * saying so. Parts that are in are tested by their own tests. */
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "glimpse.h"
#include "tests/support.h"

static const char *const names[] = {"video", "heif", "tiff", "webp", "index", "server", "faiss"};
#define PARTS (sizeof names / sizeof names[0])

/* Whether word is one of the space-separated words of list. */
static bool listed(const char *list, const char *word) {
    size_t length = strlen(word);
    for (const char *at = list; (at = strstr(at, word)) != NULL; at += length)
        if ((at == list || at[-1] == ' ') && (at[length] == ' ' || at[length] == '\0' || at[length] == '\n'))
            return true;
    return false;
}

static void expect_missing(glimpse_status status, const char *option, const char *found) {
    assert_int_equal(status, GLIMPSE_STATUS_UNSUPPORTED);
    const char *message = glimpse_last_error();
    assert_non_null(strstr(message, "is not in this build of glimpse (built with -D"));
    assert_non_null(strstr(message, option));
    if (found) assert_non_null(strstr(message, found));
}

static void test_features_agree(void **state) {
    (void)state;
    const char *list = glimpse_build_features();
    for (size_t f = 0; f < PARTS; f++)
        assert_int_equal(glimpse_has_feature((glimpse_feature)f), listed(list, names[f]));
    assert_false(glimpse_has_feature((glimpse_feature)PARTS));
    assert_false(glimpse_has_feature((glimpse_feature)-1));
    char *out = NULL, *err = NULL;
    const char *argv[] = {GLIMPSE_BINARY, "--version", NULL};
    assert_int_equal(run_program(argv, &out, &err), 0);
    const char *with = strstr(out, "\nwith: ");
    assert_non_null(with);
    for (size_t f = 0; f < PARTS; f++)
        assert_int_equal(listed(with + 7, names[f]), glimpse_has_feature((glimpse_feature)f));
    free(out);
    free(err);
}

/* A picture in a format whose decoder is left out: the format is named, not "not an image". */
static void expect_picture(glimpse_feature feature, const uint8_t *bytes, size_t size, const char *option,
                           const char *found) {
    glimpse_image *image = NULL;
    glimpse_status status = glimpse_image_load_memory(bytes, size, NULL, &image);
    if (glimpse_has_feature(feature)) {
        assert_int_not_equal(status, GLIMPSE_STATUS_OK); /* a header alone is a broken picture */
        assert_null(strstr(glimpse_last_error(), "is not in this build"));
    } else {
        expect_missing(status, option, found);
    }
    assert_null(image);
}

static void test_pictures(void **state) {
    (void)state;
    static const uint8_t heic[32] = {0, 0, 0, 24, 'f', 't', 'y', 'p', 'h', 'e', 'i', 'c', 0, 0, 0, 0,
                                     'm', 'i', 'f', '1', 'h', 'e', 'i', 'c', 0, 0, 0, 8, 'm', 'e', 't', 'a'};
    static const uint8_t avif[24] = {0, 0, 0, 24, 'f', 't', 'y', 'p', 'a', 'v', 'i', 'f', 0, 0, 0, 0,
                                     'm', 'i', 'f', '1', 'a', 'v', 'i', 'f'};
    static const uint8_t webp[20] = {'R', 'I', 'F', 'F', 12, 0, 0, 0, 'W', 'E', 'B', 'P', 'V', 'P', '8', ' '};
    static const uint8_t tiff[16] = {'I', 'I', '*', 0, 8, 0, 0, 0, 0, 0};
    expect_picture(GLIMPSE_FEATURE_HEIF, heic, sizeof heic, "GLIMPSE_WITH_HEIF=OFF", "a HEIF/AVIF picture, but");
    expect_picture(GLIMPSE_FEATURE_HEIF, avif, sizeof avif, "GLIMPSE_WITH_HEIF=OFF", "a HEIF/AVIF picture, but");
    expect_picture(GLIMPSE_FEATURE_WEBP, webp, sizeof webp, "GLIMPSE_WITH_WEBP=OFF", "a WebP picture, but");
    expect_picture(GLIMPSE_FEATURE_TIFF, tiff, sizeof tiff, "GLIMPSE_WITH_TIFF=OFF", "a TIFF picture, but");
}

static void test_video(void **state) {
    (void)state;
    if (glimpse_has_feature(GLIMPSE_FEATURE_VIDEO)) skip(); /* test_video's part */
    static const uint8_t mp4[32] = {0, 0, 0, 32, 'f', 't', 'y', 'p', 'i', 's', 'o', 'm', 0, 0, 2, 0,
                                    'i', 's', 'o', 'm', 'i', 's', 'o', '2', 'a', 'v', 'c', '1', 'm', 'p', '4', '1'};
    assert_true(glimpse_is_video(mp4, sizeof mp4));
    glimpse_video *video = (glimpse_video *)&video;
    expect_missing(glimpse_video_open(mp4, sizeof mp4, "trip.mp4", NULL, &video), "GLIMPSE_WITH_VIDEO=OFF",
                   "trip.mp4: a video, but video (FFmpeg)");
    assert_null(video);
}

static void test_index(void **state) {
    (void)state;
    if (glimpse_has_feature(GLIMPSE_FEATURE_INDEX)) skip(); /* test_search's part */
    glimpse_index *index = (glimpse_index *)&index;
    expect_missing(glimpse_index_open("photos.db", NULL, &index), "GLIMPSE_WITH_INDEX=OFF", "photos.db: ");
    assert_null(index);
    size_t found = 1;
    expect_missing(glimpse_index_search(NULL, NULL, 10, NULL, &found), "GLIMPSE_WITH_INDEX=OFF", NULL);
    assert_int_equal(found, 0);
}

/* The commands of a left-out part exit 1 with its message. */
static void test_commands(void **state) {
    (void)state;
    static const struct {
        const char *command;
        glimpse_feature feature;
        const char *option;
    } commands[] = {{"serve", GLIMPSE_FEATURE_SERVER, "GLIMPSE_WITH_SERVER=OFF"},
                    {"index", GLIMPSE_FEATURE_INDEX, "GLIMPSE_WITH_INDEX=OFF"},
                    {"search", GLIMPSE_FEATURE_INDEX, "GLIMPSE_WITH_INDEX=OFF"},
                    {"duplicates", GLIMPSE_FEATURE_INDEX, "GLIMPSE_WITH_INDEX=OFF"}};
    for (size_t c = 0; c < sizeof commands / sizeof commands[0]; c++) {
        if (glimpse_has_feature(commands[c].feature)) continue;
        char *out = NULL, *err = NULL;
        const char *argv[] = {GLIMPSE_BINARY, commands[c].command, "--help", NULL};
        assert_int_equal(run_program(argv, &out, &err), 1);
        assert_non_null(strstr(err, "is not in this build of glimpse"));
        assert_non_null(strstr(err, commands[c].option));
        free(out);
        free(err);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_features_agree), cmocka_unit_test(test_pictures), cmocka_unit_test(test_video),
        cmocka_unit_test(test_index), cmocka_unit_test(test_commands)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
