/* cli_clip.c — the CLIP subcommands: embed, rank, classify and info.
 * Each parses its options, loads only the towers it needs, reports every
 * failed input on stderr and keeps going with the rest. */
#define _GNU_SOURCE /* qsort_r */
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tools/cli_common.h"
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

static void *checked_calloc(size_t count, size_t size) {
    void *memory = calloc(count ? count : 1, size ? size : 1);
    if (!memory) {
        cli_error("out of memory");
        exit(CLI_EXIT_FAILURE);
    }
    return memory;
}

static float *embed_texts_or_exit(glimpse_context *ctx, size_t dim, char *const *texts, size_t count) {
    float *embeddings = checked_calloc(count * dim, sizeof(float));
    if (count && glimpse_embed_texts(ctx, (const char *const *)texts, count, embeddings) != GLIMPSE_STATUS_OK) {
        cli_error("cannot embed texts: %s", glimpse_last_error());
        exit(CLI_EXIT_FAILURE);
    }
    return embeddings;
}

/* ----------------------------------------------------------------- embed */

static const char embed_help[] =
    "Usage: glimpse embed -m MODEL [-i IMAGE...] [-t TEXT...] [--json] [IMAGE...]\n"
    "Prints the projected, L2-normalised embedding of each image and text\n"
    "(transformers' image_embeds / text_embeds), one line each, images first.\n"
    "  -i, --image IMAGE    an image file (may be repeated; bare arguments are images too)\n"
    "  -t, --text TEXT      a text (may be repeated)\n"
    "Plain output: the input, a tab, the numbers separated by spaces.\n"
    "JSON: {\"image\": PATH, \"embedding\": [...]} or {\"text\": TEXT, \"embedding\": [...]}.\n";

int command_embed(int argc, char **argv) {
    cli_options options;
    cli_options_init(&options);
    string_list images = {0}, texts = {0};
    static const struct option long_options[] = {
        CLI_COMMON_LONG_OPTIONS, {"image", required_argument, NULL, 'i'}, {"text", required_argument, NULL, 't'},
        {NULL, 0, NULL, 0}};
    int code;
    while ((code = getopt_long(argc, argv, "m:i:t:", long_options, NULL)) != -1) {
        if (cli_common_option(&options, code, optarg, "embed")) continue;
        switch (code) {
        case 'i': list_push(&images, optarg); break;
        case 't': list_push(&texts, optarg); break;
        case CLI_OPT_HELP: printf("%s\n%s", embed_help, cli_common_help); return CLI_EXIT_OK;
        default: cli_usage_error("embed", "unknown option");
        }
    }
    for (int i = optind; i < argc; i++) list_push(&images, argv[i]);
    if (!images.count && !texts.count) cli_usage_error("embed", "nothing to embed: give images or -t TEXT");
    glimpse_model *model = cli_load_model(&options, "embed", images.count > 0, texts.count > 0);
    glimpse_context *ctx = cli_create_context(&options, model);
    size_t dim = glimpse_model_embedding_dim(model);
    float *image_embeddings = checked_calloc(images.count * dim, sizeof(float));
    unsigned char *ok = checked_calloc(images.count, 1);
    options.failures +=
        cli_embed_image_files(&options, ctx, dim, images.items, images.count, image_embeddings, ok);
    float *text_embeddings = embed_texts_or_exit(ctx, dim, texts.items, texts.count);
    for (size_t i = 0; i < images.count + texts.count; i++) {
        int is_image = i < images.count;
        size_t j = is_image ? i : i - images.count;
        if (is_image && !ok[j]) continue;
        const char *name = is_image ? images.items[j] : texts.items[j];
        const float *embedding = (is_image ? image_embeddings : text_embeddings) + j * dim;
        if (options.json) {
            printf("{\"%s\": ", is_image ? "image" : "text");
            json_string(stdout, name);
            printf(", \"embedding\": ");
            json_floats(stdout, embedding, dim);
            printf("}\n");
        } else {
            printf("%s\t", name);
            for (size_t d = 0; d < dim; d++) printf(d ? " %.7g" : "%.7g", embedding[d]);
            printf("\n");
        }
    }
    free(image_embeddings);
    free(text_embeddings);
    free(ok);
    free(images.items);
    free(texts.items);
    glimpse_context_free(ctx);
    glimpse_model_free(model);
    return options.failures ? CLI_EXIT_FAILURE : CLI_EXIT_OK;
}

