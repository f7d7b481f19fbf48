/* cli_clip.c — the CLIP and SigLIP subcommands: embed, rank, classify and info.
 * Each parses its options, loads only the towers it needs, reports every
 * failed input on stderr and keeps going with the rest. */
#define _GNU_SOURCE /* qsort_r */
#include <getopt.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "tools/cli_common.h"
#include "tools/cli_html.h"
#include "tools/cli_inputs.h"
#include "tools/commands.h"

/* A growable list of borrowed strings (argv entries). */
typedef struct string_list {
    char **items;
    size_t count, capacity;
} string_list;

static void list_push(string_list *list, char *item) {
    if (list->count == list->capacity) {
        list->capacity = list->capacity ? list->capacity * 2 : 8;
        list->items = realloc(list->items, list->capacity * sizeof *list->items);
        if (!list->items) {
            cli_error("out of memory");
            exit(CLI_EXIT_FAILURE);
        }
    }
    list->items[list->count++] = item;
}

static float *embed_texts_or_exit(glimpse_context *ctx, size_t dim, char *const *texts, size_t count) {
    float *embeddings = cli_calloc(count * dim, sizeof(float));
    if (count && glimpse_embed_texts(ctx, (const char *const *)texts, count, embeddings) != GLIMPSE_STATUS_OK) {
        cli_error("cannot embed texts: %s", glimpse_last_error());
        exit(CLI_EXIT_FAILURE);
    }
    return embeddings;
}

/* ----------------------------------------------------------------- embed */

static const char embed_help[] =
    "Usage: glimpse embed -m MODEL [-i IMAGE...] [-t TEXT...] [--every SECONDS | --scenes] [--fast-decode]\n"
    "                     [--json] [IMAGE|VIDEO|FOLDER|-...]\n"
    "Prints the L2-normalised embedding of each image, each sampled frame of a video, and\n"
    "each text (transformers' image_embeds / text_embeds of a CLIP or SigLIP model), one\n"
    "line each, images first.\n"
    "  -i, --image IMAGE    an image or video file (may be repeated; bare arguments are too)\n"
    "  -t, --text TEXT      a text (may be repeated)\n"
    "  --fast-decode        decode JPEGs scaled down in the DCT domain (libjpeg-turbo, to the\n"
    "                       smallest 1/8 step not below the model's resize), then resize exactly:\n"
    CLI_FAST_DECODE_FIGURES
    "Pictures are read and decoded on a thread of their own, ahead of the towers.\n"
    "Plain output: the input (PATH @ M:SS.s for a video's frame), a tab, the numbers\n"
    "separated by spaces.\n"
    "JSON: {\"image\": PATH, \"embedding\": [...]} (a video's frames also carry\n"
    "\"time\": SECONDS) or {\"text\": TEXT, \"embedding\": [...]}.\n";

/* One line of embed's output. */
static void print_embedding(const cli_options *options, const cli_picture *picture, const char *text,
                            const float *embedding, size_t dim) {
    if (options->json) {
        if (picture) {
            cli_json_picture(stdout, picture);
        } else {
            printf("{\"text\": ");
            json_string(stdout, text);
        }
        printf(", \"embedding\": ");
        json_floats(stdout, embedding, dim);
        printf("}\n");
    } else {
        if (picture)
            cli_print_picture(stdout, picture);
        else
            fputs(text, stdout);
        putchar('\t');
        for (size_t d = 0; d < dim; d++) printf(d ? " %.7g" : "%.7g", embedding[d]);
        printf("\n");
    }
}

typedef struct embed_printer {
    const cli_options *options;
    cli_progress *progress;
    size_t dim;
} embed_printer;

static void print_picture_embedding(void *user, const cli_picture *picture, const float *embedding) {
    embed_printer *printer = user;
    cli_progress_end(printer->progress);
    print_embedding(printer->options, picture, NULL, embedding, printer->dim);
}

