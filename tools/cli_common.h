/* cli_common.h — what every glimpse subcommand shares: the common options
 * (--model, --threads, --json, --quiet, --verbose, --max-pixels,
 * --no-exif-rotate), error
 * lines on stderr, the progress bar, JSON Lines output, and loading a batch
 * of images where one bad file does not stop the others. CLI only: this code
 * may print and exit; the library never does. */
#ifndef GLIMPSE_TOOLS_CLI_COMMON_H
#define GLIMPSE_TOOLS_CLI_COMMON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "glimpse.h"
#include "output/json.h" /* the --json lines are written with it */

#define CLI_EXIT_OK 0
#define CLI_EXIT_FAILURE 1 /* some input or the model failed */
#define CLI_EXIT_USAGE 2   /* the command line itself is wrong */

typedef struct cli_options {
    const char *model;
    int threads;
    bool json;
    bool quiet, verbose;
    uint64_t max_pixels;
    bool no_exif_rotate; /* keep pixels as stored, ignoring the EXIF orientation */
    glimpse_precision precision;
    int failures; /* inputs that failed; non-zero makes the exit status 1 */
} cli_options;

void cli_options_init(cli_options *options);

/* Handles a common option given getopt_long's code; true if it was one. */
bool cli_common_option(cli_options *options, int code, const char *argument, const char *command);

/* The getopt_long codes of the common options (for option tables). */
enum {
    CLI_OPT_THREADS = 1000,
    CLI_OPT_JSON,
    CLI_OPT_QUIET,
    CLI_OPT_VERBOSE,
    CLI_OPT_MAX_PIXELS,
    CLI_OPT_INT8,
    CLI_OPT_NO_EXIF_ROTATE,
    CLI_OPT_HELP,
    CLI_OPT_FIRST_FREE /* a command's own codes start here */
};

#define CLI_COMMON_LONG_OPTIONS                                                                                        \
    {"model", required_argument, NULL, 'm'}, {"threads", required_argument, NULL, CLI_OPT_THREADS},                    \
        {"json", no_argument, NULL, CLI_OPT_JSON}, {"quiet", no_argument, NULL, CLI_OPT_QUIET},                        \
        {"verbose", no_argument, NULL, CLI_OPT_VERBOSE}, {"max-pixels", required_argument, NULL, CLI_OPT_MAX_PIXELS}, \
        {"int8", no_argument, NULL, CLI_OPT_INT8}, {"no-exif-rotate", no_argument, NULL, CLI_OPT_NO_EXIF_ROTATE},     \
        {"help", no_argument, NULL, CLI_OPT_HELP}

/* The help text of the common options, for each command's --help. */
extern const char cli_common_help[];

/* "glimpse: message" on stderr. */
void cli_error(const char *format, ...) __attribute__((format(printf, 1, 2)));
/* A usage error: message, a hint to --help, exit 2. */
void cli_usage_error(const char *command, const char *format, ...) __attribute__((format(printf, 2, 3), noreturn));
/* Parses a whole number in [minimum, maximum] or exits with a usage error. */
long cli_parse_long(const char *command, const char *option, const char *text, long minimum, long maximum);

/* Loads the model named by options->model (exits with a message on failure). */
glimpse_model *cli_load_model(const cli_options *options, const char *command, bool load_vision, bool load_text);
glimpse_context *cli_create_context(const cli_options *options, const glimpse_model *model);
/* The end of a command: frees its context and its model (either may be NULL)
 * and gives its exit status, CLI_EXIT_FAILURE if any input failed. */
int cli_finish(const cli_options *options, glimpse_context *ctx, glimpse_model *model);

/* calloc that exits with a message when memory runs out (never NULL, even for 0 bytes). */
void *cli_calloc(size_t count, size_t size);

/* Progress on stderr, only when stderr is a terminal and not --quiet. */
typedef struct cli_progress {
    bool active;
    size_t total, done;
    const char *what;
    double started;
} cli_progress;
void cli_progress_start(cli_progress *progress, const cli_options *options, size_t total, const char *what);
void cli_progress_step(cli_progress *progress, size_t done);
void cli_progress_end(cli_progress *progress);



double cli_now(void);

#endif
