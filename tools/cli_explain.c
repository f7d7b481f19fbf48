/* cli_explain.c — `glimpse explain`: what each word of a caption, each word of a matched text, or a CLIP/SigLIP
 * match looked at in the picture, as PNG contact sheets, JSON grids, raw attention tensors and one HTML page.
 * The maps come from the library (glimpse_explain_*); this file only names files and prints. */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tools/cli_caption.h"
#include "tools/cli_common.h"
#include "tools/cli_inputs.h"
#include "tools/cli_html.h"
#include "tools/commands.h"
#include "output/explain_json.h"

static const char explain_help[] =
    "Usage: glimpse explain -m MODEL [-t TEXT... | -q QUESTION...] [caption options] [--layer L]\n"
    "                       [--head H] [--no-occlusion] [--raw [--raw-vision]] [--panel N] [--font FILE]\n"
    "                       --out DIR [--json] [--html FILE] IMAGE...\n"
    "Shows where the model looked, as maps over the picture:\n"
    "  captioning model (BLIP,    captions each image and maps every generated word: the decoder's\n"
    "  ViT-GPT2):                 cross-attention of the step that chose it (no -t)\n"
    "  BLIP-2:                    captions (or with -q answers the question, as glimpse ask) and maps\n"
    "                             every generated word: its language model sees the Q-Former's query\n"
    "                             tokens, not patches, so a word's map is the sum over the queries of\n"
    "                             (the word's attention to query q, renormalised over the queries) x\n"
    "                             (query q's cross-attention over the patches, every Q-Former\n"
    "                             cross-attention layer and head averaged), renormalised; --layer and\n"
    "                             --head pick the language model's. A last map, \"queries\", is what\n"
    "                             the queries looked at, their maps averaged\n"
    "  LLaVA:                     captions (or with -q answers) and maps every generated word: the\n"
    "                             language model's attention from the position that chose it to the\n"
    "                             picture's positions in its sequence (the tower's patches); --layer and\n"
    "                             --head pick the language model's\n"
    "  Florence-2:                captions (--prompt: one of its caption tasks) and maps every generated\n"
    "                             word: the BART decoder's cross-attention to its encoder's image rows\n"
    "                             (DaViT's last grid; the rows' mean and the prompt's columns dropped)\n"
    "  BLIP retrieval (ITM), -t:  the match probability, a map per word of the text (its own\n"
    "                             cross-attention row) and one for the whole text (the [CLS] row,\n"
    "                             which the match head reads)\n"
    "  CLIP or SigLIP, -t:        the logit, the vision tower's attention rollout (Abnar and Zuidema\n"
    "                             2020: heads averaged, identity added, rows renormalised, multiplied\n"
    "                             through the layers, read at the class token; SigLIP, which has none,\n"
    "                             at its attention-pooling head), an occlusion map (the drop of the\n"
    "                             logit when each patch is covered with the picture's mean colour), and\n"
    "                             for SigLIP the attention-pooling head's own map. Without -t: rollout.\n"
    "Attention maps average every layer and every head (--layer and --head pick one), keep the patch\n"
    "columns (the class token's is dropped) and sum to 1. A word of several word pieces gets the\n"
    "mean of its pieces' maps (BERT's ## pieces; byte-level BPE: a token starting with a space starts\n"
    "a word, the ones after it without one join it; a newline is no word; LLaVA and Florence-2: as\n"
    "their tokenizers decode, a token whose text starts with a space starts a word, special tokens and\n"
    "whitespace are none).\n"
    "  -t, --text TEXT    a text to explain the match of (repeatable)\n"
    "  -q, --question Q   BLIP-2, LLaVA: the question to answer and explain, asked as glimpse ask asks\n"
    "                     it (repeatable)\n"
    "  --layer L          that layer alone (0 = first; rollout: layers 0 to L)\n"
    "  --head H           that head alone (0 = first)\n"
    "  --no-occlusion     skip the occlusion map (it costs one vision pass per patch)\n"
    "  --raw              also write STEM.attention.safetensors: the raw probabilities of every layer\n"
    "                     and head (caption: cross_attentions [layers, heads, seq_len, image_tokens] and\n"
    "                     self_attentions [layers, heads, seq_len, seq_len], rows = every position of\n"
    "                     the returned ids; BLIP-2: self_attentions of the language model [layers, heads,\n"
    "                     positions, positions], positions = the query tokens, the prompt's tokens and\n"
    "                     every generated token, qformer_cross_attentions [cross layers, heads, queries,\n"
    "                     image_tokens], qformer_self_attentions [layers, heads, queries, queries]; ITM:\n"
    "                     cross_attentions [layers, heads, text_len, image_tokens]; CLIP/SigLIP:\n"
    "                     vision_attentions [layers, heads, tokens, tokens], SigLIP also attention_pool\n"
    "                     [heads, tokens]; LLaVA: self_attentions [layers, heads, positions, positions]\n"
    "                     over the merged prompt and the answer; Florence-2: encoder_attentions [layers,\n"
    "                     heads, L, L] over the image rows and the prompt, decoder_self_attentions and\n"
    "                     cross_attentions [layers, heads, ids, ids | L])\n"
    "  --raw-vision       captioners, with --raw: also the vision tower's self-attention of every layer\n"
    "                     (encoder_attentions for ViT-GPT2, vision_attentions for BLIP and BLIP-2)\n"
    "  --panel N          panels N pixels on their longest side (default 256)\n"
    "  --font FILE        TrueType font of the labels (default DejaVu Sans, fonts-dejavu-core); a font\n"
    "                     you trust: stb_truetype does not check fonts against malice\n"
    "  --out DIR          where STEM.png goes (made if missing); with several texts STEM.T.png, T the\n"
    "                     text's number from 0\n"
    "  --html FILE        one self-contained page for every image: the words as buttons, hovering or\n"
    "                     clicking one shows its map\n"
    "STEM.png is a contact sheet: the picture (labelled with the caption or text), then one panel\n"
    "per map with its word or kind under it. Maps are laid over the original picture through the\n"
    "preprocessing's resize and crop (what the crop cut away stays uncoloured), upsampled\n"
    "bilinearly, scaled to their largest value and coloured with inferno (dark: little, light: most).\n"
    "Plain output: a line per image (and text): PATH, the caption or text, the score (ITM: match\n"
    "probability; CLIP, SigLIP: logit) and the contact sheet's path, separated by tabs.\n"
    "JSON: one line per image (and text): {\"image\", \"caption\" and \"ids\" | \"question\", \"answer\" and\n"
    "\"ids\" | \"text\" and \"probability\" | \"text\" and \"score\", \"grid_size\": [rows, columns],\n"
    "\"words\": [{\"word\", \"tokens\": [ids], \"grid\": [[...]] (BLIP-2: and \"queries\": the word's weight\n"
    "on each query token)}], \"maps\": [{\"kind\", \"grid\"}], \"png\": FILE}; grid rows top to bottom.\n"
    "Caption options (captioning models):\n";

