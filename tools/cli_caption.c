/* cli_caption.c — `glimpse caption`: describes images in words with a
 * BLIP or ViT-GPT2 captioning model. Bad images are reported and skipped; with one
 * image and a terminal on stdout the words appear as they are decoded. */
#include <getopt.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tools/cli_caption.h"
#include "tools/cli_common.h"
#include "tools/cli_inputs.h"
#include "tools/commands.h"

static const char caption_help[] =
    "Usage: glimpse caption -m MODEL [--prompt TEXT] [--beams N] [--max-tokens N] [--min-tokens N]\n"
    "                       [--sample [--temperature T] [--top-k K] [--top-p P] [--seed S]]\n"
    "                       [--repetition-penalty R] [--every SECONDS | --scenes] [--json]\n"
    "                       IMAGE|VIDEO|FOLDER|-...\n"
    "Describes each image, and frames of each video, with a captioning model: BLIP\n"
    "(BlipForConditionalGeneration, e.g. Salesforce/blip-image-captioning-base) or ViT-GPT2\n"
    "(VisionEncoderDecoderModel of a ViT and GPT-2, e.g. nlpconnect/vit-gpt2-image-captioning).\n"
    "%s"
    "Plain output: the caption alone for one image, else PATH (PATH @ M:SS.s for a video's\n"
    "frame), a tab, the caption.\n"
    "JSON: {\"image\": PATH, \"caption\": TEXT, \"ids\": [...]} with ids as transformers'\n"
    "generate returns them (start token, prompt, generated tokens); a video's frames also\n"
    "carry \"time\": SECONDS.\n";

const char cli_caption_options_help[] =
    "  --prompt TEXT            the caption continues this text (\"a picture of\")\n"
    "  --beams N                beam search width (default 3, ViT-GPT2 1; 1 = greedy)\n"
    "  --max-tokens N           at most N generated tokens, after the prompt (default 20, ViT-GPT2 19)\n"
    "  --min-tokens N           at least N generated tokens before it may end (default 5, ViT-GPT2 0)\n"
    "  --repetition-penalty R   > 1 discourages repeating tokens (default 1 = off)\n"
    "  --length-penalty L       beam scores are divided by length^L (default 1)\n"
    "  --sample                 draw tokens at random instead of searching (one beam)\n"
    "  --temperature T          sampling temperature (default 1)\n"
    "  --top-k K                sample among the K most likely tokens (default 50; 0 = all)\n"
    "  --top-p P                sample among the most likely tokens holding probability P (default 1)\n"
    "  --seed S                 the same seed gives the same sampled caption (default 0)\n"
    "The defaults (3 beams, 5 to 20 new tokens) are BLIP's own captioning settings from\n"
    "its paper and code; they give fluent, complete captions with the released checkpoints.\n"
    "ViT-GPT2's are those transformers' generate uses for it (greedy, max_length 20 counting\n"
    "the start token), or its config.json's top level where it has no generation_config.json.\n"
    "A snapshot's generation_config.json (num_beams, max_length, min_length,\n"
    "repetition_penalty, length_penalty) overrides them for that model; options override both.\n";

/* The most --max-tokens and --min-tokens. */
#define CAPTION_MAX_TOKENS 500

static float parse_float(const char *command, const char *option, const char *text, float minimum, float maximum) {
    return (float)cli_parse_double(command, option, text, minimum, maximum);
}