int command_embed(int argc, char **argv) {
    cli_options options;
    cli_options_init(&options);
    glimpse_video_options video = glimpse_video_default_options();
    string_list images = {0}, texts = {0};
    static const struct option long_options[] = {CLI_COMMON_LONG_OPTIONS, CLI_VIDEO_LONG_OPTIONS,
                                                 {"image", required_argument, NULL, 'i'},
                                                 {"text", required_argument, NULL, 't'},
                                                 {"fast-decode", no_argument, NULL, CLI_OPT_FAST_DECODE},
                                                 {NULL, 0, NULL, 0}};
    int code;
    bool fast_decode = false;
    while ((code = getopt_long(argc, argv, "m:i:t:", long_options, NULL)) != -1) {
        if (cli_common_option(&options, code, optarg, "embed")) continue;
        if (cli_video_option(&video, code, optarg, "embed")) continue;
        switch (code) {
        case CLI_OPT_FAST_DECODE: fast_decode = true; break;
        case 'i': list_push(&images, optarg); break;
        case 't': list_push(&texts, optarg); break;
        case CLI_OPT_HELP:
            printf("%s\n%s\n%s\n%s", embed_help, cli_inputs_help, cli_video_help, cli_common_help);
            return CLI_EXIT_OK;
        default: cli_usage_error("embed", "unknown option");
        }
    }
    for (int i = optind; i < argc; i++) list_push(&images, argv[i]);
    if (!images.count && !texts.count) cli_usage_error("embed", "nothing to embed: give images or -t TEXT");
    size_t count;
    char **paths = cli_expand_inputs(&options, "embed", images.items, images.count, &count);
    if (!count && !texts.count) return CLI_EXIT_FAILURE; /* folders without images, said on stderr */
    glimpse_model *model = cli_load_model(&options, "embed", count > 0, texts.count > 0);
    glimpse_context *ctx = cli_create_context(&options, model);
    size_t dim = glimpse_model_embedding_dim(model);
    cli_pictures pictures;
    cli_pictures_start(&pictures, &options, &video, paths, count);
    pictures.prepare_for = model;
    pictures.fast_decode = fast_decode;
    embed_printer printer = {&options, &pictures.progress, dim};
    cli_embed_pictures(&pictures, ctx, dim, print_picture_embedding, &printer);
    cli_pictures_end(&pictures);
    float *text_embeddings = embed_texts_or_exit(ctx, dim, texts.items, texts.count);
    for (size_t t = 0; t < texts.count; t++)
        print_embedding(&options, NULL, texts.items[t], text_embeddings + t * dim, dim);
    free(text_embeddings);
    free(images.items);
    free(texts.items);
    cli_inputs_free(paths, count);
    return cli_finish(&options, ctx, model);
}

/* ------------------------------------------------------------------ rank */

static const char rank_help[] =
    "Usage: glimpse rank -m MODEL -t TEXT [-t TEXT...] [--top K] [--json] IMAGE|FOLDER|-...\n"
    "       glimpse rank -m BLIP_RETRIEVAL [--itc] -t TEXT ... IMAGE...\n"
    "       glimpse rank -m CLIP --rerank BLIP_RETRIEVAL [--rerank-top K] -t TEXT ... IMAGE...\n"
    "Ranks the images against each text, best first.\n"
    "  With a CLIP model the score is CLIP's logit: logit_scale x cosine. With a\n"
    "  SigLIP model it is SigLIP's: logit_scale x cosine + logit_bias (its sigmoid is\n"
    "  the probability that the text describes the image).\n"
    "  With a BLIP retrieval model (BlipForImageTextRetrieval) it is the ITM match\n"
    "  probability (cross-attention over the image), or with --itc the cosine of the\n"
    "  contrastive projections.\n"
    "  With --rerank, CLIP (or SigLIP) shortlists the best K images per text (--rerank-top, default 10)\n"
    "  and the BLIP model re-ranks them by ITM probability; only the shortlist is printed.\n"
    "  -t, --text TEXT      a query text (may be repeated: one ranking per text)\n"
    "      --top K          show only the K best images per text (default: all)\n"
    "      --itc            BLIP retrieval models: score by ITC cosine instead of ITM\n"
    "      --rerank MODEL   re-rank CLIP's shortlist with this BLIP retrieval model\n"
    "      --rerank-top K   how many images CLIP shortlists for re-ranking (default 10)\n"
    "      --html FILE      also write FILE, one self-contained page of each text's\n"
    "                       ranking: thumbnails with their scores and paths\n"
    "JSON: {\"text\": TEXT, \"results\": [{\"image\": PATH, \"score\": S}, ...]} per text;\n"
    "re-ranked results also carry \"clip_score\" and \"itm_score\" (score is the final one).\n";