enum {
    OPT_LAYER = CLI_OPT_CAPTION_END,
    OPT_HEAD,
    OPT_NO_OCCLUSION,
    OPT_RAW,
    OPT_RAW_VISION,
    OPT_PANEL,
    OPT_FONT,
    OPT_OUT,
    OPT_HTML
};

typedef struct explain_request {
    glimpse_caption_params caption;
    glimpse_explain_params explain;
    const char **texts; /* -t's texts, or -q's questions */
    size_t text_count;
    bool questions;
    int panel;
    const char *font, *out, *html;
} explain_request;

static bool parse_options(int argc, char **argv, cli_options *options, explain_request *r) {
    static const struct option long_options[] = {CLI_COMMON_LONG_OPTIONS,
                                                 CLI_CAPTION_LONG_OPTIONS,
                                                 {"text", required_argument, NULL, 't'},
                                                 {"question", required_argument, NULL, 'q'},
                                                 {"layer", required_argument, NULL, OPT_LAYER},
                                                 {"head", required_argument, NULL, OPT_HEAD},
                                                 {"no-occlusion", no_argument, NULL, OPT_NO_OCCLUSION},
                                                 {"raw", no_argument, NULL, OPT_RAW},
                                                 {"raw-vision", no_argument, NULL, OPT_RAW_VISION},
                                                 {"panel", required_argument, NULL, OPT_PANEL},
                                                 {"font", required_argument, NULL, OPT_FONT},
                                                 {"out", required_argument, NULL, OPT_OUT},
                                                 {"html", required_argument, NULL, OPT_HTML},
                                                 {NULL, 0, NULL, 0}};
    r->texts = cli_calloc((size_t)argc, sizeof *r->texts);
    int code;
    bool texts = false;
    while ((code = getopt_long(argc, argv, "m:t:q:", long_options, NULL)) != -1) {
        if (cli_common_option(options, code, optarg, "explain")) continue;
        if (cli_caption_option(&r->caption, code, optarg, "explain")) continue;
        switch (code) {
        case 't':
            texts = true;
            r->texts[r->text_count++] = optarg;
            break;
        case 'q':
            r->questions = true;
            r->texts[r->text_count++] = optarg;
            break;
        case OPT_LAYER: r->explain.layer = (int)cli_parse_long("explain", "--layer", optarg, 0, 63); break;
        case OPT_HEAD: r->explain.head = (int)cli_parse_long("explain", "--head", optarg, 0, 1023); break;
        case OPT_NO_OCCLUSION: r->explain.occlusion = false; break;
        case OPT_RAW: r->explain.want_raw = true; break;
        case OPT_RAW_VISION: r->explain.want_vision = true; break;
        case OPT_PANEL: r->panel = (int)cli_parse_long("explain", "--panel", optarg, 16, 4096); break;
        case OPT_FONT: r->font = optarg; break;
        case OPT_OUT: r->out = optarg; break;
        case OPT_HTML: r->html = optarg; break;
        case CLI_OPT_HELP:
            printf("%s%s\n%s", explain_help, cli_caption_options_help, cli_common_help);
            return false;
        default: cli_usage_error("explain", "unknown option");
        }
    }
    cli_caption_check(&r->caption, "explain");
    if (texts && r->questions) cli_usage_error("explain", "-t explains a match, -q an answer: give one kind");
    if (r->explain.want_vision && !r->explain.want_raw) cli_usage_error("explain", "--raw-vision goes with --raw");
    if (r->questions && r->caption.prompt) cli_usage_error("explain", "-q makes the prompt: drop --prompt");
    if (!r->out) cli_usage_error("explain", "--out DIR is required: the pictures go there");
    return true;
}

