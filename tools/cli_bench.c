/* cli_bench.c — `glimpse bench`: medians per stage (load, decode,
 * preprocess, vision, text, decoder step, whole caption, search) for a model
 * at a batch size and thread count, with the work in FLOPs and the rate
 * reached. A white-box developer tool: beside the public API it times the
 * library's inner stages through the hooks of api/bench_stages.h (and fills a
 * search index with made-up rows through search/index_bench.h), and nothing
 * else. */
#include <getopt.h>
#include <math.h>
#include <png.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/bench_stages.h"
#include "core/file.h"
#include "vision/image.h"
#include "search/index_bench.h"
#include "tools/cli_common.h"
#include "tools/cli_html.h"
#include "tools/commands.h"

static const char bench_help[] =
    "Usage: glimpse bench -m MODEL [--batch B] [--threads T] [--runs N] [--tokens N] [--captions N]\n"
    "                     [--profile] [--json]\n"
    "Times each stage and prints its median over N runs (default 5), their spread\n"
    "(fastest-slowest), the work done (GFLOP) and the rate reached (GFLOP/s). Stages:\n"
    "load, decode (a 640x480 PNG), preprocess, vision, text (CLIP 77 tokens, SigLIP 64),\n"
    "decoder_step (BLIP, one token at growing positions; the median of at least 21 steps),\n"
    "caption (BLIP, ViT-GPT2 and BLIP-2, N tokens, default 20, greedy and 3 beams, the whole\n"
    "public call). BLIP-2 adds qformer (the Q-Former and the projection, once per image),\n"
    "first_token (vision, Q-Former and the language model over the query vectors and an\n"
    "11-token prompt) and decoder_step_bytes (the weights a step reads: its time's bound is\n"
    "those bytes over the read bandwidth); its decoder_step positions count after that prefix.\n"
    "LLaVA: image (tower and projector, one picture), prompt (the picture's rows and 32 more\n"
    "read at once), decoder_step (one token after 16 positions, then after the prompt and\n"
    "further on), decoder_step_bytes and\n"
    "caption. Florence-2: caption.\n"
    "CLIP's vision and text stages and SigLIP's text stage run as their embeddings\n"
    "do (the last layer for the pooled token only); BLIP's vision stage keeps every token,\n"
    "and SigLIP's, whose attention-pooling head reads them all, adds it.\n"
    "Batch stages (decode, preprocess, vision, text) report time per image or text.\n"
    "--picture FILE decodes and preprocesses FILE instead of the PNG (a photograph: the\n"
    "decode stage is then the decoder alone, preprocess the resize and the rest), and\n"
    "--fast-decode decodes it as glimpse index --fast-decode does.\n"
    "With --search-rows N (CLIP, SigLIP), also an index of N random embeddings: opening it and\n"
    "loading its embeddings (search_load), a text query's embedding (query) and its top\n"
    "10 (search).\n"
    "With --captions N (BLIP, ViT-GPT2, BLIP-2), only load and the gain of continuous batching:\n"
    "N copies of the PNG captioned by one public call, their steps batched (the default batch\n"
    "rows) and one picture at a time (batch rows 1), in turn, greedy and 3 beams, every caption\n"
    "forced to --tokens tokens. Decoder tokens per second: N x tokens (caption tokens, not beam\n"
    "rows) over the median time the library spent decoding (steps and search, not the vision\n"
    "tower nor the image's keys and values); captions per second: N over the whole call's\n"
    "median. JSON: {\"stage\": \"captions\", \"detail\": \"batched|alone|gain, greedy|3 beams\",\n"
    "\"pictures\": N, \"beams\": B, \"tokens\": T, \"median_ms\", \"min_ms\", \"max_ms\" (the whole call),\n"
    "\"decoding_ms\", \"decoding_min_ms\", \"decoding_max_ms\", \"decoder_tokens_per_s\",\n"
    "\"captions_per_s\"}; the gain rows: \"decoder_ratio\" and \"captions_ratio\", batched over alone.\n"
    "JSON: one line per stage: {\"stage\": S, \"batch\": B, \"threads\": T, \"median_ms\": M,\n"
    "\"min_ms\": FASTEST, \"max_ms\": SLOWEST, \"gflops\": G, \"gflop\": W, ...} where gflops is the\n"
    "rate reached at the median and gflop the work per image or text; vision and text add\n"
    "\"attention_gflop\": the attention's part of W (its two products, which an --int8 model\n"
    "runs on bfloat16 or float32, not on int8).\n"
    "With --profile (or GLIMPSE_PROFILE=1), each stage is followed by the shares of its\n"
    "wall time spent in products (linear layers), attention, norms, activations and the\n"
    "rest (embeddings, layout, residuals, tokenizing, ...), and how much of the first four\n"
    "was the calling thread waiting for the pool's last worker (JSON: \"profile\": {...}).\n"
    "An int8 batch shared out by pictures or texts (docs/models.md) counts the calling\n"
    "thread's share; its wait for the other threads' shares falls in the rest. Where an int8\n"
    "product's tasks quantize its input in parts (VNNI, several rows, several threads), the\n"
    "LayerNorm or activation before it runs inside them and counts as products.\n";

