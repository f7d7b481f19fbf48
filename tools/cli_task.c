/* cli_task.c — Florence-2's tasks from the command line: `glimpse task` (any task exactly as the model card
 * names it, the expert door), and the commands people guess: `ocr` (the text in a picture, --regions for each
 * line's corners), `detect` (objects, or the boxes of a phrase), `segment` (a phrase's or a region's outline) and
 * `describe` (a region in words). Coordinates are the picture's pixels; --draw writes each picture with what was
 * found drawn on it. CLI only: the tasks themselves are glimpse_run_task's. */
#include <getopt.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tools/cli_caption.h"
#include "tools/cli_common.h"
#include "tools/cli_inputs.h"
#include "tools/commands.h"

enum { OPT_TASK = CLI_OPT_CAPTION_END, OPT_TEXT, OPT_QUERY, OPT_REGION, OPT_REGIONS, OPT_DENSE, OPT_PROPOSALS,
       OPT_OPEN, OPT_CATEGORY, OPT_READ, OPT_DRAW };

static const char task_help[] =
    "Usage: glimpse task -m FLORENCE2 --task TASK [--text PHRASE|--region X0,Y0,X1,Y1] [--beams N]\n"
    "                    [--max-tokens N] [--json] [--draw DIR] IMAGE|VIDEO|FOLDER|-...\n"
    "Runs one Florence-2 task (Florence2ForConditionalGeneration, e.g. microsoft/Florence-2-base)\n"
    "exactly as its model card names it: <CAPTION>, <DETAILED_CAPTION>, <MORE_DETAILED_CAPTION>,\n"
    "<OD>, <DENSE_REGION_CAPTION>, <REGION_PROPOSAL>, <OCR>, <OCR_WITH_REGION>; with a phrase\n"
    "(--text): <CAPTION_TO_PHRASE_GROUNDING>, <REFERRING_EXPRESSION_SEGMENTATION>,\n"
    "<OPEN_VOCABULARY_DETECTION>; with a region (--text with four <loc_N> tokens, or --region in\n"
    "pixels): <REGION_TO_SEGMENTATION>, <REGION_TO_CATEGORY>, <REGION_TO_DESCRIPTION>, <REGION_TO_OCR>.\n"
    "  --task TASK              the task token\n"
    "  --text TEXT              the task's input, as the model card appends it to the task\n"
    "  --region X0,Y0,X1,Y1     the task's region in the picture's pixels (made into <loc_N> tokens\n"
    "                           as Florence-2's processor quantises boxes)\n"
    "  --draw DIR               write each picture with its boxes, polygons and labels as DIR/NAME.png\n"
    "  --beams N, --max-tokens N, --sample ...  the search, as for glimpse caption; default: the\n"
    "                           checkpoint's own settings as its generate applies them (3 beams,\n"
    "                           no 3-gram repeated, at most 20 tokens)\n"
    "Plain output: the processor's result as JSON, after PATH and a tab when there are several\n"
    "pictures. JSON: {\"image\": PATH, \"task\": TASK, \"ids\": [...], \"text\": TEXT, \"result\": {...}}:\n"
    "ids as generate returns them, text decoded as the model card decodes it (special tokens\n"
    "kept), result what the processor's post_process_generation returns for the task.\n";

static const char ocr_help[] =
    "Usage: glimpse ocr -m FLORENCE2 [--regions] [--json] [--draw DIR] IMAGE|VIDEO|FOLDER|-...\n"
    "Reads the text in each picture with Florence-2 (<OCR>).\n"
    "  --regions                each line of text with its four corners (<OCR_WITH_REGION>)\n"
    "  --draw DIR               with --regions: write each picture with its lines outlined\n"
    "Plain output: the text (with --regions: a line per line of text, the text, a tab, the corners\n"
    "x1,y1,...,x4,y4), after PATH and a tab when there are several pictures.\n"
    "JSON: {\"image\": PATH, \"text\": TEXT}, with --regions {\"image\": PATH, \"lines\": [{\"text\": TEXT,\n"
    "\"quad\": [x1, y1, ..., x4, y4]}, ...]}, in the picture's pixels.\n";