/* ------------------------------------------------------------------ output */

static char *format(const char *pattern, const char *a, const char *b, size_t number) {
    size_t length = strlen(pattern) + strlen(a) + strlen(b) + 32;
    char *text = cli_calloc(length, 1);
    snprintf(text, length, pattern, a, b, number);
    return text;
}

/* The file name of path without its folder and last extension. */
static char *stem_of(const char *path) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    char *stem = format("%s%s", base, "", 0);
    char *dot = strrchr(stem, '.');
    if (dot && dot != stem) *dot = '\0';
    return stem;
}

static bool write_file(const char *path, const void *bytes, size_t size) {
    FILE *file = fopen(path, "wb");
    if (!file) {
        cli_error("%s: %s", path, strerror(errno));
        return false;
    }
    bool ok = fwrite(bytes, 1, size, file) == size;
    if (fclose(file) != 0) ok = false;
    if (!ok) cli_error("%s: write failed", path);
    return ok;
}

static void print_json(const char *path, glimpse_model_kind kind, const char *question, const glimpse_explanation *e,
                       const char *png) {
    printf("{\"image\": ");
    json_string(stdout, path);
    explain_json_fields(stdout, kind, question, e);
    printf(", \"png\": ");
    json_string(stdout, png);
    printf("}\n");
    fflush(stdout);
}