/* Decoder steps timed for each median, at least (--runs when larger). */
#define STEP_RUNS 21
/* The most --runs. */
#define BENCH_MAX_RUNS 1000
/* Tokens the BERT states of the BLIP stages hold: the decoder steps' furthest
 * position (60) and a retrieval text fit. */
#define BENCH_BERT_LENGTH 64
/* The most --captions. */
#define BENCH_MAX_CAPTIONS 256
/* The decoded image: a smooth pattern, as a photo compresses. */
#define PNG_WIDTH 640
#define PNG_HEIGHT 480

typedef struct bench {
    cli_options options;
    int batch, runs, threads;
    int tokens;       /* --tokens: caption length */
    long search_rows; /* --search-rows: 0 = no search stages */
    int captions;     /* --captions: 0 = the usual stages, else only continuous batching's gain over this many */
    bool profile;     /* --profile or GLIMPSE_PROFILE=1 */
    const char *picture; /* --picture FILE: decoded instead of the made-up PNG */
    bool fast_decode;    /* --fast-decode: decoded as index --fast-decode does */
    double profiled[BENCH_PROFILE_KINDS], profiled_since; /* the counters and the clock at the last report */
    double *times;    /* [runs] */
    double attention_flops; /* the towers': their attention's part of the next stage reported (then 0 again) */
} bench;

static int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* A stage's runs: the median, which the rate is computed from, and the spread. */
typedef struct timing {
    double median, min, max; /* seconds */
} timing;

static timing summarize(double *values, int n) {
    qsort(values, (size_t)n, sizeof *values, compare_doubles);
    return (timing){n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]), values[0], values[n - 1]};
}

/* --profile: the shares of the time since the last report (the stage's runs
 * and whatever preceded them since) spent per kind of work, and the rest;
 * the text output leaves out stages that ran no forward pass. */
static void report_profile(bench *b) {
    double now = cli_now(), seconds[BENCH_PROFILE_KINDS], share[BENCH_PROFILE_KINDS], elapsed = now - b->profiled_since;
    double counted = 0;
    bench_profile_read(seconds);
    for (int k = 0; k < BENCH_PROFILE_KINDS; k++) {
        share[k] = elapsed > 0 ? (seconds[k] - b->profiled[k]) / elapsed : 0;
        if (k < BENCH_PROFILE_KINDS - 1) counted += share[k];
        b->profiled[k] = seconds[k];
    }
    b->profiled_since = now;
    if (b->options.json) {
        printf(", \"profile\": {");
        for (int k = 0; k < BENCH_PROFILE_KINDS; k++) printf("\"%s\": %.3f, ", bench_profile_names[k], share[k]);
        printf("\"other\": %.3f}", 1 - counted);
    } else if (counted > 0) {
        printf("%13s profile:", "");
        for (int k = 0; k < BENCH_PROFILE_KINDS; k++) printf(" %s %.0f%%", bench_profile_names[k], 100 * share[k]);
        printf(" other %.0f%% (thread_waits are inside the others)\n", 100 * (1 - counted));
    }
}

/* Prints one stage; per_item divides the time (and work) of a batch. */
static void report(bench *b, const char *stage, const char *detail, timing t, double flops, bool per_item) {
    double per = 1e3 / (per_item ? b->batch : 1), ms = t.median * per, work = flops / (per_item ? b->batch : 1);
    double rate = t.median > 0 && flops > 0 ? flops / t.median / 1e9 : 0;
    if (b->options.json) {
        printf("{\"stage\": \"%s\", \"batch\": %d, \"threads\": %d, \"median_ms\": %.3f, \"min_ms\": %.3f, "
               "\"max_ms\": %.3f, \"gflops\": %.1f, \"gflop\": %.3f",
               stage, b->batch, b->threads, ms, t.min * per, t.max * per, rate, work / 1e9);
        if (b->attention_flops > 0)
            printf(", \"attention_gflop\": %.6f", b->attention_flops / (per_item ? b->batch : 1) / 1e9);
        if (detail) printf(", \"detail\": \"%s\"", detail);
        if (b->profile) report_profile(b);
        printf("}\n");
    } else {
        char spread[48];
        snprintf(spread, sizeof spread, "(%.2f-%.2f)", t.min * per, t.max * per);
        printf("%-13s %-22s %10.2f ms %-17s %10.2f GFLOP %8.1f GFLOP/s\n", stage, detail ? detail : "", ms, spread,
               work / 1e9, rate);
        if (b->profile) report_profile(b);
    }
    b->attention_flops = 0;
    fflush(stdout);
}