static int compare_scores_descending(const void *a, const void *b, void *scores_pointer) {
    const float *scores = scores_pointer;
    size_t i = *(const size_t *)a, j = *(const size_t *)b;
    if (scores[i] > scores[j]) return -1;
    if (scores[i] < scores[j]) return 1;
    return i < j ? -1 : i > j; /* stable: input order on ties */
}

/* Indices of the usable images sorted by score; returns how many. */
static size_t sort_by_score(size_t *order, const float *scores, const bool *ok, size_t count) {
    size_t n = 0;
    for (size_t i = 0; i < count; i++)
        if (ok[i]) order[n++] = i;
    qsort_r(order, n, sizeof *order, compare_scores_descending, (void *)scores);
    return n;
}

/* --html's page while rank writes it, else NULL. */
static FILE *rank_page;

/* One text's ranking: paths[order[r]] with scores[r] for r < n, and CLIP's scores before re-ranking if given. */
static void print_ranking(const cli_options *options, const char *text, char **paths, const size_t *order, size_t n,
                          const float *scores, const float *clip_scores) {
    const char **ranked = cli_calloc(n, sizeof *ranked);
    for (size_t r = 0; r < n; r++) ranked[r] = paths[order[r]];
    cli_print_results(options, text, ranked, NULL, scores, clip_scores, n);
    if (rank_page) {
        cli_html_row(rank_page, text);
        for (size_t r = 0; r < n; r++) {
            char caption[32];
            snprintf(caption, sizeof caption, "%.4f", scores[r]);
            cli_html_picture(rank_page, options, ranked[r], -1, caption);
        }
        cli_html_row_end(rank_page);
    }
    fflush(stdout);
    free(ranked);
}

/* Loads paths[0 .. count) that decode: images[j] is paths[index[j]]; failures reported and counted. */
static size_t load_images(cli_options *options, char **paths, size_t count, glimpse_image **images, size_t *index) {
    size_t loaded = 0;
    for (size_t i = 0; i < count; i++) {
        if (!cli_load_image(options, paths[i], NULL, &images[loaded])) {
            options->failures++;
            continue;
        }
        index[loaded++] = i;
    }
    return loaded;
}

#define RANK_IMAGE_BATCH 8

/* BLIP retrieval: ITM probabilities (or ITC cosines) of every image for every text. */
static void score_with_blip(cli_options *options, glimpse_context *ctx, char **paths, size_t image_count,
                            char **texts, size_t text_count, glimpse_match_mode mode, float *scores, bool *ok) {
    cli_progress progress;
    cli_progress_start(&progress, options, image_count, "images");
    for (size_t first = 0; first < image_count; first += RANK_IMAGE_BATCH) {
        size_t batch = image_count - first < RANK_IMAGE_BATCH ? image_count - first : RANK_IMAGE_BATCH;
        glimpse_image *images[RANK_IMAGE_BATCH];
        size_t index[RANK_IMAGE_BATCH];
        cli_progress_end(&progress);
        size_t loaded = load_images(options, paths + first, batch, images, index);
        float batch_scores[RANK_IMAGE_BATCH * text_count];
        if (loaded && glimpse_match(ctx, images, loaded, (const char *const *)texts, text_count, mode,
                                    batch_scores) != GLIMPSE_STATUS_OK) {
            cli_error("%s", glimpse_last_error());
            exit(CLI_EXIT_FAILURE);
        }
        for (size_t j = 0; j < loaded; j++) {
            size_t i = first + index[j];
            ok[i] = true;
            for (size_t t = 0; t < text_count; t++) scores[i * text_count + t] = batch_scores[j * text_count + t];
            glimpse_image_free(images[j]);
        }
        cli_progress_step(&progress, first + batch);
    }
    cli_progress_end(&progress);
}