/* ------------------------------------------------------------------ rank */

static const char rank_help[] =
    "Usage: glimpse rank -m MODEL -t TEXT [-t TEXT...] [--top K] [--json] IMAGE...\n"
    "       glimpse rank -m BLIP_RETRIEVAL [--itc] -t TEXT ... IMAGE...\n"
    "       glimpse rank -m CLIP --rerank BLIP_RETRIEVAL [--rerank-top K] -t TEXT ... IMAGE...\n"
    "Ranks the images against each text, best first.\n"
    "  With a CLIP model the score is CLIP's logit: logit_scale x cosine.\n"
    "  With a BLIP retrieval model (BlipForImageTextRetrieval) it is the ITM match\n"
    "  probability (cross-attention over the image), or with --itc the cosine of the\n"
    "  contrastive projections.\n"
    "  With --rerank, CLIP shortlists the best K images per text (--rerank-top, default 10)\n"
    "  and the BLIP model re-ranks them by ITM probability; only the shortlist is printed.\n"
    "  -t, --text TEXT      a query text (may be repeated: one ranking per text)\n"
    "      --top K          show only the K best images per text (default: all)\n"
    "      --itc            BLIP retrieval models: score by ITC cosine instead of ITM\n"
    "      --rerank MODEL   re-rank CLIP's shortlist with this BLIP retrieval model\n"
    "      --rerank-top K   how many images CLIP shortlists for re-ranking (default 10)\n"
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
static size_t sort_by_score(size_t *order, const float *scores, const unsigned char *ok, size_t count) {
    size_t n = 0;
    for (size_t i = 0; i < count; i++)
        if (ok[i]) order[n++] = i;
    qsort_r(order, n, sizeof *order, compare_scores_descending, (void *)scores);
    return n;
}

/* One result line: scores[order[r]] for r < n, with the optional second scores. */
static void print_ranking(const cli_options *options, const char *text, char **paths, const size_t *order, size_t n,
                          const float *scores, const float *clip_scores) {
    if (options->json) {
        printf("{\"text\": ");
        json_string(stdout, text);
        printf(", \"results\": [");
        for (size_t r = 0; r < n; r++) {
            printf(r ? ", {\"image\": " : "{\"image\": ");
            json_string(stdout, paths[order[r]]);
            printf(", \"score\": ");
            json_float(stdout, scores[r]);
            if (clip_scores) {
                printf(", \"clip_score\": ");
                json_float(stdout, clip_scores[r]);
                printf(", \"itm_score\": ");
                json_float(stdout, scores[r]);
            }
            printf("}");
        }
        printf("]}\n");
    } else {
        printf("%s\n", text);
        for (size_t r = 0; r < n; r++) {
            if (clip_scores)
                printf("  %8.4f  (clip %8.4f)  %s\n", scores[r], clip_scores[r], paths[order[r]]);
            else
                printf("  %8.4f  %s\n", scores[r], paths[order[r]]);
        }
    }
    fflush(stdout);
}