/* A library call of the bench failed: say why and stop. */
static void check(glimpse_status status) {
    if (status == GLIMPSE_STATUS_OK) return;
    cli_error("%s", glimpse_last_error());
    exit(CLI_EXIT_FAILURE);
}

/* Parses the command line into b; false after --help. */
static bool parse_options(bench *b, int argc, char **argv) {
    cli_options_init(&b->options);
    b->batch = 1;
    b->runs = 5;
    b->tokens = 20;
    static const struct option long_options[] = {CLI_COMMON_LONG_OPTIONS,
                                                 {"batch", required_argument, NULL, 'b'},
                                                 {"runs", required_argument, NULL, 'r'},
                                                 {"tokens", required_argument, NULL, 'n'},
                                                 {"search-rows", required_argument, NULL, 's'},
                                                 {"captions", required_argument, NULL, 'c'},
                                                 {"profile", no_argument, NULL, 'p'},
                                                 {"picture", required_argument, NULL, 'i'},
                                                 {"fast-decode", no_argument, NULL, 'f'},
                                                 {NULL, 0, NULL, 0}};
    int code;
    while ((code = getopt_long(argc, argv, "m:", long_options, NULL)) != -1) {
        if (cli_common_option(&b->options, code, optarg, "bench")) continue;
        switch (code) {
        case 'b': b->batch = (int)cli_parse_long("bench", "--batch", optarg, 1, BENCH_MAX_BATCH); break;
        case 'r': b->runs = (int)cli_parse_long("bench", "--runs", optarg, 1, BENCH_MAX_RUNS); break;
        case 'n': b->tokens = (int)cli_parse_long("bench", "--tokens", optarg, 1, 400); break;
        case 's': b->search_rows = cli_parse_long("bench", "--search-rows", optarg, 1, 100000000); break;
        case 'p': b->profile = true; break;
        case 'i': b->picture = optarg; break;
        case 'f': b->fast_decode = true; break;
        case 'c': b->captions = (int)cli_parse_long("bench", "--captions", optarg, 2, BENCH_MAX_CAPTIONS); break;
        case CLI_OPT_HELP: printf("%s\n%s", bench_help, cli_common_help); return false;
        default: cli_usage_error("bench", "unknown option");
        }
    }
    if (optind < argc) cli_usage_error("bench", "unexpected argument '%s'", argv[optind]);
    const char *profile = getenv("GLIMPSE_PROFILE");
    if (profile && strcmp(profile, "1") == 0) b->profile = true;
    return true;
}

/* load: map the weights and build the model, again and again */
static void time_load(bench *b) {
    for (int r = 0; r < b->runs; r++) {
        double start = cli_now();
        glimpse_model *model = cli_load_model(&b->options, "bench", true, true);
        b->times[r] = cli_now() - start;
        glimpse_model_free(model);
    }
}

/* An encoded PNG_WIDTH x PNG_HEIGHT PNG of a smooth pattern, to time decoding. */
static uint8_t *make_png(size_t *size) {
    uint8_t *pixels = malloc((size_t)PNG_WIDTH * PNG_HEIGHT * 3);
    if (!pixels) check(GLIMPSE_STATUS_OUT_OF_MEMORY);
    for (int y = 0; y < PNG_HEIGHT; y++) {
        uint8_t *row = pixels + (size_t)y * PNG_WIDTH * 3;
        for (int x = 0; x < PNG_WIDTH; x++) {
            row[3 * x] = (uint8_t)(x * 255 / (PNG_WIDTH - 1));
            row[3 * x + 1] = (uint8_t)(y * 255 / (PNG_HEIGHT - 1));
            row[3 * x + 2] = (uint8_t)((x * y) % 251);
        }
    }
    uint8_t *png = cli_png_encode(pixels, PNG_WIDTH, PNG_HEIGHT, size);
    free(pixels);
    if (!png) check(GLIMPSE_STATUS_OUT_OF_MEMORY);
    return png;
}

/* decode: b->batch images from the PNG's bytes (or --picture's), left in images */
static void time_decode(bench *b, const glimpse_context *ctx, const uint8_t *png, size_t png_size,
                        glimpse_image **images) {
    for (int r = 0; r < b->runs; r++) {
        double start = cli_now();
        for (int i = 0; i < b->batch; i++) {
            if (r) glimpse_image_free(images[i]);
            check(bench_decode(ctx, png, png_size, b->fast_decode, &images[i]));
        }
        b->times[r] = cli_now() - start;
    }
    char detail[64] = "640x480 PNG";
    if (b->picture)
        snprintf(detail, sizeof detail, "%dx%d%s", glimpse_image_width(images[0]), glimpse_image_height(images[0]),
                 b->fast_decode ? " fast" : "");
    report(b, "decode", detail, summarize(b->times, b->runs), 0, true);
}

