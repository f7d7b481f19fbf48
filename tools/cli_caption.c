/* cli_caption.c — `glimpse caption`: describes images in words with a
 * BLIP captioning model. Bad images are reported and skipped; with one
 * image and a terminal on stdout the words appear as they are decoded. */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tools/cli_common.h"
#include "tools/commands.h"

static const char caption_help[] =
    "Usage: glimpse caption -m MODEL [--prompt TEXT] [--beams N] [--max-tokens N] [--min-tokens N]\n"
    "                       [--sample [--temperature T] [--top-k K] [--top-p P] [--seed S]]\n"
    "                       [--repetition-penalty R] [--json] IMAGE...\n"
    "Describes each image with a BLIP captioning model (BlipForConditionalGeneration,\n"
    "e.g. Salesforce/blip-image-captioning-base).\n"
    "  --prompt TEXT            the caption continues this text (\"a picture of\")\n"
    "  --beams N                beam search width (default 3; 1 = greedy)\n"
    "  --max-tokens N           at most N generated tokens, after the prompt (default 20)\n"
    "  --min-tokens N           at least N generated tokens before it may end (default 5)\n"
    "  --repetition-penalty R   > 1 discourages repeating tokens (default 1 = off)\n"
    "  --length-penalty L       beam scores are divided by length^L (default 1)\n"
    "  --sample                 draw tokens at random instead of searching (one beam)\n"
    "  --temperature T          sampling temperature (default 1)\n"
    "  --top-k K                sample among the K most likely tokens (default 50; 0 = all)\n"
    "  --top-p P                sample among the most likely tokens holding probability P (default 1)\n"
    "  --seed S                 the same seed gives the same sampled caption (default 0)\n"
    "The defaults (3 beams, 5 to 20 new tokens) are BLIP's own captioning settings from\n"
    "its paper and code; they give fluent, complete captions with the released checkpoints.\n"
    "A snapshot's generation_config.json (num_beams, max_length, min_length,\n"
    "repetition_penalty, length_penalty) overrides them for that model; options override both.\n"
    "Plain output: the caption alone for one image, else PATH, a tab, the caption.\n"
    "JSON: {\"image\": PATH, \"caption\": TEXT, \"ids\": [...]} with ids as transformers'\n"
    "generate returns them (start token, prompt, generated tokens).\n";

enum {
    OPT_PROMPT = CLI_OPT_FIRST_FREE,
    OPT_BEAMS,
    OPT_MAX_TOKENS,
    OPT_MIN_TOKENS,
    OPT_SAMPLE,
    OPT_TEMPERATURE,
    OPT_TOP_K,
    OPT_TOP_P,
    OPT_SEED,
    OPT_REPETITION,
    OPT_LENGTH_PENALTY
};

static float parse_float(const char *option, const char *text, float minimum, float maximum) {
    char *end;
    float value = strtof(text, &end);
    if (end == text || *end || !(value >= minimum && value <= maximum))
        cli_usage_error("caption", "%s takes a number from %g to %g, not '%s'", option, minimum, maximum, text);
    return value;
}

typedef struct streaming {
    int active;
    size_t printed; /* bytes of the caption already on the terminal */
    int broken;     /* the text changed before what was printed: reprint at the end */
} streaming;

static int print_as_decoded(void *user, size_t image, int32_t id, const char *text) {
    (void)image;
    (void)id;
    streaming *s = user;
    size_t length = strlen(text);
    if (s->broken) return 0;
    if (length < s->printed) {
        s->broken = 1;
        return 0;
    }
    fwrite(text + s->printed, 1, length - s->printed, stdout);
    fflush(stdout);
    s->printed = length;
    return 0;
}

