/* support.h — helpers shared by the tests: where the reference fixtures
 * are, reading expected.json and reference.safetensors, and comparing
 * tensors with the fixtures' tolerance while recording the largest
 * difference seen. */
#ifndef GLIMPSE_TESTS_SUPPORT_H
#define GLIMPSE_TESTS_SUPPORT_H

#include <cjson/cJSON.h>
#include <stddef.h>

#include "weights/safetensors.h"

/* The fixtures folder: $GLIMPSE_FIXTURES, else ../shared/fixtures beside the
 * source tree. NULL (and a note on stderr, once) when it does not exist. */
const char *fixtures_folder(void);
/* fixtures_folder()/relative; caller frees. */
char *fixture_path(const char *relative);

/* Parses a fixture's JSON file; NULL on failure. Caller cJSON_Deletes. */
cJSON *fixture_json(const char *relative);
/* Opens a fixture safetensors file; NULL on failure. */
safetensors *fixture_tensors(const char *relative);
/* The float32 data of a named tensor with `elements` elements (fails the test if absent). */
const float *fixture_tensor(const safetensors *file, const char *name, size_t elements);

/* The fixture model NAME/ loaded as float32, with a JSON file and a
 * safetensors file of its folder (e.g. expected.json, reference.safetensors):
 * 0, or -1 with a note on stderr (what was opened is set, and released by
 * fixture_close, which takes NULLs). */
int fixture_open(const char *name, const char *json_file, const char *tensors_file, struct glimpse_model **model,
                 cJSON **expected, safetensors **reference);
void fixture_close(struct glimpse_model *model, cJSON *expected, safetensors *reference);

/* A fixture image (images/NAME) decoded; fails the test if it cannot be. */
struct glimpse_image *fixture_image(const char *name);

/* A model loaded with that precision (glimpse_precision); fails the test if it cannot be. */
struct glimpse_model *load_model(const char *path, int precision);

/* max |a - b| / max(1, |b|) over n values. */
double relative_difference(const float *actual, const float *expected, size_t n);

/* Records a difference under a name; printed at the end by report_differences(). */
void note_difference(const char *what, double difference);
void report_differences(void);

#endif