/* Loads paths[first .. first+count) that decode; failures reported. */
static size_t load_images(cli_options *options, char **paths, size_t count, glimpse_image **images, size_t *index) {
    glimpse_image_params params = glimpse_image_default_params();
    params.max_pixels = options->max_pixels;
    size_t loaded = 0;
    for (size_t i = 0; i < count; i++) {
        if (glimpse_image_load_file(paths[i], &params, &images[loaded]) != GLIMPSE_STATUS_OK) {
            cli_error("%s", glimpse_last_error());
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
                            char **texts, size_t text_count, glimpse_match_mode mode, float *scores,
                            unsigned char *ok) {
    cli_progress progress;
    cli_progress_start(&progress, options, image_count, "images");
    for (size_t first = 0; first < image_count; first += RANK_IMAGE_BATCH) {
        size_t batch = image_count - first < RANK_IMAGE_BATCH ? image_count - first : RANK_IMAGE_BATCH;
        glimpse_image *images[RANK_IMAGE_BATCH];
        size_t index[RANK_IMAGE_BATCH];
        cli_progress_end(&progress);
        size_t loaded = load_images(options, paths + first, batch, images, index);
        float batch_scores[RANK_IMAGE_BATCH * text_count];
        if (loaded && glimpse_match(ctx, images, loaded, (const char *const *)texts,
                                    text_count, mode, batch_scores) != GLIMPSE_STATUS_OK) {
            cli_error("%s", glimpse_last_error());
            exit(CLI_EXIT_FAILURE);
        }
        for (size_t j = 0; j < loaded; j++) {
            size_t i = first + index[j];
            ok[i] = 1;
            for (size_t t = 0; t < text_count; t++) scores[i * text_count + t] = batch_scores[j * text_count + t];
            glimpse_image_free(images[j]);
        }
        cli_progress_step(&progress, first + batch);
    }
    cli_progress_end(&progress);
}

int command_rank(int argc, char **argv) {
    cli_options options;
    cli_options_init(&options);
    string_list texts = {0};
    long top = 0, rerank_top = 10;
    int itc = 0;
    const char *rerank_model = NULL;
    enum { OPT_ITC = CLI_OPT_FIRST_FREE, OPT_RERANK, OPT_RERANK_TOP };
    static const struct option long_options[] = {CLI_COMMON_LONG_OPTIONS,
                                                 {"text", required_argument, NULL, 't'},
                                                 {"top", required_argument, NULL, CLI_OPT_TOP},
                                                 {"itc", no_argument, NULL, OPT_ITC},
                                                 {"rerank", required_argument, NULL, OPT_RERANK},
                                                 {"rerank-top", required_argument, NULL, OPT_RERANK_TOP},
                                                 {NULL, 0, NULL, 0}};
    int code;
    while ((code = getopt_long(argc, argv, "m:t:k:", long_options, NULL)) != -1) {
        if (cli_common_option(&options, code, optarg, "rank")) continue;
        switch (code) {
        case 't': list_push(&texts, optarg); break;
        case 'k':
        case CLI_OPT_TOP: top = cli_parse_long("rank", "--top", optarg, 1, 1L << 40); break;
        case OPT_ITC: itc = 1; break;
        case OPT_RERANK: rerank_model = optarg; break;
        case OPT_RERANK_TOP: rerank_top = cli_parse_long("rank", "--rerank-top", optarg, 1, 1L << 20); break;
        case CLI_OPT_HELP: printf("%s\n%s", rank_help, cli_common_help); return CLI_EXIT_OK;
        default: cli_usage_error("rank", "unknown option");
        }
    }
    size_t image_count = (size_t)(argc - optind);
    char **image_paths = argv + optind;
    if (!texts.count) cli_usage_error("rank", "no text to rank against: give -t TEXT");
    if (!image_count) cli_usage_error("rank", "no images to rank");
    if (itc && rerank_model) cli_usage_error("rank", "--itc and --rerank do not go together");
    glimpse_model *model = cli_load_model(&options, "rank", 1, 1);
    glimpse_model_kind kind = glimpse_model_get_kind(model);
    if (kind == GLIMPSE_MODEL_KIND_BLIP_CAPTION) {
        cli_error("%s is a BLIP captioning model; ranking needs CLIP or a BLIP retrieval model", options.model);
        return CLI_EXIT_FAILURE;
    }
    if (kind == GLIMPSE_MODEL_KIND_CLIP && itc) cli_usage_error("rank", "--itc needs a BLIP retrieval model");
    if (kind != GLIMPSE_MODEL_KIND_CLIP && rerank_model)
        cli_usage_error("rank", "--rerank re-ranks a CLIP shortlist: give a CLIP model with -m");
    glimpse_model *reranker = NULL;
    glimpse_context *rerank_ctx = NULL;
    if (rerank_model) {
        cli_options second = options;
        second.model = rerank_model;
        reranker = cli_load_model(&second, "rank", 1, 1);
        if (glimpse_model_get_kind(reranker) != GLIMPSE_MODEL_KIND_BLIP_RETRIEVAL) {
            cli_error("--rerank %s: re-ranking needs a BLIP retrieval model (BlipForImageTextRetrieval)", rerank_model);
            return CLI_EXIT_FAILURE;
        }
        rerank_ctx = cli_create_context(&options, reranker);
    }
    glimpse_context *ctx = cli_create_context(&options, model);
    float *scores = checked_calloc(image_count * texts.count, sizeof(float));
    unsigned char *ok = checked_calloc(image_count, 1);
    if (kind == GLIMPSE_MODEL_KIND_CLIP) {
        size_t dim = glimpse_model_embedding_dim(model);
        float *text_embeddings = embed_texts_or_exit(ctx, dim, texts.items, texts.count);
        float *image_embeddings = checked_calloc(image_count * dim, sizeof(float));
        options.failures += cli_embed_image_files(&options, ctx, dim, image_paths, image_count, image_embeddings, ok);
        glimpse_score(model, image_embeddings, image_count, text_embeddings, texts.count, scores);
        free(image_embeddings);
        free(text_embeddings);
    } else {
        score_with_blip(&options, ctx, image_paths, image_count, texts.items, texts.count,
                        itc ? GLIMPSE_MATCH_MODE_ITC : GLIMPSE_MATCH_MODE_ITM, scores, ok);
    }
    float *column = checked_calloc(image_count, sizeof(float)), *sorted = checked_calloc(image_count, sizeof(float));
    float *clip_sorted = checked_calloc(image_count, sizeof(float));
    size_t *order = checked_calloc(image_count, sizeof(size_t));
    for (size_t t = 0; t < texts.count; t++) {
        for (size_t i = 0; i < image_count; i++) column[i] = scores[i * texts.count + t];
        size_t n = sort_by_score(order, column, ok, image_count);
        if (!reranker) {
            if (top > 0 && (size_t)top < n) n = (size_t)top;
            for (size_t r = 0; r < n; r++) sorted[r] = column[order[r]];
            print_ranking(&options, texts.items[t], image_paths, order, n, sorted, NULL);
            continue;
        }
        /* second stage: the shortlist, decoded again, re-scored by ITM */
        size_t keep = (size_t)rerank_top < n ? (size_t)rerank_top : n;
        glimpse_image **shortlist = checked_calloc(keep, sizeof *shortlist);
        float *first_scores = checked_calloc(keep, sizeof(float));
        size_t *shortlist_index = checked_calloc(keep, sizeof(size_t)), loaded = 0;
        glimpse_image_params params = glimpse_image_default_params();
        params.max_pixels = options.max_pixels;
        for (size_t r = 0; r < keep; r++) {
            if (glimpse_image_load_file(image_paths[order[r]], &params, &shortlist[loaded]) != GLIMPSE_STATUS_OK) {
                cli_error("%s", glimpse_last_error());
                options.failures++;
                continue;
            }
            first_scores[loaded] = column[order[r]];
            shortlist_index[loaded++] = order[r];
        }
        glimpse_ranked *ranked = checked_calloc(loaded, sizeof *ranked);
        size_t ranked_count = 0;
        if (glimpse_rerank(rerank_ctx, texts.items[t], shortlist, loaded, first_scores,
                           loaded, ranked, &ranked_count) != GLIMPSE_STATUS_OK) {
            cli_error("re-ranking: %s", glimpse_last_error());
            exit(CLI_EXIT_FAILURE);
        }
        if (top > 0 && (size_t)top < ranked_count) ranked_count = (size_t)top;
        for (size_t r = 0; r < ranked_count; r++) {
            order[r] = shortlist_index[ranked[r].index];
            sorted[r] = ranked[r].score;
            clip_sorted[r] = ranked[r].first_score;
        }
        print_ranking(&options, texts.items[t], image_paths, order, ranked_count, sorted, clip_sorted);
        for (size_t r = 0; r < loaded; r++) glimpse_image_free(shortlist[r]);
        free(shortlist), free(first_scores), free(shortlist_index), free(ranked);
    }
    free(column), free(sorted), free(clip_sorted), free(order);
    free(scores);
    free(ok);
    free(texts.items);
    glimpse_context_free(ctx);
    glimpse_context_free(rerank_ctx);
    glimpse_model_free(model);
    glimpse_model_free(reranker);
    return options.failures ? CLI_EXIT_FAILURE : CLI_EXIT_OK;
}

/* -------------------------------------------------------------- classify */

static const char classify_help[] =
    "Usage: glimpse classify -m MODEL -l LABEL [-l LABEL...] [--template T] [--json] IMAGE...\n"
    "Zero-shot classification: each label is put in the template, and the softmax\n"
    "of CLIP's logits over the labels gives each label's probability.\n"
    "  -l, --label LABEL    a class name (at least two make sense; may be repeated)\n"
    "      --template T     the sentence a label is put in, {} marking the place\n"
    "                       (default: \"a photo of a {}.\")\n"
    "JSON: {\"image\": PATH, \"labels\": [{\"label\": L, \"probability\": P}, ...]},\n"
    "labels most probable first.\n";

/* template with every "{}" replaced by label. */
static char *fill_template(const char *template_text, const char *label) {
    size_t template_length = strlen(template_text), label_length = strlen(label), holes = 0;
    for (const char *p = strstr(template_text, "{}"); p; p = strstr(p + 2, "{}")) holes++;
    char *text = checked_calloc(template_length + holes * label_length + 1, 1);
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
    static const struct option long_options[] = {CLI_COMMON_LONG_OPTIONS,
                                                 {"label", required_argument, NULL, 'l'},
                                                 {"template", required_argument, NULL, CLI_OPT_TEMPLATE},
                                                 {NULL, 0, NULL, 0}};
    int code;
    while ((code = getopt_long(argc, argv, "m:l:", long_options, NULL)) != -1) {
        if (cli_common_option(&options, code, optarg, "classify")) continue;
        switch (code) {
        case 'l': list_push(&labels, optarg); break;
        case CLI_OPT_TEMPLATE: template_text = optarg; break;
        case CLI_OPT_HELP: printf("%s\n%s", classify_help, cli_common_help); return CLI_EXIT_OK;
        default: cli_usage_error("classify", "unknown option");
        }
    }
    size_t image_count = (size_t)(argc - optind);
    char **image_paths = argv + optind;
    if (!labels.count) cli_usage_error("classify", "no labels: give -l LABEL (at least two)");
    if (!strstr(template_text, "{}")) cli_usage_error("classify", "the template must contain {} where the label goes");
    if (!image_count) cli_usage_error("classify", "no images to classify");
    glimpse_model *model = cli_load_model(&options, "classify", 1, 1);
    glimpse_context *ctx = cli_create_context(&options, model);
    size_t dim = glimpse_model_embedding_dim(model), n_labels = labels.count;
    char **prompts = checked_calloc(n_labels, sizeof(char *));
    for (size_t l = 0; l < n_labels; l++) prompts[l] = fill_template(template_text, labels.items[l]);
    float *text_embeddings = embed_texts_or_exit(ctx, dim, prompts, n_labels);
    float *image_embeddings = checked_calloc(image_count * dim, sizeof(float));
    unsigned char *ok = checked_calloc(image_count, 1);
    options.failures += cli_embed_image_files(&options, ctx, dim, image_paths, image_count, image_embeddings, ok);
    float *logits = checked_calloc(image_count * n_labels, sizeof(float));
    glimpse_score(model, image_embeddings, image_count, text_embeddings, n_labels, logits);
    size_t *order = checked_calloc(n_labels, sizeof(size_t));
    unsigned char *all = checked_calloc(n_labels, 1);
    memset(all, 1, n_labels);
    for (size_t i = 0; i < image_count; i++) {
        if (!ok[i]) continue;
        float *p = logits + i * n_labels; /* softmax over labels, as logits_per_image.softmax(dim=1) */
        float largest = p[0];
        for (size_t l = 1; l < n_labels; l++)
            if (p[l] > largest) largest = p[l];
        double sum = 0;
        for (size_t l = 0; l < n_labels; l++) sum += (p[l] = expf(p[l] - largest));
        for (size_t l = 0; l < n_labels; l++) p[l] = (float)(p[l] / sum);
        size_t n = sort_by_score(order, p, all, n_labels);
        if (options.json) {
            printf("{\"image\": ");
            json_string(stdout, image_paths[i]);
            printf(", \"labels\": [");
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
    glimpse_context_free(ctx);
    glimpse_model_free(model);
    return options.failures ? CLI_EXIT_FAILURE : CLI_EXIT_OK;
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
    glimpse_model *model = cli_load_model(&options, "info", 1, 1);
    glimpse_model_info info;
    glimpse_model_get_info(model, &info);
    if (options.json) {
        printf("{\"architecture\": ");
        json_string(stdout, info.architecture);
        printf(", \"path\": ");
        json_string(stdout, info.path);
        printf(", \"image_size\": %d, \"patch_size\": %d, \"vision_hidden_size\": %d, \"vision_layers\": %d, "
               "\"vision_heads\": %d, \"text_hidden_size\": %d, \"text_layers\": %d, \"text_heads\": %d, "
               "\"text_max_tokens\": %d, \"vocab_size\": %d, \"embedding_dim\": %d, \"parameters\": %zu, "
               "\"weight_bytes\": %zu, \"copied_bytes\": %zu, \"dtype\": \"%s\", \"logit_scale\": ",
               info.image_size, info.patch_size, info.vision_hidden_size, info.vision_layers, info.vision_heads,
               info.text_hidden_size, info.text_layers, info.text_heads, info.text_max_tokens, info.vocab_size,
               info.embedding_dim, info.parameter_count, info.weight_bytes, info.copied_bytes, info.weight_dtype);
        json_float(stdout, info.logit_scale);
        printf("}\n");
    } else {
        printf("architecture   %s\n", info.architecture);
        printf("folder         %s\n", info.path);
        printf("vision tower   %d layers, hidden %d, %d heads, %s; %dx%d pixels in %dx%d patches\n",
               info.vision_layers, info.vision_hidden_size, info.vision_heads, info.vision_activation,
               info.image_size, info.image_size, info.patch_size, info.patch_size);
        printf("text tower     %d layers, hidden %d, %d heads, %s; up to %d tokens, vocabulary %d\n",
               info.text_layers, info.text_hidden_size, info.text_heads, info.text_activation, info.text_max_tokens,
               info.vocab_size);
        printf("embedding      %d dimensions, logit scale %.4f\n", info.embedding_dim, info.logit_scale);
        printf("parameters     %zu (%.1f MB of %s weights, memory-mapped; %.1f MB copied to float32 at load)\n",
               info.parameter_count, info.weight_bytes / 1e6, info.weight_dtype, info.copied_bytes / 1e6);
    }
    glimpse_model_free(model);
    return CLI_EXIT_OK;
}