static const char detect_help[] =
    "Usage: glimpse detect -m FLORENCE2 [-q PHRASE [--open-vocabulary] | --dense | --proposals]\n"
    "                      [--json] [--draw DIR] IMAGE|VIDEO|FOLDER|-...\n"
    "Finds objects in each picture with Florence-2: boxes and labels (<OD>).\n"
    "  -q, --query PHRASE       the boxes of the things a phrase or caption names\n"
    "                           (<CAPTION_TO_PHRASE_GROUNDING>)\n"
    "  --open-vocabulary        with -q: any object by its name (<OPEN_VOCABULARY_DETECTION>)\n"
    "  --dense                  each region with a short description (<DENSE_REGION_CAPTION>)\n"
    "  --proposals              regions likely to hold an object, unlabelled (<REGION_PROPOSAL>)\n"
    "  --draw DIR               write each picture with its boxes and labels as DIR/NAME.png\n"
    "Plain output: a line per object: its label, a tab, its box x0,y0,x1,y1 (after PATH and a tab\n"
    "when there are several pictures). JSON: {\"image\": PATH, \"objects\": [{\"label\": LABEL,\n"
    "\"box\": [x0, y0, x1, y1]}, ...]}, in the picture's pixels (top left, bottom right).\n";

static const char segment_help[] =
    "Usage: glimpse segment -m FLORENCE2 (-q PHRASE | --region X0,Y0,X1,Y1) [--json] [--draw DIR]\n"
    "                       IMAGE|VIDEO|FOLDER|-...\n"
    "Outlines what a phrase names (<REFERRING_EXPRESSION_SEGMENTATION>), or the object in a region\n"
    "(<REGION_TO_SEGMENTATION>), with Florence-2, as polygons.\n"
    "  -q, --query PHRASE       what to outline\n"
    "  --region X0,Y0,X1,Y1     the region whose object to outline, in the picture's pixels\n"
    "  --draw DIR               write each picture with its outlines as DIR/NAME.png\n"
    "Plain output: a line per polygon: its object's number, a tab, its points x,y,x,y,...\n"
    "JSON: {\"image\": PATH, \"objects\": [{\"label\": LABEL, \"polygons\": [[x, y, ...], ...]}, ...]}.\n";

static const char describe_help[] =
    "Usage: glimpse describe -m FLORENCE2 --region X0,Y0,X1,Y1 [--category | --read] [--json]\n"
    "                        IMAGE|VIDEO|FOLDER|-...\n"
    "Describes a region of each picture in words with Florence-2 (<REGION_TO_DESCRIPTION>).\n"
    "  --region X0,Y0,X1,Y1     the region, in the picture's pixels (top left, bottom right)\n"
    "  --category               the region's category alone (<REGION_TO_CATEGORY>)\n"
    "  --read                   the text in the region (<REGION_TO_OCR>)\n"
    "Plain output: the description. JSON: {\"image\": PATH, \"region\": [x0, y0, x1, y1],\n"
    "\"description\": TEXT}.\n";

/* What one command asks of each picture. */
typedef struct task_request {
    const char *command;
    const char *task;  /* the task token */
    const char *text;  /* its input as given (NULL: none, or the region) */
    bool has_region;
    float region[4];   /* pixels */
    bool regions;      /* ocr --regions */
    const char *draw;  /* --draw DIR */
} task_request;

/* X0,Y0,X1,Y1 in pixels: four numbers, top left before bottom right. */
static void parse_region(const char *command, const char *text, float region[4]) {
    char *end;
    const char *p = text;
    for (int i = 0; i < 4; i++) {
        double value = strtod(p, &end);
        if (end == p || !isfinite(value) || value < 0 || value > 1e6 || (i < 3 && *end != ',') || (i == 3 && *end))
            cli_usage_error(command, "--region takes X0,Y0,X1,Y1 in pixels (four numbers from 0), not '%s'", text);
        region[i] = (float)value;
        p = end + 1;
    }
    if (region[2] <= region[0] || region[3] <= region[1])
        cli_usage_error(command, "--region %s: X1 must be right of X0 and Y1 below Y0", text);
}