/* What `glimpse rank` was asked, beside the common options. */
typedef struct rank_request {
    cli_options options;
    string_list texts;
    char **image_paths;
    size_t image_count;
    long top;                 /* --top: results shown per text (0 = all) */
    bool itc;                 /* --itc: BLIP's ITC cosines instead of ITM */
    const char *rerank_model; /* --rerank: the BLIP retrieval model re-ranking CLIP's shortlist */
    long rerank_top;          /* --rerank-top: the shortlist's length */
    const char *html;         /* --html: the page of the rankings, or NULL */
} rank_request;

/* Parses the command line into request; false after --help. */
static bool parse_rank_options(int argc, char **argv, rank_request *request) {
    enum { OPT_TOP = CLI_OPT_FIRST_FREE, OPT_ITC, OPT_RERANK, OPT_RERANK_TOP, OPT_HTML };
    static const struct option long_options[] = {CLI_COMMON_LONG_OPTIONS,
                                                 {"text", required_argument, NULL, 't'},
                                                 {"top", required_argument, NULL, OPT_TOP},
                                                 {"itc", no_argument, NULL, OPT_ITC},
                                                 {"rerank", required_argument, NULL, OPT_RERANK},
                                                 {"rerank-top", required_argument, NULL, OPT_RERANK_TOP},
                                                 {"html", required_argument, NULL, OPT_HTML},
                                                 {NULL, 0, NULL, 0}};
    int code;
    while ((code = getopt_long(argc, argv, "m:t:k:", long_options, NULL)) != -1) {
        if (cli_common_option(&request->options, code, optarg, "rank")) continue;
        switch (code) {
        case 't': list_push(&request->texts, optarg); break;
        case 'k':
        case OPT_TOP: request->top = cli_parse_long("rank", "--top", optarg, 1, 1L << 40); break;
        case OPT_ITC: request->itc = true; break;
        case OPT_RERANK: request->rerank_model = optarg; break;
        case OPT_RERANK_TOP: request->rerank_top = cli_parse_long("rank", "--rerank-top", optarg, 1, 1L << 20); break;
        case OPT_HTML: request->html = optarg; break;
        case CLI_OPT_HELP: printf("%s\n%s\n%s", rank_help, cli_inputs_help, cli_common_help); return false;
        default: cli_usage_error("rank", "unknown option");
        }
    }
    if (!request->texts.count) cli_usage_error("rank", "no text to rank against: give -t TEXT");
    if (argc == optind) cli_usage_error("rank", "no images to rank");
    if (request->itc && request->rerank_model) cli_usage_error("rank", "--itc and --rerank do not go together");
    request->image_paths =
        cli_expand_inputs(&request->options, "rank", argv + optind, (size_t)(argc - optind), &request->image_count);
    return true;
}

/* Loads the --rerank model and a context for it; exits if it is not a BLIP retrieval model. */
static glimpse_model *load_reranker(const rank_request *request, glimpse_context **ctx) {
    cli_options second = request->options;
    second.model = request->rerank_model;
    glimpse_model *reranker = cli_load_model(&second, "rank", true, true);
    if (!glimpse_model_kind_can(glimpse_model_get_kind(reranker), GLIMPSE_CAPABILITY_MATCH)) {
        cli_error("--rerank %s: re-ranking needs a BLIP retrieval model (BlipForImageTextRetrieval)",
                  request->rerank_model);
        exit(CLI_EXIT_FAILURE);
    }
    *ctx = cli_create_context(&request->options, reranker);
    return reranker;
}

/* scores[i * texts + t] of every image against every text, by CLIP's logits
 * or BLIP's matching; ok[i] false for the images that failed. */
static void score_images(rank_request *request, const glimpse_model *model, glimpse_context *ctx, float *scores,
                         bool *ok) {
    cli_options *options = &request->options;
    size_t image_count = request->image_count, text_count = request->texts.count;
    if (!glimpse_model_embedding_dim(model)) {
        score_with_blip(options, ctx, request->image_paths, image_count, request->texts.items, text_count,
                        request->itc ? GLIMPSE_MATCH_MODE_ITC : GLIMPSE_MATCH_MODE_ITM, scores, ok);
        return;
    }
    size_t dim = glimpse_model_embedding_dim(model);
    float *text_embeddings = embed_texts_or_exit(ctx, dim, request->texts.items, text_count);
    float *image_embeddings = cli_calloc(image_count * dim, sizeof(float));
    options->failures +=
        cli_embed_image_files(options, ctx, dim, request->image_paths, image_count, image_embeddings, ok);
    glimpse_score(model, image_embeddings, image_count, text_embeddings, text_count, scores);
    free(image_embeddings);
    free(text_embeddings);
}