/* preprocess and vision: the images to pixel_values, and the vision tower over them */
static void time_vision(bench *b, glimpse_context *ctx, glimpse_image *const *images, const glimpse_model *model) {
    for (int r = 0; r < b->runs; r++) {
        double start = cli_now();
        check(bench_preprocess(ctx, images, (size_t)b->batch));
        b->times[r] = cli_now() - start;
    }
    report(b, "preprocess", NULL, summarize(b->times, b->runs), 0, true);
    double flops;
    bench_vision(ctx, (size_t)b->batch, &flops, &b->attention_flops); /* warm */
    for (int r = 0; r < b->runs; r++) {
        double start = cli_now();
        bench_vision(ctx, (size_t)b->batch, &flops, NULL);
        b->times[r] = cli_now() - start;
    }
    report(b, "vision", bench_vision_detail(model), summarize(b->times, b->runs), flops, true);
}

/* text: full-length texts as the tokenizer makes them: start token, words, end token (pooled) */
static void time_text(bench *b, glimpse_context *ctx, const glimpse_model_info *info) {
    size_t positions = (size_t)info->text_max_tokens;
    int32_t *ids = malloc((size_t)b->batch * positions * sizeof *ids);
    size_t lengths[BENCH_MAX_BATCH];
    if (!ids) check(GLIMPSE_STATUS_OUT_OF_MEMORY);
    size_t words = info->vocab_size > 2 ? (size_t)info->vocab_size - 2 : 1;
    for (int s = 0; s < b->batch; s++) {
        int32_t *text = ids + (size_t)s * positions;
        lengths[s] = positions;
        for (size_t t = 0; t < positions; t++) text[t] = (int32_t)((t * 7919 + (size_t)s) % words);
        text[0] = (int32_t)words, text[positions - 1] = info->vocab_size - 1;
    }
    double flops;
    check(bench_text(ctx, ids, lengths, (size_t)b->batch, &flops, &b->attention_flops)); /* warm */
    for (int r = 0; r < b->runs; r++) {
        double start = cli_now();
        check(bench_text(ctx, ids, lengths, (size_t)b->batch, &flops, NULL));
        b->times[r] = cli_now() - start;
    }
    char detail[32];
    snprintf(detail, sizeof detail, "%zu tokens", positions);
    report(b, "text", detail, summarize(b->times, b->runs), flops, true);
    free(ids);
}

/* cross_kv: the image's cross-attention keys and values, once per image */
static void time_cross_kv(bench *b, bench_bert *bert) {
    double flops;
    for (int r = 0; r < b->runs; r++) {
        double start = cli_now();
        check(bench_cross_kv(bert, &flops));
        b->times[r] = cli_now() - start;
    }
    report(b, "cross_kv", "once per image", summarize(b->times, b->runs), flops, false);
}

/* decoder_step: one step at growing positions, greedy and 3 beams: the cost
 * grows only by the attention over the cache. A step is short beside this
 * machine's swings, so each median is of a caption's worth of steps or more.
 * (A position past a small model's length fails at once, unchecked: its row
 * then times nothing, as it always has.) */
static void time_decoder_steps(bench *b, bench_bert *bert) {
    const int positions[] = {1, 10, 20, 40, 60};
    int steps = b->runs > STEP_RUNS ? b->runs : STEP_RUNS;
    double step_times[BENCH_MAX_RUNS];
    for (size_t p = 0; p < sizeof positions / sizeof positions[0]; p++)
        for (int sequences = 1; sequences <= 3; sequences += 2) {
            double flops;
            for (int r = 0; r < steps; r++) {
                double start = cli_now();
                bench_decoder_step(bert, (size_t)positions[p], (size_t)sequences, &flops);
                step_times[r] = cli_now() - start;
            }
            char detail[64];
            snprintf(detail, sizeof detail, "%s, position %d", sequences == 1 ? "greedy" : "3 beams", positions[p]);
            report(b, "decoder_step", detail, summarize(step_times, steps), flops, false);
        }
}

/* caption: whole captions of --tokens tokens, greedy and 3 beams, through the public call (with `fresh`, each in a
 * new context: a family that keeps what its language model read would otherwise answer the same picture again from
 * its cache) */
static void time_captions(bench *b, glimpse_context *ctx, glimpse_image *const *images, const glimpse_model *fresh) {
    for (int beams = 1; beams <= 3; beams += 2) {
        glimpse_caption_params params = glimpse_caption_default_params();
        params.beams = beams;
        params.max_tokens = params.min_tokens = b->tokens;
        for (int r = 0; r < b->runs; r++) {
            glimpse_caption caption;
            glimpse_context *run = fresh ? cli_create_context(&b->options, fresh) : ctx;
            double start = cli_now();
            check(glimpse_caption_images(run, images, 1, &params, &caption));
            b->times[r] = cli_now() - start;
            glimpse_caption_free(&caption);
            if (fresh) glimpse_context_free(run);
        }
        char detail[64];
        snprintf(detail, sizeof detail, "%d tokens, %s", b->tokens, beams == 1 ? "greedy" : "3 beams");
        report(b, "caption", detail, summarize(b->times, b->runs), 0, false);
    }
}