/* ------------------------------------------------------------------- html */

static void html_text(FILE *out, const char *text) {
    for (; text && *text; text++) {
        switch (*text) {
        case '<': fputs("&lt;", out); break;
        case '>': fputs("&gt;", out); break;
        case '&': fputs("&amp;", out); break;
        case '"': fputs("&quot;", out); break;
        default: fputc(*text, out);
        }
    }
}

static const char html_head[] =
    "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>glimpse explain</title>\n"
    "<style>body{font-family:'DejaVu Sans',sans-serif;margin:0;background:#fff;color:#141414}"
    "section{margin:0 0 24px 0}h2{font-size:15px;font-weight:normal;margin:4px 8px}img{display:block}"
    "nav{margin:0 6px}button{margin:2px;padding:4px 8px;border:1px solid #888;background:#f4f4f4;"
    "border-radius:4px;cursor:pointer}button.shown{background:#fcffa4;border-color:#000}</style></head><body>\n";

/* Hovering or clicking a word shows its map in its section's picture (shown at its own size: the panel the
 * contact sheet has); the last clicked stays when the pointer leaves. The address's #show=ID clicks that map's
 * button at load, and #selftest hovers and clicks every button and writes into <pre id="selftest"> how many
 * switched the picture to their own map: "switched N of M". */
static const char html_script[] =
    "<script>\n"
    "const panel = (id) => document.getElementById(id).textContent;\n"
    "for (const section of document.querySelectorAll('section')) {\n"
    "  const picture = section.querySelector('img');\n"
    "  let chosen = section.querySelector('button');\n"
    "  const show = (button) => {\n"
    "    picture.src = panel(button.dataset.map);\n"
    "    picture.dataset.shown = button.dataset.map;\n"
    "    for (const other of section.querySelectorAll('button')) other.classList.toggle('shown', other === button);\n"
    "  };\n"
    "  for (const button of section.querySelectorAll('button')) {\n"
    "    button.addEventListener('mouseenter', () => show(button));\n"
    "    button.addEventListener('mouseleave', () => show(chosen));\n"
    "    button.addEventListener('click', () => { chosen = button; show(button); });\n"
    "  }\n"
    "  show(chosen);\n"
    "}\n"
    "const asked = new URLSearchParams(location.hash.slice(1));\n"
    "if (asked.has('selftest')) {\n"
    "  let switched = 0, total = 0;\n"
    "  for (const button of document.querySelectorAll('button')) {\n"
    "    const picture = button.closest('section').querySelector('img'), id = button.dataset.map;\n"
    "    total++;\n"
    "    button.dispatchEvent(new MouseEvent('mouseenter'));\n"
    "    const hovered = picture.src === panel(id) && picture.dataset.shown === id;\n"
    "    button.dispatchEvent(new MouseEvent('mouseleave'));\n"
    "    button.click();\n"
    "    if (hovered && picture.src === panel(id) && picture.dataset.shown === id) switched++;\n"
    "  }\n"
    "  const report = document.createElement('pre');\n"
    "  report.id = 'selftest';\n"
    "  report.textContent = `switched ${switched} of ${total}`;\n"
    "  document.body.append(report);\n"
    "}\n"
    "const button = asked.has('show') && document.querySelector(`button[data-map=\"${asked.get('show')}\"]`);\n"
    "if (button) button.click();\n"
    "</script>\n</body></html>\n";

/* One section: the shown picture (first, so the first section's is at the page's top left), the title, a button
 * per map (the first: the picture alone). The panels' PNGs are kept as data: URIs in <script type="text/plain">
 * elements the buttons name: section N's map M is "sN-mM", M = 0 the picture alone. */
