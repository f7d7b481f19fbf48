/* cli_inputs.h — the pictures a command is given, as people give them:
 * image files; '-' for one image (or video) on standard input; folders,
 * walked as `glimpse index` walks them (search/walk.c); and, for caption
 * and embed, videos, whose sampled frames become pictures with a time.
 * Named pipes and other files that are not regular are refused at once,
 * never waited on. CLI only: this code prints errors and counts failures. */
#ifndef GLIMPSE_TOOLS_CLI_INPUTS_H
#define GLIMPSE_TOOLS_CLI_INPUTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "tools/cli_common.h"

/* The most read from standard input: 1 GiB. */
#define CLI_STDIN_MAX_BYTES ((size_t)1 << 30)

/* The video options' getopt_long codes (apart from every command's own). */
enum { CLI_OPT_EVERY = 1900, CLI_OPT_SCENES, CLI_OPT_SCENE_THRESHOLD, CLI_OPT_FAST_DECODE };

/* --fast-decode's cost, measured by bench/photos.sh (docs/commands.md), for the help texts. */
#define CLI_FAST_DECODE_FIGURES                                                                                        \
    "                       on 100 photographs of 12 MP the embeddings' cosine to the\n"                               \
    "                       exact path was 0.999994 on average, 0.999899 at worst\n"                                    \
    "                       (demo CLIP; a random-weight ViT-B/32: 0.999998, 0.999996)\n"

#define CLI_VIDEO_LONG_OPTIONS                                                                                         \
    {"every", required_argument, NULL, CLI_OPT_EVERY}, {"scenes", no_argument, NULL, CLI_OPT_SCENES},                  \
        {"scene-threshold", required_argument, NULL, CLI_OPT_SCENE_THRESHOLD}

/* The help texts of '-' and folders, and of videos and their options. */
extern const char cli_inputs_help[];
extern const char cli_video_help[];

/* Handles a video option given getopt_long's code; true if it was one. */
bool cli_video_option(glimpse_video_options *params, int code, const char *argument, const char *command);

/* Parses a number in [minimum, maximum] or exits with a usage error. */
double cli_parse_double(const char *command, const char *option, const char *text, double minimum, double maximum);

/* The inputs named on the command line as a new array of new strings: a
 * folder becomes the image files under it (sorted; index's extensions and
 * rules), '-' (at most once) and files stay as they are. A folder that
 * cannot be read, or holds no image, is named on stderr and counted in
 * options->failures. Caller frees with cli_inputs_free. */
char **cli_expand_inputs(cli_options *options, const char *command, char *const *arguments, size_t count,
                         size_t *expanded);
void cli_inputs_free(char **paths, size_t count);

/* One picture: an image, or a frame of a video. */
typedef struct cli_picture {
    glimpse_image *image; /* the caller's, to free */
    const char *path;     /* as given ("-" for standard input) */
    size_t source;        /* its index among the paths */
    double seconds;       /* its time in the video; negative for a still image */
    bool damaged;         /* a frame of a video damaged or cut short (glimpse_video_whole): JSON says so */
} cli_picture;

/* The pictures of a list of paths, one after the other. */
typedef struct cli_pictures {
    cli_options *options;
    const glimpse_video_options *video; /* NULL: videos are refused */
    char *const *paths;
    size_t count, next, video_source;
    cli_progress progress; /* one step per path */
    const uint8_t *bytes;  /* the open input (read or mapped: owned; or standard input's) */
    size_t size;
    bool owned, mapped;
    glimpse_video *reader; /* the video being read, if any */
    /* set by the caller after cli_pictures_start, for pictures only embedded:
     * each resized for this model as soon as it is decoded (on the thread
     * ahead of the towers), JPEGs scaled in the DCT domain with fast_decode */
    const glimpse_model *prepare_for;
    bool fast_decode;
} cli_pictures;

void cli_pictures_start(cli_pictures *pictures, cli_options *options, const glimpse_video_options *video, char *const *paths,
                        size_t count);
/* The next picture; false at the end. Inputs that cannot be read are named
 * on stderr and counted in options->failures, and the next is taken. A video
 * damaged or cut short gives its frames before the damage (each marked
 * damaged), then counts as a failure (the library's warning names it). */
bool cli_pictures_next(cli_pictures *pictures, cli_picture *picture);
void cli_pictures_end(cli_pictures *pictures);

/* Decodes one image (a file or '-'), as cli_load_image promises. */
bool cli_decode_input(const cli_options *options, const char *path, cli_progress *progress, glimpse_image **image);

/* A time in a video as M:SS.s (H:MM:SS.s when there are hours). */
#define CLI_TIME_CAPACITY 48
void cli_format_time(char text[CLI_TIME_CAPACITY], double seconds);
/* "PATH" for an image, "PATH @ 0:12.5" for a frame (hours when there are some). */
void cli_print_picture(FILE *out, const cli_picture *picture);
/* The start of a result's JSON object: {"image": PATH, and "time": SECONDS for a frame. */
void cli_json_picture(FILE *out, const cli_picture *picture);

/* Embeds pictures in batches (read and decoded on a thread of their own,
 * ahead of the towers) and hands each (with its embedding) to
 * done, in order. A batch that fails is retried picture by picture to name
 * the one at fault, which is reported and counted. Frees the images. */
typedef void cli_embedded(void *user, const cli_picture *picture, const float *embedding);
void cli_embed_pictures(cli_pictures *pictures, glimpse_context *ctx, size_t dim, cli_embedded *done, void *user);

/* The frames of videos for glimpse_index_update, the library's source
 * (glimpse_video_frames_new) with these sampling params and the options'
 * pixel limit and rotation; freed with cli_frame_source_free. */
glimpse_frame_source *cli_frame_source(const cli_options *options, const glimpse_video_options *params);
void cli_frame_source_free(glimpse_frame_source *source);
/* The frame of the video at path shown at seconds (the first at or after
 * it, as sampling every `seconds` takes it): a new image in *frame. */
glimpse_status cli_video_frame_at(const cli_options *options, const char *path, double seconds,
                                  glimpse_image **frame);

/* Loads an image file (or '-', standard input, read once) within
 * --max-pixels, turned upright by its EXIF orientation unless
 * --no-exif-rotate. On failure prints the reason (ending progress's bar
 * first, if given) and returns false. */
bool cli_load_image(const cli_options *options, const char *path, cli_progress *progress, glimpse_image **image);

/* Embeds image files (or '-') in batches. For each path that cannot be read or
 * decoded (a video among them), prints one error line, counts a failure and sets ok[i] = false.
 * embeddings receives count × dim floats (rows of failed images zeroed).
 * Returns the failures. */
int cli_embed_image_files(const cli_options *options, glimpse_context *ctx, size_t dim, char *const *paths,
                          size_t count, float *embeddings, bool *ok);

/* One query's results, best first: with --json {"text": TEXT, "results":
 * [{"image": PATH, "score": S}, ...]} (re-ranked results, given the
 * first-stage clip_scores, also carry "clip_score" and "itm_score"), else
 * the text and a line per result. times (may be NULL): a video frame's
 * time, negative for a still: "PATH @ 0:12.5" and "time" in JSON. */
void cli_print_results(const cli_options *options, const char *text, const char *const *paths, const double *times,
                       const float *scores, const float *clip_scores, size_t count);

#endif
