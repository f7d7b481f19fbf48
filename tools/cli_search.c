/* cli_search.c — `glimpse index` (build, refresh or manage a search index
 * of a photo collection), `glimpse search` (query it with texts, images,
 * combinations or a picture's neighbours) and `glimpse duplicates`. */
#include <cjson/cJSON.h>
#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#ifdef GLIMPSE_HAVE_FAISS
#include "tools/cli_faiss.h"
#endif
#include "tools/cli_common.h"
#include "search/walk.h"
#include "tools/cli_html.h"
#include "tools/cli_inputs.h"
#include "tools/commands.h"

/* ----------------------------------------------------------------- index */

enum {
    INDEX_OPT_STATS = CLI_OPT_FIRST_FREE,
    INDEX_OPT_LIST,
    INDEX_OPT_PRUNE,
    INDEX_OPT_REMOVE,
    INDEX_OPT_EXCLUDE,
    INDEX_OPT_IMPORT,
    INDEX_OPT_OCR,
    INDEX_OPT_OBJECTS,
    INDEX_OPT_TASK_MODEL
};

static const struct option index_long_options[] = {CLI_COMMON_LONG_OPTIONS, CLI_VIDEO_LONG_OPTIONS,
                                                   {"fast-decode", no_argument, NULL, CLI_OPT_FAST_DECODE},
                                                   {"db", required_argument, NULL, 'd'},
                                                   {"check", no_argument, NULL, 'c'},
                                                   {"stats", no_argument, NULL, INDEX_OPT_STATS},
                                                   {"list", no_argument, NULL, INDEX_OPT_LIST},
                                                   {"prune", no_argument, NULL, INDEX_OPT_PRUNE},
                                                   {"remove", required_argument, NULL, INDEX_OPT_REMOVE},
                                                   {"exclude", required_argument, NULL, INDEX_OPT_EXCLUDE},
                                                   {"import", required_argument, NULL, INDEX_OPT_IMPORT},
                                                   {"ocr", no_argument, NULL, INDEX_OPT_OCR},
                                                   {"objects", no_argument, NULL, INDEX_OPT_OBJECTS},
                                                   {"task-model", required_argument, NULL, INDEX_OPT_TASK_MODEL},
                                                   {NULL, 0, NULL, 0}};

static const char index_help[] =
    "Usage: glimpse index -m MODEL --db FILE [--exclude GLOB...] [--every SECONDS | --scenes]\n"
    "                     [--fast-decode] [--ocr] [--objects] [--task-model FLORENCE2] PATH...\n"
    "       glimpse index --db FILE --stats | --list | --check | --prune | --remove PATH...\n"
    "       glimpse index [-m MODEL] --db FILE --import DIR\n"
    "Builds or refreshes a search index of image files: folders are walked\n"
    "recursively for JPEG, PNG, WebP, TIFF, HEIC, AVIF, BMP, GIF, TGA and PNM files\n"
    "(by their extensions in any case: .jpg, .JPG, .jpeg, .jfif, .heic, .hif, ...). Each\n"
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
    "Videos (.mp4, .mov, .mkv, .webm, .avi, .mts, ... under folders; any video named)\n"
    "are indexed too: one entry per sampled frame, with its time (see --every and\n"
    "--scenes below); a video is one file for refreshing, moves, removal and\n"
    "failures (a changed video replaces all its frames). The sampling is recorded\n"
    "in the index and used again when not given; another is refused.\n"
    "Pictures are read, decoded and resized ahead of the towers, on as many threads\n"
    "as --threads.\n"
    "      --fast-decode    decode JPEGs scaled down in the DCT domain (libjpeg-turbo,\n"
    "                       the smallest 1/8 step not below the model's resize), then\n"
    "                       resize exactly; recorded in the index (a new index only;\n"
    "                       used again when not given, the other way refused).\n"
    CLI_FAST_DECODE_FIGURES
    "      --ocr            also read each picture's text with --task-model (Florence-2's\n"
    "                       <OCR>), for glimpse search --text-in\n"
    "      --objects        also find each picture's objects with --task-model\n"
    "                       (Florence-2's <OD>), for glimpse search --object\n"
    "      --task-model M   the Florence-2 model that reads them (the same one every\n"
    "                       run: the index records it). Pictures are read once: a run\n"
    "                       reads the new and changed ones, and those stored without\n"
    "                       what is asked. Video frames are not read\n"
    "      --db FILE        the index database (created if missing)\n"
    "      --exclude GLOB   leave out files and folders whose name matches GLOB\n"
    "                       (\"*.gif\", \".thumbnails\"; a GLOB with a slash matches\n"
    "                       the whole path); their entries under PATH are forgotten.\n"
    "                       Repeatable\n"
    "      --stats          what the index holds: images, failed ones, model,\n"
    "                       precision, size, and the paths indexed (present or not)\n"
    "      --list           every entry's path, and why it failed if it did\n"
    "      --check          check FILE whole (SQLite's integrity check and every\n"
    "                       row's checksum) and report; exit status 1 if damaged\n"
    "      --prune          forget the entries whose files are gone, wherever they\n"
    "                       were (an unplugged drive's too: only when asked)\n"
    "      --remove PATH    forget the entry of a file, or every entry under a\n"
    "                       folder (repeatable)\n"
    "      --import DIR     merge the embeddings python -m glimpse.dask embed wrote\n"
    "                       to DIR (manifest.json, part-NNNNN.npy and .json) without\n"
    "                       embedding again. Their model (identity and precision)\n"
    "                       must be the index's; -m defaults to the manifest's model\n"
    "                       folder. A shard absent, partial or damaged is reported and\n"
    "                       skipped whole; a picture whose file is not here with the\n"
    "                       size and time it was embedded with is reported and left\n"
    "                       out (index it with glimpse index); importing again adds\n"
    "                       nothing twice. A video's frames go in with their times;\n"
    "                       the folder's sampling must be the index's (recorded if it\n"
    "                       has none). Exit status 1 if anything was left out\n"
    "--stats, --list, --prune and --remove take the model the index records.\n"
    "A summary line on stdout counts added, updated, moved, removed, unchanged and\n"
    "failed files (with --json, one object, after an object {\"image\": PATH,\n"
    "\"error\": REASON} or {\"path\": PATH, \"error\": REASON} per failure).\n";

