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
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "api/model.h"
#include "core/encoder_layer.h"
#include "core/file.h"
#include "vision/preprocess.h"

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

int parity_setup(void **state, const char *name, int with_model) {
    *state = NULL;
    if (!fixtures_folder()) return 0;
    parity_fixture *f = calloc(1, sizeof *f);
    if (!f) return -1;
    *state = f;
    if (fixture_open(name, "expected.json", "reference.safetensors", with_model ? &f->model : NULL, &f->expected,
                     &f->reference))
        return -1;
    f->image_count = (size_t)cJSON_GetArraySize(cJSON_GetObjectItem(f->expected, "images"));
    f->text_count = (size_t)cJSON_GetArraySize(cJSON_GetObjectItem(f->expected, "texts"));
    return 0;
}

int parity_teardown(void **state) {
    parity_fixture *f = *state;
    if (!f) return 0;
    fixture_close(f->model, f->expected, f->reference);
    free(f);
    return 0;
}

const char *parity_image(const parity_fixture *f, size_t i) {
    return cJSON_GetArrayItem(cJSON_GetObjectItem(f->expected, "images"), (int)i)->valuestring;
}

const char *parity_text(const parity_fixture *f, size_t t) {
    return cJSON_GetArrayItem(cJSON_GetObjectItem(f->expected, "texts"), (int)t)->valuestring;
}

void parity_embed_and_score(const parity_fixture *f, float **image_embeds, float **text_embeds, float **logits) {
    size_t dim = glimpse_model_embedding_dim(f->model), ni = f->image_count, nt = f->text_count;
    glimpse_context *ctx;
    glimpse_context_params params = glimpse_context_default_params();
    params.threads = 2;
    assert_int_equal(glimpse_context_create(f->model, &params, &ctx), GLIMPSE_STATUS_OK);
    glimpse_image **images = calloc(ni, sizeof *images);
    const char **texts = calloc(nt, sizeof *texts);
    *image_embeds = malloc(ni * dim * sizeof(float)), *text_embeds = malloc(nt * dim * sizeof(float));
    *logits = malloc(ni * nt * sizeof(float));
    assert_true(images && texts && *image_embeds && *text_embeds && *logits);
    for (size_t i = 0; i < ni; i++) images[i] = fixture_image(parity_image(f, i));
    for (size_t t = 0; t < nt; t++) texts[t] = parity_text(f, t);
    assert_int_equal(glimpse_embed_images(ctx, images, ni, *image_embeds), GLIMPSE_STATUS_OK);
    assert_int_equal(glimpse_embed_texts(ctx, texts, nt, *text_embeds), GLIMPSE_STATUS_OK);
    assert_int_equal(glimpse_score(f->model, *image_embeds, ni, *text_embeds, nt, *logits), GLIMPSE_STATUS_OK);
    for (size_t i = 0; i < ni; i++) glimpse_image_free(images[i]);
    free(images), free(texts);
    glimpse_context_free(ctx);
}

