/* cli_caption.c — `glimpse caption`: describes images in words with a
 * BLIP, ViT-GPT2 or BLIP-2 captioning model; and `glimpse ask`: BLIP-2 answers a
 * question about each image. Bad images are reported and skipped; with one
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
    "Usage: glimpse caption -m MODEL [--prompt TEXT | --detail 1|2|3] [--beams N] [--max-tokens N] [--min-tokens N]\n"
    "                       [--sample [--temperature T] [--top-k K] [--top-p P] [--seed S]]\n"
    "                       [--repetition-penalty R] [--every SECONDS | --scenes] [--json]\n"
    "                       IMAGE|VIDEO|FOLDER|-...\n"
    "Describes each image, and frames of each video, with a captioning model: BLIP\n"
    "(BlipForConditionalGeneration, e.g. Salesforce/blip-image-captioning-base), ViT-GPT2\n"
    "(VisionEncoderDecoderModel of a ViT and GPT-2, e.g. nlpconnect/vit-gpt2-image-captioning)\n"
    "or BLIP-2 (Blip2ForConditionalGeneration, e.g. Salesforce/blip2-opt-2.7b), or Florence-2\n"
    "(Florence2ForConditionalGeneration, e.g. microsoft/Florence-2-base).\n"
    "  --detail 1|2|3           Florence-2: a caption (<CAPTION>, the default), a detailed one\n"
    "                           (<DETAILED_CAPTION>) or a paragraph (<MORE_DETAILED_CAPTION>)\n"
    "%s"
    "Plain output: the caption alone for one image, else PATH (PATH @ M:SS.s for a video's\n"
    "frame), a tab, the caption. Captions and answers are the decoded text with the\n"
    "whitespace at its ends removed, as BLIP-2's model card prints them (its decode begins\n"
    "with a space); the library's glimpse_caption.text keeps it.\n"
    "JSON: {\"image\": PATH, \"caption\": TEXT, \"ids\": [...]} with ids as transformers'\n"
    "generate returns them: BLIP's and ViT-GPT2's start token, prompt and generated tokens;\n"
    "BLIP-2's start token 2 and the generated tokens (its prompt goes in as embeddings, not in\n"
    "the ids); Florence-2's </s> <s> ... </s> (its task's prompt goes to its encoder); a\n"
    "video's frames also carry \"time\": SECONDS.\n";

const char cli_caption_options_help[] =
    "  --prompt TEXT            the caption continues this text (\"a picture of\")\n"
    "  --beams N                beam search width (default 3, ViT-GPT2 and BLIP-2 1; 1 = greedy)\n"
    "  --max-tokens N           at most N generated tokens, after the prompt (default 20, ViT-GPT2 and BLIP-2 19)\n"
    "  --min-tokens N           at least N generated tokens before it may end (default 5, ViT-GPT2 and BLIP-2 0)\n"
    "  --repetition-penalty R   > 1 discourages repeating tokens (default 1 = off)\n"
    "  --length-penalty L       beam scores are divided by length^L (default 1)\n"
    "  --sample                 draw tokens at random instead of searching (one beam)\n"
    "  --temperature T          sampling temperature (default 1)\n"
    "  --top-k K                sample among the K most likely tokens (default 50; 0 = all)\n"
    "  --top-p P                sample among the most likely tokens holding probability P (default 1)\n"
    "  --seed S                 the same seed gives the same sampled caption (default 0)\n"
    "  --batch-rows N           caption many images together: up to N sequences (an image takes --beams\n"
    "                           of them) step as one, reading the model's weights once for all; the\n"
    "                           same captions, faster (default: 16 images, 16 x --beams sequences;\n"
    "                           1 = one image at a time)\n"
    "BLIP's defaults (3 beams, 5 to 20 new tokens) are its own captioning settings from\n"
    "its paper and code; they give fluent, complete captions with the released checkpoints.\n"
    "ViT-GPT2's are those transformers' generate uses for it (greedy, max_length 20 counting\n"
    "the start token), or its config.json's top level where it has no generation_config.json.\n"
    "BLIP-2's are its text_config's, as transformers' generate takes them (greedy, 19 new\n"
    "tokens, no minimum). Florence-2's are its text_config's too (3 beams, no repeated\n"
    "3-grams), with the model card's 1,024 new tokens at most.\n"
    "A snapshot's generation_config.json (num_beams, max_length, min_length,\n"
    "repetition_penalty, length_penalty) overrides them for that model; options override both.\n";

static const char ask_help[] =
    "Usage: glimpse ask -m BLIP2|LLAVA (-q QUESTION | --prompt TEXT) [--beams N] [--max-tokens N] ...\n"
    "                   [--json] IMAGE|VIDEO|FOLDER|-...\n"
    "Answers a question about each image with a BLIP-2 model (Blip2ForConditionalGeneration,\n"
    "e.g. Salesforce/blip2-opt-2.7b; its prompt \"Question: QUESTION Answer:\") or a LLaVA model\n"
    "(LlavaForConditionalGeneration, e.g. llava-hf/llava-1.5-7b-hf; the question after the\n"
    "picture in the chat template the checkpoint carries).\n"
    "  -q, --question QUESTION  the question\n"
    "  --prompt TEXT            a free prompt instead, given to the model as it is (LLaVA: with\n"
    "                           <image> where the picture goes)\n"
    "  --together               one answer about all the pictures given (LLaVA; at most 16), the\n"
    "                           question after them all, or one <image> per picture in --prompt\n"
    "  --beams, --max-tokens, --min-tokens, --sample ...  as for glimpse caption\n"
    "Defaults: the model's own settings (without generation_config.json, its text_config's:\n"
    "greedy, at most 19 new tokens, ending at a new line).\n"
    "Plain output: the answer alone for one image, else PATH, a tab, the answer; the answer is\n"
    "the decoded text with the spaces at its ends removed, as BLIP-2's model card prints it.\n"
    "JSON: {\"image\": PATH, \"question\": QUESTION, \"answer\": TEXT, \"ids\": [...]} (\"prompt\"\n"
    "in place of \"question\" with --prompt; with --together \"images\": [PATH, ...]), ids as\n"
    "BLIP-2's generate returns them: its start token 2 and the generated tokens; LLaVA's: the\n"
    "generated tokens, the end token included when it stopped on it, and also \"prompt\" (the\n"
    "chat template's rendering) and \"prompt_ids\" (the prompt as tokenized).\n";

enum { OPT_QUESTION = CLI_OPT_CAPTION_END, OPT_DETAIL, OPT_TOGETHER };
/* Pictures --together puts in one question at most. */
#define ASK_TOGETHER_MAX 16

