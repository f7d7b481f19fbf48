/* test_image_formats.c — every decoder against its reference, case by case:
 * tests/data/make_image_cases.py (run here with Debian's python3-pil, Pillow
 * 9.4, and libheif's heif-enc / heif-convert, libtiff's tiffcp) writes the
 * inputs and the RGB the reference gives for them — Pillow's exif_transpose +
 * convert("RGB"), heif-convert's PNG for HEIC/AVIF — never glimpse's own
 * output. Each case must match byte for byte, from a file and from memory, or
 * be refused with the expected status and the file's name. Skips (77) when
 * python3 with Pillow is not there. */
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <cmocka.h>

#include "glimpse.h"

#define CASES_FOLDER "image_cases"

static const char *python; /* an interpreter that imports PIL */

static const char *find_python(void) {
    static char chosen[512];
    const char *candidates[] = {getenv("GLIMPSE_PYTHON"), "/usr/bin/python3", "python3"};
    for (size_t i = 0; i < sizeof candidates / sizeof *candidates; i++) {
        if (!candidates[i] || !candidates[i][0]) continue;
        char command[600];
        snprintf(command, sizeof command, "%s -c 'import PIL' >/dev/null 2>&1", candidates[i]);
        if (system(command) == 0) {
            snprintf(chosen, sizeof chosen, "%s", candidates[i]);
            return chosen;
        }
    }
    return NULL;
}

static uint8_t *read_all(const char *path, size_t *size) {
    FILE *file = fopen(path, "rb");
    if (!file) return NULL;
    fseek(file, 0, SEEK_END);
    long length = ftell(file);
    fseek(file, 0, SEEK_SET);
    uint8_t *bytes = malloc(length > 0 ? (size_t)length : 1);
    *size = bytes && length > 0 ? fread(bytes, 1, (size_t)length, file) : 0;
    fclose(file);
    return bytes;
}

/* A binary PPM as make_image_cases.py writes it: "P6\nW H\n255\n" then RGB. */
static uint8_t *read_ppm(const char *path, int *width, int *height) {
    size_t size;
    uint8_t *bytes = read_all(path, &size);
    if (!bytes) return NULL;
    /* parsed by hand: scanf's whitespace would swallow pixel bytes that look like it */
    unsigned w = 0, h = 0;
    size_t at = 3;
    if (size < 3 || memcmp(bytes, "P6\n", 3) != 0) at = size;
    while (at < size && bytes[at] >= '0' && bytes[at] <= '9') w = w * 10 + (unsigned)(bytes[at++] - '0');
    if (at < size && bytes[at] == ' ') at++;
    while (at < size && bytes[at] >= '0' && bytes[at] <= '9') h = h * 10 + (unsigned)(bytes[at++] - '0');
    size_t header = at + 5;
    *width = (int)w;
    *height = (int)h;
    if (at + 5 > size || memcmp(bytes + at, "\n255\n", 5) != 0 || size - header != (size_t)w * h * 3) {
        free(bytes);
        return NULL;
    }
    memmove(bytes, bytes + header, size - header);
    return bytes;
}

typedef struct tally {
    char format[16];
    int matched, refused, failed;
} tally;

static tally tallies[16];

static tally *tally_for(const char *name) {
    char format[16];
    size_t length = strcspn(name, "_");
    snprintf(format, sizeof format, "%.*s", (int)(length < 15 ? length : 15), name);
    for (size_t i = 0; i < sizeof tallies / sizeof *tallies; i++) {
        if (!tallies[i].format[0]) snprintf(tallies[i].format, sizeof tallies[i].format, "%s", format);
        if (strcmp(tallies[i].format, format) == 0) return &tallies[i];
    }
    return &tallies[0];
}

static glimpse_status status_named(const char *name) {
    if (strcmp(name, "bad_format") == 0) return GLIMPSE_STATUS_BAD_FORMAT;
    if (strcmp(name, "too_large") == 0) return GLIMPSE_STATUS_TOO_LARGE;
    if (strcmp(name, "unsupported") == 0) return GLIMPSE_STATUS_UNSUPPORTED;
    return GLIMPSE_STATUS_INTERNAL;
}

