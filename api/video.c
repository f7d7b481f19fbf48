/* video.c — the public calls over vision/video_reader.c: a video's sampled frames
 * (glimpse_video_*) and the frame source that puts videos in an index
 * (glimpse_video_frames_new). The CLI, the Python binding and glimpse.dask
 * all sample through these, so a video gives the same frames whichever way
 * it is read. */
#include <stdio.h>
#include <stdlib.h>

#include "core/error.h"
#include "glimpse.h"
#include "vision/video_reader.h"

glimpse_video_options glimpse_video_default_options(void) {
    video_params defaults = video_default_params();
    return (glimpse_video_options){.every_seconds = defaults.every_seconds,
                                   .scene_threshold = defaults.scene_threshold,
                                   .max_pixels = defaults.max_pixels,
                                   .ignore_rotation = defaults.ignore_rotation};
}

static video_params params_of(const glimpse_video_options *options) {
    glimpse_video_options chosen = options ? *options : glimpse_video_default_options();
    video_params params = video_default_params();
    params.every_seconds = chosen.every_seconds;
    params.scene_threshold = chosen.scene_threshold;
    if (chosen.max_pixels) params.max_pixels = chosen.max_pixels;
    params.ignore_rotation = chosen.ignore_rotation;
    return params;
}

bool glimpse_is_video(const uint8_t *bytes, size_t size) {
    return bytes && video_probe(bytes, size);
}

glimpse_status glimpse_video_open(const uint8_t *bytes, size_t size, const char *label,
                                  const glimpse_video_options *options, glimpse_video **out) {
    if (!out) return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_video_open: no place for the video");
    *out = NULL;
    if (!bytes || !size) return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_video_open: no bytes");
    video_params params = params_of(options);
    video_reader *reader = NULL;
    glimpse_status status = video_open(bytes, size, label ? label : "video", &params, &reader);
    *out = (glimpse_video *)reader;
    return status;
}

glimpse_status glimpse_video_next(glimpse_video *video, glimpse_image **frame, double *seconds) {
    if (!frame) return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_video_next: no place for the frame");
    *frame = NULL;
    if (!video) return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_video_next: no video");
    double time = 0;
    int64_t number = 0;
    glimpse_status status = video_next((video_reader *)video, frame, &time, &number);
    if (seconds) *seconds = time;
    return status;
}

bool glimpse_video_whole(const glimpse_video *video) {
    return !video || video_whole((const video_reader *)video);
}

void glimpse_video_close(glimpse_video *video) {
    video_close((video_reader *)video);
}

void glimpse_video_sampling_text(const glimpse_video_options *options, char *text, size_t capacity) {
    if (!text || !capacity) return;
    video_params params = params_of(options);
    if (params.scene_threshold > 0)
        snprintf(text, capacity, "at scene changes of %g", params.scene_threshold);
    else
        snprintf(text, capacity, "every %g s", params.every_seconds);
}

/* ------------------------------------------------ the index's frame source */

typedef struct frame_source {
    glimpse_frame_source source; /* first: the public struct is the allocation */
    glimpse_video_options options;
    char sampling[64];
} frame_source;

static bool source_is_video(void *user, const uint8_t *bytes, size_t size) {
    (void)user;
    return glimpse_is_video(bytes, size);
}

static glimpse_status source_open(void *user, const char *path, const uint8_t *bytes, size_t size, void **video) {
    const frame_source *source = user;
    glimpse_video *opened = NULL;
    glimpse_status status = glimpse_video_open(bytes, size, path, &source->options, &opened);
    /* a video cut short fails at once, as a damaged file, rather than after decoding it all */
    if (!status && (status = video_check_whole((const video_reader *)opened)))
        glimpse_video_close(opened), opened = NULL;
    *video = opened;
    return status;
}

/* The next frame (a video cut short was refused by source_open). */
static glimpse_status source_next(void *user, void *video, glimpse_image **frame, double *seconds) {
    (void)user;
    return glimpse_video_next(video, frame, seconds);
}

static void source_close(void *user, void *video) {
    (void)user;
    glimpse_video_close(video);
}

glimpse_frame_source *glimpse_video_frames_new(const glimpse_video_options *options) {
    frame_source *source = calloc(1, sizeof *source);
    if (!source) {
        (void)ERROR_OOM();
        return NULL;
    }
    source->options = options ? *options : glimpse_video_default_options();
    glimpse_video_sampling_text(&source->options, source->sampling, sizeof source->sampling);
    source->source = (glimpse_frame_source){.is_video = source_is_video,
                                            .open = source_open,
                                            .next = source_next,
                                            .close = source_close,
                                            .user = source,
                                            .sampling = source->sampling};
    return &source->source;
}

void glimpse_video_frames_free(glimpse_frame_source *frames) {
    free(frames); /* (the frame_source it begins) */
}
