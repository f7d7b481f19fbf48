/* cli_chat.c — `glimpse chat`: a conversation about pictures in the terminal with a model that converses (LLaVA,
 * BLIP-2). Each line read is the user's message; the answer is printed as it is decoded. The conversation is
 * kept whole (every message goes back to glimpse_chat, which reuses the context's key/value cache for what it has
 * already read), so an answer costs only the new message. Lines starting with / are commands (/image, /reset,
 * /quit). Ctrl-C stops an answer being written (what was written stays in the conversation); at the prompt it
 * ends the conversation. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tools/cli_caption.h"
#include "tools/cli_common.h"
#include "tools/cli_inputs.h"
#include "tools/commands.h"

static const char chat_help[] =
    "Usage: glimpse chat -m LLAVA|BLIP2 [--system TEXT] [--max-tokens N] [--sample ...] [PICTURE...]\n"
    "A conversation about pictures: each line typed is a message, and the model's answer is\n"
    "written as it comes. The pictures given go with the first message. The model keeps what\n"
    "it has read (its key/value cache), so each answer reads only the new message.\n"
    "Models: LLaVA (LlavaForConditionalGeneration, e.g. llava-hf/llava-1.5-7b-hf: the\n"
    "conversation in the checkpoint's chat template) and BLIP-2 (Blip2ForConditionalGeneration:\n"
    "\"Question: ... Answer: ...\" chained, one picture).\n"
    "  --system TEXT            a system message first (for templates that take one)\n"
    "  --beams, --max-tokens, --min-tokens, --sample ...  as for glimpse caption (defaults:\n"
    "                           the model's own settings)\n"
    "At the prompt:\n"
    "  /image PATH              show another picture with the next message\n"
    "  /reset                   start again (the pictures given go with the next message)\n"
    "  /quit                    end (so do Ctrl-D and Ctrl-C at the prompt)\n"
    "Ctrl-C while an answer is written stops it; the words written stay in the conversation.\n"
    "Standard input need not be a terminal: each line is then a message, and each answer\n"
    "ends with a new line.\n";

enum { OPT_SYSTEM = CLI_OPT_CAPTION_END };

static volatile sig_atomic_t interrupted;

static void on_interrupt(int signal_number) {
    (void)signal_number;
    interrupted = 1;
}

/* The conversation: messages with their own copies of texts, and the pictures they show. */
typedef struct conversation {
    glimpse_chat_message *messages;
    glimpse_chat_part **parts; /* each message's parts, owned */
    size_t count, capacity;
    glimpse_image **pending; /* pictures for the next user message */
    size_t pending_count, pending_capacity;
} conversation;

static void *grown(void *buffer, size_t *capacity, size_t need, size_t size) {
    if (need <= *capacity) return buffer;
    size_t capacity_new = need * 2;
    void *p = realloc(buffer, capacity_new * size);
    if (!p) {
        cli_error("out of memory");
        exit(CLI_EXIT_FAILURE);
    }
    *capacity = capacity_new;
    return p;
}

/* Appends a message of role with the pending pictures (user messages) and text (may be NULL). */
static void add_message(conversation *c, const char *role, const char *text) {
    size_t capacity = c->capacity; /* messages and parts grow together */
    c->messages = grown(c->messages, &c->capacity, c->count + 1, sizeof *c->messages);
    c->parts = grown(c->parts, &capacity, c->count + 1, sizeof *c->parts);
    bool user = strcmp(role, "assistant") != 0;
    size_t pictures = user ? c->pending_count : 0, n = pictures + (text ? 1 : 0);
    glimpse_chat_part *parts = cli_calloc(n ? n : 1, sizeof *parts);
    for (size_t i = 0; i < pictures; i++) parts[i].image = c->pending[i];
    if (text && !(parts[pictures].text = strdup(text))) {
        cli_error("out of memory");
        exit(CLI_EXIT_FAILURE);
    }
    if (user) c->pending_count = 0; /* the message owns them now */
    c->parts[c->count] = parts;
    c->messages[c->count++] = (glimpse_chat_message){role, parts, n};
}