/* Checks one case; returns 1 when it holds, printing why when it does not. */
static int check_case(const char *name, const char *input, const char *expected, const char *mode) {
    char path[1024], reference[1024];
    snprintf(path, sizeof path, CASES_FOLDER "/%s", input);
    glimpse_image_params params = glimpse_image_default_params();
    if (strcmp(mode, "keep") == 0) params.ignore_exif_orientation = true;
    if (strncmp(mode, "limit=", 6) == 0) params.max_pixels = strtoull(mode + 6, NULL, 10);
    glimpse_image *image = NULL, *from_memory = NULL;
    glimpse_status status = glimpse_image_load_file(path, &params, &image);
    char message[512];
    snprintf(message, sizeof message, "%s", status ? glimpse_last_error() : "");
    size_t size = 0;
    uint8_t *bytes = read_all(path, &size);
    glimpse_status memory_status = glimpse_image_load_memory(bytes, size, &params, &from_memory);
    free(bytes);
    int ok = 1;
    if (strncmp(expected, "refuse:", 7) == 0) {
        glimpse_status wanted = status_named(expected + 7);
        if (status != wanted || memory_status != wanted || !strstr(message, path)) {
            printf("  %s: expected %s naming the file, got %s / %s: %s\n", name, expected, glimpse_status_string(status),
                   glimpse_status_string(memory_status), message);
            ok = 0;
        }
        tally_for(name)->refused += ok;
    } else {
        int width = 0, height = 0;
        snprintf(reference, sizeof reference, CASES_FOLDER "/%s", expected);
        uint8_t *want = read_ppm(reference, &width, &height);
        if (!want) {
            printf("  %s: cannot read the reference %s\n", name, reference);
            ok = 0;
        } else if (status || memory_status) {
            printf("  %s: refused: %s\n", name, message[0] ? message : glimpse_last_error());
            ok = 0;
        } else if (glimpse_image_width(image) != width || glimpse_image_height(image) != height) {
            printf("  %s: %dx%d, Pillow says %dx%d\n", name, glimpse_image_width(image), glimpse_image_height(image),
                   width, height);
            ok = 0;
        } else {
            size_t count = (size_t)width * (size_t)height, differing = 0, first = 0;
            const uint8_t *got = glimpse_image_pixels(image);
            for (size_t i = 0; i < count; i++)
                if (memcmp(got + 3 * i, want + 3 * i, 3) != 0 && differing++ == 0) first = i;
            if (differing) {
                printf("  %s: %zu of %zu pixels differ; first at (%zu,%zu): %d,%d,%d, reference %d,%d,%d\n", name,
                       differing, count, first % (size_t)width, first / (size_t)width, got[3 * first],
                       got[3 * first + 1], got[3 * first + 2], want[3 * first], want[3 * first + 1], want[3 * first + 2]);
                ok = 0;
            } else if (memcmp(got, glimpse_image_pixels(from_memory), count * 3) != 0) {
                printf("  %s: the file and memory paths disagree\n", name);
                ok = 0;
            }
        }
        free(want);
        tally_for(name)->matched += ok;
    }
    tally_for(name)->failed += !ok;
    glimpse_image_free(image);
    glimpse_image_free(from_memory);
    return ok;
}

static void test_every_case_against_its_reference(void **state) {
    (void)state;
    char command[2048];
    snprintf(command, sizeof command, "rm -rf " CASES_FOLDER " && %s %s/tests/data/make_image_cases.py " CASES_FOLDER,
             python, GLIMPSE_SOURCE_DIR);
    int result = system(command);
    if (!WIFEXITED(result) || WEXITSTATUS(result) != 0) fail_msg("make_image_cases.py failed (%d)", result);
    FILE *list = fopen(CASES_FOLDER "/cases.tsv", "r");
    assert_non_null(list);
    char line[4096];
    int cases = 0, failures = 0;
    while (fgets(line, sizeof line, list)) {
        line[strcspn(line, "\r\n")] = 0;
        char *fields[4] = {0};
        char *cursor = line;
        for (int i = 0; i < 4 && cursor; i++) {
            fields[i] = cursor;
            cursor = strchr(cursor, '\t');
            if (cursor) *cursor++ = 0;
        }
        if (!fields[3]) continue;
        cases++;
        failures += !check_case(fields[0], fields[1], fields[2], fields[3]);
    }
    fclose(list);
    for (size_t i = 0; i < sizeof tallies / sizeof *tallies && tallies[i].format[0]; i++)
        printf("image cases: %-5s %3d match the reference, %2d refused as expected, %d failed\n", tallies[i].format,
               tallies[i].matched, tallies[i].refused, tallies[i].failed);
    printf("image cases: %d cases, %d failed\n", cases, failures);
    assert_true(cases > 200);
    assert_int_equal(failures, 0);
}

int main(void) {
    python = find_python();
    if (!python) {
        fprintf(stderr, "test_image_formats: skipped: no python3 with Pillow (apt-get install python3-pil)\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_every_case_against_its_reference)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