/* The second stage for one text: CLIP's shortlist (order[0..n), scored by
 * column), decoded again and re-scored by ITM, printed best first. */
static void print_reranked(rank_request *request, glimpse_context *rerank_ctx, const char *text, size_t *order,
                           size_t n, const float *column) {
    size_t keep = (size_t)request->rerank_top < n ? (size_t)request->rerank_top : n;
    glimpse_image **shortlist = cli_calloc(keep, sizeof *shortlist);
    float *first_scores = cli_calloc(keep, sizeof(float));
    size_t *shortlist_index = cli_calloc(keep, sizeof(size_t)), loaded = 0;
    for (size_t r = 0; r < keep; r++) {
        if (!cli_load_image(&request->options, request->image_paths[order[r]], NULL, &shortlist[loaded])) {
            request->options.failures++;
            continue;
        }
        first_scores[loaded] = column[order[r]];
        shortlist_index[loaded++] = order[r];
    }
    glimpse_ranked *ranked = cli_calloc(loaded, sizeof *ranked);
    size_t ranked_count = 0;
    if (glimpse_rerank(rerank_ctx, text, shortlist, loaded, first_scores, loaded, ranked, &ranked_count) !=
        GLIMPSE_STATUS_OK) {
        cli_error("re-ranking: %s", glimpse_last_error());
        exit(CLI_EXIT_FAILURE);
    }
    if (request->top > 0 && (size_t)request->top < ranked_count) ranked_count = (size_t)request->top;
    float *scores = cli_calloc(ranked_count, sizeof(float)), *clip_scores = cli_calloc(ranked_count, sizeof(float));
    for (size_t r = 0; r < ranked_count; r++) {
        order[r] = shortlist_index[ranked[r].index];
        scores[r] = ranked[r].score;
        clip_scores[r] = ranked[r].first_score;
    }
    print_ranking(&request->options, text, request->image_paths, order, ranked_count, scores, clip_scores);
    for (size_t r = 0; r < loaded; r++) glimpse_image_free(shortlist[r]);
    free(shortlist), free(first_scores), free(shortlist_index), free(ranked), free(scores), free(clip_scores);
}

int command_rank(int argc, char **argv) {
    rank_request request = {.top = 0, .itc = false, .rerank_model = NULL, .rerank_top = 10};
    cli_options_init(&request.options);
    if (!parse_rank_options(argc, argv, &request)) return CLI_EXIT_OK;
    if (!request.image_count) return CLI_EXIT_FAILURE; /* folders without images, said on stderr */
    cli_options *options = &request.options;
    glimpse_model *model = cli_load_model(options, "rank", true, true);
    if (!glimpse_model_kind_can(glimpse_model_get_kind(model), GLIMPSE_CAPABILITY_RANK)) {
        glimpse_model_info info;
        glimpse_model_get_info(model, &info);
        bool captions = glimpse_model_kind_can(info.kind, GLIMPSE_CAPABILITY_CAPTION);
        cli_error("%s is %s (%s), which does not rank; ranking needs CLIP, SigLIP or a BLIP retrieval model",
                  options->model, captions ? "a captioning model" : "a model", info.architecture);
        return CLI_EXIT_FAILURE;
    }
    bool embeds = glimpse_model_embedding_dim(model) > 0; /* CLIP, SigLIP */
    if (embeds && request.itc) cli_usage_error("rank", "--itc needs a BLIP retrieval model");
    if (!embeds && request.rerank_model)
        cli_usage_error("rank", "--rerank re-ranks a CLIP or SigLIP shortlist: give such a model with -m");
    glimpse_context *rerank_ctx = NULL;
    glimpse_model *reranker = request.rerank_model ? load_reranker(&request, &rerank_ctx) : NULL;
    glimpse_context *ctx = cli_create_context(options, model);
    size_t image_count = request.image_count, text_count = request.texts.count;
    float *scores = cli_calloc(image_count * text_count, sizeof(float));
    bool *ok = cli_calloc(image_count, sizeof *ok);
    score_images(&request, model, ctx, scores, ok);
    float *column = cli_calloc(image_count, sizeof(float)), *sorted = cli_calloc(image_count, sizeof(float));
    size_t *order = cli_calloc(image_count, sizeof(size_t));
    rank_page = request.html ? cli_html_open(request.html, "glimpse rank") : NULL;
    for (size_t t = 0; t < text_count; t++) {
        for (size_t i = 0; i < image_count; i++) column[i] = scores[i * text_count + t];
        size_t n = sort_by_score(order, column, ok, image_count);
        if (reranker) {
            print_reranked(&request, rerank_ctx, request.texts.items[t], order, n, column);
            continue;
        }
        if (request.top > 0 && (size_t)request.top < n) n = (size_t)request.top;
        for (size_t r = 0; r < n; r++) sorted[r] = column[order[r]];
        print_ranking(options, request.texts.items[t], request.image_paths, order, n, sorted, NULL);
    }
    if (rank_page && !cli_html_close(rank_page, request.html)) options->failures++;
    rank_page = NULL;
    free(column), free(sorted), free(order);
    free(scores);
    free(ok);
    free(request.texts.items);
    cli_inputs_free(request.image_paths, request.image_count);
    glimpse_context_free(rerank_ctx);
    glimpse_model_free(reranker);
    return cli_finish(options, ctx, model);
}

