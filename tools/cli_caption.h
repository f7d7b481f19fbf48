/* cli_caption.h — the caption search options (--prompt, --beams, --max-tokens, ... --seed) that `glimpse
 * caption` and `glimpse explain` share: their option table entries, their help and their parsing into
 * glimpse_caption_params. CLI only. */
#ifndef GLIMPSE_TOOLS_CLI_CAPTION_H
#define GLIMPSE_TOOLS_CLI_CAPTION_H

#include <stdbool.h>

#include "glimpse.h"
#include "tools/cli_common.h"

enum {
    CLI_OPT_PROMPT = CLI_OPT_FIRST_FREE,
    CLI_OPT_BEAMS,
    CLI_OPT_MAX_TOKENS,
    CLI_OPT_MIN_TOKENS,
    CLI_OPT_SAMPLE,
    CLI_OPT_TEMPERATURE,
    CLI_OPT_TOP_K,
    CLI_OPT_TOP_P,
    CLI_OPT_SEED,
    CLI_OPT_REPETITION,
    CLI_OPT_LENGTH_PENALTY,
    CLI_OPT_BATCH_ROWS,
    CLI_OPT_CAPTION_END /* a command's own codes after these start here */
};

#define CLI_CAPTION_LONG_OPTIONS                                                                                       \
    {"prompt", required_argument, NULL, CLI_OPT_PROMPT}, {"beams", required_argument, NULL, CLI_OPT_BEAMS},            \
        {"max-tokens", required_argument, NULL, CLI_OPT_MAX_TOKENS},                                                   \
        {"min-tokens", required_argument, NULL, CLI_OPT_MIN_TOKENS}, {"sample", no_argument, NULL, CLI_OPT_SAMPLE},   \
        {"temperature", required_argument, NULL, CLI_OPT_TEMPERATURE},                                                 \
        {"top-k", required_argument, NULL, CLI_OPT_TOP_K}, {"top-p", required_argument, NULL, CLI_OPT_TOP_P},         \
        {"seed", required_argument, NULL, CLI_OPT_SEED},                                                               \
        {"repetition-penalty", required_argument, NULL, CLI_OPT_REPETITION},                                           \
        {"length-penalty", required_argument, NULL, CLI_OPT_LENGTH_PENALTY},                                           \
        {"batch-rows", required_argument, NULL, CLI_OPT_BATCH_ROWS}

/* The options' help lines. */
extern const char cli_caption_options_help[];

/* Handles a caption option given getopt_long's code (exits on a bad value); true if it was one. */
bool cli_caption_option(glimpse_caption_params *params, int code, const char *argument, const char *command);
/* Exits with a usage error when the options contradict each other (--sample with beams, min above max). */
void cli_caption_check(const glimpse_caption_params *params, const char *command);
/* --min-tokens above the model's own maximum (when --max-tokens is not given) lowered to it. */
void cli_caption_fit_model(glimpse_caption_params *params, const glimpse_model *model);
/* A caption's JSON fields on stdout: {"image": PATH, "caption": TEXT, "ids": [...] (the object left open). */
/* The caption's fields after the picture's: , "caption": TEXT, "ids": [...] (the object left open). */
void cli_print_caption_result(const char *text, const int32_t *ids, size_t count);
void cli_print_caption_fields(const char *path, const char *text, const int32_t *ids, size_t count);

#endif
