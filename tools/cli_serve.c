/* cli_serve.c — `glimpse serve`: parses the command line, reads the API key
 * file, starts the server (serve/), logs to stderr, and on SIGTERM or SIGINT
 * drains it: requests in flight are answered, new ones refused. */
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/file.h"
#include "serve/serve.h"
#include "tools/cli_common.h"
#include "tools/commands.h"

static const char serve_help[] =
    "Usage: glimpse serve -m MODEL [-m MODEL...] [--db INDEX] [--host 127.0.0.1] [--port 8080]\n"
    "                     [--api-key-file F] [--max-body BYTES] [--queue N] [--threads N]\n"
    "Serves the models over HTTP/1.1 (JSON answers; errors are {\"error\": message}):\n"
    "  POST /v1/embed     an image (the body, or a multipart part named image) or\n"
    "                     {\"text\": ...} -> {\"embedding\": [...], \"model\": NAME} (CLIP, SigLIP)\n"
    "  POST /v1/rank      multipart: parts image (files) and text (fields) -> scores,\n"
    "                     and a ranking per text (CLIP, SigLIP; BLIP retrieval, mode=itm|itc)\n"
    "  POST /v1/caption   an image; options prompt, beams, max_tokens, min_tokens, sample,\n"
    "                     temperature, top_k, top_p, seed, repetition_penalty, length_penalty\n"
    "                     (query string or form fields) -> {\"caption\", \"ids\"} (BLIP, ViT-GPT2,\n"
    "                     BLIP-2)\n"
    "  GET  /v1/search?q=TEXT&k=N   POST /v1/search?k=N (an image): the --db index's best\n"
    "                     matches, {\"results\": [{\"path\", \"score\"}]}\n"
    "  POST /predict      immich's machine-learning protocol, CLIP task (visual and textual)\n"
    "  GET  /health, /ping, /v1/models, /metrics (Prometheus)\n"
    "  POST /v1/explain   an image; options text, layer, head, occlusion, png=1, panel (and the\n"
    "                     caption options for a captioner) -> the maps as glimpse explain --json\n"
    "                     prints them, png the contact sheet in base64 (CLIP, SigLIP, BLIP)\n"
    "  POST /v1/ask       an image and question=TEXT (and the caption options) ->\n"
    "                     {\"question\", \"answer\", \"ids\"} as glimpse ask --json (BLIP-2)\n"
    "  POST /v1/chat/completions  OpenAI's chat API (LLaVA, BLIP-2): JSON {\"model\", \"messages\"\n"
    "                     with text and image_url parts (data: URIs, base64), \"max_tokens\",\n"
    "                     \"temperature\" (0: greedy; left out: the model's own settings), \"top_p\",\n"
    "                     \"seed\", \"stream\"} -> a chat.completion (with usage, ids and prompt_ids),\n"
    "                     or server-sent chunks as the words come with stream: true\n"
    "/v1/embed, /v1/rank, /v1/caption, /v1/ask and /v1/explain take ?model=NAME (the model folder's last\n"
    "component, or the hub id, as GET /v1/models lists them); without it, the first\n"
    "model loaded that can do it. /v1/search uses the model of the --db index.\n"
    "      --db FILE          a search index (glimpse index) to serve; its model must be loaded\n"
    "      --host ADDRESS     the address to listen on (default 127.0.0.1, this machine only);\n"
    "                         any other needs --api-key-file\n"
    "      --port N           default 8080; 0 picks a free port (printed on stderr)\n"
    "      --api-key-file F   a file holding the API key; requests then need\n"
    "                         'Authorization: Bearer KEY' or 'X-API-Key: KEY' (but /health, /ping)\n"
    "      --allow-local-images DIR  /v1/chat/completions may read pictures by path (file:///...)\n"
    "                         inside DIR; without it only pictures sent in the request\n"
    "      --open-predict     /predict needs no key either: immich's machine-learning client,\n"
    "                         on another host or container, sends none\n"
    "      --max-body BYTES   the largest request body (default 33554432); more is 413\n"
    "      --queue N          requests that may wait for a model at once (default 64); more\n"
    "                         are answered 503 with Retry-After\n"
    "      --threads N        threads of each model's worker (default: all cores)\n"
    "      --timeout S        close a connection silent for S seconds (default 30)\n"
    "      --max-connections N  connections at once (default 256)\n"
    "      --max-per-client N   connections at once from one client address (default 64,\n"
    "                         0 = no bound but --max-connections): a client holding\n"
    "                         connections open cannot take every one\n"
    "      --max-batch N      image embeddings run as one batch (default 8; 1 = one at a time)\n"
    "      --batch-wait MS    how long a batch's first image waits for others, at most\n"
    "                         (default 2; never when no other image request is arriving)\n"
    "Images come only in request bodies: the server never opens a path a client names\n"
    "(but under --allow-local-images DIR).\n"
    "SIGTERM or SIGINT: requests in flight are answered (for up to 30 s), new ones refused.\n";

