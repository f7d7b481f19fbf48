/* cli_search.c — `glimpse index` (build or refresh a search index of a
 * photo collection) and `glimpse search` (query it with texts, images or
 * combinations). */
#include <getopt.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "tools/cli_common.h"
#include "tools/commands.h"

/* Both commands take the common options and --db FILE. */
static const struct option db_long_options[] = {CLI_COMMON_LONG_OPTIONS, {"db", required_argument, NULL, 'd'},
                                                {NULL, 0, NULL, 0}};

/* ----------------------------------------------------------------- index */

static const struct option index_long_options[] = {CLI_COMMON_LONG_OPTIONS, {"db", required_argument, NULL, 'd'},
                                                   {"check", no_argument, NULL, 'c'}, {NULL, 0, NULL, 0}};

static const char index_help[] =
    "Usage: glimpse index -m MODEL --db FILE PATH...\n"
    "       glimpse index --check --db FILE\n"
    "Builds or refreshes a search index of image files: folders are walked\n"
    "recursively for JPEG, PNG, WebP, TIFF, HEIC, AVIF, BMP, GIF, TGA and PNM files. Each\n"
    "file's path, size, modification time, content hash and CLIP or SigLIP embedding are\n"
    "stored in FILE (SQLite), with the model's identity: an index takes one model only.\n"
    "Running it again embeds only new or changed files, recognises moved or renamed\n"
    "files by their content without embedding them again, and forgets deleted files.\n"
    "Work is committed in small batches: an interrupted run loses nothing already\n"
    "committed, and the next run carries on. Broken files are reported and skipped.\n"
    "Only the paths given are judged: files gone from other folders stay in the\n"
    "index. A path that is missing or unreadable is reported and its entries kept;\n"
    "the others are indexed and the exit status is 1. A stored file that no longer\n"
    "reads or decodes is reported, left out of search results and tried again by\n"
    "the next run. The index records the model's precision (--int8 or not) and\n"
    "refuses the other; a model folder without preprocessor_config.json is refused.\n"
    "      --db FILE        the index database (created if missing)\n"
    "      --check          check FILE whole (SQLite's integrity check and every\n"
    "                       row's checksum) and report; exit status 1 if damaged\n"
    "A summary line on stdout counts added, updated, moved, removed, unchanged and\n"
    "failed files (with --json, one object).\n";

typedef struct index_progress {
    cli_progress bar;
    const cli_options *options;
} index_progress;

static bool on_progress(void *user, size_t done, size_t total) {
    index_progress *p = user;
    if (p->bar.total != total) cli_progress_start(&p->bar, p->options, total, "images");
    cli_progress_step(&p->bar, done);
    return false;
}

static void on_failure(void *user, const char *path, const char *reason) {
    index_progress *p = user;
    cli_progress_end(&p->bar);
    (void)path; /* the reason names the file */
    cli_error("%s", reason);
}

static void on_root_failure(void *user, const char *path, glimpse_status status, const char *reason) {
    (void)user, (void)status;
    cli_error("%s: %s; not indexed, its entries in the index are kept", path, reason);
}

/* `glimpse index --check`: the full check of the index at db, reported. */
static int check_index(const char *db) {
    glimpse_index *index;
    bool checksummed = false;
    glimpse_status status = glimpse_index_open(db, NULL, &index);
    if (!status) status = glimpse_index_verify(index, &checksummed);
    if (status) {
        cli_error("%s", glimpse_last_error());
        return CLI_EXIT_FAILURE;
    }
    printf("%s: %zu images; structure %s\n", db, glimpse_index_count(index),
           checksummed ? "and every row's checksum are intact"
                       : "intact; made before row checksums, which the next glimpse index adds");
    glimpse_index_free(index);
    return CLI_EXIT_OK;
}

int command_index(int argc, char **argv) {
    cli_options options;
    cli_options_init(&options);
    const char *db = NULL;
    bool check = false;
    int code;
    while ((code = getopt_long(argc, argv, "m:", index_long_options, NULL)) != -1) {
        if (cli_common_option(&options, code, optarg, "index")) continue;
        switch (code) {
        case 'd': db = optarg; break;
        case 'c': check = true; break;
        case CLI_OPT_HELP: printf("%s\n%s", index_help, cli_common_help); return CLI_EXIT_OK;
        default: cli_usage_error("index", "unknown option");
        }
    }
    if (!db) cli_usage_error("index", "no index file: give --db FILE");
    if (check && optind < argc) cli_usage_error("index", "--check takes no paths");
    if (check) return check_index(db);
    if (optind >= argc) cli_usage_error("index", "no files or folders to index");
    glimpse_model *model = cli_load_model(&options, "index", true, false);
    glimpse_index *index;
    if (glimpse_index_open(db, model, &index) != GLIMPSE_STATUS_OK) {
        cli_error("%s", glimpse_last_error());
        return CLI_EXIT_FAILURE;
    }
    glimpse_context *ctx = cli_create_context(&options, model);
    index_progress progress = {.bar = {0}, .options = &options};
    glimpse_index_params params = {
        .on_progress = on_progress,
        .on_failure = on_failure,
        .user = &progress,
        .max_pixels = options.max_pixels,
        .on_root_failure = on_root_failure};
    glimpse_index_summary summary;
    double started = cli_now();
    glimpse_status status = glimpse_index_update(index, ctx, (const char *const *)(argv + optind),
                                                 (size_t)(argc - optind), &params, &summary);
    cli_progress_end(&progress.bar);
    if (status) cli_error("%s", glimpse_last_error());
    double seconds = cli_now() - started;
    if (options.json)
        printf("{\"added\": %zu, \"updated\": %zu, \"moved\": %zu, \"removed\": %zu, \"unchanged\": %zu, "
               "\"failed\": %zu, \"paths_failed\": %zu, \"indexed\": %zu, \"seconds\": %.3f}\n",
               summary.added, summary.updated, summary.moved, summary.removed, summary.unchanged, summary.failed,
               summary.roots_failed, glimpse_index_count(index), seconds);
    else
        printf("added %zu, updated %zu, moved %zu, removed %zu, unchanged %zu, failed %zu; %zu images in the index "
               "(%.1f s)%s\n",
               summary.added, summary.updated, summary.moved, summary.removed, summary.unchanged, summary.failed,
               glimpse_index_count(index), seconds,
               summary.roots_failed ? "; some paths were missing or unreadable (above)" : "");
    glimpse_context_free(ctx);
    glimpse_index_free(index);
    glimpse_model_free(model);
    return status || summary.failed || summary.roots_failed ? CLI_EXIT_FAILURE : CLI_EXIT_OK;
}

