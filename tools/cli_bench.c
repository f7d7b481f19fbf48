/* cli_bench.c — `glimpse bench`: medians per stage (load, decode,
 * preprocess, vision, text, decoder step, whole caption) for a model at a
 * batch size and thread count, with the work in FLOPs and the rate reached.
 * A developer tool: it times the library's internal stages directly. */
#include <getopt.h>
#include <png.h>
#include <sqlite3.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "fusion/caption.h"
#include "tools/cli_common.h"
#include "tools/commands.h"
#include "api/model.h"
#include <math.h>

static const char bench_help[] =
    "Usage: glimpse bench -m MODEL [--batch B] [--threads T] [--runs N] [--tokens N] [--json]\n"
    "Times each stage and prints its median over N runs (default 5) with the work\n"
    "done (GFLOP) and the rate reached (GFLOP/s). Stages: load, decode (a 640x480 PNG),\n"
    "preprocess, vision, text (CLIP, 77 tokens), decoder_step (BLIP, one token at growing\n"
    "positions; the median of at least 21 steps), caption (BLIP, N tokens, default 20,\n"
    "greedy and 3 beams). CLIP's vision and text stages run as its embeddings do (the\n"
    "last layer for the pooled token only); BLIP's vision stage keeps every token.\n"
    "Batch stages (decode, preprocess, vision, text) report time per image or text.\n"
    "With --search-rows N (CLIP), also an index of N random embeddings: opening it and\n"
    "loading its embeddings (search_load), a text query's embedding (query) and its top\n"
    "10 (search).\n"
    "JSON: one line per stage: {\"stage\": S, \"batch\": B, \"threads\": T, \"median_ms\": M,\n"
    "\"gflops\": G, ...} where gflops is the rate reached.\n";

/* Decoder steps timed for each median, at least (--runs when larger). */
#define STEP_RUNS 21

typedef struct bench {
    cli_options options;
    int batch, runs, threads;
} bench;