static void log_line(void *user, const char *message) {
    (void)user;
    fprintf(stderr, "glimpse serve: %s\n", message);
}

/* The key in path, without surrounding white space; exits on failure. */
static char *read_api_key(const char *path) {
    uint8_t *bytes;
    size_t size;
    if (file_read_all(path, 1 << 16, &bytes, &size) != GLIMPSE_STATUS_OK) {
        cli_error("--api-key-file: %s", glimpse_last_error());
        exit(CLI_EXIT_FAILURE);
    }
    char *key = (char *)bytes;
    while (size && (key[size - 1] == '\n' || key[size - 1] == '\r' || key[size - 1] == ' ' || key[size - 1] == '\t'))
        key[--size] = '\0';
    if (size < 16 || strlen(key) != size || strpbrk(key, "\r\n")) {
        cli_error("--api-key-file %s: the key must be one line of at least 16 characters", path);
        exit(CLI_EXIT_FAILURE);
    }
    struct stat info;
    if (stat(path, &info) == 0 && (info.st_mode & S_IROTH))
        fprintf(stderr, "glimpse serve: warning: %s is readable by every user\n", path);
    return key;
}

int command_serve(int argc, char **argv) {
    /* a long-lived process that batches pictures: the towers on AMX's tiles where the CPU has them (bf16x3.h) */
    setenv("GLIMPSE_FLOAT32_TILES", "always", 0);
    enum {
        OPT_DB = CLI_OPT_FIRST_FREE,
        OPT_HOST,
        OPT_PORT,
        OPT_API_KEY_FILE,
        OPT_MAX_BODY,
        OPT_QUEUE,
        OPT_TIMEOUT,
        OPT_MAX_CONNECTIONS,
        OPT_MAX_PER_CLIENT,
        OPT_MAX_BATCH,
        OPT_BATCH_WAIT,
        OPT_OPEN_PREDICT,
        OPT_LOCAL_IMAGES
    };
    static const struct option long_options[] = {CLI_COMMON_LONG_OPTIONS,
                                                 {"db", required_argument, NULL, OPT_DB},
                                                 {"host", required_argument, NULL, OPT_HOST},
                                                 {"port", required_argument, NULL, OPT_PORT},
                                                 {"api-key-file", required_argument, NULL, OPT_API_KEY_FILE},
                                                 {"max-body", required_argument, NULL, OPT_MAX_BODY},
                                                 {"queue", required_argument, NULL, OPT_QUEUE},
                                                 {"timeout", required_argument, NULL, OPT_TIMEOUT},
                                                 {"max-connections", required_argument, NULL, OPT_MAX_CONNECTIONS},
                                                 {"max-per-client", required_argument, NULL, OPT_MAX_PER_CLIENT},
                                                 {"max-batch", required_argument, NULL, OPT_MAX_BATCH},
                                                 {"batch-wait", required_argument, NULL, OPT_BATCH_WAIT},
                                                 {"open-predict", no_argument, NULL, OPT_OPEN_PREDICT},
                                                 {"allow-local-images", required_argument, NULL, OPT_LOCAL_IMAGES},
                                                 {NULL, 0, NULL, 0}};
    cli_options options;
    cli_options_init(&options);
    serve_config config = serve_default_config();
    const char *models[64];
    size_t model_count = 0;
    const char *api_key_file = NULL;
    int code;
    while ((code = getopt_long(argc, argv, "m:", long_options, NULL)) != -1) {
        if (code == 'm') {
            if (model_count == sizeof models / sizeof models[0]) cli_usage_error("serve", "at most 64 models");
            models[model_count++] = optarg;
            continue;
        }
        if (cli_common_option(&options, code, optarg, "serve")) continue;
        switch (code) {
        case OPT_DB: config.db = optarg; break;
        case OPT_HOST: config.host = optarg; break;
        case OPT_PORT: config.port = (int)cli_parse_long("serve", "--port", optarg, 0, 65535); break;
        case OPT_API_KEY_FILE: api_key_file = optarg; break;
        case OPT_MAX_BODY: config.max_body = (size_t)cli_parse_long("serve", "--max-body", optarg, 1, 1L << 34); break;
        case OPT_QUEUE: config.queue_limit = (size_t)cli_parse_long("serve", "--queue", optarg, 1, 1 << 20); break;
        case OPT_TIMEOUT: config.timeout_seconds = (unsigned)cli_parse_long("serve", "--timeout", optarg, 1, 86400); break;
        case OPT_MAX_CONNECTIONS:
            config.max_connections = (unsigned)cli_parse_long("serve", "--max-connections", optarg, 1, 65536);
            break;
        case OPT_MAX_PER_CLIENT:
            config.max_per_client = (unsigned)cli_parse_long("serve", "--max-per-client", optarg, 0, 65536);
            break;
        case OPT_MAX_BATCH: config.max_batch = (int)cli_parse_long("serve", "--max-batch", optarg, 1, 64); break;
        case OPT_OPEN_PREDICT: config.open_predict = true; break;
        case OPT_LOCAL_IMAGES: config.local_images = optarg; break;
        case OPT_BATCH_WAIT: config.batch_wait_ms = (double)cli_parse_long("serve", "--batch-wait", optarg, 0, 1000); break;
        case CLI_OPT_HELP: printf("%s\n%s", serve_help, cli_common_help); return CLI_EXIT_OK;
        default: cli_usage_error("serve", "unknown option");
        }
    }
    if (optind < argc) cli_usage_error("serve", "unexpected argument '%s'", argv[optind]);
    if (!model_count) cli_usage_error("serve", "no model given: use -m MODEL (may be repeated)");
    char *api_key = api_key_file ? read_api_key(api_key_file) : NULL;
    config.models = models;
    config.model_count = model_count;
    config.api_key = api_key;
    config.threads = options.threads;
    config.precision = options.precision;
    config.max_pixels = options.max_pixels;
    config.log = log_line;
    /* the signals are taken by sigwait below: blocked before any thread starts, so every thread inherits that */
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGTERM);
    sigaddset(&stop_signals, SIGINT);
    pthread_sigmask(SIG_BLOCK, &stop_signals, NULL);
    signal(SIGPIPE, SIG_IGN);
    serve_server *server;
    if (serve_start(&config, &server) != GLIMPSE_STATUS_OK) {
        cli_error("serve: %s", glimpse_last_error());
        free(api_key);
        return CLI_EXIT_FAILURE;
    }
    fprintf(stderr, "glimpse serve: listening on http://%s%s%s:%d/%s\n", strchr(config.host, ':') ? "[" : "",
            config.host, strchr(config.host, ':') ? "]" : "", serve_port(server),
            api_key ? " (API key required)" : "");
    int signal_number = 0;
    sigwait(&stop_signals, &signal_number);
    fprintf(stderr, "glimpse serve: %s: finishing the requests in flight, refusing new ones\n",
            signal_number == SIGTERM ? "SIGTERM" : "SIGINT");
    size_t left = serve_drain(server, 30);
    if (left) fprintf(stderr, "glimpse serve: %zu requests still in flight after 30 s; stopping anyway\n", left);
    serve_free(server);
    free(api_key);
    fprintf(stderr, "glimpse serve: stopped\n");
    return CLI_EXIT_OK;
}