/* Florence-2's caption task for --detail 1, 2, 3. */
static const char *const detail_tasks[] = {"<CAPTION>", "<DETAILED_CAPTION>", "<MORE_DETAILED_CAPTION>"};

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
    case CLI_OPT_BATCH_ROWS:
        params->batch_rows = (int)cli_parse_long(command, "--batch-rows", argument, 1, 4096);
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

/* Parses the command line of `command` ("caption", or "ask" which takes a question) into options, params and
 * video: what is not given stays as glimpse_caption_default_params() leaves it, to the model. False after --help. */
static bool parse_options(const char *command, int argc, char **argv, cli_options *options,
                          glimpse_caption_params *params, const char **question, glimpse_video_options *video,
                          int *detail, bool *together) {
    bool asking = strcmp(command, "ask") == 0;
    static const struct option long_options[] = {CLI_COMMON_LONG_OPTIONS, CLI_CAPTION_LONG_OPTIONS,
                                                 {"question", required_argument, NULL, OPT_QUESTION},
                                                 {"detail", required_argument, NULL, OPT_DETAIL},
                                                 {"together", no_argument, NULL, OPT_TOGETHER},
                                                 CLI_VIDEO_LONG_OPTIONS,
                                                 {NULL, 0, NULL, 0}};
    int code;
    while ((code = getopt_long(argc, argv, asking ? "m:q:" : "m:", long_options, NULL)) != -1) {
        if (cli_common_option(options, code, optarg, command)) continue;
        if (cli_caption_option(params, code, optarg, command)) continue;
        if (cli_video_option(video, code, optarg, command)) continue;
        if (code == OPT_DETAIL) {
            if (asking) cli_usage_error(command, "--detail is glimpse caption's");
            *detail = (int)cli_parse_long(command, "--detail", optarg, 1, 3);
            continue;
        }
        if (code == OPT_TOGETHER) {
            if (!asking) cli_usage_error(command, "--together is glimpse ask's");
            *together = true;
            continue;
        }
        if (code == 'q' || code == OPT_QUESTION) {
            if (!asking) cli_usage_error(command, "--question is glimpse ask's: glimpse ask -m BLIP2 -q QUESTION");
            *question = optarg;
            continue;
        }
        if (code == CLI_OPT_HELP) {
            if (asking)
                printf("%s", ask_help);
            else
                printf(caption_help, cli_caption_options_help);
            printf("\n%s\n%s\n%s", cli_inputs_help, cli_video_help, cli_common_help);
            return false;
        }
        cli_usage_error(command, "unknown option");
    }
    if (asking && !*question == !params->prompt)
        cli_usage_error(command, "give a question (-q QUESTION) or a free prompt (--prompt TEXT), one of the two");
    if (*detail && params->prompt) cli_usage_error(command, "--detail picks Florence-2's caption prompt: drop --prompt");
    cli_caption_check(params, command);
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
    if (s->printed == 0) { /* the whitespace the caption begins with is not shown (json_text_trimmed) */
        size_t lead = strspn(text, " \t\n\r");
        if (lead == length) return false;
        s->printed = lead;
    }
    if (length < s->printed) {
        s->broken = true;
        return false;
    }
    fwrite(text + s->printed, 1, length - s->printed, stdout);
    fflush(stdout);
    s->printed = length;
    return false;
}