/* --captions: one way of captioning the pictures (batch_rows 0 = batched, 1 = one at a time) */
typedef struct caption_way {
    const char *name;
    int batch_rows;
    double *whole, *decoding; /* [runs]: a call's seconds, and the seconds of them spent decoding */
    double profiled[BENCH_PROFILE_KINDS], elapsed; /* --profile: the kinds' seconds during its calls, and theirs */
    double decoder_rate, caption_rate;
} caption_way;

/* One glimpse_caption_images call over count pictures, every caption forced to b->tokens tokens, timed
 * into run r of way (and, with --profile, its kinds of work). */
static void time_caption_call(bench *b, caption_way *way, int r, glimpse_context *ctx, glimpse_image *const *images,
                              int count, int beams, glimpse_caption *captions) {
    glimpse_caption_params params = glimpse_caption_default_params();
    params.beams = beams, params.batch_rows = way->batch_rows;
    params.max_tokens = params.min_tokens = b->tokens;
    double kinds[BENCH_PROFILE_KINDS], kinds_after[BENCH_PROFILE_KINDS];
    bench_profile_read(kinds);
    double decoding = bench_profile_decoding(), start = cli_now();
    check(glimpse_caption_images(ctx, images, (size_t)count, &params, captions));
    way->whole[r] = cli_now() - start;
    way->decoding[r] = bench_profile_decoding() - decoding;
    bench_profile_read(kinds_after);
    for (int k = 0; k < BENCH_PROFILE_KINDS; k++) way->profiled[k] += kinds_after[k] - kinds[k];
    way->elapsed += way->whole[r];
    for (int i = 0; i < count; i++) glimpse_caption_free(&captions[i]);
}

/* a over b, 0 when b is not above 0 */
static double ratio_of(double a, double b) { return b > 0 ? a / b : 0; }

/* Prints one way's row (or, with alone, batched's rates over alone's), and with --profile the way's shares of
 * its calls' time per kind of work. */
static void report_captions(const bench *b, int beams, timing whole, timing decoding, const caption_way *way,
                            const caption_way *alone) {
    const char *search = beams == 1 ? "greedy" : "3 beams";
    if (b->options.json) {
        printf("{\"stage\": \"captions\", \"detail\": \"%s, %s\", \"pictures\": %d, \"beams\": %d, "
               "\"tokens\": %d, \"threads\": %d",
               alone ? "gain" : way->name, search, b->captions, beams, b->tokens, b->threads);
        if (alone)
            printf(", \"decoder_ratio\": %.3f, \"captions_ratio\": %.3f",
                   ratio_of(way->decoder_rate, alone->decoder_rate), ratio_of(way->caption_rate, alone->caption_rate));
        else
            printf(", \"median_ms\": %.1f, \"min_ms\": %.1f, \"max_ms\": %.1f, \"decoding_ms\": %.1f, "
                   "\"decoding_min_ms\": %.1f, \"decoding_max_ms\": %.1f, \"decoder_tokens_per_s\": %.2f, "
                   "\"captions_per_s\": %.3f",
                   whole.median * 1e3, whole.min * 1e3, whole.max * 1e3, decoding.median * 1e3, decoding.min * 1e3,
                   decoding.max * 1e3, way->decoder_rate, way->caption_rate);
    } else if (alone) {
        printf("%-13s gain     %-7s decoder tokens/s %.2fx, captions/s %.2fx (batched over alone)\n", "captions",
               search, ratio_of(way->decoder_rate, alone->decoder_rate), ratio_of(way->caption_rate, alone->caption_rate));
    } else {
        printf("%-13s %-8s %-7s %8.0f ms (%.0f-%.0f), decoding %.0f ms (%.0f-%.0f): %7.1f decoder tokens/s, "
               "%.3f captions/s\n",
               "captions", way->name, search, whole.median * 1e3, whole.min * 1e3, whole.max * 1e3,
               decoding.median * 1e3, decoding.min * 1e3, decoding.max * 1e3, way->decoder_rate, way->caption_rate);
    }
    if (b->profile && !alone) {
        double counted = 0;
        printf(b->options.json ? ", \"profile\": {" : "%13s profile:", "");
        for (int k = 0; k < BENCH_PROFILE_KINDS; k++) {
            double share = ratio_of(way->profiled[k], way->elapsed);
            if (k < BENCH_PROFILE_KINDS - 1) counted += share;
            printf(b->options.json ? "\"%s\": %.3f, " : " %s %.0f%%", bench_profile_names[k],
                   b->options.json ? share : 100 * share);
        }
        printf(b->options.json ? "\"other\": %.3f}" : " other %.0f%%\n", b->options.json ? 1 - counted : 100 * (1 - counted));
    }
    if (b->options.json) printf("}\n");
    fflush(stdout);
}

