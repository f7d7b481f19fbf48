/* support.c — fixture access and tolerance helpers for the tests. */
#include "tests/support.h"

#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/file.h"

const char *fixtures_folder(void) {
    static char folder[4096];
    static int decided, present;
    if (!decided) {
        decided = 1;
        const char *env = getenv("GLIMPSE_FIXTURES");
        snprintf(folder, sizeof folder, "%s", env && env[0] ? env : GLIMPSE_SOURCE_DIR "/../shared/fixtures");
        present = file_is_directory(folder);
        if (!present) fprintf(stderr, "note: fixtures not found at %s; parity tests are skipped\n", folder);
    }
    return present ? folder : NULL;
}

char *fixture_path(const char *relative) {
    const char *folder = fixtures_folder();
    return folder ? file_join(folder, relative) : NULL;
}

cJSON *fixture_json(const char *relative) {
    char *path = fixture_path(relative);
    if (!path) return NULL;
    uint8_t *bytes;
    size_t size;
    cJSON *json = NULL;
    if (file_read_all(path, 1u << 26, &bytes, &size) == 0) {
        json = cJSON_ParseWithLength((const char *)bytes, size);
        free(bytes);
    }
    free(path);
    return json;
}

safetensors *fixture_tensors(const char *relative) {
    char *path = fixture_path(relative);
    if (!path) return NULL;
    safetensors *file = NULL;
    safetensors_open(path, &file);
    free(path);
    return file;
}

const float *fixture_tensor(const safetensors *file, const char *name, size_t elements) {
    const tensor_entry *entry = safetensors_find(file, name);
    if (!entry) fail_msg("reference tensor %s is missing", name);
    assert_int_equal(entry->dtype, TENSOR_DTYPE_F32);
    assert_int_equal(entry->elements, elements);
    return (const float *)entry->data;
}

struct glimpse_image *fixture_image(const char *name) {
    char relative[256];
    snprintf(relative, sizeof relative, "images/%s", name);
    char *path = fixture_path(relative);
    glimpse_image *image = NULL;
    if (!path || glimpse_image_load_file(path, NULL, &image) != GLIMPSE_STATUS_OK)
        fail_msg("%s: %s", path ? path : name, glimpse_last_error());
    free(path);
    return image;
}

double relative_difference(const float *actual, const float *expected, size_t n) {
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        double scale = fabs(expected[i]) > 1.0 ? fabs(expected[i]) : 1.0;
        double d = fabs((double)actual[i] - expected[i]) / scale;
        if (!(d <= worst)) worst = d; /* NaN propagates */
    }
    return worst;
}

#define MAX_NOTES 64
static struct {
    char what[64];
    double difference;
} notes[MAX_NOTES];
static int note_count;

void note_difference(const char *what, double difference) {
    for (int i = 0; i < note_count; i++)
        if (strcmp(notes[i].what, what) == 0) {
            if (!(difference <= notes[i].difference)) notes[i].difference = difference;
            return;
        }
    if (note_count == MAX_NOTES) return;
    snprintf(notes[note_count].what, sizeof notes[note_count].what, "%s", what);
    notes[note_count++].difference = difference;
}

void report_differences(void) {
    for (int i = 0; i < note_count; i++)
        fprintf(stderr, "max difference %-28s %.3g\n", notes[i].what, notes[i].difference);
}

struct glimpse_model *load_model(const char *path, int precision) {
    glimpse_load_params params = glimpse_load_default_params();
    params.precision = (glimpse_precision)precision;
    glimpse_model *model = NULL;
    if (glimpse_model_load(path, &params, &model)) fail_msg("%s: %s", path, glimpse_last_error());
    return model;
}

int fixture_open(const char *name, const char *json_file, const char *tensors_file, struct glimpse_model **model,
                 cJSON **expected, safetensors **reference) {
    *model = NULL, *expected = NULL, *reference = NULL;
    char *folder = fixture_path(name);
    glimpse_status status = folder ? glimpse_model_load(folder, NULL, model) : GLIMPSE_STATUS_OUT_OF_MEMORY;
    free(folder);
    if (status) {
        fprintf(stderr, "%s: load failed: %s\n", name, glimpse_last_error());
        return -1;
    }
    char relative[256];
    snprintf(relative, sizeof relative, "%s/%s", name, json_file);
    *expected = fixture_json(relative);
    snprintf(relative, sizeof relative, "%s/%s", name, tensors_file);
    *reference = fixture_tensors(relative);
    return *expected && *reference ? 0 : -1;
}

void fixture_close(struct glimpse_model *model, cJSON *expected, safetensors *reference) {
    glimpse_model_free(model);
    cJSON_Delete(expected);
    if (reference) safetensors_close(reference);
}