/* ---------------------------------------------------------------- search */

static const char search_help[] =
    "Usage: glimpse search --db FILE [-m MODEL] [-k N] [--json] QUERY...\n"
    "Finds the indexed images closest to each query, best first.\n"
    "A query is a text, an image file, or a combination: parts joined by \" + \" and\n"
    "\" - \", each optionally weighted: \"beach + sunset - people\", \"2:sunset + beach\",\n"
    "\"@photos/dog.jpg + snow\", \"@~/Pictures/dog.jpg\". The parts' normalised\n"
    "embeddings are added and subtracted. A part written @PATH is that image file\n"
    "(~ is your home folder; a file that does not exist is an error); every other\n"
    "part is a text (\"@@\" starts a text with @), and a text that looks like an\n"
    "image file name (\"dog.jpg\") is refused as a likely missing @.\n"
    "      --db FILE        the index built by glimpse index\n"
    "  -m, --model MODEL    the model (default: the one the index was built with;\n"
    "                       another model is refused)\n"
    "  -k N                 how many results per query (default 10)\n"
    "Scores are the model's logits: logit_scale x cosine, + logit_bias for SigLIP.\n"
    "JSON: {\"text\": QUERY, \"results\": [{\"image\": PATH, \"score\": S}, ...]} per query.\n";

int command_search(int argc, char **argv) {
    cli_options options;
    cli_options_init(&options);
    const char *db = NULL;
    long k = 10;
    int code;
    while ((code = getopt_long(argc, argv, "m:k:", db_long_options, NULL)) != -1) {
        if (cli_common_option(&options, code, optarg, "search")) continue;
        switch (code) {
        case 'd': db = optarg; break;
        case 'k': k = cli_parse_long("search", "-k", optarg, 1, 1L << 30); break;
        case CLI_OPT_HELP: printf("%s\n%s", search_help, cli_common_help); return CLI_EXIT_OK;
        default: cli_usage_error("search", "unknown option");
        }
    }
    if (!db) cli_usage_error("search", "no index file: give --db FILE");
    if (optind >= argc) cli_usage_error("search", "no query");
    glimpse_index *index;
    if (glimpse_index_open(db, NULL, &index) != GLIMPSE_STATUS_OK) {
        cli_error("%s", glimpse_last_error());
        return CLI_EXIT_FAILURE;
    }
    bool images = false;
    for (int i = optind; i < argc; i++) images |= glimpse_query_needs_images(argv[i]);
    if (!options.model) options.model = glimpse_index_model_path(index);
    /* the index's precision unless --int8 was asked (another is refused below) */
    if (options.precision == GLIMPSE_PRECISION_FLOAT32) options.precision = glimpse_index_precision(index);
    /* a text query needs only the text tower */
    glimpse_model *model = cli_load_model(&options, "search", images, true);
    if (glimpse_index_check_model(index, model) != GLIMPSE_STATUS_OK) { /* refuses another model */
        cli_error("%s", glimpse_last_error());
        return CLI_EXIT_FAILURE;
    }
    glimpse_context *ctx = cli_create_context(&options, model);
    size_t dim = glimpse_model_embedding_dim(model);
    float *query = cli_calloc(dim, sizeof(float));
    glimpse_search_result *results = cli_calloc((size_t)k, sizeof *results);
    const char **paths = cli_calloc((size_t)k, sizeof *paths);
    float *scores = cli_calloc((size_t)k, sizeof *scores);
    for (int i = optind; i < argc; i++) {
        size_t found = 0;
        if (glimpse_embed_query(ctx, argv[i], query) != GLIMPSE_STATUS_OK ||
            glimpse_index_search(index, query, (size_t)k, results, &found) != GLIMPSE_STATUS_OK) {
            cli_error("%s", glimpse_last_error());
            options.failures++;
            continue;
        }
        for (size_t r = 0; r < found; r++) paths[r] = results[r].path, scores[r] = results[r].score;
        cli_print_results(&options, argv[i], paths, scores, NULL, found);
    }
    free(query), free(results), free(paths), free(scores);
    glimpse_index_free(index);
    return cli_finish(&options, ctx, model);
}
