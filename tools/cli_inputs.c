/* cli_inputs.c — what the commands are given turned into pictures: folders
 * walked, standard input read once (bounded), files read (long videos mapped), videos sampled. */
#include "tools/cli_inputs.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/file.h"
#include "core/prefetch.h"
#include "search/walk.h"

const char cli_inputs_help[] =
    "Inputs: image files; '-' for one picture on standard input (read whole, up to 1 GiB;\n"
    "a terminal is refused); folders, walked recursively for image files as 'glimpse index'\n"
    "walks them (same extensions and rules). A named pipe is refused at once (give it as\n"
    "'-' < PIPE), never waited on.\n";

const char cli_video_help[] =
    "Videos, named or on standard input, not taken from folders (MP4/MOV, Matroska/WebM,\n"
    "AVI, MPEG-TS/PS, FLV, ASF, Ogg; H.264, H.265, VP9, AV1, MJPEG and the rest FFmpeg\n"
    "decodes): frames are taken every few seconds or at scene changes, turned upright by\n"
    "the video's rotation (kept as stored with --no-exif-rotate), in RGB exactly as the\n"
    "ffmpeg tool converts them to rgb24; each result carries its time (\"time\": SECONDS in JSON,\n"
    "PATH @ M:SS.s in plain output). A video damaged or cut short gives its frames before the\n"
    "damage, each with \"damaged\": true in JSON, is named on stderr and counts as a failure.\n"
    "      --every SECONDS  a frame at the start and every SECONDS after it (default 2:\n"
    "                       a moment of a home video lasts a few seconds, and a ten-minute\n"
    "                       video costs 300 frames)\n"
    "      --scenes         a frame at the start and at each scene change instead: when the\n"
    "                       frame's 64x64 grey thumbnail differs from the last frame taken by\n"
    "                       a mean absolute difference over the threshold (of full scale)\n"
    "      --scene-threshold T  that threshold (default 0.1; between two unrelated photographs\n"
    "                       it is about 0.27, between frames of one still shot near 0)\n";

double cli_parse_double(const char *command, const char *option, const char *text, double minimum, double maximum) {
    char *end;
    errno = 0;
    double value = strtod(text, &end);
    if (errno || end == text || *end || !(value >= minimum && value <= maximum))
        cli_usage_error(command, "%s takes a number from %g to %g, not '%s'", option, minimum, maximum, text);
    return value;
}

bool cli_video_option(glimpse_video_options *params, int code, const char *argument, const char *command) {
    switch (code) {
    case CLI_OPT_EVERY:
        params->every_seconds = cli_parse_double(command, "--every", argument, 0.001, 1e9);
        params->scene_threshold = 0;
        return true;
    case CLI_OPT_SCENES:
        if (!(params->scene_threshold > 0)) params->scene_threshold = GLIMPSE_VIDEO_DEFAULT_SCENE_THRESHOLD;
        return true;
    case CLI_OPT_SCENE_THRESHOLD:
        params->scene_threshold = cli_parse_double(command, "--scene-threshold", argument, 0.0001, 1);
        return true;
    }
    return false;
}

/* ------------------------------------------------------------ expansion */

static void push_path(char ***paths, size_t *count, size_t *capacity, const char *path) {
    if (*count == *capacity) {
        *capacity = *capacity ? *capacity * 2 : 16;
        *paths = realloc(*paths, *capacity * sizeof **paths);
    }
    char *copy = *paths ? strdup(path) : NULL;
    if (!copy) {
        cli_error("out of memory");
        exit(CLI_EXIT_FAILURE);
    }
    (*paths)[(*count)++] = copy;
}