float *parity_pixel_values(const parity_fixture *f, const preprocess_config *config, size_t size) {
    size_t plane = 3 * size * size;
    float *pixels = malloc(f->image_count * plane * sizeof(float));
    assert_non_null(pixels);
    for (size_t i = 0; i < f->image_count; i++) {
        glimpse_image *image = fixture_image(parity_image(f, i));
        assert_int_equal(preprocess_image(pixels + i * plane, image, config), GLIMPSE_STATUS_OK);
        glimpse_image_free(image);
    }
    return pixels;
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

int report_differences(int failed) {
    for (int i = 0; i < note_count; i++)
        fprintf(stderr, "max difference %-28s %.3g\n", notes[i].what, notes[i].difference);
    return failed;
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
    *expected = NULL, *reference = NULL;
    if (model) {
        *model = NULL;
        char *folder = fixture_path(name);
        glimpse_status status = folder ? glimpse_model_load(folder, NULL, model) : GLIMPSE_STATUS_OUT_OF_MEMORY;
        free(folder);
        if (status) {
            fprintf(stderr, "%s: load failed: %s\n", name, glimpse_last_error());
            return -1;
        }
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

void expect_caption_matches(const glimpse_caption *caption, const cJSON *item) {
    const char *image = cJSON_GetObjectItem(item, "image")->valuestring;
    const char *prompt = cJSON_GetObjectItem(item, "prompt")->valuestring;
    const char *kind = cJSON_GetObjectItem(item, "generation")->valuestring;
    const cJSON *ids = cJSON_GetObjectItem(item, "ids");
    if ((int)caption->id_count != cJSON_GetArraySize(ids))
        fail_msg("%s, prompt '%s', %s: %zu ids, expected %d", image, prompt, kind, caption->id_count,
                 cJSON_GetArraySize(ids));
    for (size_t i = 0; i < caption->id_count; i++)
        if (caption->ids[i] != cJSON_GetArrayItem(ids, (int)i)->valueint)
            fail_msg("%s, prompt '%s', %s: id %zu is %d, expected %d", image, prompt, kind, i, caption->ids[i],
                     cJSON_GetArrayItem(ids, (int)i)->valueint);
    assert_string_equal(caption->text, cJSON_GetObjectItem(item, "caption")->valuestring);
}

void write_text_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (!f) fail_msg("%s: cannot write", path);
    assert_true(fputs(text, f) >= 0);
    assert_int_equal(fclose(f), 0);
}

char *snapshot_from_config(const char *workspace, const char *config_text, const char *name, const char *options) {
    char config_name[256], command[4096];
    snprintf(config_name, sizeof config_name, "%s.json", name);
    char *config = file_join(workspace, config_name), *folder = file_join(workspace, name);
    write_text_file(config, config_text);
    snprintf(command, sizeof command, "%s %s %s --seed 7%s > /dev/null", GLIMPSE_MAKE_MODEL, config, folder, options);
    if (system(command) != 0) fail_msg("command failed: %s", command);
    free(config);
    return folder;
}

glimpse_image *smooth_picture(void) {
    uint8_t pixels[40][50][3];
    for (int y = 0; y < 40; y++)
        for (int x = 0; x < 50; x++)
            pixels[y][x][0] = (uint8_t)(5 * x), pixels[y][x][1] = (uint8_t)(6 * y), pixels[y][x][2] = (uint8_t)(x * y);
    glimpse_image *image;
    assert_int_equal(glimpse_image_from_pixels(&pixels[0][0][0], 50, 40, 0, GLIMPSE_PIXEL_FORMAT_RGB8, &image),
                     GLIMPSE_STATUS_OK);
    return image;
}

static char workspace[] = "/tmp/glimpse-test-XXXXXX";

int workspace_setup(void **state) {
    *state = workspace;
    return mkdtemp(workspace) ? 0 : -1;
}

int workspace_teardown(void **state) {
    (void)state;
    char command[512];
    snprintf(command, sizeof command, "rm -rf '%s'", workspace);
    return system(command) == 0 ? 0 : -1;
}

const char *test_workspace(void) { return workspace; }

void remove_tree(const char *folder) {
    char command[1100];
    snprintf(command, sizeof command, "rm -rf '%s'", folder);
    assert_int_equal(system(command), 0);
}

/* A record of every layer of the kinds asked for, its memory filled with ATTENTION_UNTOUCHED. */
attention_record record_every_layer(int self, int cross, size_t layers, size_t sequences, size_t heads, size_t rows,
                                    size_t self_columns, size_t cross_columns) {
    uint64_t all = layers >= 64 ? UINT64_MAX : ((uint64_t)1 << layers) - 1;
    attention_record r = {.layers = {self ? all : 0, cross ? all : 0}, .sequences = sequences, .heads = heads,
                          .rows = rows, .columns = {self_columns, cross_columns}};
    for (int kind = 0; kind < ATTENTION_KINDS; kind++) {
        size_t n = attention_record_floats(&r, (attention_kind)kind);
        if (!n) continue;
        r.probabilities[kind] = malloc(n * sizeof(float));
        for (size_t i = 0; i < n; i++) r.probabilities[kind][i] = ATTENTION_UNTOUCHED;
    }
    return r;
}

void record_free(attention_record *r) {
    for (int kind = 0; kind < ATTENTION_KINDS; kind++) free(r->probabilities[kind]);
}

/* Compares rows 0 .. compared-1 of each [heads] block of recorded [heads, rows, columns] with the reference
 * tensor [heads, rows, columns]; rows compared .. rows-1 must be untouched. */
void compare_rows(const float *recorded, const float *reference, size_t heads, size_t rows, size_t columns,
                  size_t compared, const char *what) {
    double worst = 0;
    for (size_t h = 0; h < heads; h++)
        for (size_t t = 0; t < rows; t++) {
            const float *got = recorded + (h * rows + t) * columns, *want = reference + (h * rows + t) * columns;
            for (size_t j = 0; j < columns; j++) {
                if (t >= compared) {
                    if (got[j] != ATTENTION_UNTOUCHED) fail_msg("%s: head %zu row %zu was written", what, h, t);
                    continue;
                }
                double d = fabs((double)got[j] - (double)want[j]);
                if (d > worst) worst = d;
                if (d > ATTENTION_TOLERANCE)
                    fail_msg("%s: head %zu row %zu column %zu is %g, reference %g", what, h, t, j, got[j], want[j]);
            }
        }
    note_difference(what, worst);
}

void expect_caption_case(struct glimpse_context *ctx, const cJSON *item, size_t prompt_length) {
    const char *image_name = cJSON_GetObjectItem(item, "image")->valuestring;
    const char *prompt = cJSON_GetObjectItem(item, "prompt")->valuestring;
    const cJSON *params = cJSON_GetObjectItem(item, "params");
    const cJSON *beams = cJSON_GetObjectItem(params, "num_beams"), *min = cJSON_GetObjectItem(params, "min_length");
    glimpse_caption_params p = glimpse_caption_default_params();
    p.prompt = prompt;
    p.beams = beams ? beams->valueint : 1;
    p.max_tokens = cJSON_GetObjectItem(params, "max_length")->valueint - (int)prompt_length;
    int min_tokens = min ? min->valueint - (int)prompt_length : 0;
    p.min_tokens = min_tokens > 0 ? min_tokens : 0;
    glimpse_image *image = fixture_image(image_name);
    glimpse_caption caption;
    if (glimpse_caption_images(ctx, &image, 1, &p, &caption)) fail_msg("%s: %s", image_name, glimpse_last_error());
    glimpse_image_free(image);
    expect_caption_matches(&caption, item);
    glimpse_caption_free(&caption);
}

/* image_embeds of one fixture image through the model's own vision tower. */
float *image_embeds(const struct glimpse_model *model, const char *image_name) {
    size_t size = (size_t)test_blocks(model).vision->config.image_size;
    size_t tokens = test_blocks(model).vision->tokens, hidden = (size_t)test_blocks(model).vision->config.hidden_size;
    float *pixels = malloc(3 * size * size * sizeof(float)), *embeds = malloc(tokens * hidden * sizeof(float));
    glimpse_image *image = fixture_image(image_name);
    assert_int_equal(preprocess_image(pixels, image, &model->preprocess), GLIMPSE_STATUS_OK);
    glimpse_image_free(image);
    vit_state *vision;
    assert_int_equal(vit_state_create(test_blocks(model).vision, 1, &vision), GLIMPSE_STATUS_OK);
    vit_forward(test_blocks(model).vision, vision, pixels, 1, ENCODER_OUTPUT_ALL_ROWS, NULL);
    vit_post_norm_all(test_blocks(model).vision, vision, 0, embeds);
    vit_state_free(vision);
    free(pixels);
    return embeds;
}

int expect_caption_cases(const struct glimpse_model *model, const cJSON *expected,
                         size_t (*prompt_length)(const struct glimpse_model *model, const cJSON *item)) {
    glimpse_context *ctx;
    assert_int_equal(glimpse_context_create(model, NULL, &ctx), GLIMPSE_STATUS_OK);
    const cJSON *item;
    int cases = 0;
    cJSON_ArrayForEach(item, cJSON_GetObjectItem(expected, "cases")) {
        expect_caption_case(ctx, item, prompt_length(model, item));
        cases++;
    }
    glimpse_context_free(ctx);
    return cases;
}

void expect_reference_close(const float *actual, const safetensors *reference, const char *name, size_t n,
                            const char *what, double tolerance) {
    double d = relative_difference(actual, fixture_tensor(reference, name, n), n);
    note_difference(what, d);
    if (!(d <= tolerance)) fail_msg("%s: %s differs from the reference by %g (tolerance %g)", what, name, d, tolerance);
}

bool record_caption_token(void *user, size_t image, int32_t id, const char *text) {
    (void)image;
    caption_recorder *r = user;
    if (r->count < sizeof r->ids / sizeof r->ids[0]) r->ids[r->count++] = id;
    snprintf(r->last_text, sizeof r->last_text, "%s", text);
    return r->stop_after && r->count >= r->stop_after;
}

static char *slurp(const char *path) {
    uint8_t *bytes;
    size_t size;
    if (file_read_all(path, 1 << 26, &bytes, &size)) return strdup("");
    return (char *)bytes;
}

int run_program(const char *const *argv, char **out, char **err) {
    char out_path[] = "/tmp/glimpse-run-out-XXXXXX", err_path[] = "/tmp/glimpse-run-err-XXXXXX";
    int out_fd = mkstemp(out_path), err_fd = mkstemp(err_path);
    pid_t child = fork();
    if (child == 0) {
        dup2(out_fd, 1);
        dup2(err_fd, 2);
        int null_fd = open("/dev/null", O_RDONLY);
        dup2(null_fd, 0);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    int status = 0;
    waitpid(child, &status, 0);
    close(out_fd);
    close(err_fd);
    *out = slurp(out_path);
    *err = slurp(err_path);
    unlink(out_path);
    unlink(err_path);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

attention_fixture attention_fixture_open(const char *name, const char *json_name) {
    attention_fixture f = {0};
    if (!fixtures_folder()) skip();
    if (fixture_open(name, json_name, "attention.safetensors", &f.model, &f.json, &f.attention))
        fail_msg("%s: no model, %s or attention.safetensors", name, json_name);
    return f;
}

void attention_fixture_close(attention_fixture *f) { fixture_close(f->model, f->json, f->attention); }

/* Two parsed results equal: the same structure, strings exactly, numbers equal as float32 values. */
bool json_same_float32(const cJSON *a, const cJSON *b) {
    if (cJSON_IsNumber(a) || cJSON_IsNumber(b))
        return cJSON_IsNumber(a) && cJSON_IsNumber(b) && (float)a->valuedouble == (float)b->valuedouble;
    if (cJSON_IsString(a) || cJSON_IsString(b))
        return cJSON_IsString(a) && cJSON_IsString(b) && !strcmp(a->valuestring, b->valuestring);
    if ((cJSON_IsArray(a) != cJSON_IsArray(b)) || (cJSON_IsObject(a) != cJSON_IsObject(b))) return false;
    if (cJSON_GetArraySize(a) != cJSON_GetArraySize(b)) return false;
    const cJSON *x = a->child, *y = b->child;
    for (; x && y; x = x->next, y = y->next) {
        if (cJSON_IsObject(a) && strcmp(x->string, y->string) != 0) return false;
        if (!json_same_float32(x, y)) return false;
    }
    return !x && !y;
}

void expect_ids_equal(const int32_t *ids, size_t count, const cJSON *expected, const char *what) {
    int n = cJSON_GetArraySize(expected);
    for (int i = 0; i < n || (size_t)i < count; i++)
        if (i >= n || (size_t)i >= count || ids[i] != cJSON_GetArrayItem(expected, i)->valueint)
            fail_msg("%s: id %d is %d, the reference's %d (%zu and %d ids)", what, i,
                     (size_t)i < count ? ids[i] : -1, i < n ? cJSON_GetArrayItem(expected, i)->valueint : -1, count, n);
}

family_blocks test_blocks(const glimpse_model *model) {
    family_blocks blocks;
    family_blocks_of(model, &blocks);
    return blocks;
}

family_run_blocks test_run_blocks(glimpse_context *ctx) {
    family_run_blocks run;
    assert_int_equal(family_run_blocks_of(ctx, &run), GLIMPSE_STATUS_OK);
    return run;
}

static uint32_t random_state = 12345;

uint32_t test_random_bits(void) {
    random_state = random_state * 1664525u + 1013904223u;
    return random_state;
}

float test_random_float(void) { return (float)((test_random_bits() >> 8) / 16777216.0 * 2.0 - 1.0); }

float *test_random_array(size_t n) {
    float *a = malloc(n * sizeof *a);
    for (size_t i = 0; i < n; i++) a[i] = test_random_float();
    return a;
}

void test_wire_layer(encoder_layer *layer, const float *weights, const float *biases, const float *ones,
                     const float *zeros, size_t hidden, size_t inter, bool fused) {
    *layer = (encoder_layer){0};
    layer->norm1_weight = layer->norm2_weight = ones, layer->norm1_bias = layer->norm2_bias = zeros;
    if (fused) {
        layer->qkv_weight = kernel_weight_f32(weights), layer->qkv_bias = biases;
    } else {
        layer->q_weight = kernel_weight_f32(weights), layer->q_bias = biases;
        layer->k_weight = kernel_weight_f32(weights + hidden * hidden), layer->k_bias = biases + hidden;
        layer->v_weight = kernel_weight_f32(weights + 2 * hidden * hidden), layer->v_bias = biases + 2 * hidden;
    }
    layer->out_weight = kernel_weight_f32(weights + 3 * hidden * hidden), layer->out_bias = biases + 3 * hidden;
    layer->fc1_weight = kernel_weight_f32(weights + 4 * hidden * hidden), layer->fc1_bias = biases + 4 * hidden;
    layer->fc2_weight = kernel_weight_f32(weights + 4 * hidden * hidden + hidden * inter);
    layer->fc2_bias = biases + 4 * hidden + inter;
}
