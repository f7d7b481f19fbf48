/* support.h — helpers shared by the tests: where the reference fixtures
 * are, reading expected.json and reference.safetensors, and comparing
 * tensors with the fixtures' tolerance while recording the largest
 * difference seen. */
#ifndef GLIMPSE_TESTS_SUPPORT_H
#define GLIMPSE_TESTS_SUPPORT_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/attention_record.h"
#include "families/family.h"
#include "weights/safetensors.h"

struct glimpse_model;
struct preprocess_config;

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
 * safetensors file of its folder (e.g. expected.json, reference.safetensors;
 * model NULL: the files only):
 * 0, or -1 with a note on stderr (what was opened is set, and released by
 * fixture_close, which takes NULLs). */
int fixture_open(const char *name, const char *json_file, const char *tensors_file, struct glimpse_model **model,
                 cJSON **expected, safetensors **reference);
void fixture_close(struct glimpse_model *model, cJSON *expected, safetensors *reference);

/* A fixture model with a JSON file of its folder (attention.json, expected.json) and its attention.safetensors. */
typedef struct attention_fixture {
    struct glimpse_model *model;
    cJSON *json;
    safetensors *attention;
} attention_fixture;
/* Opens fixtures/NAME's; skips the test when there are no fixtures, fails it when they cannot be read. */
attention_fixture attention_fixture_open(const char *name, const char *json_name);
void attention_fixture_close(attention_fixture *f);

/* Runs argv[0] (a path) with argv (NULL-terminated), stdin from /dev/null; *out and *err receive what it
 * wrote (caller frees). Returns its exit status (128 + the signal if one ended it). */
int run_program(const char *const *argv, char **out, char **err);

/* A fixture image (images/NAME) decoded; fails the test if it cannot be. */
struct glimpse_image *fixture_image(const char *name);

/* A parity test's fixture: fixtures/NAME's model (when loaded here),
 * expected.json, reference.safetensors, and how many "images" and "texts"
 * expected.json lists. */
typedef struct parity_fixture {
    struct glimpse_model *model;
    cJSON *expected;
    safetensors *reference;
    size_t image_count, text_count;
} parity_fixture;
/* For a cmocka group setup: *state = a new fixture of fixtures/NAME, its
 * model loaded with glimpse_model_load when with_model; or NULL when there
 * are no fixtures (the tests then skip). -1 when something cannot be read. */
int parity_setup(void **state, const char *name, int with_model);
/* Frees the fixture and its model. */
int parity_teardown(void **state);
/* expected.json's "images"[i] and "texts"[t]. */
const char *parity_image(const parity_fixture *f, size_t i);
const char *parity_text(const parity_fixture *f, size_t t);
/* Every image and text of expected.json through the public API with the
 * fixture's model (a context of 2 threads): *image_embeds [image_count, dim],
 * *text_embeds [text_count, dim] and glimpse_score's *logits [image_count,
 * text_count], each a new array the caller frees. Fails the test on an error. */
void parity_embed_and_score(const parity_fixture *f, float **image_embeds, float **text_embeds, float **logits);
/* pixel_values [image_count, 3, size, size] of every image of expected.json,
 * preprocessed with config (vision/preprocess.h); caller frees. */
float *parity_pixel_values(const parity_fixture *f, const struct preprocess_config *config, size_t size);


/* A cmocka group's setup and teardown that make a scratch folder under /tmp (its path in *state, and from
 * test_workspace()) and remove it with all it holds. */
int workspace_setup(void **state);
int workspace_teardown(void **state);
/* Removes folder and all it holds (the test fails if it cannot). */
void remove_tree(const char *folder);
const char *test_workspace(void);

/* Writes text to path (fails the test if it cannot). */
/* A small CLIP of the published layout (64-wide towers of two layers, 64-pixel pictures, 600 tokens): the
 * configuration make-model fills with random weights for tests that need a model but no fixture. */
#define TINY_CLIP_CONFIG                                                                                       \
    "{\"architectures\": [\"CLIPModel\"], \"model_type\": \"clip\", \"projection_dim\": 32,"                 \
    " \"vision_config\": {\"hidden_size\": 64, \"intermediate_size\": 128, \"num_hidden_layers\": 2,"           \
    " \"num_attention_heads\": 4, \"image_size\": 64, \"patch_size\": 16, \"hidden_act\": \"gelu\"},"         \
    " \"text_config\": {\"hidden_size\": 64, \"intermediate_size\": 128, \"num_hidden_layers\": 2,"             \
    " \"num_attention_heads\": 4, \"vocab_size\": 600, \"max_position_embeddings\": 77,"                      \
    " \"hidden_act\": \"gelu\", \"eos_token_id\": 599}}"
void write_text_file(const char *path, const char *text);
/* glimpse-make-model run on config_text (written to workspace/NAME.json) into workspace/NAME, with `options`
 * added to its command line ("", " --f16", ...): the new folder's path (caller frees). Fails the test if the
 * tool fails. */