char **cli_expand_inputs(cli_options *options, const char *command, char *const *arguments, size_t count,
                         size_t *expanded) {
    char **paths = NULL;
    size_t found = 0, capacity = 0;
    bool standard_input = false;
    for (size_t i = 0; i < count; i++) {
        if (strcmp(arguments[i], "-") == 0) {
            if (standard_input) cli_usage_error(command, "'-' (standard input) may be given once");
            standard_input = true;
        }
        if (strcmp(arguments[i], "-") == 0 || !file_is_directory(arguments[i])) {
            push_path(&paths, &found, &capacity, arguments[i]);
            continue;
        }
        walk_result walk;
        if (walk_folder_files(arguments[i], &walk)) {
            cli_error("out of memory");
            exit(CLI_EXIT_FAILURE);
        }
        for (size_t s = 0; s < walk.skipped.count; s++) {
            cli_error("%s: %s%s", walk.skipped.items[s].path, walk.skipped.items[s].folder ? "cannot read this folder: " : "",
                      walk.skipped.items[s].reason);
            options->failures++;
        }
        if (!walk.files.count && !walk.skipped.count) {
            cli_error("%s: no image files in this folder", arguments[i]);
            options->failures++;
        }
        for (size_t f = 0; f < walk.files.count; f++) push_path(&paths, &found, &capacity, walk.files.items[f].path);
        walk_result_free(&walk);
    }
    *expanded = found;
    return paths;
}

void cli_inputs_free(char **paths, size_t count) {
    for (size_t i = 0; i < count; i++) free(paths[i]);
    free(paths);
}

/* ---------------------------------------------------------- the bytes */

/* Standard input, read once (a re-ranking may decode an image twice). */
static struct {
    bool tried, ok;
    uint8_t *bytes;
    size_t size;
} standard_input;

static const char *input_label(const char *path) { return strcmp(path, "-") == 0 ? "standard input" : path; }

/* The bytes of a path (*owned: read into memory, or mapped when *mapped, as file_contents_open holds them) or of
 * '-' (standard input's, kept for another decoding). Prints the reason on failure. */
static bool open_input(const char *path, cli_progress *progress, const uint8_t **bytes, size_t *size, bool *owned,
                       bool *mapped) {
    *owned = *mapped = false;
    if (strcmp(path, "-") != 0) {
        file_contents file;
        if (file_contents_open(path, &file)) {
            if (progress) cli_progress_end(progress);
            cli_error("%s", glimpse_last_error());
            return false;
        }
        *bytes = file.bytes, *size = file.size, *owned = true, *mapped = file.mapped;
        return true;
    }
    if (!standard_input.tried) {
        standard_input.tried = true;
        if (progress) cli_progress_end(progress);
        if (isatty(STDIN_FILENO)) {
            cli_error("standard input is a terminal: pipe a picture into it ('- < photo.jpg')");
            return false;
        }
        if (file_read_stream(STDIN_FILENO, "standard input", CLI_STDIN_MAX_BYTES, &standard_input.bytes,
                             &standard_input.size)) {
            cli_error("%s", glimpse_last_error());
            return false;
        }
        standard_input.ok = true;
    } else if (!standard_input.ok) {
        if (progress) cli_progress_end(progress);
        cli_error("standard input could not be read");
        return false;
    }
    *bytes = standard_input.bytes;
    *size = standard_input.size;
    return true;
}

static void close_input(const uint8_t *bytes, size_t size, bool owned, bool mapped) {
    file_contents file = {bytes, size, mapped};
    if (owned) file_contents_release(&file);
}

/* Decodes bytes as an image; a video where an image is wanted is named as one. */
static bool decode_image(const cli_options *options, const char *path, cli_progress *progress, const uint8_t *bytes,
                         size_t size, bool videos_elsewhere, const cli_pictures *pictures, glimpse_image **image) {
    glimpse_image_params params = {.max_pixels = options->max_pixels, .ignore_exif_orientation = options->no_exif_rotate};
    const glimpse_model *model = pictures ? pictures->prepare_for : NULL;
    bool fast = pictures && pictures->fast_decode;
    if (!glimpse_image_decode(bytes, size, input_label(path), &params, model, fast, image)) return true;
    if (progress) cli_progress_end(progress);
    if (videos_elsewhere && glimpse_is_video(bytes, size))
        cli_error("%s: a video; this command takes images (caption and embed take videos)", input_label(path));
    else
        cli_error("%s", glimpse_last_error());
    return false;
}