/* --captions N: continuous batching against one picture at a time, greedy and 3 beams, the two ways in turn
 * first in each run. Decoder tokens per second: N x --tokens over the seconds the library spent decoding
 * (steps and search; profile_stop_decoding), the vision tower and the image's keys and values left out. */
static void time_caption_batching(bench *b, glimpse_context *ctx, const uint8_t *png, size_t png_size) {
    int count = b->captions;
    glimpse_image **images = calloc((size_t)count, sizeof *images);
    glimpse_caption *captions = calloc((size_t)count, sizeof *captions);
    double *times = calloc(4 * (size_t)b->runs, sizeof *times);
    if (!images || !captions || !times) check(GLIMPSE_STATUS_OUT_OF_MEMORY);
    for (int i = 0; i < count; i++) check(glimpse_image_load_memory(png, png_size, NULL, &images[i]));
    if (!b->profile) bench_profile_start(); /* (the decoding counter; --profile started it already) */
    for (int beams = 1; beams <= 3; beams += 2) {
        caption_way ways[2] = {{.name = "batched", .batch_rows = 0, .whole = times, .decoding = times + b->runs},
                               {.name = "alone", .batch_rows = 1, .whole = times + 2 * b->runs,
                                .decoding = times + 3 * b->runs}};
        int warm_tokens = b->tokens;
        b->tokens = 2; /* warm: the states at their size, the weights in the page cache */
        time_caption_call(b, &ways[0], 0, ctx, images, count < 4 ? count : 4, beams, captions);
        b->tokens = warm_tokens;
        memset(ways[0].profiled, 0, sizeof ways[0].profiled), ways[0].elapsed = 0;
        for (int r = 0; r < b->runs; r++)
            for (int w = 0; w < 2; w++) time_caption_call(b, &ways[(w + r) % 2], r, ctx, images, count, beams, captions);
        timing whole[2], decoding[2];
        for (int w = 0; w < 2; w++) {
            caption_way *way = &ways[w];
            whole[w] = summarize(way->whole, b->runs), decoding[w] = summarize(way->decoding, b->runs);
            way->decoder_rate = ratio_of((double)count * b->tokens, decoding[w].median);
            way->caption_rate = count / whole[w].median;
            report_captions(b, beams, whole[w], decoding[w], way, NULL);
        }
        report_captions(b, beams, whole[0], decoding[0], &ways[0], &ways[1]);
    }
    for (int i = 0; i < count; i++) glimpse_image_free(images[i]);
    free(images), free(captions), free(times);
}

/* BLIP captioning: cross_kv, decoder steps, whole captions */
static void time_caption_stages(bench *b, glimpse_context *ctx, glimpse_image *const *images) {
    bench_bert *decoder;
    double flops;
    check(bench_bert_create(ctx, 3, BENCH_BERT_LENGTH, &decoder));
    check(bench_cross_kv(decoder, &flops)); /* warm */
    time_cross_kv(b, decoder);
    time_decoder_steps(b, decoder);
    bench_bert_free(decoder);
    time_captions(b, ctx, images, NULL);
}

/* The bytes of weights a decoding step reads (its bound is them over the read bandwidth). */
static void report_step_bytes(const bench *b, double bytes) {
    if (b->options.json)
        printf("{\"stage\": \"decoder_step_bytes\", \"threads\": %d, \"bytes\": %.0f}\n", b->threads, bytes);
    else
        printf("%-13s %-22s %10.1f MB of weights read per step\n", "decoder_step", "", bytes / 1e6);
}

/* BLIP-2: the Q-Former (once per image), the time to the first token (vision, Q-Former and the language
 * model's pass over the query vectors and an 11-token prompt, as a question's), the decoder steps (greedy and 3
 * beams, at positions after that prefix) with the bytes of weights a step reads, and whole captions. */