/* -------------------------------------------------------------- classify */

static const char classify_help[] =
    "Usage: glimpse classify -m MODEL -l LABEL [-l LABEL...] [--template T] [--softmax] [--json] IMAGE|FOLDER|-...\n"
    "Zero-shot classification: each label is put in the template and scored against\n"
    "each image.\n"
    "  CLIP: the softmax of the logits over the labels gives each label's\n"
    "  probability; they sum to 1.\n"
    "  SigLIP: each label's probability is the sigmoid of its own logit, as SigLIP is\n"
    "  trained; they do NOT sum to 1 (several labels, or none, may fit the image).\n"
    "  -l, --label LABEL    a class name (at least two make sense; may be repeated)\n"
    "      --template T     the sentence a label is put in, {} marking the place\n"
    "                       (default: \"a photo of a {}.\")\n"
    "      --softmax        SigLIP: the softmax over the labels instead, as CLIP's\n"
    "JSON: {\"image\": PATH, \"probabilities\": \"softmax\" or \"sigmoid\", \"sum_to_one\": true or\n"
    "false, \"labels\": [{\"label\": L, \"probability\": P}, ...]}, labels most probable first.\n";

/* One image's logits over n labels into probabilities, in place: SigLIP's
 * sigmoid of each on its own, or the softmax over them all, as
 * logits_per_image.softmax(dim=1). */
static void label_probabilities(float *p, size_t n, bool sigmoid) {
    if (sigmoid) {
        for (size_t l = 0; l < n; l++) p[l] = 1.0f / (1.0f + expf(-p[l]));
        return;
    }
    float largest = p[0];
    for (size_t l = 1; l < n; l++)
        if (p[l] > largest) largest = p[l];
    double sum = 0;
    for (size_t l = 0; l < n; l++) sum += (p[l] = expf(p[l] - largest));
    for (size_t l = 0; l < n; l++) p[l] = (float)(p[l] / sum);
}

/* template with every "{}" replaced by label. */
static char *fill_template(const char *template_text, const char *label) {
    size_t template_length = strlen(template_text), label_length = strlen(label), holes = 0;
    for (const char *p = strstr(template_text, "{}"); p; p = strstr(p + 2, "{}")) holes++;
    char *text = cli_calloc(template_length + holes * label_length + 1, 1);
    char *out = text;
    for (const char *p = template_text; *p;) {
        if (p[0] == '{' && p[1] == '}') {
            memcpy(out, label, label_length);
            out += label_length;
            p += 2;
        } else {
            *out++ = *p++;
        }
    }
    return text;
}