bool cli_decode_input(const cli_options *options, const char *path, cli_progress *progress, glimpse_image **image) {
    const uint8_t *bytes;
    size_t size;
    bool owned, mapped;
    if (!open_input(path, progress, &bytes, &size, &owned, &mapped)) return false;
    bool ok = decode_image(options, path, progress, bytes, size, true, NULL, image);
    close_input(bytes, size, owned, mapped);
    return ok;
}

/* ------------------------------------------------------------ pictures */

void cli_pictures_start(cli_pictures *pictures, cli_options *options, const glimpse_video_options *video, char *const *paths,
                        size_t count) {
    memset(pictures, 0, sizeof *pictures);
    pictures->options = options;
    pictures->video = video;
    pictures->paths = paths;
    pictures->count = count;
    cli_progress_start(&pictures->progress, options, count, "inputs");
}

/* The input open (an image decoded, or a video ended or failed) is done with. */
static void finish_input(cli_pictures *pictures, size_t source) {
    glimpse_video_close(pictures->reader);
    pictures->reader = NULL;
    close_input(pictures->bytes, pictures->size, pictures->owned, pictures->mapped);
    pictures->bytes = NULL, pictures->size = 0, pictures->owned = pictures->mapped = false;
    cli_progress_step(&pictures->progress, source + 1);
}

static void fail(cli_pictures *pictures, size_t source, const char *message) {
    cli_progress_end(&pictures->progress);
    if (message) cli_error("%s", message);
    pictures->options->failures++;
    finish_input(pictures, source);
}

bool cli_pictures_next(cli_pictures *pictures, cli_picture *picture) {
    memset(picture, 0, sizeof *picture);
    for (;;) {
        if (pictures->reader) {
            size_t source = pictures->video_source;
            if (glimpse_video_next(pictures->reader, &picture->image, &picture->seconds)) {
                fail(pictures, source, glimpse_last_error());
                continue;
            }
            if (!picture->image) {
                if (!glimpse_video_whole(pictures->reader)) pictures->options->failures++;
                finish_input(pictures, source);
                continue;
            }
            if (pictures->prepare_for && glimpse_image_prepare(pictures->prepare_for, &picture->image)) {
                glimpse_image_free(picture->image);
                picture->image = NULL;
                fail(pictures, source, glimpse_last_error());
                continue;
            }
            picture->path = pictures->paths[source];
            picture->source = source;
            picture->damaged = !glimpse_video_whole(pictures->reader);
            return true;
        }
        if (pictures->next >= pictures->count) return false;
        size_t source = pictures->next++;
        const char *path = pictures->paths[source];
        if (!open_input(path, &pictures->progress, &pictures->bytes, &pictures->size, &pictures->owned,
                        &pictures->mapped)) {
            fail(pictures, source, NULL);
            continue;
        }
        if (pictures->video && glimpse_is_video(pictures->bytes, pictures->size)) {
            glimpse_video_options params = *pictures->video;
            params.max_pixels = pictures->options->max_pixels;
            params.ignore_rotation = pictures->options->no_exif_rotate;
            if (glimpse_video_open(pictures->bytes, pictures->size, input_label(path), &params, &pictures->reader))
                fail(pictures, source, glimpse_last_error());
            else
                pictures->video_source = source;
            continue;
        }
        bool decoded = decode_image(pictures->options, path, &pictures->progress, pictures->bytes, pictures->size,
                                    !pictures->video, pictures, &picture->image);
        if (!decoded) {
            fail(pictures, source, NULL);
            continue;
        }
        finish_input(pictures, source);
        picture->path = path;
        picture->source = source;
        picture->seconds = -1;
        return true;
    }
}

void cli_pictures_end(cli_pictures *pictures) {
    if (pictures->reader || pictures->bytes) finish_input(pictures, pictures->video_source);
    cli_progress_end(&pictures->progress);
}

/* ------------------------------------------------------------- results */

bool cli_load_image(const cli_options *options, const char *path, cli_progress *progress, glimpse_image **image) {
    return cli_decode_input(options, path, progress, image);
}