static bool html_section(FILE *out, size_t number, const char *path, const explain_request *r,
                         const glimpse_explanation *e, const glimpse_image *image) {
    fprintf(out, "<section id=\"s%zu\"><img alt=\"map\"><h2>", number);
    html_text(out, path);
    if (e->text) {
        fputs(" — ", out);
        html_text(out, e->text);
    }
    if (e->score == e->score) fprintf(out, " (%.4g)", e->score);
    fputs("</h2><nav>", out);
    for (size_t m = 0; m <= e->map_count; m++) {
        fprintf(out, "<button data-map=\"s%zu-m%zu\">", number, m);
        html_text(out, m ? e->maps[m - 1].label : "picture");
        fputs("</button>", out);
    }
    fputs("</nav>\n", out);
    for (size_t m = 0; m <= e->map_count; m++) {
        void *png = NULL;
        size_t size = 0;
        /* the picture alone: the contact sheet of an explanation with no maps */
        glimpse_explanation bare = *e;
        bare.map_count = 0;
        glimpse_status status = m ? glimpse_explain_render_png(e, image, m - 1, r->panel, r->font, &png, &size)
                                  : glimpse_explain_render_png(&bare, image, GLIMPSE_EXPLAIN_SHEET, r->panel,
                                                               r->font, &png, &size);
        if (status) {
            cli_error("%s: %s", path, glimpse_last_error());
            return false;
        }
        fprintf(out, "<script type=\"text/plain\" id=\"s%zu-m%zu\">data:image/png;base64,", number, m);
        json_base64(out, png, size);
        fputs("</script>\n", out);
        free(png);
    }
    fputs("</section>\n", out);
    return true;
}

/* ---------------------------------------------------------------- the work */

typedef struct run {
    cli_options *options;
    glimpse_context *ctx;
    glimpse_model_kind kind;
    const explain_request *request;
    FILE *html;
    size_t sections;
} run;

static glimpse_status explain_one(const run *w, const glimpse_image *image, const char *text,
                                  glimpse_explanation **e) {
    const explain_request *r = w->request;
    if (r->questions) return glimpse_explain_answer(w->ctx, image, text, &r->caption, &r->explain, e);
    if (glimpse_model_kind_can(w->kind, GLIMPSE_CAPABILITY_CAPTION))
        return glimpse_explain_caption(w->ctx, image, &r->caption, &r->explain, e);
    if (glimpse_model_kind_can(w->kind, GLIMPSE_CAPABILITY_MATCH)) return glimpse_explain_match(w->ctx, image, text, &r->explain, e);
    return glimpse_explain_clip(w->ctx, image, text, &r->explain, e);
}

/* Explains one image against one text (or none), writes its files and prints its line. */
static bool explain_text(run *w, const char *path, const char *stem, const glimpse_image *image, const char *text,
                         size_t text_index) {
    const explain_request *r = w->request;
    glimpse_explanation *e = NULL;
    if (explain_one(w, image, text, &e)) {
        cli_error("%s: %s", path, glimpse_last_error());
        return false;
    }
    bool several = r->text_count > 1;
    char *png_path = several ? format("%s/%s.%zu.png", r->out, stem, text_index) : format("%s/%s.png", r->out, stem, 0);
    void *png = NULL;
    size_t size = 0;
    bool ok = !glimpse_explain_render_png(e, image, GLIMPSE_EXPLAIN_SHEET, r->panel, r->font, &png, &size);
    if (!ok) cli_error("%s: %s", path, glimpse_last_error());
    ok = ok && write_file(png_path, png, size);
    free(png);
    if (ok && r->explain.want_raw) {
        char *raw_path = several ? format("%s/%s.%zu.attention.safetensors", r->out, stem, text_index)
                                 : format("%s/%s.attention.safetensors", r->out, stem, 0);
        if (glimpse_explain_write_safetensors(e, raw_path)) {
            cli_error("%s", glimpse_last_error());
            ok = false;
        }
        free(raw_path);
    }
    if (ok && w->html) ok = html_section(w->html, w->sections++, path, r, e, image);
    if (ok && w->options->json)
        print_json(path, w->kind, r->questions ? text : NULL, e, png_path);
    else if (ok) {
        if (e->score == e->score)
            printf("%s\t%s\t%.4g\t%s\n", path, e->text ? e->text : "", e->score, png_path);
        else
            printf("%s\t%s\t%s\n", path, e->text ? e->text : "", png_path);
        fflush(stdout);
    }
    free(png_path);
    glimpse_explanation_free(e);
    return ok;
}