/* Forgets every message from `keep` on (freeing their texts and pictures). */
static void truncate_conversation(conversation *c, size_t keep) {
    while (c->count > keep) {
        glimpse_chat_message *m = &c->messages[--c->count];
        for (size_t i = 0; i < m->part_count; i++) {
            free((char *)c->parts[c->count][i].text);
            glimpse_image_free(c->parts[c->count][i].image);
        }
        free(c->parts[c->count]);
    }
}

typedef struct stream {
    size_t printed;
    char *text; /* the answer so far, as decoded */
} stream;

/* Prints what is new in the decoded text; a replacement character at its end waits (it may be the first
 * bytes of a character the next token completes). */
static bool print_new_words(void *user, size_t image, int32_t id, const char *text) {
    (void)image, (void)id;
    stream *s = user;
    size_t length = strlen(text), from = s->printed ? s->printed : strspn(text, " "); /* from its first word */
    while (length >= 3 && !memcmp(text + length - 3, "\xEF\xBF\xBD", 3)) length -= 3;
    if (length > from && !strncmp(text, s->text ? s->text : "", s->printed)) {
        fwrite(text + from, 1, length - from, stdout);
        fflush(stdout);
        s->printed = length;
    }
    free(s->text);
    s->text = strdup(text);
    return interrupted != 0;
}

/* One turn: the user's line, the answer streamed; the answer (or what was written of it) kept. False when the
 * model failed (the user's message is taken back). */
static bool turn(cli_options *options, glimpse_context *ctx, conversation *c, const char *line,
                 const glimpse_caption_params *params) {
    size_t before = c->count;
    add_message(c, "user", line);
    stream s = {0, NULL};
    glimpse_caption_params p = *params;
    p.on_token = print_new_words, p.user = &s;
    glimpse_caption reply;
    interrupted = 0;
    glimpse_status status = glimpse_chat(ctx, c->messages, c->count, &p, &reply);
    bool ok = status == GLIMPSE_STATUS_OK || (status == GLIMPSE_STATUS_CANCELLED && s.text);
    if (ok) {
        char *answer = status == GLIMPSE_STATUS_OK ? reply.text : s.text;
        size_t end = strlen(answer), from = s.printed ? s.printed : strspn(answer, " \t\r\n");
        while (end && strchr(" \t\r\n", answer[end - 1])) end--;
        if (end > from) fwrite(answer + from, 1, end - from, stdout); /* what was held back, without the end's spaces */
        add_message(c, "assistant", json_text_trimmed(answer));
        printf("%s\n", status == GLIMPSE_STATUS_CANCELLED ? " [stopped]" : "");
    } else {
        if (s.printed) printf("\n");
        cli_error("%s", glimpse_last_error());
        options->failures++;
        /* the pictures of the message go back to the next one */
        glimpse_chat_message *m = &c->messages[before];
        for (size_t i = 0; i < m->part_count; i++)
            if (m->parts[i].image) {
                c->pending = grown(c->pending, &c->pending_capacity, c->pending_count + 1, sizeof *c->pending);
                c->pending[c->pending_count++] = m->parts[i].image;
                c->parts[before][i].image = NULL;
            }
        truncate_conversation(c, before);
    }
    fflush(stdout);
    glimpse_caption_free(&reply);
    free(s.text);
    return ok;
}

static bool load_picture(const cli_options *options, conversation *c, const char *path) {
    glimpse_image *image;
    if (!cli_load_image(options, path, NULL, &image)) return false;
    c->pending = grown(c->pending, &c->pending_capacity, c->pending_count + 1, sizeof *c->pending);
    c->pending[c->pending_count++] = image;
    return true;
}

/* A command line (starting with /): false to end the conversation. */
static bool command(cli_options *options, conversation *c, char *line, char *const *pictures, size_t picture_count,
                    size_t system_messages) {
    if (!strcmp(line, "/quit") || !strcmp(line, "/exit")) return false;
    if (!strcmp(line, "/reset")) {
        truncate_conversation(c, system_messages);
        for (size_t i = 0; i < picture_count; i++) load_picture(options, c, pictures[i]);
        fprintf(stderr, "(a new conversation)\n");
    } else if (!strncmp(line, "/image ", 7) && line[7]) {
        if (load_picture(options, c, line + 7)) fprintf(stderr, "(%s goes with the next message)\n", line + 7);
    } else {
        fprintf(stderr, "commands: /image PATH, /reset, /quit\n");
    }
    return true;
}