/* The rows of cli_embed_image_files, by the index of each picture's path. */
typedef struct embedded_rows {
    float *embeddings;
    bool *ok;
    size_t dim;
} embedded_rows;

static void keep_row(void *user, const cli_picture *picture, const float *embedding) {
    embedded_rows *rows = user;
    memcpy(rows->embeddings + picture->source * rows->dim, embedding, rows->dim * sizeof(float));
    rows->ok[picture->source] = true;
}

int cli_embed_image_files(const cli_options *options, glimpse_context *ctx, size_t dim, char *const *paths,
                          size_t count, float *embeddings, bool *ok) {
    memset(embeddings, 0, count * dim * sizeof(float));
    memset(ok, 0, count * sizeof *ok);
    cli_options counted = *options; /* failures counted from zero here, returned */
    counted.failures = 0;
    cli_pictures pictures;
    cli_pictures_start(&pictures, &counted, NULL, paths, count);
    embedded_rows rows = {embeddings, ok, dim};
    cli_embed_pictures(&pictures, ctx, dim, keep_row, &rows);
    cli_pictures_end(&pictures);
    return counted.failures;
}

void cli_print_results(const cli_options *options, const char *text, const char *const *paths, const double *times,
                       const float *scores, const float *clip_scores, size_t count) {
    if (options->json) {
        printf("{\"text\": ");
        json_string(stdout, text);
        printf(", \"results\": [");
        for (size_t r = 0; r < count; r++) {
            printf(r ? ", {\"image\": " : "{\"image\": ");
            json_path(stdout, paths[r]);
            if (times && times[r] >= 0) printf(", \"time\": %.10g", times[r]);
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
        for (size_t r = 0; r < count; r++) {
            if (clip_scores)
                printf("  %8.4f  (clip %8.4f)  %s\n", scores[r], clip_scores[r], paths[r]);
            else {
                printf("  %8.4f  ", scores[r]);
                cli_print_picture(stdout, &(cli_picture){.path = paths[r], .seconds = times ? times[r] : -1});
                putchar('\n');
            }
        }
    }
}


void cli_format_time(char text[CLI_TIME_CAPACITY], double seconds) {
    long long whole_minutes = (long long)(seconds / 60);
    double rest = seconds - 60.0 * (double)whole_minutes;
    if (rest >= 59.95) whole_minutes++, rest = 0; /* 59.97 s shows as 1:00.0, not 0:60.0 */
    if (whole_minutes >= 60)
        snprintf(text, CLI_TIME_CAPACITY, "%lld:%02lld:%04.1f", whole_minutes / 60, whole_minutes % 60, rest);
    else
        snprintf(text, CLI_TIME_CAPACITY, "%lld:%04.1f", whole_minutes, rest);
}

void cli_print_picture(FILE *out, const cli_picture *picture) {
    fputs(picture->path, out);
    if (picture->seconds < 0) return;
    char time[CLI_TIME_CAPACITY];
    cli_format_time(time, picture->seconds);
    fprintf(out, " @ %s", time);
}

void cli_json_picture(FILE *out, const cli_picture *picture) {
    fputs("{\"image\": ", out);
    json_string(out, picture->path);
    if (picture->seconds >= 0) {
        fputs(", \"time\": ", out);
        fprintf(out, "%.10g", picture->seconds); /* ten digits: to 10 us for a video a day long */
    }
    if (picture->damaged) fputs(", \"damaged\": true", out); /* its video ends before the frames it lists */
}

#define CLI_PICTURE_BATCH 8
/* Pictures decoded ahead of the towers: two batches (each resized for the
 * model when pictures->prepare_for is set: a few hundred kB apiece). */
#define CLI_PICTURES_AHEAD (2 * CLI_PICTURE_BATCH)

typedef struct picture_ahead {
    cli_picture picture;
} picture_ahead;

static bool produce_picture(void *user, void *item, const atomic_bool *stopping) {
    (void)stopping;
    return cli_pictures_next(user, &((picture_ahead *)item)->picture);
}

static void dispose_picture(void *user, void *item) {
    (void)user;
    glimpse_image_free(((picture_ahead *)item)->picture.image);
}

void cli_embed_pictures(cli_pictures *pictures, glimpse_context *ctx, size_t dim, cli_embedded *done, void *user) {
    cli_picture batch[CLI_PICTURE_BATCH];
    glimpse_image *images[CLI_PICTURE_BATCH];
    float *embeddings = cli_calloc(CLI_PICTURE_BATCH * dim, sizeof(float));
    /* the pictures are read, decoded and resized on a thread of their own,
     * a batch or two ahead of the towers; the order is kept */
    prefetch *ahead;
    if (prefetch_start(sizeof(picture_ahead), CLI_PICTURES_AHEAD, true, produce_picture, dispose_picture, pictures,
                       &ahead)) {
        cli_error("%s", glimpse_last_error());
        exit(CLI_EXIT_FAILURE);
    }
    int failures = 0; /* the producer counts its own in options->failures: these join them at the end */
    bool more = true;
    while (more) {
        size_t count = 0;
        picture_ahead next;
        while (count < CLI_PICTURE_BATCH && (more = prefetch_next(ahead, &next)))
            batch[count] = next.picture, images[count] = batch[count].image, count++;
        if (!count) break;
        bool batch_failed = glimpse_embed_images(ctx, images, count, embeddings) != GLIMPSE_STATUS_OK;
        for (size_t j = 0; j < count; j++) {
            /* a batch that failed as a whole is retried one by one to name the culprit */
            if (batch_failed && glimpse_embed_images(ctx, &images[j], 1, embeddings + j * dim)) {
                cli_progress_end(&pictures->progress);
                cli_error("%s: %s", input_label(batch[j].path), glimpse_last_error());
                failures++;
            } else {
                done(user, &batch[j], embeddings + j * dim);
            }
            glimpse_image_free(images[j]);
        }
    }
    prefetch_stop(ahead);
    pictures->options->failures += failures;
    free(embeddings);
}

/* ------------------------------------------------ videos for the index */

/* The library's frame source (api/video.c) with the command's sampling and
 * picture options. */
glimpse_frame_source *cli_frame_source(const cli_options *options, const glimpse_video_options *params) {
    glimpse_video_options chosen = {.every_seconds = params->every_seconds,
                                    .scene_threshold = params->scene_threshold,
                                    .max_pixels = options->max_pixels,
                                    .ignore_rotation = options->no_exif_rotate};
    glimpse_frame_source *source = glimpse_video_frames_new(&chosen);
    if (!source) {
        cli_error("%s", glimpse_last_error());
        exit(CLI_EXIT_FAILURE);
    }
    return source;
}

void cli_frame_source_free(glimpse_frame_source *source) {
    glimpse_video_frames_free(source);
}

glimpse_status cli_video_frame_at(const cli_options *options, const char *path, double seconds,
                                  glimpse_image **frame) {
    *frame = NULL;
    file_contents file;
    glimpse_status status = file_contents_open(path, &file);
    if (status) return status;
    /* sampled every `seconds`: the frame at or after it comes second (the first at 0) */
    glimpse_video_options params = glimpse_video_default_options();
    params.every_seconds = seconds > 0 ? seconds : 1;
    params.max_pixels = options->max_pixels;
    params.ignore_rotation = options->no_exif_rotate;
    glimpse_video *reader = NULL;
    status = glimpse_video_open(file.bytes, file.size, path, &params, &reader);
    double at = -1;
    while (!status) {
        glimpse_image *next = NULL;
        status = glimpse_video_next(reader, &next, &at);
        if (status || !next) break;
        glimpse_image_free(*frame);
        *frame = next;
        if (at >= seconds - 1e-6) break;
    }
    if (!status && !*frame) status = GLIMPSE_STATUS_NOT_FOUND; /* (glimpse_video_next reports a video of no frame) */
    if (status) glimpse_image_free(*frame), *frame = NULL;
    glimpse_video_close(reader);
    file_contents_release(&file);
    return status;
}