typedef struct index_progress {
    cli_progress bar;
    const cli_options *options;
} index_progress;

/* A failure as a JSON Lines object, {"KEY": PATH, "error": REASON}, for --json readers. */
static void print_json_error(const cli_options *options, const char *key, const char *path, const char *reason) {
    if (!options->json) return;
    printf("{\"%s\": ", key);
    json_path(stdout, path);
    printf(", \"error\": ");
    json_string(stdout, reason);
    printf("}\n");
}

/* Set by Ctrl-C (SIGINT) or SIGTERM during an update: the update stops after what it has committed. */
static volatile sig_atomic_t index_interrupted;

static void on_interrupt(int signal_number) {
    (void)signal_number;
    index_interrupted = 1;
}

/* Catches SIGINT and SIGTERM (on) or restores what was there (off, with saved). */
static void catch_interrupts(bool on, struct sigaction saved[2]) {
    static const int signals[2] = {SIGINT, SIGTERM};
    struct sigaction handler = {.sa_handler = on_interrupt};
    sigemptyset(&handler.sa_mask);
    for (int i = 0; i < 2; i++) sigaction(signals[i], on ? &handler : &saved[i], on ? &saved[i] : NULL);
}

static bool on_progress(void *user, size_t done, size_t total) {
    index_progress *p = user;
    if (p->bar.total != total) cli_progress_start(&p->bar, p->options, total, "images");
    cli_progress_step(&p->bar, done);
    return index_interrupted != 0;
}

static void on_failure(void *user, const char *path, const char *reason) {
    index_progress *p = user;
    cli_progress_end(&p->bar);
    cli_error("%s", reason); /* the reason names the file */
    print_json_error(p->options, "image", path, reason);
}