/* The flags that pick a command's task. */
typedef struct task_flags {
    const char *query;
    bool open, dense, proposals, category, read;
} task_flags;

/* The task token a guessable command's flags ask for (exits when they contradict each other). */
static const char *pick_task(task_request *r, const task_flags *f) {
    const char *c = r->command;
    if (!strcmp(c, "ocr")) return r->regions ? "<OCR_WITH_REGION>" : "<OCR>";
    if (!strcmp(c, "detect")) {
        if (r->has_region) cli_usage_error(c, "--region is glimpse describe's and segment's");
        if (f->open && !f->query) cli_usage_error(c, "--open-vocabulary names what to find: add -q NAME");
        if ((f->query != NULL) + f->dense + f->proposals > 1)
            cli_usage_error(c, "choose one of -q PHRASE, --dense and --proposals");
        r->text = f->query;
        if (f->query) return f->open ? "<OPEN_VOCABULARY_DETECTION>" : "<CAPTION_TO_PHRASE_GROUNDING>";
        return f->dense ? "<DENSE_REGION_CAPTION>" : f->proposals ? "<REGION_PROPOSAL>" : "<OD>";
    }
    if (!strcmp(c, "segment")) {
        if (!f->query == !r->has_region) cli_usage_error(c, "give what to outline: -q PHRASE or --region X0,Y0,X1,Y1");
        r->text = f->query;
        return f->query ? "<REFERRING_EXPRESSION_SEGMENTATION>" : "<REGION_TO_SEGMENTATION>";
    }
    if (!strcmp(c, "describe")) {
        if (!r->has_region) cli_usage_error(c, "give the region to describe: --region X0,Y0,X1,Y1");
        if (f->category && f->read) cli_usage_error(c, "choose one of --category and --read");
        return f->category ? "<REGION_TO_CATEGORY>" : f->read ? "<REGION_TO_OCR>" : "<REGION_TO_DESCRIPTION>";
    }
    if (!r->task) cli_usage_error(c, "name the task: --task '<OD>' (glimpse task --help lists them)");
    if (r->text && r->has_region) cli_usage_error(c, "give the task's input once: --text or --region");
    return r->task;
}

static const char *command_help(const char *command) {
    if (!strcmp(command, "ocr")) return ocr_help;
    if (!strcmp(command, "detect")) return detect_help;
    if (!strcmp(command, "segment")) return segment_help;
    if (!strcmp(command, "describe")) return describe_help;
    return task_help;
}

