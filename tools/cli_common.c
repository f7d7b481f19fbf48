/* cli_common.c — shared plumbing of the glimpse subcommands. */
#include "tools/cli_common.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void cli_options_init(cli_options *options) {
    memset(options, 0, sizeof *options);
    options->max_pixels = glimpse_image_default_params().max_pixels;
}

const char cli_common_help[] =
    "Common options:\n"
    "  -m, --model MODEL    a Hugging Face snapshot folder, or a hub id (ORG/NAME) already\n"
    "                       in the local Hugging Face cache\n"
    "      --threads N      worker threads (default: all cores)\n"
    "      --json           JSON Lines on stdout, one object per result\n"
    "      --max-pixels N   refuse images larger than N pixels (default 178956970, as Pillow)\n"
    "      --no-exif-rotate keep pictures as stored: by default they are turned upright by\n"
    "                       their EXIF orientation, as transformers' load_image does (index\n"
    "                       always turns them)\n"
    "      --int8           quantize the transformer layers to 8 bits at load: about 3x\n"
    "                       faster towers and 2x faster caption steps (AVX-512 VNNI; about\n"
    "                       1.5x on CPUs with AVX2 only), with embeddings and captions\n"
    "                       close to but not exactly the reference's\n"
    "      --quiet          no progress bar\n"
    "      --verbose        say what is loaded and how long it took (stderr)\n"
    "      --help           this text\n"
    "Results go to stdout; errors and progress to stderr. An input that fails is named\n"
    "on stderr, the others are still processed, and the exit status is then 1\n"
    "(2 for a wrong command line).\n"
    "Environment: GLIMPSE_FLOAT32_TILES=always runs float32 towers on AMX's bfloat16 tiles\n"
    "where the CPU has AMX-BF16, as exactly as float32 (about 1.4x faster for batches of\n"
    "pictures; the split at load costs time and 1.5x the weights' memory): serve and\n"
    "index turn it on, =never keeps them off it. GLIMPSE_NO_AMX=1 turns every AMX kernel off.\n";

void cli_error(const char *format, ...) {
    va_list args;
    va_start(args, format);
    fputs("glimpse: ", stderr);
    vfprintf(stderr, format, args);
    fputc('\n', stderr);
    va_end(args);
}

void cli_usage_error(const char *command, const char *format, ...) {
    va_list args;
    va_start(args, format);
    fprintf(stderr, "glimpse %s: ", command);
    vfprintf(stderr, format, args);
    fprintf(stderr, "\nTry 'glimpse %s --help'.\n", command);
    va_end(args);
    exit(CLI_EXIT_USAGE);
}

long cli_parse_long(const char *command, const char *option, const char *text, long minimum, long maximum) {
    char *end;
    errno = 0;
    long value = strtol(text, &end, 10);
    if (errno || end == text || *end != '\0' || value < minimum || value > maximum)
        cli_usage_error(command, "%s takes a whole number from %ld to %ld, not '%s'", option, minimum, maximum, text);
    return value;
}

bool cli_common_option(cli_options *options, int code, const char *argument, const char *command) {
    switch (code) {
    case 'm': options->model = argument; return true;
    case CLI_OPT_THREADS: options->threads = (int)cli_parse_long(command, "--threads", argument, 1, 256); return true;
    case CLI_OPT_JSON: options->json = true; return true;
    case CLI_OPT_QUIET: options->quiet = true; return true;
    case CLI_OPT_VERBOSE: options->verbose = true; return true;
    case CLI_OPT_INT8: options->precision = GLIMPSE_PRECISION_INT8; return true;
    case CLI_OPT_NO_EXIF_ROTATE: options->no_exif_rotate = true; return true;
    case CLI_OPT_MAX_PIXELS:
        options->max_pixels = (uint64_t)cli_parse_long(command, "--max-pixels", argument, 1, 0x7fffffffffffffffL);
        return true;
    }
    return false;
}

void *cli_calloc(size_t count, size_t size) {
    void *memory = calloc(count ? count : 1, size ? size : 1);
    if (!memory) {
        cli_error("out of memory");
        exit(CLI_EXIT_FAILURE);
    }
    return memory;
}

double cli_now(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + now.tv_nsec * 1e-9;
}

/* The library's diagnostics on stderr: warnings always, the rest with --verbose. */
static void print_log(void *user, glimpse_log_level level, const char *message) {
    bool verbose = *(const bool *)user;
    if (level >= GLIMPSE_LOG_LEVEL_WARNING || (verbose && level >= GLIMPSE_LOG_LEVEL_INFO))
        fprintf(stderr, "glimpse: %s%s\n", level >= GLIMPSE_LOG_LEVEL_WARNING ? "warning: " : "", message);
}

glimpse_model *cli_load_model(const cli_options *options, const char *command, bool load_vision, bool load_text) {
    if (!options->model) cli_usage_error(command, "no model given: use -m MODEL");
    static bool verbose;
    verbose = options->verbose;
    glimpse_set_log_callback(print_log, &verbose);
    glimpse_load_params params = glimpse_load_default_params();
    params.load_vision = load_vision;
    params.load_text = load_text;
    params.precision = options->precision;
    double started = cli_now();
    glimpse_model *model;
    if (glimpse_model_load(options->model, &params, &model) != GLIMPSE_STATUS_OK) {
        cli_error("cannot load model: %s", glimpse_last_error());
        exit(CLI_EXIT_FAILURE);
    }
    if (options->verbose) {
        glimpse_model_info info;
        glimpse_model_get_info(model, &info);
        fprintf(stderr, "glimpse: loaded %s from %s in %.1f ms\n", info.architecture, info.path,
                (cli_now() - started) * 1e3);
    }
    return model;
}

glimpse_context *cli_create_context(const cli_options *options, const glimpse_model *model) {
    glimpse_context_params params = glimpse_context_default_params();
    params.threads = options->threads;
    glimpse_context *ctx;
    if (glimpse_context_create(model, &params, &ctx) != GLIMPSE_STATUS_OK) {
        cli_error("%s", glimpse_last_error());
        exit(CLI_EXIT_FAILURE);
    }
    return ctx;
}

int cli_finish(const cli_options *options, glimpse_context *ctx, glimpse_model *model) {
    glimpse_context_free(ctx);
    glimpse_model_free(model);
    return options->failures ? CLI_EXIT_FAILURE : CLI_EXIT_OK;
}

void cli_progress_start(cli_progress *progress, const cli_options *options, size_t total, const char *what) {
    memset(progress, 0, sizeof *progress);
    progress->active = !options->quiet && total > 1 && isatty(STDERR_FILENO);
    progress->total = total;
    progress->what = what;
    progress->started = cli_now();
}

void cli_progress_step(cli_progress *progress, size_t done) {
    progress->done = done;
    if (!progress->active) return;
    const int width = 30;
    int filled = progress->total ? (int)(width * done / progress->total) : width;
    double elapsed = cli_now() - progress->started;
    double rate = elapsed > 0 ? done / elapsed : 0;
    double left = rate > 0 ? (progress->total - done) / rate : 0;
    fprintf(stderr, "\r[%.*s%*s] %zu/%zu %s  %.1f/s  %.0fs left ", filled, "##############################",
            width - filled, "", done, progress->total, progress->what, rate, left);
    fflush(stderr);
}

void cli_progress_end(cli_progress *progress) {
    if (progress->active) fprintf(stderr, "\r\033[K");
}