static int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *values, int n) {
    qsort(values, (size_t)n, sizeof *values, compare_doubles);
    return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

/* Prints one stage; per_item divides the time (and work) of a batch. */
static void report(const bench *b, const char *stage, const char *detail, double seconds, double flops, int per_item) {
    double ms = seconds * 1e3 / (per_item ? b->batch : 1), work = flops / (per_item ? b->batch : 1);
    double rate = seconds > 0 && flops > 0 ? flops / seconds / 1e9 : 0;
    if (b->options.json) {
        printf("{\"stage\": \"%s\", \"batch\": %d, \"threads\": %d, \"median_ms\": %.3f, \"gflops\": %.1f, \"gflop\": %.3f",
               stage, b->batch, b->threads, ms, rate, work / 1e9);
        if (detail) printf(", \"detail\": \"%s\"", detail);
        printf("}\n");
    } else {
        printf("%-13s %-22s %10.2f ms %10.2f GFLOP %8.1f GFLOP/s\n", stage, detail ? detail : "", ms, work / 1e9, rate);
    }
    fflush(stdout);
}

/* An encoded 640x480 PNG of a smooth pattern, to time decoding. */
static void write_png_bytes(png_structp png, png_bytep data, png_size_t length) {
    uint8_t **buffer = png_get_io_ptr(png);
    size_t *size = (size_t *)(buffer + 1);
    *buffer = realloc(*buffer, *size + length);
    memcpy(*buffer + *size, data, length);
    *size += length;
}
static void flush_png(png_structp png) { (void)png; }

static uint8_t *make_png(size_t *size) {
    struct {
        uint8_t *bytes;
        size_t size;
    } out = {NULL, 0};
    uint8_t row[640 * 3];
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png_create_info_struct(png);
    png_set_write_fn(png, &out, write_png_bytes, flush_png);
    png_set_IHDR(png, info, 640, 480, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
                 PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    for (int y = 0; y < 480; y++) {
        for (int x = 0; x < 640; x++) {
            row[3 * x] = (uint8_t)(x * 255 / 639);
            row[3 * x + 1] = (uint8_t)(y * 255 / 479);
            row[3 * x + 2] = (uint8_t)((x * y) % 251);
        }
        png_write_row(png, row);
    }
    png_write_end(png, info);
    png_destroy_write_struct(&png, &info);
    *size = out.size;
    return out.bytes;
}

/* FLOPs of `layers` encoder layers over t tokens; with `pooled`, the last
 * layer makes keys and values for every token and the rest for one. */
static double encoder_flops(double layers, double t, double h, double inter, int pooled) {
    double layer = 2 * t * (4 * h * h + 2 * h * inter) + 4 * t * t * h;
    if (!pooled) return layers * layer;
    return (layers - 1) * layer + 2 * t * 2 * h * h + 2 * (2 * h * h + 2 * h * inter) + 4 * t * h;
}

static double vision_flops(const vit_model *v, int batch, int pooled) {
    double h = v->config.hidden_size, t = (double)v->tokens;
    double patch = 3.0 * v->config.patch_size * v->config.patch_size;
    double layers = encoder_flops(v->config.layers, t, h, v->config.intermediate_size, pooled);
    return batch * (layers + 2 * (t - 1) * patch * h);
}

static double text_flops(const clip_text_model *m, int batch, double t) {
    return batch * encoder_flops(m->config.layers, t, m->config.hidden_size, m->config.intermediate_size, 1);
}

static double decoder_step_flops(const bert_model *m, double sequences, double cached, double image_tokens) {
    double h = m->config.hidden_size, inter = m->config.intermediate_size, vocab = m->config.vocab_size;
    double per_layer = 2 * (6 * h * h + 2 * h * inter) + 4 * h * (cached + 1) + 4 * h * image_tokens;
    return sequences * (per_layer * m->config.layers + 2 * h * h + 2 * h * vocab);
}

int command_bench(int argc, char **argv) {
    bench b = {0};
    cli_options_init(&b.options);
    b.batch = 1;
    b.runs = 5;
    int tokens = 20;
    long search_rows = 0;
    static const struct option long_options[] = {CLI_COMMON_LONG_OPTIONS,
                                                 {"batch", required_argument, NULL, 'b'},
                                                 {"runs", required_argument, NULL, 'r'},
                                                 {"tokens", required_argument, NULL, 'n'},
                                                 {"search-rows", required_argument, NULL, 's'},
                                                 {NULL, 0, NULL, 0}};
    int code;
    while ((code = getopt_long(argc, argv, "m:", long_options, NULL)) != -1) {
        if (cli_common_option(&b.options, code, optarg, "bench")) continue;
        switch (code) {
        case 'b': b.batch = (int)cli_parse_long("bench", "--batch", optarg, 1, CONTEXT_IMAGE_BATCH); break;
        case 'r': b.runs = (int)cli_parse_long("bench", "--runs", optarg, 1, 1000); break;
        case 'n': tokens = (int)cli_parse_long("bench", "--tokens", optarg, 1, 400); break;
        case 's': search_rows = cli_parse_long("bench", "--search-rows", optarg, 1, 100000000); break;
        case CLI_OPT_HELP: printf("%s\n%s", bench_help, cli_common_help); return CLI_EXIT_OK;
        default: cli_usage_error("bench", "unknown option");
        }
    }
    if (optind < argc) cli_usage_error("bench", "unexpected argument '%s'", argv[optind]);
    double *times = calloc((size_t)b.runs, sizeof *times);
    /* load: map the weights and build the model, again and again */
    for (int r = 0; r < b.runs; r++) {
        double start = cli_now();
        glimpse_model *model = cli_load_model(&b.options, "bench", 1, 1);
        times[r] = cli_now() - start;
        glimpse_model_free(model);
    }
    glimpse_model *model = cli_load_model(&b.options, "bench", 1, 1);
    glimpse_context *ctx = cli_create_context(&b.options, model);
    b.threads = pool_threads(ctx->threads);
    report(&b, "load", NULL, median(times, b.runs), 0, 0);

    /* decode and preprocess */
    size_t png_size;
    uint8_t *png = make_png(&png_size);
    glimpse_image *images[CONTEXT_IMAGE_BATCH];
    for (int r = 0; r < b.runs; r++) {
        double start = cli_now();
        for (int i = 0; i < b.batch; i++) {
            if (r) glimpse_image_free(images[i]);
            if (glimpse_image_load_memory(png, png_size, NULL, &images[i])) {
                cli_error("%s", glimpse_last_error());
                return CLI_EXIT_FAILURE;
            }
        }
        times[r] = cli_now() - start;
    }
    report(&b, "decode", "640x480 PNG", median(times, b.runs), 0, 1);
    if (model->has_vision) {
        for (int r = 0; r < b.runs; r++) {
            double start = cli_now();
            context_preprocess(ctx, images, (size_t)b.batch, 0);
            times[r] = cli_now() - start;
        }
        report(&b, "preprocess", NULL, median(times, b.runs), 0, 1);
        /* as the library runs it: CLIP embeddings need the class tokens' last layer alone, captions every token's */
        int clip = model->kind == GLIMPSE_MODEL_KIND_CLIP;
        encoder_output output = clip ? ENCODER_OUTPUT_POOLED_ROWS : ENCODER_OUTPUT_ALL_ROWS;
        vit_forward(&model->vision, ctx->vision, ctx->pixel_values, (size_t)b.batch, output, ctx->threads); /* warm */
        for (int r = 0; r < b.runs; r++) {
            double start = cli_now();
            vit_forward(&model->vision, ctx->vision, ctx->pixel_values, (size_t)b.batch, output, ctx->threads);
            times[r] = cli_now() - start;
        }
        report(&b, "vision", clip ? "class tokens' last layer" : NULL, median(times, b.runs),
               vision_flops(&model->vision, b.batch, clip), 1);
    }
    if (model->kind == GLIMPSE_MODEL_KIND_CLIP && model->has_text) {
        size_t positions = (size_t)model->text.config.max_positions;
        int32_t *ids = malloc((size_t)b.batch * positions * sizeof *ids);
        size_t lengths[CONTEXT_IMAGE_BATCH];
        /* full-length texts as the tokenizer makes them: start token, words, end token (pooled) */
        size_t words = model->text.config.vocab_size > 2 ? (size_t)model->text.config.vocab_size - 2 : 1;
        for (int s = 0; s < b.batch; s++) {
            int32_t *text = ids + (size_t)s * positions;
            lengths[s] = positions;
            for (size_t t = 0; t < positions; t++) text[t] = (int32_t)((t * 7919 + (size_t)s) % words);
            text[0] = (int32_t)words, text[positions - 1] = model->text.config.vocab_size - 1;
        }
        clip_text_forward(&model->text, ctx->text, ids, lengths, (size_t)b.batch, ENCODER_OUTPUT_POOLED_ROWS,
                          ctx->threads);
        for (int r = 0; r < b.runs; r++) {
            double start = cli_now();
            clip_text_forward(&model->text, ctx->text, ids, lengths, (size_t)b.batch, ENCODER_OUTPUT_POOLED_ROWS,
                              ctx->threads);
            times[r] = cli_now() - start;
        }
        report(&b, "text", "77 tokens", median(times, b.runs), text_flops(&model->text, b.batch, (double)positions), 1);
        free(ids);
    }
    if (model->kind == GLIMPSE_MODEL_KIND_BLIP_CAPTION) {
        const bert_model *decoder = &model->text_decoder;
        size_t image_tokens = model->vision.tokens, max_length = 64;
        vit_post_norm_all(&model->vision, ctx->vision, 0, ctx->image_tokens);
        bert_state *state;
        if (bert_state_create(decoder, 3, max_length, max_length, image_tokens, &state)) {
            cli_error("%s", glimpse_last_error());
            return CLI_EXIT_FAILURE;
        }
        bert_set_image(decoder, state, ctx->image_tokens, image_tokens, ctx->threads);
        for (int r = 0; r < b.runs; r++) {
            double start = cli_now();
            bert_set_image(decoder, state, ctx->image_tokens, image_tokens, ctx->threads);
            times[r] = cli_now() - start;
        }
        double h = decoder->config.hidden_size, e = decoder->config.encoder_hidden_size;
        report(&b, "cross_kv", "once per image", median(times, b.runs),
               decoder->config.layers * 2 * 2 * (double)image_tokens * e * h, 0);
        /* one step at growing positions: the cost grows only by the attention over the cache. A step
         * is short beside this machine's swings, so each median is of a caption's worth of steps or more. */
        int32_t ids[3] = {model->start_id, model->start_id, model->start_id};
        const int positions[] = {1, 10, 20, 40, 60};
        int steps = b.runs > STEP_RUNS ? b.runs : STEP_RUNS;
        double step_times[1000]; /* --runs is at most 1000 */
        for (size_t p = 0; p < sizeof positions / sizeof positions[0]; p++)
            for (int sequences = 1; sequences <= 3; sequences += 2) {
                for (int r = 0; r < steps; r++) {
                    state->length = (size_t)positions[p] - 1; /* cache contents do not matter for timing */
                    double start = cli_now();
                    bert_decode_step(decoder, state, ids, (size_t)sequences, 1, ctx->threads);
                    step_times[r] = cli_now() - start;
                }
                char detail[64];
                snprintf(detail, sizeof detail, "%s, position %d", sequences == 1 ? "greedy" : "3 beams", positions[p]);
                report(&b, "decoder_step", detail, median(step_times, steps),
                       decoder_step_flops(decoder, sequences, positions[p] - 1, (double)image_tokens), 0);
            }
        bert_state_free(state);
        for (int beams = 1; beams <= 3; beams += 2) {
            glimpse_caption_params params = glimpse_caption_default_params();
            params.beams = beams;
            params.max_tokens = params.min_tokens = tokens;
            for (int r = 0; r < b.runs; r++) {
                glimpse_caption caption;
                double start = cli_now();
                if (glimpse_caption_images(ctx, images, 1, &params, &caption)) {
                    cli_error("%s", glimpse_last_error());
                    return CLI_EXIT_FAILURE;
                }
                times[r] = cli_now() - start;
                glimpse_caption_free(&caption);
            }
            char detail[64];
            snprintf(detail, sizeof detail, "%d tokens, %s", tokens, beams == 1 ? "greedy" : "3 beams");
            report(&b, "caption", detail, median(times, b.runs), 0, 0);
        }
    }
    if (model->kind == GLIMPSE_MODEL_KIND_BLIP_RETRIEVAL) {
        /* one (image, text) pair: the image's share (vision, cross keys/values) is paid once per image */
        const bert_model *encoder = &model->text_encoder;
        size_t image_tokens = model->vision.tokens;
        vit_post_norm_all(&model->vision, ctx->vision, 0, ctx->image_tokens);
        bert_state *state;
        if (bert_state_create(encoder, 1, 64, 64, image_tokens, &state)) {
            cli_error("%s", glimpse_last_error());
            return CLI_EXIT_FAILURE;
        }
        for (int r = 0; r < b.runs; r++) {
            double start = cli_now();
            bert_set_image(encoder, state, ctx->image_tokens, image_tokens, ctx->threads);
            times[r] = cli_now() - start;
        }
        double h = encoder->config.hidden_size, e = encoder->config.encoder_hidden_size;
        report(&b, "cross_kv", "once per image", median(times, b.runs),
               encoder->config.layers * 2 * 2 * (double)image_tokens * e * h, 0);
        int32_t ids[64];
        size_t count = 0;
        if (glimpse_tokenize(model, "a picture of a cat sitting on a wooden table", ids, 64, &count)) {
            cli_error("%s", glimpse_last_error());
            return CLI_EXIT_FAILURE;
        }
        for (int r = 0; r < b.runs; r++) {
            double start = cli_now();
            bert_encode(encoder, state, ids, count, 1, ctx->threads);
            itm_match_probability(&model->itm, state->x, NULL);
            times[r] = cli_now() - start;
        }
        double inter = encoder->config.intermediate_size, t = (double)count;
        double flops = encoder->config.layers * (2 * t * (6 * h * h + 2 * h * inter) + 4 * t * t * h + 4 * t * h * image_tokens);
        char detail[64];
        snprintf(detail, sizeof detail, "per text, %zu tokens", count);
        report(&b, "itm_text", detail, median(times, b.runs), flops, 0);
        bert_state_free(state);
    }
    if (search_rows && model->kind == GLIMPSE_MODEL_KIND_CLIP) {
        /* an index of search_rows random unit vectors, written straight into SQLite */
        char db[] = "/tmp/glimpse-bench-XXXXXX.db";
        int fd = mkstemps(db, 3);
        close(fd);
        unlink(db);
        glimpse_index *index;
        if (glimpse_index_open(db, model, &index)) {
            cli_error("%s", glimpse_last_error());
            return CLI_EXIT_FAILURE;
        }
        glimpse_index_free(index);
        size_t dim = glimpse_model_embedding_dim(model);
        sqlite3 *handle;
        sqlite3_stmt *insert;
        sqlite3_open(db, &handle);
        sqlite3_exec(handle, "BEGIN", NULL, NULL, NULL);
        sqlite3_prepare_v2(handle, "INSERT INTO images(path, size, mtime_ns, hash, embedding) VALUES (?, 1, 1, ?, ?)",
                           -1, &insert, NULL);
        float *row = malloc(dim * sizeof(float));
        uint64_t random = 88172645463325252ull;
        for (long r = 0; r < search_rows; r++) {
            double norm = 0;
            for (size_t d = 0; d < dim; d++) {
                random ^= random << 13, random ^= random >> 7, random ^= random << 17;
                row[d] = (float)((random >> 11) / 9007199254740992.0 - 0.5);
                norm += (double)row[d] * row[d];
            }
            for (size_t d = 0; d < dim; d++) row[d] = (float)(row[d] / sqrt(norm));
            char path[64];
            snprintf(path, sizeof path, "/photos/%08ld.jpg", r);
            sqlite3_bind_text(insert, 1, path, -1, SQLITE_TRANSIENT);
            sqlite3_bind_int64(insert, 2, r);
            sqlite3_bind_blob(insert, 3, row, (int)(dim * sizeof(float)), SQLITE_STATIC);
            sqlite3_step(insert);
            sqlite3_reset(insert);
        }
        sqlite3_finalize(insert);
        sqlite3_exec(handle, "COMMIT", NULL, NULL, NULL);
        sqlite3_exec(handle, "PRAGMA wal_checkpoint(TRUNCATE)", NULL, NULL, NULL); /* as glimpse index leaves it */
        sqlite3_close(handle);
        glimpse_search_result results[10];
        size_t found;
        double start = cli_now();
        glimpse_index_open(db, NULL, &index);
        glimpse_index_search(index, row, 10, results, &found); /* loads the embeddings */
        char detail[64];
        snprintf(detail, sizeof detail, "%ld rows", search_rows);
        report(&b, "search_load", detail, cli_now() - start, 0, 0);
        for (int r = 0; r < b.runs; r++) {
            start = cli_now();
            glimpse_embed_query(ctx, "a photo of a dog on the beach", row);
            times[r] = cli_now() - start;
        }
        report(&b, "query", "text embedding", median(times, b.runs), 0, 0);
        for (int r = 0; r < b.runs; r++) {
            start = cli_now();
            glimpse_index_search(index, row, 10, results, &found);
            times[r] = cli_now() - start;
        }
        report(&b, "search", detail, median(times, b.runs), 2.0 * search_rows * dim, 0);
        glimpse_index_free(index);
        free(row);
        unlink(db);
    }
    for (int i = 0; i < b.batch; i++) glimpse_image_free(images[i]);
    free(png);
    free(times);
    glimpse_context_free(ctx);
    glimpse_model_free(model);
    return CLI_EXIT_OK;
}