bool cli_caption_option(glimpse_caption_params *params, int code, const char *argument, const char *command) {
    switch (code) {
    case CLI_OPT_PROMPT: params->prompt = argument; break;
    case CLI_OPT_BEAMS:
        params->beams = (int)cli_parse_long(command, "--beams", argument, 1, GLIMPSE_CAPTION_MAX_BEAMS);
        break;
    case CLI_OPT_MAX_TOKENS:
        params->max_tokens = (int)cli_parse_long(command, "--max-tokens", argument, 1, CAPTION_MAX_TOKENS);
        break;
    case CLI_OPT_MIN_TOKENS:
        params->min_tokens = (int)cli_parse_long(command, "--min-tokens", argument, 0, CAPTION_MAX_TOKENS);
        break;
    case CLI_OPT_SAMPLE: params->sample = true; break;
    case CLI_OPT_TEMPERATURE: params->temperature = parse_float(command, "--temperature", argument, 1e-3f, 100); break;
    case CLI_OPT_TOP_K: params->top_k = (int)cli_parse_long(command, "--top-k", argument, 0, 1 << 24); break;
    case CLI_OPT_TOP_P: params->top_p = parse_float(command, "--top-p", argument, 1e-6f, 1); break;
    case CLI_OPT_SEED:
        params->seed = (uint64_t)cli_parse_long(command, "--seed", argument, 0, 0x7fffffffffffffffL);
        break;
    case CLI_OPT_REPETITION:
        params->repetition_penalty = parse_float(command, "--repetition-penalty", argument, 1e-3f, 100);
        break;
    case CLI_OPT_LENGTH_PENALTY:
        params->length_penalty = parse_float(command, "--length-penalty", argument, -10, 10);
        break;
    default: return false;
    }
    return true;
}

void cli_caption_check(const glimpse_caption_params *params, const char *command) {
    bool beams_given = params->beams != GLIMPSE_CAPTION_MODEL_DEFAULT;
    if (params->sample && beams_given && params->beams != 1)
        cli_usage_error(command, "--sample draws one caption: drop --beams");
    if (params->max_tokens != GLIMPSE_CAPTION_MODEL_DEFAULT && params->min_tokens > params->max_tokens)
        cli_usage_error(command, "--min-tokens (%d) is more than --max-tokens (%d)", params->min_tokens,
                        params->max_tokens);
}

void cli_caption_fit_model(glimpse_caption_params *params, const glimpse_model *model) {
    /* --min-tokens above the model's own maximum is lowered to it, as --max-tokens lowers the model's minimum */
    int model_max_tokens = glimpse_caption_model_params(model).max_tokens;
    if (params->max_tokens == GLIMPSE_CAPTION_MODEL_DEFAULT && params->min_tokens > model_max_tokens)
        params->min_tokens = model_max_tokens;
}

/* Parses the command line into options and params: what is not given stays
 * as glimpse_caption_default_params() leaves it, to the model. False after --help. */
static bool parse_options(int argc, char **argv, cli_options *options, glimpse_caption_params *params,
                          video_params *video) {
    static const struct option long_options[] = {CLI_COMMON_LONG_OPTIONS, CLI_CAPTION_LONG_OPTIONS,
                                                 CLI_VIDEO_LONG_OPTIONS,
                                                 {NULL, 0, NULL, 0}};
    int code;
    while ((code = getopt_long(argc, argv, "m:", long_options, NULL)) != -1) {
        if (cli_common_option(options, code, optarg, "caption")) continue;
        if (cli_caption_option(params, code, optarg, "caption")) continue;
        if (cli_video_option(video, code, optarg, "caption")) continue;
        if (code == CLI_OPT_HELP) {
            printf(caption_help, cli_caption_options_help);
            printf("\n%s\n%s\n%s", cli_inputs_help, cli_video_help, cli_common_help);
            return false;
        }
        cli_usage_error("caption", "unknown option");
    }
    cli_caption_check(params, "caption");
    return true;
}

typedef struct streaming {
    bool active;
    size_t printed; /* bytes of the caption already on the terminal */
    bool broken;    /* the text changed before what was printed: reprint at the end */
} streaming;

static bool print_as_decoded(void *user, size_t image, int32_t id, const char *text) {
    (void)image;
    (void)id;
    streaming *s = user;
    size_t length = strlen(text);
    if (s->broken) return false;
    if (length < s->printed) {
        s->broken = true;
        return false;
    }
    fwrite(text + s->printed, 1, length - s->printed, stdout);
    fflush(stdout);
    s->printed = length;
    return false;
}

void cli_print_caption_result(const char *text, const int32_t *ids, size_t count) {
    printf(", \"caption\": ");
    json_string(stdout, text);
    printf(", \"ids\": [");
    for (size_t j = 0; j < count; j++) printf(j ? ", %d" : "%d", ids[j]);
    printf("]");
}