int command_caption(int argc, char **argv) {
    cli_options options;
    cli_options_init(&options);
    /* options are collected first, then laid over the model's own defaults */
    glimpse_caption_params params = glimpse_caption_default_params();
    int beams_given = 0, max_given = 0, min_given = 0, repetition_given = 0, length_given = 0;
    static const struct option long_options[] = {CLI_COMMON_LONG_OPTIONS,
                                                 {"prompt", required_argument, NULL, OPT_PROMPT},
                                                 {"beams", required_argument, NULL, OPT_BEAMS},
                                                 {"max-tokens", required_argument, NULL, OPT_MAX_TOKENS},
                                                 {"min-tokens", required_argument, NULL, OPT_MIN_TOKENS},
                                                 {"sample", no_argument, NULL, OPT_SAMPLE},
                                                 {"temperature", required_argument, NULL, OPT_TEMPERATURE},
                                                 {"top-k", required_argument, NULL, OPT_TOP_K},
                                                 {"top-p", required_argument, NULL, OPT_TOP_P},
                                                 {"seed", required_argument, NULL, OPT_SEED},
                                                 {"repetition-penalty", required_argument, NULL, OPT_REPETITION},
                                                 {"length-penalty", required_argument, NULL, OPT_LENGTH_PENALTY},
                                                 {NULL, 0, NULL, 0}};
    int code;
    while ((code = getopt_long(argc, argv, "m:", long_options, NULL)) != -1) {
        if (cli_common_option(&options, code, optarg, "caption")) continue;
        switch (code) {
        case OPT_PROMPT: params.prompt = optarg; break;
        case OPT_BEAMS:
            params.beams = (int)cli_parse_long("caption", "--beams", optarg, 1, 16);
            beams_given = 1;
            break;
        case OPT_MAX_TOKENS:
            params.max_tokens = (int)cli_parse_long("caption", "--max-tokens", optarg, 1, 500);
            max_given = 1;
            break;
        case OPT_MIN_TOKENS:
            params.min_tokens = (int)cli_parse_long("caption", "--min-tokens", optarg, 0, 500);
            min_given = 1;
            break;
        case OPT_SAMPLE: params.sample = 1; break;
        case OPT_TEMPERATURE: params.temperature = parse_float("--temperature", optarg, 1e-3f, 100); break;
        case OPT_TOP_K: params.top_k = (int)cli_parse_long("caption", "--top-k", optarg, 0, 1 << 24); break;
        case OPT_TOP_P: params.top_p = parse_float("--top-p", optarg, 1e-6f, 1); break;
        case OPT_SEED: params.seed = (uint64_t)cli_parse_long("caption", "--seed", optarg, 0, 0x7fffffffffffffffL); break;
        case OPT_REPETITION:
            params.repetition_penalty = parse_float("--repetition-penalty", optarg, 1e-3f, 100);
            repetition_given = 1;
            break;
        case OPT_LENGTH_PENALTY:
            params.length_penalty = parse_float("--length-penalty", optarg, -10, 10);
            length_given = 1;
            break;
        case CLI_OPT_HELP: printf("%s\n%s", caption_help, cli_common_help); return CLI_EXIT_OK;
        default: cli_usage_error("caption", "unknown option");
        }
    }
    if (params.sample && beams_given && params.beams != 1)
        cli_usage_error("caption", "--sample draws one caption: drop --beams");
    if (max_given && min_given && params.min_tokens > params.max_tokens)
        cli_usage_error("caption", "--min-tokens (%d) is more than --max-tokens (%d)", params.min_tokens,
                        params.max_tokens);
    size_t count = (size_t)(argc - optind);
    char **paths = argv + optind;
    if (!count) cli_usage_error("caption", "no images to caption");
    glimpse_model *model = cli_load_model(&options, "caption", 1, 1);
    glimpse_caption_params model_params = glimpse_caption_model_params(model);
    if (!beams_given) params.beams = model_params.beams;
    if (!max_given) params.max_tokens = model_params.max_tokens;
    if (!min_given) params.min_tokens = model_params.min_tokens;
    if (!repetition_given) params.repetition_penalty = model_params.repetition_penalty;
    if (!length_given) params.length_penalty = model_params.length_penalty;
    if (params.sample) params.beams = 1;
    if (params.min_tokens > params.max_tokens) params.min_tokens = params.max_tokens;
    if (glimpse_model_get_kind(model) != GLIMPSE_MODEL_KIND_BLIP_CAPTION) {
        glimpse_model_info info;
        glimpse_model_get_info(model, &info);
        cli_error("%s is a %s model; captioning needs a BLIP captioning model (BlipForConditionalGeneration)",
                  options.model, info.architecture);
        glimpse_model_free(model);
        return CLI_EXIT_FAILURE;
    }
    glimpse_context *ctx = cli_create_context(&options, model);
    glimpse_image_params image_params = glimpse_image_default_params();
    image_params.max_pixels = options.max_pixels;
    streaming stream = {count == 1 && !options.json && isatty(STDOUT_FILENO), 0, 0};
    if (stream.active) {
        params.on_token = print_as_decoded;
        params.user = &stream;
    }
    cli_progress progress;
    cli_progress_start(&progress, &options, count, "images");
    for (size_t i = 0; i < count; i++) {
        glimpse_image *image;
        if (glimpse_image_load_file(paths[i], &image_params, &image) != GLIMPSE_STATUS_OK) {
            cli_progress_end(&progress);
            cli_error("%s", glimpse_last_error());
            options.failures++;
            continue;
        }
        glimpse_caption caption;
        glimpse_status status = glimpse_caption_images(ctx, &image, 1, &params, &caption);
        glimpse_image_free(image);
        cli_progress_end(&progress);
        if (status) {
            cli_error("%s: %s", paths[i], glimpse_last_error());
            options.failures++;
            continue;
        }
        if (options.json) {
            printf("{\"image\": ");
            json_string(stdout, paths[i]);
            printf(", \"caption\": ");
            json_string(stdout, caption.text);
            printf(", \"ids\": [");
            for (size_t j = 0; j < caption.id_count; j++) printf(j ? ", %d" : "%d", caption.ids[j]);
            printf("]}\n");
        } else if (stream.active) {
            if (stream.broken) printf("\r\033[K%s", caption.text);
            printf("\n");
        } else if (count == 1) {
            printf("%s\n", caption.text);
        } else {
            printf("%s\t%s\n", paths[i], caption.text);
        }
        fflush(stdout);
        glimpse_caption_free(&caption);
        cli_progress_step(&progress, i + 1);
    }
    cli_progress_end(&progress);
    glimpse_context_free(ctx);
    glimpse_model_free(model);
    return options.failures ? CLI_EXIT_FAILURE : CLI_EXIT_OK;
}