/* What `glimpse ask` asked: the question, or a free prompt (NULL both for `glimpse caption`). */
typedef struct asked {
    const char *question, *prompt;
} asked;

static void print_ids(const char *key, const int32_t *ids, size_t count) {
    printf(", \"%s\": [", key);
    for (size_t j = 0; j < count; j++) printf(j ? ", %d" : "%d", ids[j]);
    printf("]");
}

/* , ASKED_KEY: ASKED when asked_key is not NULL, TEXT_KEY: TEXT, "ids": [...] (the object left open). */
static void print_result(const char *asked_key, const char *asked_text, const char *text_key, const char *text,
                         const int32_t *ids, size_t count) {
    if (asked_key) {
        printf(", \"%s\": ", asked_key);
        json_string(stdout, asked_text);
    }
    printf(", \"%s\": ", text_key);
    json_string(stdout, text);
    print_ids("ids", ids, count);
}

/* An answer's fields after ASKED_KEY: ASKED: the answer, its ids, and where the family built the prompt (LLaVA)
 * the prompt as rendered ("prompt", unless that is what was asked) and its ids. */
static void print_answer(const char *asked_key, const char *asked_text, const glimpse_caption *answer) {
    print_result(asked_key, asked_text, "answer", answer->text, answer->ids, answer->id_count);
    if (!answer->prompt_ids) return;
    if (strcmp(asked_key, "prompt") != 0) {
        printf(", \"prompt\": ");
        json_string(stdout, answer->prompt);
    }
    print_ids("prompt_ids", answer->prompt_ids, answer->prompt_id_count);
}

void cli_print_caption_result(const char *text, const int32_t *ids, size_t count) {
    print_result(NULL, NULL, "caption", text, ids, count);
}

void cli_print_caption_fields(const char *path, const char *text, const int32_t *ids, size_t count) {
    printf("{\"image\": ");
    json_string(stdout, path);
    cli_print_caption_result(text, ids, count);
}

/* One result: a JSON line, the end of the streamed words, the caption alone
 * (one image), or PATH, a tab, the caption. */