void cli_print_caption_fields(const char *path, const char *text, const int32_t *ids, size_t count) {
    printf("{\"image\": ");
    json_string(stdout, path);
    cli_print_caption_result(text, ids, count);
}

/* One result: a JSON line, the end of the streamed words, the caption alone
 * (one image), or PATH, a tab, the caption. */
static void print_caption(const cli_options *options, const streaming *stream, size_t count,
                          const cli_picture *picture, const glimpse_caption *caption) {
    if (options->json) {
        cli_json_picture(stdout, picture);
        cli_print_caption_result(caption->text, caption->ids, caption->id_count);
        printf("}\n");
    } else if (stream->active) {
        if (stream->broken) printf("\r\033[K%s", caption->text);
        printf("\n");
    } else if (count == 1 && picture->seconds < 0) {
        printf("%s\n", caption->text);
    } else {
        cli_print_picture(stdout, picture);
        printf("\t%s\n", caption->text);
    }
    fflush(stdout);
}

/* Captions the images, and the sampled frames of videos, one at a time;
 * each input that fails is named on stderr and counted, and the others go on. */
static void caption_files(cli_options *options, glimpse_context *ctx, char *const *paths, size_t count,
                          glimpse_caption_params *params, const video_params *video) {
    streaming stream = {.active = count == 1 && !options->json && isatty(STDOUT_FILENO), .printed = 0, .broken = false};
    cli_pictures pictures;
    cli_pictures_start(&pictures, options, video, paths, count);
    cli_picture picture;
    while (cli_pictures_next(&pictures, &picture)) {
        /* words appear as they come for one image, not for a video's frames */
        if (picture.seconds >= 0) stream.active = false;
        params->on_token = stream.active ? print_as_decoded : NULL;
        params->user = stream.active ? &stream : NULL;
        glimpse_caption caption;
        glimpse_status status = glimpse_caption_images(ctx, &picture.image, 1, params, &caption);
        glimpse_image_free(picture.image);
        cli_progress_end(&pictures.progress);
        if (status) {
            cli_error("%s: %s", picture.path, glimpse_last_error());
            options->failures++;
            continue;
        }
        print_caption(options, &stream, count, &picture, &caption);
        glimpse_caption_free(&caption);
        cli_progress_step(&pictures.progress, pictures.progress.done);
    }
    cli_pictures_end(&pictures);
}

int command_caption(int argc, char **argv) {
    cli_options options;
    cli_options_init(&options);
    glimpse_caption_params params = glimpse_caption_default_params();
    video_params video = video_default_params();
    if (!parse_options(argc, argv, &options, &params, &video)) return CLI_EXIT_OK;
    if (argc == optind) cli_usage_error("caption", "no images to caption");
    size_t count;
    char **paths = cli_expand_inputs(&options, "caption", argv + optind, (size_t)(argc - optind), &count);
    if (!count) return CLI_EXIT_FAILURE; /* folders without images, said on stderr */
    glimpse_model *model = cli_load_model(&options, "caption", true, true);
    cli_caption_fit_model(&params, model);
    glimpse_model_kind kind = glimpse_model_get_kind(model);
    if (kind != GLIMPSE_MODEL_KIND_BLIP_CAPTION && kind != GLIMPSE_MODEL_KIND_VIT_GPT2) {
        glimpse_model_info info;
        glimpse_model_get_info(model, &info);
        cli_error("%s is a %s model; captioning needs a BLIP captioning model (BlipForConditionalGeneration) or a "
                  "ViT-GPT2 one (VisionEncoderDecoderModel of ViT and GPT-2)", options.model, info.architecture);
        glimpse_model_free(model);
        cli_inputs_free(paths, count);
        return CLI_EXIT_FAILURE;
    }
    glimpse_context *ctx = cli_create_context(&options, model);
    caption_files(&options, ctx, paths, count, &params, &video);
    cli_inputs_free(paths, count);
    return cli_finish(&options, ctx, model);
}