/* A stem no earlier image took: the file's own, else with -2, -3, ... */
static char *unique_stem(const char *path, char **taken, size_t count) {
    char *base = stem_of(path), *stem = format("%s%s", base, "", 0);
    for (size_t n = 2;; n++) {
        bool used = false;
        for (size_t i = 0; i < count && !used; i++) used = !strcmp(taken[i], stem);
        if (!used) break;
        free(stem);
        stem = format("%s-%s%zu", base, "", n);
    }
    free(base);
    return stem;
}

int command_explain(int argc, char **argv) {
    cli_options options;
    cli_options_init(&options);
    explain_request request = {.caption = glimpse_caption_default_params(),
                               .explain = glimpse_explain_default_params()};
    if (!parse_options(argc, argv, &options, &request)) {
        free(request.texts);
        return CLI_EXIT_OK;
    }
    size_t count = (size_t)(argc - optind);
    char **paths = argv + optind;
    if (!count) cli_usage_error("explain", "no images to explain");
    glimpse_model *model = cli_load_model(&options, "explain", true, true);
    glimpse_model_kind kind = glimpse_model_get_kind(model);
    cli_caption_fit_model(&request.caption, model);
    if (request.questions && !glimpse_model_kind_can(kind, GLIMPSE_CAPABILITY_ASK))
        cli_usage_error("explain", "-q needs a model that answers questions (BLIP-2, LLaVA)");
    if (glimpse_model_kind_can(kind, GLIMPSE_CAPABILITY_CAPTION) && request.text_count && !request.questions)
        cli_usage_error("explain", "a captioning model explains its own caption: drop -t");
    if (glimpse_model_kind_can(kind, GLIMPSE_CAPABILITY_MATCH) && !request.text_count)
        cli_usage_error("explain", "a BLIP retrieval model explains a match: give the text with -t");
    if (mkdir(request.out, 0777) != 0 && errno != EEXIST) {
        cli_error("%s: %s", request.out, strerror(errno));
        glimpse_model_free(model);
        free(request.texts);
        return CLI_EXIT_FAILURE;
    }
    glimpse_context *ctx = cli_create_context(&options, model);
    run w = {&options, ctx, kind, &request, NULL, 0};
    if (request.html && !(w.html = fopen(request.html, "w"))) cli_error("%s: %s", request.html, strerror(errno));
    if (request.html && !w.html) options.failures++;
    if (w.html) fputs(html_head, w.html);
    char **stems = cli_calloc(count, sizeof *stems);
    size_t texts = request.text_count ? request.text_count : 1;
    for (size_t i = 0; i < count; i++) {
        stems[i] = unique_stem(paths[i], stems, i);
        glimpse_image *image;
        if (!cli_load_image(&options, paths[i], NULL, &image)) {
            options.failures++;
            continue;
        }
        for (size_t t = 0; t < texts; t++)
            if (!explain_text(&w, paths[i], stems[i], image, request.text_count ? request.texts[t] : NULL, t))
                options.failures++;
        glimpse_image_free(image);
    }
    if (w.html) {
        fputs(html_script, w.html);
        if (fclose(w.html) != 0) {
            cli_error("%s: write failed", request.html);
            options.failures++;
        }
    }
    for (size_t i = 0; i < count; i++) free(stems[i]);
    free(stems);
    free(request.texts);
    return cli_finish(&options, ctx, model);
}