/* Parses `command`'s line into options, params, video and the request. False after --help. */
static bool parse_options(int argc, char **argv, cli_options *options, glimpse_caption_params *params,
                          glimpse_video_options *video, task_request *r) {
    const char *c = r->command;
    bool expert = !strcmp(c, "task");
    static const struct option long_options[] = {
        CLI_COMMON_LONG_OPTIONS, CLI_CAPTION_LONG_OPTIONS, CLI_VIDEO_LONG_OPTIONS,
        {"task", required_argument, NULL, OPT_TASK}, {"text", required_argument, NULL, OPT_TEXT},
        {"query", required_argument, NULL, OPT_QUERY}, {"region", required_argument, NULL, OPT_REGION},
        {"regions", no_argument, NULL, OPT_REGIONS}, {"dense", no_argument, NULL, OPT_DENSE},
        {"proposals", no_argument, NULL, OPT_PROPOSALS}, {"open-vocabulary", no_argument, NULL, OPT_OPEN},
        {"category", no_argument, NULL, OPT_CATEGORY}, {"read", no_argument, NULL, OPT_READ},
        {"draw", required_argument, NULL, OPT_DRAW}, {NULL, 0, NULL, 0}};
    /* which of the command-specific options each command takes */
    static const struct {
        int code;
        const char *name, *commands;
    } owners[] = {{OPT_TASK, "--task", "task"},          {OPT_TEXT, "--text", "task"},
                  {OPT_QUERY, "-q", "detect segment"},   {OPT_REGION, "--region", "task segment describe"},
                  {OPT_REGIONS, "--regions", "ocr"},     {OPT_DENSE, "--dense", "detect"},
                  {OPT_PROPOSALS, "--proposals", "detect"}, {OPT_OPEN, "--open-vocabulary", "detect"},
                  {OPT_CATEGORY, "--category", "describe"}, {OPT_READ, "--read", "describe"},
                  {OPT_DRAW, "--draw", "task ocr detect segment"}};
    task_flags f = {NULL, false, false, false, false, false};
    int code;
    while ((code = getopt_long(argc, argv, "m:q:", long_options, NULL)) != -1) {
        if (code == 'q') code = OPT_QUERY;
        for (size_t i = 0; i < sizeof owners / sizeof owners[0]; i++)
            if (owners[i].code == code && !strstr(owners[i].commands, c))
                cli_usage_error(c, "%s is not an option of glimpse %s (see glimpse %s --help)", owners[i].name, c, c);
        if (cli_common_option(options, code, optarg, c)) continue;
        if (cli_video_option(video, code, optarg, c)) continue;
        if (code == CLI_OPT_PROMPT) cli_usage_error(c, "the task makes the prompt: give its input with %s",
                                                    expert ? "--text" : "-q or --region");
        if (cli_caption_option(params, code, optarg, c)) continue;
        switch (code) {
        case OPT_TASK: r->task = optarg; break;
        case OPT_TEXT: r->text = optarg; break;
        case OPT_QUERY: f.query = optarg; break;
        case OPT_REGION: parse_region(c, optarg, r->region), r->has_region = true; break;
        case OPT_REGIONS: r->regions = true; break;
        case OPT_DENSE: f.dense = true; break;
        case OPT_PROPOSALS: f.proposals = true; break;
        case OPT_OPEN: f.open = true; break;
        case OPT_CATEGORY: f.category = true; break;
        case OPT_READ: f.read = true; break;
        case OPT_DRAW: r->draw = optarg; break;
        case CLI_OPT_HELP:
            printf("%s", command_help(c));
            if (expert) printf("%s", cli_caption_options_help);
            printf("\n%s\n%s\n%s", cli_inputs_help, cli_video_help, cli_common_help);
            return false;
        default: cli_usage_error(c, "unknown option");
        }
    }
    if (!strcmp(c, "ocr") && r->draw && !r->regions) cli_usage_error(c, "--draw outlines the lines of --regions");
    r->task = pick_task(r, &f);
    cli_caption_check(params, c);
    return true;
}

/* A float list as plain text: x,y,x,y... with up to 9 significant digits. */
static void print_coords(const float *coords, size_t count) {
    for (size_t i = 0; i < count; i++) printf(i ? ",%.9g" : "%.9g", coords[i]);
}

/* The regions whose instance is `instance`, as {"label": L, "polygons": [[...], ...]}. */
static void print_instance_json(const glimpse_task_result *result, size_t first) {
    const glimpse_region *regions = result->regions;
    printf("{\"label\": ");
    json_string(stdout, regions[first].label);
    printf(", \"polygons\": [");
    for (size_t i = first; i < result->region_count && regions[i].instance == regions[first].instance; i++) {
        printf(i > first ? ", [" : "[");
        json_floats(stdout, regions[i].coords, regions[i].coord_count);
        printf("]");
    }
    printf("]}");
}

