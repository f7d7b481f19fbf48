/* video_reader.h — frames of a video, through FFmpeg's libraries (libavformat,
 * libavcodec, libswscale): sampled every so many seconds or at scene changes,
 * turned upright by the stream's display matrix, and converted to RGB8 as the
 * `ffmpeg` tool converts the same frame to rgb24. Reads from memory only (a
 * mapped file): no other file, pipe or network address is ever opened. */
#ifndef GLIMPSE_VISION_VIDEO_READER_H
#define GLIMPSE_VISION_VIDEO_READER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vision/image.h"

/* Two seconds between samples: a moment of a home video (a shot of a phone
 * or camcorder lasts a few seconds, most over two) is seen at least once,
 * while a ten-minute video costs 300 frames through a model. */
#define VIDEO_DEFAULT_EVERY_SECONDS 2.0
/* With scene sampling: a frame is taken when its 64×64 grey thumbnail
 * differs from the last frame taken by this mean absolute difference (of
 * full scale). Between two unrelated photographs (the fixtures' nine) it is
 * 0.27 at the median; between examples/pictures' drawings 0.04 to 0.16. */
#define VIDEO_DEFAULT_SCENE_THRESHOLD GLIMPSE_VIDEO_DEFAULT_SCENE_THRESHOLD
/* Streams a container may have (more is refused): a home video has two or three. */
#define VIDEO_MAX_STREAMS 64

typedef struct video_params {
    double every_seconds;   /* > 0: the first frame at or after each multiple of this is taken */
    double scene_threshold; /* > 0: take frames at scene changes instead (see above); 0: use every_seconds */
    uint64_t max_pixels;    /* frames with more pixels are refused (the decoders stop there too) */
    bool ignore_rotation;   /* keep frames as stored, ignoring the display matrix */
} video_params;

/* Every two seconds, frames up to the still images' pixel limit, upright. */
static inline video_params video_default_params(void) {
    return (video_params){.every_seconds = VIDEO_DEFAULT_EVERY_SECONDS,
                          .scene_threshold = 0,
                          .max_pixels = IMAGE_DEFAULT_MAX_PIXELS,
                          .ignore_rotation = false};
}

typedef struct video_reader video_reader;

/* Whether bytes look like a video container we read (MP4/MOV, Matroska/WebM,
 * AVI, MPEG-TS/PS, FLV, ASF, Ogg) rather than a still image: the image
 * formats we decode are never taken for videos (HEIC and AVIF are ISO
 * media files too). Looks at the first 1 MiB at most. */
bool video_probe(const uint8_t *bytes, size_t size);

/* The common containers (MP4/MOV, Matroska/WebM, AVI, FLV, ASF, Ogg, MPEG
 * program streams) by their signatures alone, pictures excepted
 * (vision/video_signature.c): video_probe where FFmpeg is not there. */
bool video_signature_probe(const uint8_t *bytes, size_t size);

/* Opens the video in bytes (which must outlive the reader): the container
 * is probed within fixed bounds (5 MB, 5 s of media, VIDEO_MAX_STREAMS
 * streams), its best video stream chosen and its decoder opened. label
 * names the video in errors. Caller closes with video_close. */
glimpse_status video_open(const uint8_t *bytes, size_t size, const char *label, const video_params *params,
                          video_reader **out);

/* The next sampled frame as a new image (caller frees with
 * glimpse_image_free), its time in seconds from the start of the file (as
 * `ffmpeg -ss` counts it) and its number among the decoded frames (from 0,
 * as the select filter's n counts them). *frame is NULL at the end. A
 * damaged packet is skipped, as the ffmpeg tool skips it; a video where no
 * frame at all decodes is an error. Work is bounded by the file: each packet
 * costs at most one decode of at most max_pixels. */
glimpse_status video_next(video_reader *reader, glimpse_image **frame, double *seconds, int64_t *number);

/* Whether the file reads to its end with the frames its container lists: known at video_open, which reads
 * every packet once without decoding. False for a video damaged or cut short, whose frames before the damage
 * video_next still gives. */
bool video_whole(const video_reader *reader);

/* The same as an error, known from video_open: BAD_FORMAT ("LABEL: the video is damaged or cut short: it ends
 * before the frames its container lists") for a video that is not whole; OK otherwise (and for NULL). */
glimpse_status video_check_whole(const video_reader *reader);
void video_close(video_reader *reader);

#endif