static void on_root_failure(void *user, const char *path, glimpse_status status, const char *reason) {
    index_progress *p = user;
    (void)status;
    char message[1024];
    snprintf(message, sizeof message, "%s; not indexed, its entries in the index are kept", reason);
    cli_error("%s: %s", path, message);
    print_json_error(p->options, "path", path, message);
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

/* The index at db opened read-only, or exit 1 with the reason. */
static glimpse_index *open_for_reading(const char *db) {
    glimpse_index *index;
    if (glimpse_index_open(db, NULL, &index) == GLIMPSE_STATUS_OK) return index;
    cli_error("%s", glimpse_last_error());
    exit(CLI_EXIT_FAILURE);
}

static void print_root(void *user, const char *path, size_t images, bool present) {
    cli_options *options = user; /* its failures count the roots printed */
    if (options->json) {
        printf(options->failures++ ? ", {\"path\": " : "{\"path\": ");
        json_path(stdout, path);
        printf(", \"images\": %zu, \"present\": %s}", images, present ? "true" : "false");
    } else {
        printf("  %s: %zu images%s\n", path, images, present ? "" : " (missing: glimpse index --prune forgets them)");
    }
}

/* `glimpse index --stats`. */
static int show_stats(const char *db, const cli_options *options) {
    glimpse_index *index = open_for_reading(db);
    glimpse_index_stats stats;
    if (glimpse_index_get_stats(index, &stats) != GLIMPSE_STATUS_OK) {
        cli_error("%s", glimpse_last_error());
        return CLI_EXIT_FAILURE;
    }
    const char *precision = stats.precision == GLIMPSE_PRECISION_INT8 ? "int8" : "float32";
    if (options->json) {
        printf("{\"db\": ");
        json_path(stdout, db);
        printf(", \"images\": %zu, \"failed\": %zu, \"bytes\": %llu, \"model\": ", stats.images, stats.failed,
               (unsigned long long)stats.file_bytes);
        json_path(stdout, stats.model_path ? stats.model_path : "");
        printf(", \"identity\": ");
        json_string(stdout, stats.model_identity);
        printf(", \"precision\": \"%s\", \"dim\": %zu, \"videos\": %zu, \"frames\": %zu, \"decode\": \"%s\"",
               precision, stats.dim, stats.videos, stats.frames, stats.fast_decode ? "fast" : "exact");
        if (stats.video_sampling) {
            printf(", \"video_sampling\": ");
            json_string(stdout, stats.video_sampling);
        }
        printf(", \"roots\": [");
    } else {
        double bytes = (double)stats.file_bytes;
        printf("%s: %zu images, %.1f %s\n", db, stats.images, bytes < 1e6 ? bytes / 1e3 : bytes / 1e6,
               bytes < 1e6 ? "kB" : "MB");
        if (stats.failed)
            printf("failed: %zu (files that no longer read or decode: left out of results, tried again by the next "
                   "glimpse index; --list names them)\n", stats.failed);
        if (stats.videos)
            printf("videos: %zu of them, %zu frames sampled %s\n", stats.videos, stats.frames,
                   stats.video_sampling ? stats.video_sampling : "?");
        printf("model: %s (%s), %s, %zu dimensions, %s decoding\npaths indexed:\n",
               stats.model_path ? stats.model_path : "?", stats.model_identity, precision, stats.dim,
               stats.fast_decode ? "fast (--fast-decode)" : "exact");
    }
    cli_options counter = *options;
    counter.failures = 0; /* counts the roots printed, for the commas */
    glimpse_status status = glimpse_index_list_roots(index, print_root, &counter);
    if (options->json) printf("]}\n");
    if (status) cli_error("%s", glimpse_last_error());
    glimpse_index_free(index);
    return status ? CLI_EXIT_FAILURE : CLI_EXIT_OK;
}

static void print_entry(void *user, const char *path, const char *failure) {
    const cli_options *options = user;
    if (options->json) {
        printf("{\"image\": ");
        json_path(stdout, path);
        if (failure) printf(", \"failed\": "), json_string(stdout, failure);
        printf("}\n");
    } else {
        printf(failure ? "%s  (failed: %s)\n" : "%s\n", path, failure);
    }
}

/* `glimpse index --list`. */
static int list_entries(const char *db, cli_options *options) {
    glimpse_index *index = open_for_reading(db);
    glimpse_status status = glimpse_index_list(index, print_entry, options);
    if (status) cli_error("%s", glimpse_last_error());
    glimpse_index_free(index);
    return status ? CLI_EXIT_FAILURE : CLI_EXIT_OK;
}

/* The model folder an index records, while a command uses it as -m. */
static char *recorded_model;

/* The index at db opened for changes with the model it records (text tower
 * only: nothing is embedded), at its precision. */
static glimpse_index *open_with_recorded_model(const char *db, cli_options *options, glimpse_model **model) {
    glimpse_index *index = open_for_reading(db);
    recorded_model = strdup(glimpse_index_model_path(index) ? glimpse_index_model_path(index) : "");
    if (!options->model) options->model = recorded_model;
    if (options->precision == GLIMPSE_PRECISION_FLOAT32) options->precision = glimpse_index_precision(index);
    glimpse_index_free(index);
    *model = cli_load_model(options, "index", false, true);
    if (glimpse_index_open(db, *model, &index) != GLIMPSE_STATUS_OK) {
        cli_error("%s", glimpse_last_error());
        exit(CLI_EXIT_FAILURE);
    }
    return index;
}

/* `glimpse index --prune` and `--remove PATH...`. */
static int change_index(const char *db, cli_options *options, bool prune, char **removals, size_t removal_count) {
    glimpse_model *model;
    glimpse_index *index = open_with_recorded_model(db, options, &model);
    size_t total = 0, removed = 0;
    glimpse_status status = GLIMPSE_STATUS_OK;
    for (size_t i = 0; i < removal_count && !status; i++) {
        status = glimpse_index_remove(index, removals[i], &removed);
        if (!status && !removed) cli_error("%s: no entry in %s", removals[i], db), options->failures++;
        total += removed;
    }
    if (!status && prune) status = glimpse_index_prune(index, &removed);
    if (!status && prune) total += removed;
    if (status) cli_error("%s", glimpse_last_error()), options->failures++;
    if (options->json)
        printf("{\"removed\": %zu, \"indexed\": %zu}\n", total, glimpse_index_count(index));
    else
        printf("removed %zu; %zu images in the index\n", total, glimpse_index_count(index));
    glimpse_index_free(index);
    int exit_status = cli_finish(options, NULL, model);
    free(recorded_model);
    return exit_status;
}

/* What `glimpse index` was asked to do. */
typedef struct index_request {
    const char *db, *import; /* --import DIR */
    bool check, stats, list, prune;
    char **removals, **excluded; /* --remove and --exclude arguments */
    size_t removal_count, excluded_count;
    const char *const *paths; /* to index */
    size_t path_count;
    glimpse_video_options video;
    bool video_given, fast_decode; /* --every/--scenes, --fast-decode given */
    bool ocr, objects;             /* --ocr, --objects */
    const char *task_model;        /* --task-model */
} index_request;

/* The words source of --task-model for --ocr and --objects (NULL when not asked); exits when the model
 * cannot read. *model and *ctx are the caller's to free. */
static glimpse_words_source *words_source(const index_request *request, const cli_options *options,
                                          glimpse_model **model, glimpse_context **ctx) {
    *model = NULL, *ctx = NULL;
    if (!request->ocr && !request->objects) return NULL;
    cli_options task_options = *options;
    task_options.model = request->task_model;
    task_options.precision = GLIMPSE_PRECISION_FLOAT32;
    *model = cli_load_model(&task_options, "index", true, true);
    *ctx = cli_create_context(&task_options, *model);
    glimpse_words_source *words = glimpse_task_words_new(*ctx);
    if (!words) {
        cli_error("--task-model %s: %s", request->task_model, glimpse_last_error());
        exit(CLI_EXIT_FAILURE);
    }
    return words;
}

/* Indexes the paths asked: the summary on stdout, the exit status returned. */
static int index_paths(const index_request *request, cli_options *options) {
    glimpse_model *model = cli_load_model(options, "index", true, false);
    glimpse_index *index;
    if (glimpse_index_open(request->db, model, &index) != GLIMPSE_STATUS_OK) {
        cli_error("%s", glimpse_last_error());
        glimpse_model_free(model);
        return CLI_EXIT_FAILURE;
    }
    glimpse_context *ctx = cli_create_context(options, model);
    index_progress progress = {.bar = {0}, .options = options};
    /* what the index recorded, unless given again */
    glimpse_index_stats stats;
    bool recorded = glimpse_index_get_stats(index, &stats) == GLIMPSE_STATUS_OK;
    glimpse_video_options video = request->video;
    if (recorded && !request->video_given && stats.video_sampling) {
        double value;
        if (sscanf(stats.video_sampling, "every %lf s", &value) == 1 && value > 0)
            video.every_seconds = value, video.scene_threshold = 0;
        else if (sscanf(stats.video_sampling, "at scene changes of %lf", &value) == 1 && value > 0)
            video.scene_threshold = value;
    }
    glimpse_frame_source *frames = cli_frame_source(options, &video);
    glimpse_model *task_model;
    glimpse_context *task_ctx;
    glimpse_words_source *words = words_source(request, options, &task_model, &task_ctx);
    glimpse_index_params params = {
        .on_progress = on_progress,
        .on_failure = on_failure,
        .user = &progress,
        .max_pixels = options->max_pixels,
        .on_root_failure = on_root_failure,
        .exclude = (const char *const *)request->excluded,
        .exclude_count = request->excluded_count,
        .frames = frames,
        .fast_decode = request->fast_decode || (recorded && stats.fast_decode),
        .words = words,
        .read_text = request->ocr,
        .read_objects = request->objects};
    glimpse_index_summary summary;
    double started = cli_now();
    struct sigaction saved[2];
    catch_interrupts(true, saved);
    glimpse_status status =
        glimpse_index_update(index, ctx, request->paths, request->path_count, &params, &summary);
    catch_interrupts(false, saved);
    cli_progress_end(&progress.bar);
    bool stopped = status == GLIMPSE_STATUS_CANCELLED && index_interrupted;
    if (stopped)
        cli_error("interrupted: what was committed is kept (below); run the same glimpse index command again to "
                  "go on from there");
    else if (status)
        cli_error("%s", glimpse_last_error());
    double seconds = cli_now() - started;
    char read[64] = "";
    if (words) snprintf(read, sizeof read, options->json ? ", \"read\": %zu" : ", words read for %zu", summary.read);
    bool refused = status && !stopped; /* nothing to sum up */
    if (!refused && options->json)
        printf("{\"added\": %zu, \"updated\": %zu, \"moved\": %zu, \"removed\": %zu, \"unchanged\": %zu, "
               "\"failed\": %zu, \"paths_failed\": %zu%s, \"indexed\": %zu, \"seconds\": %.3f}\n",
               summary.added, summary.updated, summary.moved, summary.removed, summary.unchanged, summary.failed,
               summary.roots_failed, read, glimpse_index_count(index), seconds);
    else if (!refused)
        printf("added %zu, updated %zu, moved %zu, removed %zu, unchanged %zu, failed %zu%s; %zu images in the "
               "index (%.1f s)%s\n",
               summary.added, summary.updated, summary.moved, summary.removed, summary.unchanged, summary.failed,
               read, glimpse_index_count(index), seconds,
               summary.roots_failed ? "; some paths were missing or unreadable (above)" : "");
    glimpse_context_free(ctx);
    glimpse_index_free(index);
    glimpse_model_free(model);
    cli_frame_source_free(frames);
    glimpse_task_words_free(words);
    glimpse_context_free(task_ctx);
    glimpse_model_free(task_model);
    if (stopped) return 128 + SIGINT;
    return status || summary.failed || summary.roots_failed ? CLI_EXIT_FAILURE : CLI_EXIT_OK;
}

static bool on_import_progress(void *user, size_t done, size_t total) {
    index_progress *p = user;
    if (p->bar.total != total) cli_progress_start(&p->bar, p->options, total, "shards");
    cli_progress_step(&p->bar, done);
    return false;
}

/* The model folder a glimpse.dask manifest names (for -m's default; *int8 set if its embeddings are
 * int8); NULL if it cannot be read. The import itself checks the manifest in full. */
static char *manifest_model_path(const char *folder, bool *int8) {
    char *path = cli_calloc(strlen(folder) + 16, 1), *model = NULL;
    sprintf(path, "%s/manifest.json", folder);
    FILE *file = fopen(path, "rb");
    free(path);
    if (!file) return NULL;
    char *text = cli_calloc(1 << 20, 1);
    size_t length = fread(text, 1, (1 << 20) - 1, file);
    fclose(file);
    text[length] = 0;
    cJSON *json = cJSON_Parse(text);
    const cJSON *record = cJSON_GetObjectItemCaseSensitive(json, "model");
    const cJSON *folder_item = cJSON_GetObjectItemCaseSensitive(record, "path");
    if (cJSON_IsString(folder_item)) model = strdup(folder_item->valuestring);
    const cJSON *precision = cJSON_GetObjectItemCaseSensitive(record, "precision");
    *int8 = cJSON_IsString(precision) && strcmp(precision->valuestring, "int8") == 0;
    cJSON_Delete(json);
    free(text);
    return model;
}

/* `glimpse index --import DIR`: glimpse.dask's shards merged; the summary on stdout. */
static int import_shards(const index_request *request, cli_options *options) {
    bool int8 = false;
    char *default_model = manifest_model_path(request->import, &int8);
    if (!options->model && !default_model) {
        cli_error("%s/manifest.json: cannot be read, or names no model; give -m MODEL", request->import);
        return CLI_EXIT_FAILURE;
    }
    if (!options->model) options->model = default_model;
    if (int8) options->precision = GLIMPSE_PRECISION_INT8; /* the embeddings' precision; the index checks it */
    glimpse_model *model = cli_load_model(options, "index", false, true); /* nothing is embedded */
    glimpse_index *index;
    if (glimpse_index_open(request->db, model, &index) != GLIMPSE_STATUS_OK) {
        cli_error("%s", glimpse_last_error());
        glimpse_model_free(model);
        free(default_model);
        return CLI_EXIT_FAILURE;
    }
    index_progress progress = {.bar = {0}, .options = options};
    glimpse_index_params params = {.on_progress = on_import_progress, .on_failure = on_failure, .user = &progress};
    glimpse_index_summary summary;
    double started = cli_now();
    glimpse_status status = glimpse_index_import(index, request->import, &params, &summary);
    cli_progress_end(&progress.bar);
    if (status) cli_error("%s", glimpse_last_error());
    double seconds = cli_now() - started;
    if (!status && options->json) /* refused or stopped: the error says why, no summary */
        printf("{\"added\": %zu, \"updated\": %zu, \"unchanged\": %zu, \"failed\": %zu, \"shards_skipped\": %zu, "
               "\"indexed\": %zu, \"seconds\": %.3f}\n",
               summary.added, summary.updated, summary.unchanged, summary.failed, summary.roots_failed,
               glimpse_index_count(index), seconds);
    else if (!status)
        printf("imported: added %zu, updated %zu, unchanged %zu, failed %zu, shards skipped %zu; %zu images in the "
               "index (%.1f s)\n",
               summary.added, summary.updated, summary.unchanged, summary.failed, summary.roots_failed,
               glimpse_index_count(index), seconds);
    glimpse_index_free(index);
    glimpse_model_free(model);
    free(default_model);
    return status || summary.failed || summary.roots_failed ? CLI_EXIT_FAILURE : CLI_EXIT_OK;
}

/* Does what was asked, after checking the options go together. */
static int run_index(const index_request *request, cli_options *options) {
    if (!request->db) cli_usage_error("index", "no index file: give --db FILE");
    bool changes = request->prune || request->removal_count;
    int modes = request->check + request->stats + request->list + changes + (request->import != NULL);
    if (modes > 1)
        cli_usage_error("index", "--check, --stats, --list, --import and --prune/--remove go one at a time");
    if (modes && request->path_count)
        cli_usage_error("index", "--check, --stats, --list, --import, --prune and --remove take no paths");
    if (modes && request->excluded_count) cli_usage_error("index", "--exclude goes with paths to index");
    if ((request->ocr || request->objects) != (request->task_model != NULL))
        cli_usage_error("index", request->task_model ? "--task-model reads with --ocr or --objects: add one"
                                                     : "--ocr and --objects read with a Florence-2 model: add "
                                                       "--task-model FLORENCE2");
    if (modes && request->task_model) cli_usage_error("index", "--ocr and --objects go with paths to index");
    if (request->import) return import_shards(request, options);
    if (request->check) return check_index(request->db);
    if (request->stats) return show_stats(request->db, options);
    if (request->list) return list_entries(request->db, options);
    if (changes) return change_index(request->db, options, request->prune, request->removals, request->removal_count);
    if (!request->path_count) cli_usage_error("index", "no files or folders to index");
    return index_paths(request, options);
}

int command_index(int argc, char **argv) {
    /* a whole library: the split of the towers' weights at load is soon repaid (core/bf16x3.h) */
    setenv("GLIMPSE_FLOAT32_TILES", "always", 0);
    cli_options options;
    cli_options_init(&options);
    index_request request = {.removals = cli_calloc((size_t)argc, sizeof(char *)),
                             .excluded = cli_calloc((size_t)argc, sizeof(char *)),
                             .video = glimpse_video_default_options()};
    int code;
    while ((code = getopt_long(argc, argv, "m:", index_long_options, NULL)) != -1) {
        if (cli_common_option(&options, code, optarg, "index")) continue;
        if (cli_video_option(&request.video, code, optarg, "index")) {
            request.video_given = true;
            continue;
        }
        switch (code) {
        case CLI_OPT_FAST_DECODE: request.fast_decode = true; break;
        case 'd': request.db = optarg; break;
        case 'c': request.check = true; break;
        case INDEX_OPT_STATS: request.stats = true; break;
        case INDEX_OPT_LIST: request.list = true; break;
        case INDEX_OPT_PRUNE: request.prune = true; break;
        case INDEX_OPT_REMOVE: request.removals[request.removal_count++] = optarg; break;
        case INDEX_OPT_EXCLUDE: request.excluded[request.excluded_count++] = optarg; break;
        case INDEX_OPT_IMPORT: request.import = optarg; break;
        case INDEX_OPT_OCR: request.ocr = true; break;
        case INDEX_OPT_OBJECTS: request.objects = true; break;
        case INDEX_OPT_TASK_MODEL: request.task_model = optarg; break;
        case CLI_OPT_HELP: printf("%s\n%s\n%s", index_help, cli_video_help, cli_common_help); break;
        default: cli_usage_error("index", "unknown option");
        }
        if (code == CLI_OPT_HELP) break;
    }
    request.paths = (const char *const *)(argv + optind);
    request.path_count = (size_t)(argc - optind);
    int exit_status = code == CLI_OPT_HELP ? CLI_EXIT_OK : run_index(&request, &options);
    free(request.removals), free(request.excluded);
    return exit_status;
}

/* ---------------------------------------------------------------- search */

enum { SEARCH_OPT_LIKE = CLI_OPT_FIRST_FREE, DUPLICATES_OPT_THRESHOLD, OPT_HTML, SEARCH_OPT_FAISS, SEARCH_OPT_NPROBE,
       SEARCH_OPT_TEXT_IN, SEARCH_OPT_OBJECT };

static const struct option search_long_options[] = {CLI_COMMON_LONG_OPTIONS,
                                                    {"db", required_argument, NULL, 'd'},
                                                    {"like", required_argument, NULL, SEARCH_OPT_LIKE},
                                                    {"html", required_argument, NULL, OPT_HTML},
                                                    {"faiss", required_argument, NULL, SEARCH_OPT_FAISS},
                                                    {"nprobe", required_argument, NULL, SEARCH_OPT_NPROBE},
                                                    {"text-in", required_argument, NULL, SEARCH_OPT_TEXT_IN},
                                                    {"object", required_argument, NULL, SEARCH_OPT_OBJECT},
                                                    {NULL, 0, NULL, 0}};

static const char search_help[] =
    "Usage: glimpse search --db FILE [-m MODEL] [-k N] [--json] [--like PHOTO...] [--text-in WORDS]\n"
    "                      [--object LABEL] [QUERY...]\n"
    "       glimpse search --faiss INDEX [-m MODEL] [-k N] [--nprobe N] [--json] QUERY...\n"
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
    "      --like PHOTO     the pictures most like PHOTO, itself left out: its stored\n"
    "                       embedding if the index holds it (no model is loaded),\n"
    "                       else PHOTO embedded now. Repeatable; no QUERY needed\n"
    "      --text-in WORDS  only pictures whose text holds every one of WORDS (any order;\n"
    "                       case and accents ignored): an index built with --ocr\n"
    "      --object LABEL   only pictures with an object labelled LABEL: an index\n"
    "                       built with --objects. Both filters go with queries and\n"
    "                       --like (ranked by them) or alone (ranked by how well the\n"
    "                       words match; score: SQLite's bm25 relevance, negated)\n"
    "      --html FILE      also write FILE, one self-contained page of the results'\n"
    "                       thumbnails with their scores and paths\n"
    "      --faiss INDEX    search the FAISS index folder python -m glimpse.faiss build\n"
    "                       made from glimpse.dask's shards instead of an SQLite index\n"
    "                       (memory-mapped; the candidates re-scored with the exact\n"
    "                       vectors when the folder keeps vectors.npy). The model is\n"
    "                       the one the shards were embedded with. Only in a glimpse\n"
    "                       built with FAISS (libfaiss-dev)\n"
    "      --nprobe N       with --faiss: the inverted lists searched (default: the\n"
    "                       index's, params.json); more finds more, slower\n"
    "Scores are the model's logits: logit_scale x cosine, + logit_bias for SigLIP.\n"
    "A video's frame shows as PATH @ M:SS.s (its time in the video).\n"
    "JSON: {\"text\": QUERY, \"results\": [{\"image\": PATH, \"score\": S}, ...]} per query\n"
    "(a video's frame: {\"image\": PATH, \"time\": SECONDS, \"score\": S})\n"
    "(\"text\": \"@PHOTO\" for --like; a name that is not UTF-8 has \"path_bytes\" too);\n"
    "a query that fails: {\"text\": QUERY, \"error\": REASON}.\n";

/* One query's embedding and how to print its results. */
typedef struct search_query {
    const char *label; /* the query, or @PHOTO for --like */
    const char *like;  /* --like's PHOTO, else NULL */
    bool stored;       /* --like's PHOTO found in the index: its embedding is there already */
} search_query;

/* Searches with one embedded query and prints its results, --like's photo itself left out: all its rows (a
 * video's every frame) are asked for beyond k, more each round until k others are found or the index has no
 * more, so that a video's own frames never count against k. */
static void search_and_print(cli_options *options, glimpse_index *index, const search_query *q,
                             const glimpse_search_filter *filter, const float *embedding, size_t k,
                             const char **paths, double *times, float *scores, FILE *page) {
    size_t found = 0, shown = 0, wanted = k + (q->like != NULL);
    char *itself = q->like ? realpath(q->like, NULL) : NULL;
    glimpse_search_result *results = NULL;
    glimpse_status status;
    for (;;) {
        free(results);
        results = cli_calloc(wanted + 1, sizeof *results);
        status = filter ? glimpse_index_search_filtered(index, embedding, wanted, filter, results, &found)
                        : glimpse_index_search(index, embedding, wanted, results, &found);
        if (status) break;
        shown = 0;
        for (size_t r = 0; r < found && shown < k; r++) {
            if (itself && strcmp(results[r].path, itself) == 0) continue;
            paths[shown] = results[r].path, times[shown] = results[r].time, scores[shown++] = results[r].score;
        }
        if (shown == k || found < wanted || !itself) break;
        wanted = wanted * 2 + 8; /* its frames filled the list: ask for more */
    }
    if (status != GLIMPSE_STATUS_OK) {
        cli_error("%s", glimpse_last_error());
        print_json_error(options, "text", q->label, glimpse_last_error());
        options->failures++;
        free(itself), free(results);
        return;
    }
    cli_print_results(options, q->label, paths, times, scores, NULL, shown);
    if (page) {
        cli_html_row(page, q->label);
        for (size_t r = 0; r < shown; r++) {
            char caption[32];
            snprintf(caption, sizeof caption, "%.4f", scores[r]);
            cli_html_picture(page, options, paths[r], times[r], caption);
        }
        cli_html_row_end(page);
    }
    free(itself), free(results);
}

/* Embeds the query: a stored picture's embedding, an image file, or a combined query. */
static bool embed_search_query(const cli_options *options, glimpse_index *index, glimpse_context *ctx,
                               const search_query *q, float *embedding) {
    glimpse_status status;
    if (q->stored) {
        status = glimpse_index_embedding(index, q->like, embedding);
    } else if (q->like) {
        glimpse_image *image;
        if (!cli_load_image(options, q->like, NULL, &image)) {
            print_json_error(options, "text", q->label, glimpse_last_error());
            return false;
        }
        status = glimpse_embed_images(ctx, &image, 1, embedding);
        glimpse_image_free(image);
    } else {
        status = glimpse_embed_query(ctx, q->label, embedding);
    }
    if (status) {
        cli_error("%s", glimpse_last_error());
        print_json_error(options, "text", q->label, glimpse_last_error());
    }
    return !status;
}

/* `glimpse search --faiss INDEX`: text and combined queries against glimpse.faiss's index folder. */
static int search_faiss(const char *folder, cli_options *options, char **queries, size_t query_count, size_t k,
                        size_t nprobe, const char *html) {
#ifdef GLIMPSE_HAVE_FAISS
    const char *why;
    const cli_faiss_functions *faiss = cli_faiss_load(&why);
    if (!faiss) {
        cli_error("%s", why);
        return CLI_EXIT_FAILURE;
    }
    glimpse_faiss *index;
    if (faiss->glimpse_faiss_open(folder, options->threads, &index) != GLIMPSE_STATUS_OK) { /* (0: every core) */
        cli_error("%s", faiss->glimpse_faiss_last_error());
        return CLI_EXIT_FAILURE;
    }
    const char *model_path, *precision, *stored_identity;
    faiss->glimpse_faiss_model(index, &model_path, &precision, &stored_identity);
    size_t dim = faiss->glimpse_faiss_dim(index);
    if (!options->model) options->model = model_path;
    if (options->precision == GLIMPSE_PRECISION_FLOAT32 && strcmp(precision, "int8") == 0)
        options->precision = GLIMPSE_PRECISION_INT8;
    bool images = false;
    for (size_t i = 0; i < query_count; i++) images |= glimpse_query_needs_images(queries[i]);
    glimpse_model *model = cli_load_model(options, "search", images, true);
    char identity[GLIMPSE_MODEL_IDENTITY_CAPACITY] = "";
    glimpse_model_identity(model, identity, sizeof identity);
    if (glimpse_model_embedding_dim(model) != dim || (stored_identity && strcmp(identity, stored_identity) != 0)) {
        cli_error("%s holds embeddings of another model (%s, from %s) than %s; give that model", folder,
                  stored_identity ? stored_identity : "?", model_path, options->model);
        faiss->glimpse_faiss_close(index);
        glimpse_model_free(model);
        return CLI_EXIT_FAILURE;
    }
    glimpse_context *ctx = cli_create_context(options, model);
    float *embedding = cli_calloc(dim, sizeof(float));
    glimpse_search_result *results = cli_calloc(k, sizeof *results);
    const char **paths = cli_calloc(k, sizeof *paths);
    float *scores = cli_calloc(k, sizeof *scores);
    double *times = cli_calloc(k, sizeof *times);
    FILE *page = html ? cli_html_open(html, "glimpse search") : NULL;
    for (size_t q = 0; q < query_count; q++) {
        size_t found = 0;
        glimpse_status status = glimpse_embed_query(ctx, queries[q], embedding);
        const char *error = NULL;
        if (status) {
            error = glimpse_last_error();
        } else if ((status = faiss->glimpse_faiss_search(index, embedding, k, nprobe, results, &found))) {
            error = faiss->glimpse_faiss_last_error();
        }
        if (status) {
            cli_error("%s", error);
            print_json_error(options, "text", queries[q], error);
            options->failures++;
            continue;
        }
        for (size_t r = 0; r < found; r++)
            paths[r] = results[r].path, scores[r] = results[r].score, times[r] = results[r].time;
        cli_print_results(options, queries[q], paths, times, scores, NULL, found);
        if (page) {
            cli_html_row(page, queries[q]);
            for (size_t r = 0; r < found; r++) {
                char caption[32];
                snprintf(caption, sizeof caption, "%.4f", scores[r]);
                cli_html_picture(page, options, paths[r], times[r], caption);
            }
            cli_html_row_end(page);
        }
    }
    if (page && !cli_html_close(page, html)) options->failures++;
    free(embedding), free(results), free(paths), free(scores), free(times);
    faiss->glimpse_faiss_close(index);
    return cli_finish(options, ctx, model);
#else
    (void)options, (void)queries, (void)query_count, (void)k, (void)nprobe, (void)html;
    cli_error("%s: this glimpse was built without FAISS (install libfaiss-dev and build it again)", folder);
    return CLI_EXIT_FAILURE;
#endif
}

int command_search(int argc, char **argv) {
    cli_options options;
    cli_options_init(&options);
    const char *db = NULL, *html = NULL, *faiss = NULL;
    glimpse_search_filter filter = {NULL, NULL};
    long k = 10, nprobe = 0;
    int code;
    search_query *queries = cli_calloc((size_t)argc, sizeof *queries);
    size_t query_count = 0;
    while ((code = getopt_long(argc, argv, "m:k:", search_long_options, NULL)) != -1) {
        if (cli_common_option(&options, code, optarg, "search")) continue;
        switch (code) {
        case 'd': db = optarg; break;
        case 'k': k = cli_parse_long("search", "-k", optarg, 1, 1L << 30); break;
        case SEARCH_OPT_LIKE: queries[query_count++] = (search_query){.label = NULL, .like = optarg}; break;
        case OPT_HTML: html = optarg; break;
        case SEARCH_OPT_FAISS: faiss = optarg; break;
        case SEARCH_OPT_NPROBE: nprobe = cli_parse_long("search", "--nprobe", optarg, 1, 1L << 20); break;
        case SEARCH_OPT_TEXT_IN: filter.text_in = optarg; break;
        case SEARCH_OPT_OBJECT: filter.object = optarg; break;
        case CLI_OPT_HELP: printf("%s\n%s", search_help, cli_common_help); free(queries); return CLI_EXIT_OK;
        default: cli_usage_error("search", "unknown option");
        }
    }
    if (faiss) {
        if (db || query_count || filter.text_in || filter.object)
            cli_usage_error("search", "--faiss goes without --db, --like, --text-in and --object");
        if (optind >= argc) cli_usage_error("search", "no query");
        free(queries);
        return search_faiss(faiss, &options, argv + optind, (size_t)(argc - optind), (size_t)k, (size_t)nprobe, html);
    }
    if (nprobe) cli_usage_error("search", "--nprobe goes with --faiss");
    if (!db) cli_usage_error("search", "no index file: give --db FILE or --faiss INDEX");
    bool filtered = filter.text_in || filter.object;
    if (optind >= argc && !query_count && !filtered)
        cli_usage_error("search", "no query (give QUERY, --like PHOTO, --text-in WORDS or --object LABEL)");
    glimpse_index *index = open_for_reading(db);
    float *embedding = cli_calloc(glimpse_index_embedding_dim(index), sizeof(float));
    /* which towers: a text for the text queries, the vision tower for images not stored */
    bool images = false, texts = optind < argc;
    size_t like_count = query_count;
    char **labels = cli_calloc(like_count + 1, sizeof *labels);
    for (size_t i = 0; i < like_count; i++) {
        search_query *q = &queries[i];
        labels[i] = cli_calloc(strlen(q->like) + 2, 1);
        labels[i][0] = '@', strcpy(labels[i] + 1, q->like);
        q->label = labels[i];
        q->stored = glimpse_index_embedding(index, q->like, embedding) == GLIMPSE_STATUS_OK;
        images |= !q->stored;
    }
    for (int i = optind; i < argc; i++) {
        queries[query_count++] = (search_query){.label = argv[i]};
        images |= glimpse_query_needs_images(argv[i]);
    }
    glimpse_model *model = NULL;
    glimpse_context *ctx = NULL;
    if (images || texts) {
        if (!options.model) options.model = glimpse_index_model_path(index);
        /* the index's precision unless --int8 was asked (another is refused below) */
        if (options.precision == GLIMPSE_PRECISION_FLOAT32) options.precision = glimpse_index_precision(index);
        /* a text query needs only the text tower */
        model = cli_load_model(&options, "search", images, texts);
        if (glimpse_index_check_model(index, model) != GLIMPSE_STATUS_OK) { /* refuses another model */
            cli_error("%s", glimpse_last_error());
            return CLI_EXIT_FAILURE;
        }
        ctx = cli_create_context(&options, model);
    }
    const char **paths = cli_calloc((size_t)k + 1, sizeof *paths);
    float *scores = cli_calloc((size_t)k + 1, sizeof *scores);
    double *times = cli_calloc((size_t)k + 1, sizeof *times);
    FILE *page = html ? cli_html_open(html, "glimpse search") : NULL;
    for (size_t i = 0; i < query_count; i++) {
        if (embed_search_query(&options, index, ctx, &queries[i], embedding))
            search_and_print(&options, index, &queries[i], filtered ? &filter : NULL, embedding, (size_t)k, paths,
                             times, scores, page);
        else
            options.failures++;
    }
    if (!query_count) { /* the filters alone, ranked by how well the words match */
        search_query words = {.label = filter.text_in ? filter.text_in : filter.object};
        search_and_print(&options, index, &words, &filter, NULL, (size_t)k, paths, times, scores, page);
    }
    if (page && !cli_html_close(page, html)) options.failures++;
    for (size_t i = 0; i < like_count; i++) free(labels[i]);
    free(labels), free(queries), free(embedding), free(paths), free(scores), free(times);
    glimpse_index_free(index);
    return cli_finish(&options, ctx, model);
}

/* ------------------------------------------------------------ duplicates */

/* No model is loaded: the common options that choose or run one are not taken (nor listed by --help). */
static const struct option duplicates_long_options[] = {
    {"db", required_argument, NULL, 'd'},         {"threshold", required_argument, NULL, DUPLICATES_OPT_THRESHOLD},
    {"html", required_argument, NULL, OPT_HTML},  {"json", no_argument, NULL, CLI_OPT_JSON},
    {"quiet", no_argument, NULL, CLI_OPT_QUIET},  {"verbose", no_argument, NULL, CLI_OPT_VERBOSE},
    {"help", no_argument, NULL, CLI_OPT_HELP},    {NULL, 0, NULL, 0}};

static const char duplicates_help[] =
    "Usage: glimpse duplicates --db FILE [--threshold T] [--json] [--html PAGE]\n"
    "Lists groups of near-identical pictures in an index (resized, re-encoded or\n"
    "lightly edited copies) from the embeddings it stores: pictures whose cosine\n"
    "is at least T are one group, and so are chains of them. No model is loaded.\n"
    "      --db FILE        the index built by glimpse index\n"
    "      --threshold T    the cosine from 0 to 1 (default 0.95: measured on the demo\n"
    "                       pictures with re-encoded, resized, cropped and brightened\n"
    "                       copies, see docs/search.md)\n"
    "      --html PAGE      also write PAGE, each group's thumbnails side by side\n"
    "      --json           JSON Lines on stdout\n"
    "      --quiet, --verbose, --help\n"
    "Each group: its pictures and their cosine to the first. JSON: one object per\n"
    "group, {\"group\": [{\"image\": PATH, \"similarity\": S}, ...]}.\n";

typedef struct group_printer {
    cli_options options; /* its failures count the groups printed */
    FILE *page;          /* --html's, or NULL */
} group_printer;

static void print_group(void *user, const char *const *paths, const float *similarity, size_t count) {
    group_printer *printer = user;
    cli_options *options = &printer->options;
    options->failures++;
    if (printer->page) {
        char heading[64], caption[32];
        snprintf(heading, sizeof heading, "group %d, %zu pictures", options->failures, count);
        cli_html_row(printer->page, heading);
        for (size_t i = 0; i < count; i++) {
            snprintf(caption, sizeof caption, "cosine %.4f", similarity[i]);
            /* a video by its first frame */
            cli_html_picture(printer->page, options, paths[i], path_has_video_extension(paths[i]) ? 0 : -1, caption);
        }
        cli_html_row_end(printer->page);
    }
    if (options->json) printf("{\"group\": [");
    else printf("group %d, %zu pictures\n", options->failures, count);
    for (size_t i = 0; i < count; i++) {
        if (options->json) {
            printf(i ? ", {\"image\": " : "{\"image\": ");
            json_path(stdout, paths[i]);
            printf(", \"similarity\": ");
            json_float(stdout, similarity[i]);
            printf("}");
        } else {
            printf("  %.4f  %s\n", similarity[i], paths[i]);
        }
    }
    if (options->json) printf("]}\n");
}

int command_duplicates(int argc, char **argv) {
    cli_options options;
    cli_options_init(&options);
    const char *db = NULL, *html = NULL;
    float threshold = GLIMPSE_INDEX_DUPLICATE_COSINE;
    int code;
    while ((code = getopt_long(argc, argv, "", duplicates_long_options, NULL)) != -1) {
        if (cli_common_option(&options, code, optarg, "duplicates")) continue;
        char *end;
        switch (code) {
        case 'd': db = optarg; break;
        case DUPLICATES_OPT_THRESHOLD:
            threshold = strtof(optarg, &end);
            if (end == optarg || *end || !(threshold >= 0.0f && threshold <= 1.0f))
                cli_usage_error("duplicates", "--threshold takes a cosine from 0 to 1, not '%s'", optarg);
            break;
        case OPT_HTML: html = optarg; break;
        case CLI_OPT_HELP: printf("%s", duplicates_help); return CLI_EXIT_OK;
        default: cli_usage_error("duplicates", "unknown option");
        }
    }
    if (!db) cli_usage_error("duplicates", "no index file: give --db FILE");
    if (optind < argc) cli_usage_error("duplicates", "takes no paths: give the index with --db");
    glimpse_index *index = open_for_reading(db);
    group_printer printer = {.options = options, .page = html ? cli_html_open(html, "glimpse duplicates") : NULL};
    printer.options.failures = 0;
    size_t groups = 0;
    glimpse_status status = glimpse_index_duplicates(index, threshold, print_group, &printer, &groups);
    if (status) cli_error("%s", glimpse_last_error());
    else if (!options.json)
        printf("%zu group%s of near-identical pictures (cosine >= %.3g)\n", groups, groups == 1 ? "" : "s", threshold);
    if (printer.page && !cli_html_close(printer.page, html)) status = GLIMPSE_STATUS_IO;
    glimpse_index_free(index);
    return status ? CLI_EXIT_FAILURE : CLI_EXIT_OK;
}