/* The JSON fields of a guessable command's result after the picture's. */
static void print_fields_json(const task_request *r, const glimpse_task_result *result) {
    const char *c = r->command;
    if (!strcmp(c, "describe") || (!strcmp(c, "ocr") && !r->regions)) {
        if (!strcmp(c, "describe")) {
            printf(", \"region\": [");
            json_floats(stdout, r->region, 4);
            printf("], \"description\": ");
        } else {
            printf(", \"text\": ");
        }
        json_string(stdout, result->answer ? result->answer : "");
        return;
    }
    printf(!strcmp(c, "ocr") ? ", \"lines\": [" : ", \"objects\": [");
    bool polygons = !strcmp(c, "segment");
    for (size_t i = 0; i < result->region_count; i++) {
        const glimpse_region *g = &result->regions[i];
        if (polygons) {
            if (i && result->regions[i - 1].instance == g->instance) continue;
            printf(i ? ", " : "");
            print_instance_json(result, i);
            continue;
        }
        printf(i ? ", {\"%s\": " : "{\"%s\": ", !strcmp(c, "ocr") ? "text" : "label");
        json_string(stdout, g->label);
        printf(!strcmp(c, "ocr") ? ", \"quad\": [" : ", \"box\": [");
        json_floats(stdout, g->coords, g->coord_count);
        printf("]");
        if (!isnan(g->score)) printf(", \"score\": "), json_float(stdout, g->score);
        printf("}");
    }
    printf("]");
}

/* One picture's result: a JSON line, or plain lines (after PATH and a tab when prefix). */
static void print_result(const cli_options *options, const task_request *r, const cli_picture *picture,
                         bool prefix, const glimpse_task_result *result) {
    if (options->json) {
        cli_json_picture(stdout, picture);
        if (!strcmp(r->command, "task")) {
            printf(", \"task\": ");
            json_string(stdout, result->task);
            printf(", \"ids\": [");
            for (size_t j = 0; j < result->id_count; j++) printf(j ? ", %d" : "%d", result->ids[j]);
            printf("], \"text\": ");
            json_string(stdout, result->text);
            printf(", \"result\": %s", result->json);
        } else {
            print_fields_json(r, result);
        }
        printf("}\n");
        return;
    }
    bool text_only = !strcmp(r->command, "describe") || (!strcmp(r->command, "ocr") && !r->regions);
    if (!strcmp(r->command, "task") || text_only) {
        if (prefix) cli_print_picture(stdout, picture), printf("\t");
        printf("%s\n", !strcmp(r->command, "task") ? result->json : result->answer ? result->answer : "");
        return;
    }
    for (size_t i = 0; i < result->region_count; i++) {
        const glimpse_region *g = &result->regions[i];
        if (prefix) cli_print_picture(stdout, picture), printf("\t");
        if (g->shape == GLIMPSE_REGION_POLYGON)
            printf("%zu", g->instance);
        else
            printf("%s", g->label);
        printf("\t");
        print_coords(g->coords, g->coord_count);
        printf("\n");
    }
}

/* The four <loc_N> tokens of the request's region for this picture (glimpse_task_region), or its text. */
static bool task_input(const task_request *r, const cli_picture *picture, char *buffer, size_t capacity,
                       const char **input) {
    *input = r->text;
    if (!r->has_region) return true;
    glimpse_status status = glimpse_task_region(glimpse_image_width(picture->image),
                                                glimpse_image_height(picture->image), r->region, buffer, capacity);
    if (status) return false;
    *input = buffer;
    return true;
}

/* DIR/NAME.png for a picture (its file name without folders, a video's frame numbered by its time). */
static char *draw_path(const char *folder, const cli_picture *picture) {
    const char *slash = strrchr(picture->path, '/');
    const char *name = slash ? slash + 1 : picture->path;
    if (!strcmp(name, "-")) name = "stdin";
    size_t size = strlen(folder) + strlen(name) + 48;
    char *path = cli_calloc(size, 1);
    if (picture->seconds >= 0)
        snprintf(path, size, "%s/%s@%.3f.png", folder, name, picture->seconds);
    else
        snprintf(path, size, "%s/%s.png", folder, name);
    return path;
}