static void time_blip2_stages(bench *b, glimpse_context *ctx, glimpse_image *const *images) {
    double flops, vision_flops, prefill_flops;
    const size_t prompt = 11;
    check(bench_blip2_qformer(ctx, 3, &flops)); /* warm, and the states */
    for (int r = 0; r < b->runs; r++) {
        double start = cli_now();
        check(bench_blip2_qformer(ctx, 3, &flops));
        b->times[r] = cli_now() - start;
    }
    report(b, "qformer", "once per image", summarize(b->times, b->runs), flops, false);
    for (int r = 0; r < b->runs; r++) {
        double start = cli_now();
        bench_vision(ctx, 1, &vision_flops, NULL);
        check(bench_blip2_qformer(ctx, 3, &flops));
        check(bench_blip2_prefill(ctx, prompt, &prefill_flops));
        b->times[r] = cli_now() - start;
    }
    report(b, "first_token", "vision+Q-Former+prompt", summarize(b->times, b->runs),
           vision_flops + flops + prefill_flops, false);
    int steps = b->runs > STEP_RUNS ? b->runs : STEP_RUNS;
    double step_times[BENCH_MAX_RUNS];
    const int positions[] = {1, 10, 20};
    for (size_t p = 0; p < sizeof positions / sizeof positions[0]; p++)
        for (int sequences = 1; sequences <= 3; sequences += 2) {
            for (int r = 0; r < steps; r++) {
                double start = cli_now();
                check(bench_blip2_step(ctx, prompt, (size_t)positions[p], (size_t)sequences, &flops));
                step_times[r] = cli_now() - start;
            }
            char detail[64];
            snprintf(detail, sizeof detail, "%s, position %d", sequences == 1 ? "greedy" : "3 beams", positions[p]);
            report(b, "decoder_step", detail, summarize(step_times, steps), flops, false);
        }
    report_step_bytes(b, bench_blip2_step_bytes(ctx));
    time_captions(b, ctx, images, NULL);
}

/* A family with parts of its own (LLaVA): the image side of one picture; the prompt (the picture's rows and 32
 * more) read at once; one decoding step after 16 positions and after growing lengths from the prompt's, with the
 * bytes of weights a step reads (its bound is them over the read bandwidth); whole captions. */
static void time_family_stages(bench *b, glimpse_context *ctx, glimpse_image *const *images,
                               const glimpse_model *model) {
    double flops;
    check(bench_family_image(ctx, images, 1, &flops)); /* warm */
    for (int r = 0; r < b->runs; r++) {
        double start = cli_now();
        check(bench_family_image(ctx, images, 1, &flops));
        b->times[r] = cli_now() - start;
    }
    report(b, "image", "tower and projector", summarize(b->times, b->runs), flops, false);
    size_t prompt = bench_family_image_rows(model) + 32;
    check(bench_family_decode(ctx, 0, prompt, &flops)); /* warm, and the state */
    for (int r = 0; r < b->runs; r++) {
        double start = cli_now();
        check(bench_family_decode(ctx, 0, prompt, &flops));
        b->times[r] = cli_now() - start;
    }
    char detail[64];
    snprintf(detail, sizeof detail, "%zu positions", prompt);
    report(b, "prompt", detail, summarize(b->times, b->runs), flops, false);
    int steps = b->runs > STEP_RUNS ? b->runs : STEP_RUNS;
    double step_times[BENCH_MAX_RUNS];
    /* a short cache first (the weights' share alone: llama-bench's decoding starts from an empty cache), then after
     * the prompt and further on, where reading the cache adds up */
    const size_t positions[] = {16, prompt, prompt + 256, prompt + 1024};
    for (size_t p = 0; p < sizeof positions / sizeof positions[0]; p++) {
        glimpse_status status = GLIMPSE_STATUS_OK;
        for (int r = 0; r < steps && !status; r++) {
            double start = cli_now();
            status = bench_family_decode(ctx, positions[p], 1, &flops);
            step_times[r] = cli_now() - start;
        }
        if (status) break; /* past the model's positions */
        snprintf(detail, sizeof detail, "greedy, position %zu", positions[p]);
        report(b, "decoder_step", detail, summarize(step_times, steps), flops, false);
    }
    report_step_bytes(b, bench_family_step_bytes(model));
    time_captions(b, ctx, images, model);
}

/* BLIP retrieval: one (image, text) pair; the image's share (vision, cross
 * keys and values) is paid once per image */
static void time_itm_stages(bench *b, glimpse_context *ctx, const glimpse_model *model) {
    bench_bert *encoder;
    check(bench_bert_create(ctx, 1, BENCH_BERT_LENGTH, &encoder));
    time_cross_kv(b, encoder);
    int32_t ids[BENCH_BERT_LENGTH];
    size_t count = 0;
    check(glimpse_tokenize(model, "a picture of a cat sitting on a wooden table", ids, BENCH_BERT_LENGTH, &count));
    double flops;
    for (int r = 0; r < b->runs; r++) {
        double start = cli_now();
        check(bench_itm_text(encoder, ids, count, &flops));
        b->times[r] = cli_now() - start;
    }
    char detail[64];
    snprintf(detail, sizeof detail, "per text, %zu tokens", count);
    report(b, "itm_text", detail, summarize(b->times, b->runs), flops, false);
    bench_bert_free(encoder);
}

/* Fills the new index db (made for model) with rows random unit vectors
 * (uniform on the sphere, through the index's own insert); leaves one of
 * the same kind, not stored, in row. */