int command_classify(int argc, char **argv) {
    cli_options options;
    cli_options_init(&options);
    string_list labels = {0};
    const char *template_text = "a photo of a {}.";
    bool softmax = false;
    enum { OPT_TEMPLATE = CLI_OPT_FIRST_FREE, OPT_SOFTMAX };
    static const struct option long_options[] = {CLI_COMMON_LONG_OPTIONS,
                                                 {"label", required_argument, NULL, 'l'},
                                                 {"template", required_argument, NULL, OPT_TEMPLATE},
                                                 {"softmax", no_argument, NULL, OPT_SOFTMAX},
                                                 {NULL, 0, NULL, 0}};
    int code;
    while ((code = getopt_long(argc, argv, "m:l:", long_options, NULL)) != -1) {
        if (cli_common_option(&options, code, optarg, "classify")) continue;
        switch (code) {
        case 'l': list_push(&labels, optarg); break;
        case OPT_TEMPLATE: template_text = optarg; break;
        case OPT_SOFTMAX: softmax = true; break;
        case CLI_OPT_HELP: printf("%s\n%s\n%s", classify_help, cli_inputs_help, cli_common_help); return CLI_EXIT_OK;
        default: cli_usage_error("classify", "unknown option");
        }
    }
    if (!labels.count) cli_usage_error("classify", "no labels: give -l LABEL (at least two)");
    if (!strstr(template_text, "{}")) cli_usage_error("classify", "the template must contain {} where the label goes");
    if (argc == optind) cli_usage_error("classify", "no images to classify");
    size_t image_count;
    char **image_paths = cli_expand_inputs(&options, "classify", argv + optind, (size_t)(argc - optind), &image_count);
    if (!image_count) return CLI_EXIT_FAILURE; /* folders without images, said on stderr */
    glimpse_model *model = cli_load_model(&options, "classify", true, true);
    glimpse_context *ctx = cli_create_context(&options, model);
    size_t dim = glimpse_model_embedding_dim(model), n_labels = labels.count;
    char **prompts = cli_calloc(n_labels, sizeof(char *));
    for (size_t l = 0; l < n_labels; l++) prompts[l] = fill_template(template_text, labels.items[l]);
    float *text_embeddings = embed_texts_or_exit(ctx, dim, prompts, n_labels);
    float *image_embeddings = cli_calloc(image_count * dim, sizeof(float));
    bool *ok = cli_calloc(image_count, sizeof *ok);
    options.failures += cli_embed_image_files(&options, ctx, dim, image_paths, image_count, image_embeddings, ok);
    float *logits = cli_calloc(image_count * n_labels, sizeof(float));
    glimpse_score(model, image_embeddings, image_count, text_embeddings, n_labels, logits);
    size_t *order = cli_calloc(n_labels, sizeof(size_t));
    bool *all = cli_calloc(n_labels, sizeof *all);
    for (size_t l = 0; l < n_labels; l++) all[l] = true;
    glimpse_model_info info;
    glimpse_model_get_info(model, &info);
    bool sigmoid = info.sigmoid_scores && !softmax;
    for (size_t i = 0; i < image_count; i++) {
        if (!ok[i]) continue;
        float *p = logits + i * n_labels;
        label_probabilities(p, n_labels, sigmoid);
        size_t n = sort_by_score(order, p, all, n_labels);
        if (options.json) {
            printf("{\"image\": ");
            json_string(stdout, image_paths[i]);
            printf(", \"probabilities\": \"%s\", \"sum_to_one\": %s, \"labels\": [", sigmoid ? "sigmoid" : "softmax",
                   sigmoid ? "false" : "true");
            for (size_t r = 0; r < n; r++) {
                printf(r ? ", {\"label\": " : "{\"label\": ");
                json_string(stdout, labels.items[order[r]]);
                printf(", \"probability\": ");
                json_float(stdout, p[order[r]]);
                printf("}");
            }
            printf("]}\n");
        } else {
            printf("%s\n", image_paths[i]);
            for (size_t r = 0; r < n; r++) printf("  %6.4f  %s\n", p[order[r]], labels.items[order[r]]);
        }
    }
    for (size_t l = 0; l < n_labels; l++) free(prompts[l]);
    free(prompts);
    free(order);
    free(all);
    free(logits);
    free(ok);
    free(image_embeddings);
    free(text_embeddings);
    free(labels.items);
    cli_inputs_free(image_paths, image_count);
    return cli_finish(&options, ctx, model);
}