/* Writes the picture with the result drawn on it into the --draw folder; false (said on stderr) on failure. */
static bool draw_result(const task_request *r, const cli_picture *picture, const glimpse_task_result *result) {
    void *png = NULL;
    size_t size = 0;
    glimpse_status status = glimpse_task_draw(picture->image, result, &png, &size);
    char *path = draw_path(r->draw, picture);
    bool ok = !status;
    if (status) {
        cli_error("%s: drawing: %s", picture->path, glimpse_last_error());
    } else {
        FILE *f = fopen(path, "wb");
        ok = f && fwrite(png, 1, size, f) == size;
        if (f && fclose(f)) ok = false;
        if (!ok) cli_error("%s: cannot write %s", picture->path, path);
    }
    free(path);
    free(png);
    return ok;
}

/* Runs the task on every picture of the inputs in order; a picture that fails is named and counted. */
static void run_files(cli_options *options, glimpse_context *ctx, char *const *paths, size_t count,
                      glimpse_caption_params *params, const task_request *r, const glimpse_video_options *video) {
    cli_pictures pictures;
    cli_pictures_start(&pictures, options, video, paths, count);
    cli_picture picture;
    while (cli_pictures_next(&pictures, &picture)) {
        char region[128];
        const char *input;
        glimpse_task_result result;
        memset(&result, 0, sizeof result);
        glimpse_status status = task_input(r, &picture, region, sizeof region, &input)
                                    ? glimpse_run_task(ctx, &picture.image, 1, r->task, input, params, &result)
                                    : GLIMPSE_STATUS_INVALID_ARGUMENT;
        cli_progress_end(&pictures.progress);
        if (status) {
            cli_error("%s: %s", picture.path, glimpse_last_error());
            options->failures++;
        } else {
            print_result(options, r, &picture, count > 1 || picture.seconds >= 0, &result);
            fflush(stdout);
            if (r->draw && !draw_result(r, &picture, &result)) options->failures++;
        }
        glimpse_task_result_free(&result);
        glimpse_image_free(picture.image);
        cli_progress_step(&pictures.progress, pictures.progress.done);
    }
    cli_pictures_end(&pictures);
}

/* Every task command: parse, load a task model (refusing others by name), run over the inputs. */
static int task_command(const char *command, int argc, char **argv) {
    cli_options options;
    cli_options_init(&options);
    glimpse_caption_params params = glimpse_caption_default_params();
    glimpse_video_options video = glimpse_video_default_options();
    task_request r = {.command = command};
    if (!parse_options(argc, argv, &options, &params, &video, &r)) return CLI_EXIT_OK;
    if (argc == optind) cli_usage_error(command, "no images given");
    if (r.draw) {
        struct stat st;
        if (stat(r.draw, &st) || !S_ISDIR(st.st_mode))
            cli_usage_error(command, "--draw %s: not a folder (make it first)", r.draw);
    }
    size_t count;
    char **paths = cli_expand_inputs(&options, command, argv + optind, (size_t)(argc - optind), &count);
    if (!count) return CLI_EXIT_FAILURE;
    glimpse_model *model = cli_load_model(&options, command, true, true);
    if (!glimpse_model_kind_can(glimpse_model_get_kind(model), GLIMPSE_CAPABILITY_TASK)) {
        glimpse_model_info info;
        glimpse_model_get_info(model, &info);
        cli_error("%s is a %s model; glimpse %s needs Florence-2 (Florence2ForConditionalGeneration, e.g. "
                  "microsoft/Florence-2-base)",
                  options.model, info.architecture, command);
        glimpse_model_free(model);
        cli_inputs_free(paths, count);
        return CLI_EXIT_FAILURE;
    }
    cli_caption_fit_model(&params, model);
    glimpse_context *ctx = cli_create_context(&options, model);
    run_files(&options, ctx, paths, count, &params, &r, &video);
    cli_inputs_free(paths, count);
    return cli_finish(&options, ctx, model);
}

int command_task(int argc, char **argv) { return task_command("task", argc, argv); }
int command_ocr(int argc, char **argv) { return task_command("ocr", argc, argv); }
int command_detect(int argc, char **argv) { return task_command("detect", argc, argv); }
int command_segment(int argc, char **argv) { return task_command("segment", argc, argv); }
int command_describe(int argc, char **argv) { return task_command("describe", argc, argv); }