static void write_random_index(const char *db, const glimpse_model *model, long rows, float *row) {
    glimpse_index *index;
    check(glimpse_index_open(db, model, &index));
    check(index_bench_fill(index, (size_t)rows, 0, 1));
    index_bench_random_row(row, glimpse_model_embedding_dim(model), 0, 1, (uint64_t)rows);
    glimpse_index_free(index);
}

/* CLIP or SigLIP with --search-rows: opening an index and loading its embeddings, a
 * text query's embedding, and its top 10 */
static void time_search(bench *b, glimpse_context *ctx, const glimpse_model *model) {
    char db[] = "/tmp/glimpse-bench-XXXXXX.db";
    int fd = mkstemps(db, 3);
    close(fd);
    unlink(db);
    size_t dim = glimpse_model_embedding_dim(model);
    float *row = malloc(dim * sizeof(float));
    if (!row) check(GLIMPSE_STATUS_OUT_OF_MEMORY);
    write_random_index(db, model, b->search_rows, row);
    glimpse_index *index;
    glimpse_search_result results[10];
    size_t found;
    double start = cli_now();
    check(glimpse_index_open(db, NULL, &index));
    check(glimpse_index_search(index, row, 10, results, &found)); /* loads the embeddings */
    char detail[64];
    snprintf(detail, sizeof detail, "%ld rows", b->search_rows);
    double once = cli_now() - start;
    report(b, "search_load", detail, (timing){once, once, once}, 0, false);
    for (int r = 0; r < b->runs; r++) {
        start = cli_now();
        check(glimpse_embed_query(ctx, "a photo of a dog on the beach", row));
        b->times[r] = cli_now() - start;
    }
    report(b, "query", "text embedding", summarize(b->times, b->runs), 0, false);
    for (int r = 0; r < b->runs; r++) {
        start = cli_now();
        check(glimpse_index_search(index, row, 10, results, &found));
        b->times[r] = cli_now() - start;
    }
    report(b, "search", detail, summarize(b->times, b->runs), 2.0 * b->search_rows * dim, false);
    glimpse_index_free(index);
    free(row);
    unlink(db);
}

/* The stages of the families built from the shared parts: the towers, then each kind of decoder or head. */
static void time_shared_stages(bench *b, glimpse_context *ctx, glimpse_image *const *images, glimpse_model *model,
                               const glimpse_model_info *info) {
    if (bench_has_vision(model)) time_vision(b, ctx, images, model);
    if (info->embedding_dim && info->text_layers) time_text(b, ctx, info);
    unsigned stages = bench_stages_of(model);
    if (stages & BENCH_STAGE_CROSS_DECODER) time_caption_stages(b, ctx, images);
    else if (stages & BENCH_STAGE_PREFIX_DECODER) time_blip2_stages(b, ctx, images);
    else if (stages & BENCH_STAGE_CAPTIONS) time_captions(b, ctx, images, NULL);
    if (stages & BENCH_STAGE_ITM) time_itm_stages(b, ctx, model);
    if (b->search_rows && info->embedding_dim) time_search(b, ctx, model);
}

int command_bench(int argc, char **argv) {
    bench b = {0};
    if (!parse_options(&b, argc, argv)) return CLI_EXIT_OK;
    b.times = calloc((size_t)b.runs, sizeof *b.times);
    if (!b.times) check(GLIMPSE_STATUS_OUT_OF_MEMORY);
    if (b.profile) {
        bench_profile_start();
        b.profiled_since = cli_now();
    }
    time_load(&b);
    glimpse_model *model = cli_load_model(&b.options, "bench", true, true);
    glimpse_context *ctx = cli_create_context(&b.options, model);
    b.threads = bench_threads(ctx);
    report(&b, "load", NULL, summarize(b.times, b.runs), 0, false);
    glimpse_model_info info;
    check(glimpse_model_get_info(model, &info));
    size_t png_size;
    uint8_t *png = NULL;
    if (b.picture) check(file_read_all(b.picture, IMAGE_FILE_MAX_BYTES, &png, &png_size));
    else png = make_png(&png_size);
    glimpse_image *images[BENCH_MAX_BATCH];
    if (b.captions && !glimpse_model_kind_can(info.kind, GLIMPSE_CAPABILITY_CAPTION)) cli_usage_error("bench", "--captions needs a captioning model");
    if (b.captions) {
        time_caption_batching(&b, ctx, png, png_size);
    } else {
        time_decode(&b, ctx, png, png_size, images);
        if (bench_family_has(model)) time_family_stages(&b, ctx, images, model);
        else time_shared_stages(&b, ctx, images, model, &info);
        for (int i = 0; i < b.batch; i++) glimpse_image_free(images[i]);
    }
    free(png);
    free(b.times);
    glimpse_context_free(ctx);
    glimpse_model_free(model);
    return CLI_EXIT_OK;
}