static void print_caption(const cli_options *options, const streaming *stream, size_t count,
                          const cli_picture *picture, const asked *ask, const glimpse_caption *caption) {
    if (options->json) {
        cli_json_picture(stdout, picture);
        if (ask->question || ask->prompt)
            print_answer(ask->question ? "question" : "prompt", ask->question ? ask->question : ask->prompt, caption);
        else
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

/* Pictures per library call: their captions step together (continuous batching) unless --batch-rows 1. */
#define CAPTION_GROUP_MAX 64

/* Captions or answers group[0..count) in one call; prints each result in order. When the call fails, each picture
 * is tried alone, so that the one that fails is named and the others still get their captions. */
static void caption_group(cli_options *options, glimpse_context *ctx, cli_picture *group, size_t count,
                          size_t inputs, glimpse_caption_params *params, const asked *ask, streaming *stream) {
    glimpse_image *images[CAPTION_GROUP_MAX];
    glimpse_caption captions[CAPTION_GROUP_MAX];
    for (size_t i = 0; i < count; i++) images[i] = group[i].image;
    glimpse_status status = ask->question ? glimpse_ask_images(ctx, images, count, ask->question, params, captions)
                                          : glimpse_caption_images(ctx, images, count, params, captions);
    if (status && count > 1) {
        for (size_t i = 0; i < count; i++) caption_group(options, ctx, group + i, 1, inputs, params, ask, stream);
        return;
    }
    for (size_t i = 0; i < count; i++) {
        glimpse_image_free(group[i].image);
        if (status) {
            cli_error("%s: %s", group[i].path, glimpse_last_error());
            options->failures++;
            continue;
        }
        json_text_trimmed(captions[i].text);
        print_caption(options, stream, inputs, &group[i], ask, &captions[i]);
        glimpse_caption_free(&captions[i]);
    }
}

/* Captions the images, and the sampled frames of videos, several to a call (as --batch-rows allows); each input
 * that fails is named on stderr and counted, and the others go on. Results come in the order of the inputs. */
static void caption_files(cli_options *options, glimpse_context *ctx, char *const *paths, size_t count,
                          glimpse_caption_params *params, const asked *ask, const glimpse_video_options *video) {
    streaming stream = {.active = count == 1 && !options->json && isatty(STDOUT_FILENO), .printed = 0, .broken = false};
    size_t group_size = params->batch_rows == 1 ? 1
                        : params->batch_rows > GLIMPSE_CAPTION_DEFAULT_BATCH_ROWS
                            ? (size_t)params->batch_rows
                            : GLIMPSE_CAPTION_DEFAULT_BATCH_ROWS;
    if (group_size > CAPTION_GROUP_MAX) group_size = CAPTION_GROUP_MAX;
    cli_pictures pictures;
    cli_pictures_start(&pictures, options, video, paths, count);
    cli_picture group[CAPTION_GROUP_MAX];
    size_t grouped = 0;
    bool more = true;
    while (more) {
        more = cli_pictures_next(&pictures, &group[grouped]);
        if (more) {
            /* words appear as they come for one image, not for a video's frames */
            if (group[grouped].seconds >= 0) stream.active = false;
            grouped++;
        }
        if (grouped && (grouped == group_size || !more)) {
            params->on_token = stream.active ? print_as_decoded : NULL;
            params->user = stream.active ? &stream : NULL;
            cli_progress_end(&pictures.progress);
            caption_group(options, ctx, group, grouped, count, params, ask, &stream);
            cli_progress_step(&pictures.progress, pictures.progress.done);
            grouped = 0;
        }
    }
    cli_pictures_end(&pictures);
}

/* glimpse ask --together: every picture given (videos' sampled frames too) in one question. */
static void ask_together(cli_options *options, glimpse_context *ctx, char *const *paths, size_t count,
                         glimpse_caption_params *params, const asked *ask, const glimpse_video_options *video) {
    cli_pictures pictures;
    cli_pictures_start(&pictures, options, video, paths, count);
    cli_picture group[ASK_TOGETHER_MAX + 1];
    glimpse_image *images[ASK_TOGETHER_MAX];
    size_t n = 0;
    while (n <= ASK_TOGETHER_MAX && cli_pictures_next(&pictures, &group[n])) n++;
    cli_progress_end(&pictures.progress);
    glimpse_caption answer = {0};
    if (n > ASK_TOGETHER_MAX) {
        cli_error("--together takes at most %d pictures", ASK_TOGETHER_MAX);
        options->failures++;
    } else if (n) {
        for (size_t i = 0; i < n; i++) images[i] = group[i].image;
        params->prompt = ask->prompt;
        if (glimpse_ask_together(ctx, images, n, ask->question, params, &answer)) {
            cli_error("%s", glimpse_last_error());
            options->failures++;
        } else if (options->json) {
            printf("{\"images\": [");
            for (size_t i = 0; i < n; i++) {
                if (i) printf(", ");
                json_string(stdout, group[i].path);
            }
            printf("]");
            json_text_trimmed(answer.text);
            print_answer(ask->question ? "question" : "prompt", ask->question ? ask->question : ask->prompt, &answer);
            printf("}\n");
        } else {
            json_text_trimmed(answer.text);
            printf("%s\n", answer.text);
        }
    }
    glimpse_caption_free(&answer);
    for (size_t i = 0; i < n && i <= ASK_TOGETHER_MAX; i++) glimpse_image_free(group[i].image);
    cli_pictures_end(&pictures);
}

/* `glimpse caption` and `glimpse ask`: the same options and output, ask with its question. */
static int caption_command(const char *command, int argc, char **argv) {
    cli_options options;
    cli_options_init(&options);
    glimpse_caption_params params = glimpse_caption_default_params();
    asked ask = {NULL, NULL};
    glimpse_video_options video = glimpse_video_default_options();
    int detail = 0;
    bool together = false;
    if (!parse_options(command, argc, argv, &options, &params, &ask.question, &video, &detail, &together))
        return CLI_EXIT_OK;
    if (strcmp(command, "ask") == 0) ask.prompt = params.prompt;
    if (argc == optind) cli_usage_error(command, "no images given");
    size_t count;
    char **paths = cli_expand_inputs(&options, command, argv + optind, (size_t)(argc - optind), &count);
    if (!count) return CLI_EXIT_FAILURE; /* folders without images, said on stderr */
    glimpse_model *model = cli_load_model(&options, command, true, true);
    cli_caption_fit_model(&params, model);
    glimpse_model_kind kind = glimpse_model_get_kind(model);
    bool fits = glimpse_model_kind_can(kind, ask.question ? GLIMPSE_CAPABILITY_ASK : GLIMPSE_CAPABILITY_CAPTION);
    if (!fits) {
        glimpse_model_info info;
        glimpse_model_get_info(model, &info);
        cli_error(ask.question ? "%s is a %s model; answering questions needs a BLIP-2 model "
                                 "(Blip2ForConditionalGeneration) or a LLaVA one (LlavaForConditionalGeneration)"
                               : "%s is a %s model; captioning needs a BLIP captioning model "
                                 "(BlipForConditionalGeneration), a ViT-GPT2 one (VisionEncoderDecoderModel of ViT "
                                 "and GPT-2) or BLIP-2 (Blip2ForConditionalGeneration)",
                  options.model, info.architecture);
        glimpse_model_free(model);
        cli_inputs_free(paths, count);
        return CLI_EXIT_FAILURE;
    }
    if (detail) {
        if (!glimpse_model_kind_can(kind, GLIMPSE_CAPABILITY_TASK)) {
            cli_error("--detail is Florence-2's (its three caption tasks); %s captions with one", options.model);
            glimpse_model_free(model);
            cli_inputs_free(paths, count);
            return CLI_EXIT_FAILURE;
        }
        params.prompt = detail_tasks[detail - 1];
    }
    glimpse_context *ctx = cli_create_context(&options, model);
    if (together)
        ask_together(&options, ctx, paths, count, &params, &ask, &video);
    else
        caption_files(&options, ctx, paths, count, &params, &ask, &video);
    cli_inputs_free(paths, count);
    return cli_finish(&options, ctx, model);
}

int command_caption(int argc, char **argv) { return caption_command("caption", argc, argv); }

int command_ask(int argc, char **argv) { return caption_command("ask", argc, argv); }
