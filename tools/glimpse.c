/* glimpse.c — the glimpse command-line program: picks the subcommand and
 * hands it the rest of the arguments. Each subcommand lives in cli_*.c. */
#include <stdio.h>
#include <string.h>

#include "tools/cli_common.h"
#include "tools/commands.h"

static const char usage[] =
    "glimpse " GLIMPSE_VERSION_STRING " — vision-language models (CLIP, SigLIP, BLIP, ViT-GPT2, BLIP-2) on the CPU\n"
    "\n"
    "Usage: glimpse COMMAND [OPTIONS] ...\n"
    "\n"
    "Commands:\n"
    "  embed       print image and text embeddings\n"
    "  rank        rank images against texts\n"
    "  classify    zero-shot classification of images over labels\n"
    "  caption     describe images (and video frames) in words (BLIP, ViT-GPT2, BLIP-2)\n"
    "  ask         answer a question about images (BLIP-2)\n"
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
    "the local Hugging Face cache. 'glimpse COMMAND --help' explains each command.\n";

typedef struct command {
    const char *name;
    int (*run)(int argc, char **argv);
} command;

int main(int argc, char **argv) {
    static const command commands[] = {
        {"embed", command_embed}, {"rank", command_rank}, {"classify", command_classify}, {"info", command_info},
        {"caption", command_caption}, {"bench", command_bench},
        {"serve", command_serve},
        {"index", command_index},     {"search", command_search},
        {"ask", command_ask},         {"duplicates", command_duplicates},
        {"explain", command_explain}};
    if (argc < 2) {
        fputs(usage, stderr);
        return CLI_EXIT_USAGE;
    }
    const char *name = argv[1];
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0 || strcmp(name, "help") == 0) {
        fputs(usage, stdout);
        return CLI_EXIT_OK;
    }
    if (strcmp(name, "--version") == 0 || strcmp(name, "version") == 0) {
        printf("glimpse %s\n", glimpse_version());
        return CLI_EXIT_OK;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(name, commands[i].name) == 0) return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "glimpse: unknown command '%s'\nTry 'glimpse --help'.\n", name);
    return CLI_EXIT_USAGE;
}
