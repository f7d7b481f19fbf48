/* glimpse.c — the glimpse command-line program: picks the subcommand and
 * hands it the rest of the arguments, or says that this build lacks the
 * optional part it needs. Each subcommand lives in cli_*.c. */
#include <stdio.h>
#include <string.h>

#include "core/features.h"
#include "tools/cli_common.h"
#include "tools/commands.h"

#if !GLIMPSE_WITH_SERVER /* cli_serve.c is not built: main answers from the command's feature */
#define command_serve NULL
#endif

static const char usage[] =
    "glimpse " GLIMPSE_VERSION_STRING " — vision-language models (CLIP, SigLIP, BLIP, ViT-GPT2, BLIP-2, Florence-2,\n"
    "LLaVA) on the CPU\n"
    "\n"
    "Usage: glimpse COMMAND [OPTIONS] ...\n"
    "\n"
    "Commands:\n"
    "  embed       print image and text embeddings\n"
    "  rank        rank images against texts\n"
    "  classify    zero-shot classification of images over labels\n"
    "  caption     describe images (and video frames) in words (BLIP, ViT-GPT2, BLIP-2)\n"
    "  ask         answer a question about images (BLIP-2, LLaVA)\n"
    "  chat        talk about pictures in the terminal (LLaVA, BLIP-2)\n"
    "  ocr         read the text in pictures (Florence-2)\n"
    "  detect      find objects, or the things a phrase names, with boxes (Florence-2)\n"
    "  segment     outline what a phrase or a region names (Florence-2)\n"
    "  describe    describe a region of a picture in words (Florence-2)\n"
    "  task        run any Florence-2 task as its model card names it (<OD>, <OCR>, ...)\n"
    "  explain     show which parts of a picture each word or match attended to\n"
    "  index       build or refresh a search index of a photo collection\n"
    "  search      search an index with texts, images or combinations\n"
    "  duplicates  list groups of near-identical pictures in an index\n"
    "  serve       serve the models over HTTP (embed, rank, caption, search; immich's /predict)\n"
    "  info        describe a model\n"
    "  bench       time each stage of a model (developers)\n"
    "\n"
    "MODEL is a Hugging Face snapshot folder (config.json, model.safetensors, tokenizer\n"
    "files), or a hub id such as openai/clip-vit-base-patch32 already downloaded into\n"
    "the local Hugging Face cache. 'glimpse COMMAND --help' explains each command;\n"
    "'glimpse --version' lists the optional parts this build has.\n";

typedef struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    int needs; /* the glimpse_feature the command needs, or -1 */
} command;

/* The version and the optional parts in this build, one line each. */
static int print_version(void) {
    const char *features = glimpse_build_features();
    printf("glimpse %s\nwith: %s\n", glimpse_version(), features[0] ? features : "(no optional parts)");
    return CLI_EXIT_OK;
}

int main(int argc, char **argv) {
    static const command commands[] = {
        {"embed", command_embed, -1}, {"rank", command_rank, -1}, {"classify", command_classify, -1},
        {"info", command_info, -1}, {"caption", command_caption, -1}, {"bench", command_bench, -1},
        {"serve", command_serve, GLIMPSE_FEATURE_SERVER},
        {"index", command_index, GLIMPSE_FEATURE_INDEX}, {"search", command_search, GLIMPSE_FEATURE_INDEX},
        {"ask", command_ask, -1}, {"chat", command_chat, -1}, {"duplicates", command_duplicates, GLIMPSE_FEATURE_INDEX},
        {"explain", command_explain, -1}, {"task", command_task, -1}, {"ocr", command_ocr, -1},
        {"detect", command_detect, -1}, {"segment", command_segment, -1}, {"describe", command_describe, -1}};
    if (argc < 2) {
        fputs(usage, stderr);
        return CLI_EXIT_USAGE;
    }
    const char *name = argv[1];
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0 || strcmp(name, "help") == 0) {
        fputs(usage, stdout);
        return CLI_EXIT_OK;
    }
    if (strcmp(name, "--version") == 0 || strcmp(name, "version") == 0) return print_version();
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        const command *chosen = &commands[i];
        if (strcmp(name, chosen->name) != 0) continue;
        if (chosen->needs >= 0 && !glimpse_has_feature((glimpse_feature)chosen->needs)) {
            feature_unavailable((glimpse_feature)chosen->needs, NULL, NULL);
            fprintf(stderr, "glimpse %s: %s\n", name, glimpse_last_error());
            return CLI_EXIT_FAILURE;
        }
        return chosen->run(argc - 1, argv + 1);
    }
    fprintf(stderr, "glimpse: unknown command '%s'\nTry 'glimpse --help'.\n", name);
    return CLI_EXIT_USAGE;
}
