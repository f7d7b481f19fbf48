/* florence2_call.c — glimpse's side of bench/florence2.sh: whole Florence-2 task calls through the public API,
 * each timed inside the process from the picture's file to the processor's result (glimpse_image_load_file, then
 * glimpse_run_task: preprocessing, DaViT, the BART encoder, the search, decoding and post_process_generation), as
 * bench/florence2_torch.py times PyTorch's (Image.open, the processor, generate, batch_decode,
 * post_process_generation).
 *
 *   florence2_call MODEL PICTURE THREADS CALLS [--int8] TASK:BEAMS:MAX_TOKENS:MIN_TOKENS...
 *
 * Loads MODEL (timed: the "load" line), makes one call of the first TASK untimed (the first call in a process
 * pays for its page faults and first allocations), then makes CALLS timed calls of each TASK in turn.
 * JSON Lines on stdout: {"runtime": "glimpse", "precision": "f32"|"int8", "stage": "load", "ms": M}, then per call
 * {"runtime": ..., "precision": ..., "task": T, "beams": B, "max_tokens": N, "min_tokens": N, "call": I,
 *  "ms": M, "ids": [...], "json": RESULT}.
 * Built by bench/florence2.sh against build/libglimpse.so; a benchmark, not part of the library. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "glimpse.h"

typedef struct call {
    char task[64];
    int beams, max_tokens, min_tokens;
} call;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

static void check(glimpse_status status, const char *what) {
    if (status == GLIMPSE_STATUS_OK) return;
    fprintf(stderr, "florence2_call: %s: %s (%s)\n", what, glimpse_status_string(status), glimpse_last_error());
    exit(1);
}

/* A string as a JSON string: the result's JSON and the task names hold only printable ASCII quotes and
 * backslashes to escape, and UTF-8 passes through. */
static void print_json_string(const char *s) {
    putchar('"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') printf("\\%c", c);
        else if (c < 0x20) printf("\\u%04x", c);
        else putchar(c);
    }
    putchar('"');
}

/* One whole call: the picture from its file to the task's result. Returns the seconds it took. */
static double run(glimpse_context *ctx, const char *picture, const call *c, glimpse_task_result *result) {
    glimpse_caption_params params = glimpse_caption_default_params();
    params.beams = c->beams;
    params.max_tokens = c->max_tokens;
    params.min_tokens = c->min_tokens;
    double start = now();
    glimpse_image *image = NULL;
    check(glimpse_image_load_file(picture, NULL, &image), picture);
    check(glimpse_run_task(ctx, &image, 1, c->task, NULL, &params, result), c->task);
    double seconds = now() - start;
    glimpse_image_free(image);
    return seconds;
}

int main(int argc, char **argv) {
    if (argc < 6) {
        fprintf(stderr, "usage: florence2_call MODEL PICTURE THREADS CALLS [--int8] TASK:BEAMS:MAX:MIN...\n");
        return 2;
    }
    const char *model_path = argv[1], *picture = argv[2];
    int threads = atoi(argv[3]), calls = atoi(argv[4]), first = 5;
    glimpse_load_params load = glimpse_load_default_params();
    const char *precision = "f32";
    if (strcmp(argv[first], "--int8") == 0) load.precision = GLIMPSE_PRECISION_INT8, precision = "int8", first++;
    int count = argc - first;
    call *list = calloc((size_t)(count > 0 ? count : 1), sizeof *list);
    if (!list || count < 1) return 2;
    for (int i = 0; i < count; i++) {
        const char *spec = argv[first + i], *colon = strchr(spec, ':');
        if (!colon || (size_t)(colon - spec) >= sizeof list[i].task ||
            sscanf(colon + 1, "%d:%d:%d", &list[i].beams, &list[i].max_tokens, &list[i].min_tokens) != 3) {
            fprintf(stderr, "florence2_call: %s is not TASK:BEAMS:MAX_TOKENS:MIN_TOKENS\n", spec);
            return 2;
        }
        memcpy(list[i].task, spec, (size_t)(colon - spec));
    }

    double start = now();
    glimpse_model *model = NULL;
    check(glimpse_model_load(model_path, &load, &model), model_path);
    glimpse_context_params context = glimpse_context_default_params();
    context.threads = threads;
    glimpse_context *ctx = NULL;
    check(glimpse_context_create(model, &context, &ctx), "context");
    printf("{\"runtime\": \"glimpse\", \"precision\": \"%s\", \"stage\": \"load\", \"ms\": %.3f}\n", precision,
           (now() - start) * 1e3);
    fflush(stdout);

    glimpse_task_result result;
    run(ctx, picture, &list[0], &result); /* warm-up, untimed */
    glimpse_task_result_free(&result);
    for (int i = 0; i < count; i++)
        for (int r = 0; r < calls; r++) {
            double seconds = run(ctx, picture, &list[i], &result);
            printf("{\"runtime\": \"glimpse\", \"precision\": \"%s\", \"task\": ", precision);
            print_json_string(list[i].task);
            printf(", \"beams\": %d, \"max_tokens\": %d, \"min_tokens\": %d, \"call\": %d, \"ms\": %.3f, \"ids\": [",
                   list[i].beams, list[i].max_tokens, list[i].min_tokens, r, seconds * 1e3);
            for (size_t t = 0; t < result.id_count; t++) printf("%s%d", t ? ", " : "", (int)result.ids[t]);
            printf("], \"json\": ");
            print_json_string(result.json ? result.json : "");
            printf("}\n");
            fflush(stdout);
            glimpse_task_result_free(&result);
        }
    glimpse_context_free(ctx);
    glimpse_model_free(model);
    free(list);
    return 0;
}