char *snapshot_from_config(const char *workspace, const char *config_text, const char *name, const char *options);
/* One linear congruential sequence per process (seeded 12345: the same values on every run): its next 32-bit
 * state, its next value as a float in [-1, 1), and n such values in a new array (caller frees). */
uint32_t test_random_bits(void);
float test_random_float(void);
float *test_random_array(size_t n);
struct encoder_layer;
/* An encoder layer of width hidden and feed-forward inter wired to float32 `weights` of 4·hidden² + 2·hidden·inter
 * values (q, k, v, out, fc1, fc2; q|k|v as one fused product when fused) and `biases` of 6·hidden + inter, its
 * LayerNorms weighted by `ones` and biased by `zeros` (hidden values each); what else it has is zeroed. */
void test_wire_layer(struct encoder_layer *layer, const float *weights, const float *biases, const float *ones,
                     const float *zeros, size_t hidden, size_t inter, bool fused);
/* A 50 × 40 picture of smooth colours (a made-up model's input). */
struct glimpse_image *smooth_picture(void);

struct glimpse_caption;
/* A caption against a generation case of expected.json ({"image", "prompt", "generation", "ids", "caption"}):
 * the same ids and text exactly; a difference fails the test naming the case and the first differing id. */
void expect_caption_matches(const struct glimpse_caption *caption, const cJSON *item);

/* A model loaded with that precision (glimpse_precision); fails the test if it cannot be. */
struct glimpse_model *load_model(const char *path, int precision);

/* max |a - b| / max(1, |b|) over n values. */
double relative_difference(const float *actual, const float *expected, size_t n);

/* The reference tensor `name` of n values against actual: the relative difference noted under `what`, and the
 * test failed if it is over tolerance. */
void expect_reference_close(const float *actual, const safetensors *reference, const char *name, size_t n,
                            const char *what, double tolerance);

/* Records a difference under a name; printed at the end by report_differences(). */
void note_difference(const char *what, double difference);
/* Prints the differences noted and returns failed, so that a parity test's
 * main ends: return report_differences(cmocka_run_group_tests_name(...)); */
int report_differences(int failed);

/* Attention parity (attention.safetensors): probabilities within this of the reference's. */
#define ATTENTION_TOLERANCE 1e-5
/* What recorded memory is filled with first: rows no pass reached keep it. */
#define ATTENTION_UNTOUCHED -7.0f
/* A record of every layer of the kinds asked for, its memory filled with ATTENTION_UNTOUCHED; free with record_free. */
attention_record record_every_layer(int self, int cross, size_t layers, size_t sequences, size_t heads, size_t rows,
                                    size_t self_columns, size_t cross_columns);
void record_free(attention_record *r);
/* Compares rows 0 .. compared-1 of each [heads] block of recorded [heads, rows, columns] with the reference
 * tensor [heads, rows, columns] within ATTENTION_TOLERANCE (noted under `what`); rows compared .. rows-1 must be
 * untouched. Fails the test otherwise. */
void compare_rows(const float *recorded, const float *reference, size_t heads, size_t rows, size_t columns,
                  size_t compared, const char *what);

/* Runs one generation case of a captioning fixture's expected.json (its image, prompt and params: num_beams,
 * max_length and min_length counting the start token and the prompt's prompt_length - 1 tokens) through
 * glimpse_caption_images and checks its ids and caption exactly (expect_caption_matches). */
struct glimpse_context;
void expect_caption_case(struct glimpse_context *ctx, const cJSON *item, size_t prompt_length);
/* A glimpse_token_callback's record of the tokens it was called with and the last text; it cancels after
 * stop_after tokens (0: never). */
typedef struct caption_recorder {
    int32_t ids[64];
    size_t count;
    size_t stop_after;
    char last_text[512];
} caption_recorder;
bool record_caption_token(void *user, size_t image, int32_t id, const char *text); /* user: a caption_recorder */

/* Every case of expected.json's "cases" through expect_caption_case with a context of the model, each case's
 * prompt_length given by the function; returns how many ran. */
int expect_caption_cases(const struct glimpse_model *model, const cJSON *expected,
                         size_t (*prompt_length)(const struct glimpse_model *model, const cJSON *item));

/* The last hidden state of one fixture image (images/NAME) through the model's vision tower after its final
 * LayerNorm [tokens, hidden] (BLIP's image_embeds, ViT-GPT2's encoder_last_hidden_state); caller frees. */
float *image_embeds(const struct glimpse_model *model, const char *image_name);

/* ids[0..count) against the JSON list `expected`, exactly: a difference fails the test naming `what`, the first
 * differing position and both lengths. */
void expect_ids_equal(const int32_t *ids, size_t count, const cJSON *expected, const char *what);

/* Two JSON values equal: the same structure and keys in order, strings exactly, numbers equal as float32 values (a
 * processor's coordinates, computed in float32 and printed as Python floats). */
bool json_same_float32(const cJSON *a, const cJSON *b);

/* The shared blocks a model's family holds behind model->parts, and a context's run state of them (made with the
 * context), through the family table: how the tests reach the towers and decoders they check. */
family_blocks test_blocks(const glimpse_model *model);
family_run_blocks test_run_blocks(glimpse_context *ctx);

#endif