/* Reads lines until the end, /quit or Ctrl-C at the prompt (true). */
static bool converse(cli_options *options, glimpse_context *ctx, conversation *c, const glimpse_caption_params *p,
                     char *const *pictures, size_t picture_count, size_t system_messages) {
    bool terminal = isatty(STDIN_FILENO);
    char *line = NULL;
    size_t capacity = 0;
    for (;;) {
        if (terminal) printf("> "), fflush(stdout);
        interrupted = 0;
        errno = 0;
        ssize_t length = getline(&line, &capacity, stdin);
        if (length < 0) {
            if (terminal) printf("\n");
            break;
        }
        interrupted = 0;
        while (length && (line[length - 1] == '\n' || line[length - 1] == '\r')) line[--length] = '\0';
        if (!length) continue;
        if (line[0] == '/') {
            if (!command(options, c, line, pictures, picture_count, system_messages)) break;
            continue;
        }
        turn(options, ctx, c, line, p);
    }
    free(line);
    return interrupted != 0;
}

int command_chat(int argc, char **argv) {
    cli_options options;
    cli_options_init(&options);
    glimpse_caption_params params = glimpse_caption_default_params();
    const char *system_text = NULL;
    static const struct option long_options[] = {CLI_COMMON_LONG_OPTIONS, CLI_CAPTION_LONG_OPTIONS,
                                                 {"system", required_argument, NULL, OPT_SYSTEM}, {NULL, 0, NULL, 0}};
    int code;
    while ((code = getopt_long(argc, argv, "m:", long_options, NULL)) != -1) {
        if (cli_common_option(&options, code, optarg, "chat")) continue;
        if (code == CLI_OPT_PROMPT) cli_usage_error("chat", "the conversation is the prompt: drop --prompt");
        if (code == CLI_OPT_BATCH_ROWS) cli_usage_error("chat", "--batch-rows is glimpse caption's");
        if (cli_caption_option(&params, code, optarg, "chat")) continue;
        if (code == OPT_SYSTEM) {
            system_text = optarg;
            continue;
        }
        if (code == CLI_OPT_HELP) {
            printf("%s\n%s", chat_help, cli_common_help);
            return CLI_EXIT_OK;
        }
        cli_usage_error("chat", "unknown option");
    }
    if (options.json) cli_usage_error("chat", "--json: the conversation is plain text (the library and glimpse "
                                              "serve's /v1/chat/completions give the ids)");
    cli_caption_check(&params, "chat");
    glimpse_model *model = cli_load_model(&options, "chat", true, true);
    if (!glimpse_model_kind_can(glimpse_model_get_kind(model), GLIMPSE_CAPABILITY_CHAT)) {
        cli_error("%s cannot converse; glimpse chat needs a LLaVA model (LlavaForConditionalGeneration) or "
                  "BLIP-2 (Blip2ForConditionalGeneration)", options.model);
        glimpse_model_free(model);
        return CLI_EXIT_FAILURE;
    }
    cli_caption_fit_model(&params, model);
    glimpse_context *ctx = cli_create_context(&options, model);
    conversation c = {0};
    if (system_text) add_message(&c, "system", system_text);
    size_t system_messages = c.count;
    for (int i = optind; i < argc; i++)
        if (!load_picture(&options, &c, argv[i])) {
            truncate_conversation(&c, 0);
            for (size_t j = 0; j < c.pending_count; j++) glimpse_image_free(c.pending[j]);
            free(c.pending), free(c.messages), free(c.parts);
            options.failures++;
            return cli_finish(&options, ctx, model);
        }
    struct sigaction action = {0}; /* no SA_RESTART: Ctrl-C at the prompt ends the read */
    action.sa_handler = on_interrupt;
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, NULL);
    bool stopped = converse(&options, ctx, &c, &params, argv + optind, (size_t)(argc - optind), system_messages);
    truncate_conversation(&c, 0);
    for (size_t j = 0; j < c.pending_count; j++) glimpse_image_free(c.pending[j]);
    free(c.pending), free(c.messages), free(c.parts);
    int status = cli_finish(&options, ctx, model);
    return stopped ? 128 + SIGINT : status; /* as a shell reports a command Ctrl-C ended */
}