/* ------------------------------------------------------------------ info */

static const char info_help[] =
    "Usage: glimpse info -m MODEL [--json]\n"
    "Loads the model and describes it: architecture, towers, sizes, parameters.\n";

int command_info(int argc, char **argv) {
    cli_options options;
    cli_options_init(&options);
    static const struct option long_options[] = {CLI_COMMON_LONG_OPTIONS, {NULL, 0, NULL, 0}};
    int code;
    while ((code = getopt_long(argc, argv, "m:", long_options, NULL)) != -1) {
        if (cli_common_option(&options, code, optarg, "info")) continue;
        if (code == CLI_OPT_HELP) {
            printf("%s\n%s", info_help, cli_common_help);
            return CLI_EXIT_OK;
        }
        cli_usage_error("info", "unknown option");
    }
    if (optind < argc) cli_usage_error("info", "unexpected argument '%s'", argv[optind]);
    glimpse_model *model = cli_load_model(&options, "info", true, true);
    glimpse_model_info info;
    glimpse_model_get_info(model, &info);
    bool int8 = info.precision == GLIMPSE_PRECISION_INT8; /* as loaded: --int8 */
    if (options.json) {
        printf("{\"architecture\": ");
        json_string(stdout, info.architecture);
        printf(", \"path\": ");
        json_string(stdout, info.path);
        printf(", \"image_size\": %d, \"patch_size\": %d, \"vision_hidden_size\": %d, \"vision_layers\": %d, "
               "\"vision_heads\": %d, \"text_hidden_size\": %d, \"text_layers\": %d, \"text_heads\": %d, "
               "\"text_max_tokens\": %d, \"vocab_size\": %d, \"embedding_dim\": %d, \"parameters\": %zu, "
               "\"weight_bytes\": %zu, \"copied_bytes\": %zu, \"dtype\": \"%s\", ",
               info.image_size, info.patch_size, info.vision_hidden_size, info.vision_layers, info.vision_heads,
               info.text_hidden_size, info.text_layers, info.text_heads, info.text_max_tokens, info.vocab_size,
               info.embedding_dim, info.parameter_count, info.weight_bytes, info.copied_bytes, info.weight_dtype);
        printf("\"precision\": \"%s\", \"logit_scale\": ", int8 ? "int8" : "float32");
        json_float(stdout, info.logit_scale);
        printf(", \"logit_bias\": ");
        json_float(stdout, info.logit_bias);
        printf("}\n");
    } else {
        printf("architecture   %s\n", info.architecture);
        if (info.description) printf("family         %s\n", info.description);
        printf("folder         %s\n", info.path);
        printf("vision tower   %d layers, hidden %d, %d heads, %s; %dx%d pixels in %dx%d patches\n",
               info.vision_layers, info.vision_hidden_size, info.vision_heads, info.vision_activation,
               info.image_size, info.image_size, info.patch_size, info.patch_size);
        printf("text tower     %d layers, hidden %d, %d heads, %s; up to %d tokens, vocabulary %d\n",
               info.text_layers, info.text_hidden_size, info.text_heads, info.text_activation, info.text_max_tokens,
               info.vocab_size);
        if (info.embedding_dim > 0) {
            printf("embedding      %d dimensions, logit scale %.4f", info.embedding_dim, info.logit_scale);
            if (info.sigmoid_scores) printf(", logit bias %.4f (probabilities: a sigmoid per pair)", info.logit_bias);
            printf("\n");
        } else {
            printf("embedding      none: this model writes text (captions, answers), it gives no embeddings\n");
        }
        printf("precision      %s\n", int8 ? "int8: the transformer layers quantized to 8 bits at load (--int8)"
                                            : "float32 (--int8 quantizes the transformer layers at load)");
        printf("parameters     %zu (%.1f MB of %s weights, memory-mapped; %.1f MB copied to float32 at load)\n",
               info.parameter_count, info.weight_bytes / 1e6, info.weight_dtype, info.copied_bytes / 1e6);
    }
    glimpse_model_free(model);
    return CLI_EXIT_OK;
}
