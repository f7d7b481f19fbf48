/* video_reader.c — sampled, upright RGB8 frames of a video held in memory, through
 * libavformat (demuxing from our own bounded reader), libavcodec (the same
 * decoder the ffmpeg tool picks) and libswscale (the conversion the ffmpeg
 * tool's filter graph makes, with the same flags). No scaling to the model's
 * size here: that is preprocess.c's business, as for still images. */
#include "vision/video_reader.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/log.h"
#include "vision/decoders.h"
#include "vision/ffmpeg_library.h"

/* Containers read (libavformat's names): what phones, cameras and the web
 * write. Raw elementary streams and the image demuxers are left out. */
static const char video_formats[] = "mov,mp4,m4a,3gp,3g2,mj2,matroska,webm,avi,mpegts,mpeg,flv,asf,ogg";

#define VIDEO_IO_BUFFER_BYTES 32768
#define VIDEO_PROBE_BYTES 5000000         /* libavformat's own default, stated */
#define VIDEO_PROBE_SNIFF_BYTES (1 << 20) /* what video_probe looks at */
#define VIDEO_THUMBNAIL_SIDE 64
/* Timestamps closer than this to a sampling time count as on it (rounding of
 * pts × time_base). */
#define VIDEO_TIME_EPSILON 1e-7

/* How a frame is turned upright, as the ffmpeg tool's autorotate does it:
 * output (row r, column c) takes the stored pixel at (c, r) when transposed,
 * else (r, c), then counted from the far end on the axes flipped. */
typedef struct video_orientation {
    bool transpose, flip_rows, flip_columns;
} video_orientation;

typedef struct memory_source {
    const uint8_t *bytes;
    size_t size, at;
} memory_source;

struct video_reader {
    memory_source source;
    AVIOContext *io;
    AVFormatContext *format;
    AVCodecContext *decoder;
    AVPacket *packet;
    AVFrame *frame, *upright, *rgb;
    struct SwsContext *convert, *thumbnail;
    int stream, convert_width, convert_height, convert_format;
    AVRational time_base;
    double start_seconds, frame_rate;
    video_orientation orientation;
    video_params params;
    char *label;
    double next_time;
    int64_t decoded, packets; /* frames decoded, packets of our stream read */
    bool draining, finished, read_failed, have_taken;
    bool cut_short; /* the file ended (or failed to read) before the frames its container lists */
    bool said_cut_short;
    int decode_error; /* the last error the decoder gave, 0 for none */
    uint8_t last_thumbnail[VIDEO_THUMBNAIL_SIDE * VIDEO_THUMBNAIL_SIDE];
    uint8_t thumbnail_pixels[VIDEO_THUMBNAIL_SIDE * VIDEO_THUMBNAIL_SIDE];
};

/* ------------------------------------------------ FFmpeg's log, quietly */

/* FFmpeg would print on stderr; its lines go to the library's log instead
 * (debug level), as every diagnostic of the library does. */
static void forward_log(void *object, int level, const char *format, va_list args) {
    if (level > AV_LOG_WARNING) return;
    char line[512];
    int print_prefix = 1;
    ffmpeg.av_log_format_line2(object, level, format, args, line, sizeof line, &print_prefix);
    size_t length = strlen(line);
    while (length && (line[length - 1] == '\n' || line[length - 1] == '\r')) line[--length] = '\0';
    if (length) log_message(GLIMPSE_LOG_LEVEL_DEBUG, "ffmpeg: %s", line);
}

static void install_log(void) { ffmpeg.av_log_set_callback(forward_log); }

/* FFmpeg's libraries, loaded (vision/ffmpeg_library.c) and their log sent
 * to ours; false, with why, when they cannot be loaded. */
static bool ready(const char **why) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    if (!ffmpeg_load(why)) return false;
    pthread_once(&once, install_log);
    return true;
}

static const char *ffmpeg_error(int code, char *text, size_t size) {
    if (ffmpeg.av_strerror(code, text, size) < 0) snprintf(text, size, "error %d", code);
    return text;
}

/* -------------------------------------------------- reading from memory */

static int read_memory(void *user, uint8_t *target, int wanted) {
    memory_source *source = user;
    size_t left = source->size - source->at;
    if (left == 0) return AVERROR_EOF;
    size_t count = wanted > 0 && (size_t)wanted < left ? (size_t)wanted : left;
    if (wanted <= 0) return 0;
    memcpy(target, source->bytes + source->at, count);
    source->at += count;
    return (int)count;
}

static int64_t seek_memory(void *user, int64_t offset, int whence) {
    memory_source *source = user;
    int64_t base;
    switch (whence & ~AVSEEK_FORCE) {
    case AVSEEK_SIZE: return (int64_t)source->size;
    case SEEK_SET: base = 0; break;
    case SEEK_CUR: base = (int64_t)source->at; break;
    case SEEK_END: base = (int64_t)source->size; break;
    default: return AVERROR(EINVAL);
    }
    if (offset > (int64_t)source->size || offset < -base || base + offset > (int64_t)source->size)
        return AVERROR(EINVAL);
    source->at = (size_t)(base + offset);
    return (int64_t)source->at;
}

/* The demuxers may ask to open other files (a MOV's data references, a
 * playlist's segments): never. */
static int refuse_open(struct AVFormatContext *format, AVIOContext **io, const char *url, int flags,
                       AVDictionary **options) {
    (void)format, (void)io, (void)url, (void)flags, (void)options;
    return AVERROR(EPERM);
}

/* ------------------------------------------------------------- probing */

bool video_probe(const uint8_t *bytes, size_t size) {
    if (!bytes || size == 0 || image_known_format(bytes, size)) return false;
    /* without FFmpeg, by the containers' signatures: video_open then says what is missing */
    if (!ready(NULL)) return video_signature_probe(bytes, size);
    size_t length = size < VIDEO_PROBE_SNIFF_BYTES ? size : VIDEO_PROBE_SNIFF_BYTES;
    uint8_t *padded = calloc(1, length + AVPROBE_PADDING_SIZE);
    if (!padded) return false;
    memcpy(padded, bytes, length);
    AVProbeData probe = {.filename = "", .buf = padded, .buf_size = (int)length, .mime_type = NULL};
    int score = 0;
    const AVInputFormat *found = ffmpeg.av_probe_input_format3(&probe, 1, &score);
    free(padded);
    return found && score > AVPROBE_SCORE_EXTENSION && ffmpeg.av_match_list(found->name, video_formats, ',');
}

/* ------------------------------------------------------------- opening */

/* The ffmpeg tool's autorotate (fftools/ffmpeg_filter.c, 5.1): the angle
 * from the display matrix, rounded to whole degrees, then transpose for 90
 * and 270 (with a flip when the matrix mirrors), hflip/vflip for 180, vflip
 * for a mirrored 0. Other angles are left alone (the tool would rotate by
 * an arbitrary angle and fill the corners). */
static video_orientation orientation_of(const AVStream *stream) {
    video_orientation none = {false, false, false};
    size_t size = 0;
    const int32_t *matrix = (const int32_t *)ffmpeg.av_stream_get_side_data(stream, AV_PKT_DATA_DISPLAYMATRIX, &size);
    if (!matrix || size < 9 * sizeof(int32_t)) return none;
    double theta = -round(ffmpeg.av_display_rotation_get(matrix));
    if (isnan(theta)) return none;
    theta -= 360 * floor(theta / 360 + 0.9 / 360);
    if (fabs(theta - 90) < 1.0) /* transpose=clock, or cclock_flip when mirrored */
        return matrix[3] > 0 ? (video_orientation){true, false, false} : (video_orientation){true, true, false};
    if (fabs(theta - 180) < 1.0) return (video_orientation){false, matrix[4] < 0, matrix[0] < 0};
    if (fabs(theta - 270) < 1.0) /* transpose=cclock, or clock_flip when mirrored */
        return matrix[3] < 0 ? (video_orientation){true, true, true} : (video_orientation){true, false, true};
    if (fabs(theta) < 1.0 && matrix[4] < 0) return (video_orientation){false, true, false};
    return none;
}

static glimpse_status open_failure(video_reader *reader, glimpse_status status, const char *what, int code) {
    char text[128];
    /* libavformat says only "Cannot allocate memory" when a file has more streams than max_streams */
    if (code == AVERROR(ENOMEM))
        return error_set(GLIMPSE_STATUS_TOO_LARGE, "%s: %s: more than %d streams, or out of memory", reader->label,
                         what, VIDEO_MAX_STREAMS);
    return error_set(status, "%s: %s: %s", reader->label, what, ffmpeg_error(code, text, sizeof text));
}

static int64_t max_pixels_of(const video_reader *reader) {
    return reader->params.max_pixels < INT64_MAX ? (int64_t)reader->params.max_pixels : INT64_MAX;
}

static glimpse_status open_container(video_reader *reader) {
    uint8_t *buffer = ffmpeg.av_malloc(VIDEO_IO_BUFFER_BYTES);
    if (!buffer) return ERROR_OOM();
    reader->io = ffmpeg.avio_alloc_context(buffer, VIDEO_IO_BUFFER_BYTES, 0, &reader->source, read_memory, NULL,
                                           seek_memory);
    if (!reader->io) {
        ffmpeg.av_free(buffer);
        return ERROR_OOM();
    }
    AVFormatContext *format = ffmpeg.avformat_alloc_context();
    if (!format) return ERROR_OOM();
    format->pb = reader->io;
    format->flags |= AVFMT_FLAG_CUSTOM_IO;
    format->probesize = VIDEO_PROBE_BYTES;
    format->max_analyze_duration = 5 * AV_TIME_BASE;
    format->max_streams = VIDEO_MAX_STREAMS;
    format->io_open = refuse_open;
    format->format_whitelist = ffmpeg.av_strdup(video_formats);
    if (!format->format_whitelist) {
        ffmpeg.avformat_free_context(format);
        return ERROR_OOM();
    }
    int code = ffmpeg.avformat_open_input(&format, "", NULL, NULL); /* frees format on failure */
    if (code < 0) return open_failure(reader, GLIMPSE_STATUS_BAD_FORMAT, "not a video we read", code);
    reader->format = format;
    /* the decoders that probing opens refuse frames over the limit too */
    AVDictionary *options[VIDEO_MAX_STREAMS] = {NULL};
    unsigned streams = format->nb_streams < VIDEO_MAX_STREAMS ? format->nb_streams : VIDEO_MAX_STREAMS;
    for (unsigned i = 0; i < streams; i++) ffmpeg.av_dict_set_int(&options[i], "max_pixels", max_pixels_of(reader), 0);
    code = format->nb_streams <= VIDEO_MAX_STREAMS ? ffmpeg.avformat_find_stream_info(format, options)
                                                   : AVERROR(ENOMEM);
    for (unsigned i = 0; i < streams; i++) ffmpeg.av_dict_free(&options[i]);
    if (code < 0) return open_failure(reader, GLIMPSE_STATUS_BAD_FORMAT, "cannot read its streams", code);
    return GLIMPSE_STATUS_OK;
}

static glimpse_status open_decoder(video_reader *reader) {
    AVFormatContext *format = reader->format;
    int best = ffmpeg.av_find_best_stream(format, AVMEDIA_TYPE_VIDEO, -1, -1, NULL, 0);
    /* a cover picture is not the video */
    if (best >= 0 && (format->streams[best]->disposition & AV_DISPOSITION_ATTACHED_PIC)) best = -1;
    for (unsigned i = 0; best < 0 && i < format->nb_streams; i++)
        if (format->streams[i]->codecpar->codec_type == AVMEDIA_TYPE_VIDEO &&
            !(format->streams[i]->disposition & AV_DISPOSITION_ATTACHED_PIC))
            best = (int)i;
    if (best < 0) return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: has no video stream", reader->label);
    AVStream *stream = format->streams[best];
    reader->stream = best;
    AVCodecParameters *codec = stream->codecpar;
    if (codec->width > 0 && codec->height > 0) {
        glimpse_status status =
            check_dimensions(reader->label, (uint64_t)codec->width, (uint64_t)codec->height, reader->params.max_pixels);
        if (status) return status;
    }
    const AVCodec *decoder = ffmpeg.avcodec_find_decoder(codec->codec_id);
    if (!decoder)
        return error_set(GLIMPSE_STATUS_UNSUPPORTED, "%s: no decoder for its %s video", reader->label,
                         ffmpeg.avcodec_get_name(codec->codec_id));
    reader->decoder = ffmpeg.avcodec_alloc_context3(decoder);
    if (!reader->decoder) return ERROR_OOM();
    int code = ffmpeg.avcodec_parameters_to_context(reader->decoder, codec);
    if (code < 0) return open_failure(reader, GLIMPSE_STATUS_BAD_FORMAT, "bad codec parameters", code);
    reader->decoder->pkt_timebase = stream->time_base;
    reader->decoder->thread_count = 1;
    /* the decoder refuses larger frames itself, whatever a later header says */
    reader->decoder->max_pixels = max_pixels_of(reader);
    if ((code = ffmpeg.avcodec_open2(reader->decoder, decoder, NULL)) < 0)
        return open_failure(reader, GLIMPSE_STATUS_UNSUPPORTED, "cannot open its decoder", code);
    reader->time_base = stream->time_base;
    if (reader->time_base.num <= 0 || reader->time_base.den <= 0)
        return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: its time base %d/%d is not a time", reader->label,
                         reader->time_base.num, reader->time_base.den);
    reader->start_seconds = format->start_time != AV_NOPTS_VALUE ? (double)format->start_time / AV_TIME_BASE : 0;
    AVRational rate = ffmpeg.av_guess_frame_rate(format, stream, NULL);
    reader->frame_rate = rate.num > 0 && rate.den > 0 ? av_q2d(rate) : 0;
    if (!reader->params.ignore_rotation) reader->orientation = orientation_of(stream);
    return GLIMPSE_STATUS_OK;
}

/* Whether a read of the container that ended with `code` after `packets` packets of our stream ended short: an
 * error, or an end before the frames the container lists (an MP4's index names every sample). */
static bool ended_short(const video_reader *reader, int code, int64_t packets) {
    int64_t listed = reader->format->streams[reader->stream]->nb_frames;
    return code != AVERROR_EOF || (listed > 0 && packets < listed);
}

/* Reads every packet of the file once, without decoding (a demuxer's work, a small part of decoding's): whether
 * it reads to its end with the frames its container lists, so that a video damaged or cut short is known before
 * its first frame (and its frames before the damage can say so). Then the container is opened afresh, to be read
 * from its start as if the scan had not been. */
static glimpse_status scan_packets(video_reader *reader) {
    int64_t ours = 0;
    int code;
    while ((code = ffmpeg.av_read_frame(reader->format, reader->packet)) >= 0) {
        ours += reader->packet->stream_index == reader->stream;
        ffmpeg.av_packet_unref(reader->packet);
    }
    reader->cut_short = ended_short(reader, code, ours);
    ffmpeg.avformat_close_input(&reader->format);
    if (reader->io) ffmpeg.av_freep(&reader->io->buffer);
    ffmpeg.avio_context_free(&reader->io);
    reader->source.at = 0;
    glimpse_status status = open_container(reader);
    if (!status && ((unsigned)reader->stream >= reader->format->nb_streams ||
                    reader->format->streams[reader->stream]->codecpar->codec_id != reader->decoder->codec_id))
        status = error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: its streams differ when read again", reader->label);
    return status;
}

glimpse_status video_open(const uint8_t *bytes, size_t size, const char *label, const video_params *params,
                          video_reader **out) {
    if (!out) return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "video_open: out is NULL");
    *out = NULL;
    if (!bytes || size == 0) return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: empty file, not a video", label);
    if (size > INT64_MAX) return error_set(GLIMPSE_STATUS_TOO_LARGE, "%s: too large", label);
    video_params chosen = params ? *params : video_default_params();
    if (!(chosen.every_seconds > 0) && !(chosen.scene_threshold > 0))
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "%s: sample every so many seconds (> 0) or at scenes",
                         label);
    const char *why = NULL;
    if (!ready(&why)) return error_set(GLIMPSE_STATUS_UNSUPPORTED, "%s: %s", label ? label : "video in memory", why);
    video_reader *reader = calloc(1, sizeof *reader);
    if (!reader) return ERROR_OOM();
    reader->source = (memory_source){bytes, size, 0};
    reader->params = chosen;
    reader->label = strdup(label ? label : "video in memory");
    reader->packet = ffmpeg.av_packet_alloc();
    reader->frame = ffmpeg.av_frame_alloc();
    glimpse_status status = reader->label && reader->packet && reader->frame ? GLIMPSE_STATUS_OK : ERROR_OOM();
    if (!status) status = open_container(reader);
    if (!status) status = open_decoder(reader);
    if (!status) status = scan_packets(reader);
    if (status) {
        video_close(reader);
        return status;
    }
    *out = reader;
    return GLIMPSE_STATUS_OK;
}

void video_close(video_reader *reader) {
    if (!reader) return;
    ffmpeg.avcodec_free_context(&reader->decoder);
    ffmpeg.avformat_close_input(&reader->format);
    if (reader->io) ffmpeg.av_freep(&reader->io->buffer);
    ffmpeg.avio_context_free(&reader->io);
    ffmpeg.av_packet_free(&reader->packet);
    ffmpeg.av_frame_free(&reader->frame);
    ffmpeg.av_frame_free(&reader->upright);
    ffmpeg.av_frame_free(&reader->rgb);
    ffmpeg.sws_freeContext(reader->convert);
    ffmpeg.sws_freeContext(reader->thumbnail);
    free(reader->label);
    free(reader);
}

/* ------------------------------------------------------- turning upright */

/* Bytes per element of each plane of a planar format the ffmpeg tool's
 * transpose and flip filters take as they are (no palette, bitstream or
 * hardware frames, and for a transpose the same chroma subsampling on both
 * axes); 0 when the format is not one of them. */
static int plane_element_bytes(const AVPixFmtDescriptor *format, int plane, bool transpose) {
    if (format->flags & (AV_PIX_FMT_FLAG_PAL | AV_PIX_FMT_FLAG_BITSTREAM | AV_PIX_FMT_FLAG_HWACCEL)) return 0;
    if (transpose && format->log2_chroma_w != format->log2_chroma_h) return 0;
    int step = 0;
    for (int c = 0; c < format->nb_components; c++)
        if (format->comp[c].plane == plane && format->comp[c].step > step) step = format->comp[c].step;
    return step;
}

/* reader->upright = reader->frame turned by reader->orientation, plane by
 * plane as the transpose/hflip/vflip filters do it (before any conversion). */
static glimpse_status turn_upright(video_reader *reader, const AVFrame *frame, const AVFrame **result) {
    video_orientation turn = reader->orientation;
    *result = frame;
    if (!turn.transpose && !turn.flip_rows && !turn.flip_columns) return GLIMPSE_STATUS_OK;
    const AVPixFmtDescriptor *format = ffmpeg.av_pix_fmt_desc_get(frame->format);
    int planes = ffmpeg.av_pix_fmt_count_planes(frame->format);
    if (!format || planes <= 0) return GLIMPSE_STATUS_OK;
    for (int p = 0; p < planes; p++)
        if (!plane_element_bytes(format, p, turn.transpose))
            return error_set(GLIMPSE_STATUS_UNSUPPORTED, "%s: a rotated video in %s pixels, which we cannot turn",
                             reader->label, format->name);
    if (!reader->upright && !(reader->upright = ffmpeg.av_frame_alloc())) return ERROR_OOM();
    AVFrame *upright = reader->upright;
    ffmpeg.av_frame_unref(upright);
    upright->format = frame->format;
    upright->width = turn.transpose ? frame->height : frame->width;
    upright->height = turn.transpose ? frame->width : frame->height;
    if (ffmpeg.av_frame_get_buffer(upright, 0) < 0 || ffmpeg.av_frame_copy_props(upright, frame) < 0)
        return ERROR_OOM();
    for (int p = 0; p < planes; p++) {
        bool chroma = (p == 1 || p == 2) && !(format->flags & AV_PIX_FMT_FLAG_RGB);
        int source_width = chroma ? AV_CEIL_RSHIFT(frame->width, format->log2_chroma_w) : frame->width;
        int source_height = chroma ? AV_CEIL_RSHIFT(frame->height, format->log2_chroma_h) : frame->height;
        int target_width = turn.transpose ? source_height : source_width;
        int target_height = turn.transpose ? source_width : source_height;
        size_t element = (size_t)plane_element_bytes(format, p, turn.transpose);
        for (int r = 0; r < target_height; r++) {
            uint8_t *target = upright->data[p] + (ptrdiff_t)r * upright->linesize[p];
            for (int c = 0; c < target_width; c++) {
                int source_row = turn.transpose ? c : r, source_column = turn.transpose ? r : c;
                if (turn.flip_rows) source_row = source_height - 1 - source_row;
                if (turn.flip_columns) source_column = source_width - 1 - source_column;
                memcpy(target + (size_t)c * element,
                       frame->data[p] + (ptrdiff_t)source_row * frame->linesize[p] + (size_t)source_column * element,
                       element);
            }
        }
    }
    *result = upright;
    return GLIMPSE_STATUS_OK;
}

/* ------------------------------------------------------ RGB as ffmpeg does */

/* The matrix the ffmpeg tool's scale filter (libavfilter/vf_scale.c, 5.1,
 * in_color_matrix "auto") takes for a frame's colour space. */
static const int *frame_matrix(enum AVColorSpace space) {
    if (space < 1 || space > 10 || space == 8) space = AVCOL_SPC_BT470BG;
    return ffmpeg.sws_getCoefficients(space);
}

/* A converter for frames of this size and format, made as the scale filter
 * that the ffmpeg tool inserts to reach rgb24 makes it: the tool's default
 * flags (bicubic), MPEG-2 chroma siting for yuv420p, one thread. */
static glimpse_status make_converter(video_reader *reader, const AVFrame *frame) {
    if (reader->convert && reader->convert_width == frame->width && reader->convert_height == frame->height &&
        reader->convert_format == frame->format)
        return GLIMPSE_STATUS_OK;
    ffmpeg.sws_freeContext(reader->convert);
    struct SwsContext *convert = reader->convert = ffmpeg.sws_alloc_context();
    if (!convert) return ERROR_OOM();
    ffmpeg.av_opt_set_int(convert, "srcw", frame->width, 0);
    ffmpeg.av_opt_set_int(convert, "srch", frame->height, 0);
    ffmpeg.av_opt_set_int(convert, "src_format", frame->format, 0);
    ffmpeg.av_opt_set_int(convert, "dstw", frame->width, 0);
    ffmpeg.av_opt_set_int(convert, "dsth", frame->height, 0);
    ffmpeg.av_opt_set_int(convert, "dst_format", AV_PIX_FMT_RGB24, 0);
    ffmpeg.av_opt_set_int(convert, "sws_flags", SWS_BICUBIC, 0);
    ffmpeg.av_opt_set_int(convert, "threads", 1, 0);
    ffmpeg.av_opt_set_int(convert, "src_h_chr_pos", -513, 0);
    ffmpeg.av_opt_set_int(convert, "src_v_chr_pos", frame->format == AV_PIX_FMT_YUV420P ? 128 : -513, 0);
    ffmpeg.av_opt_set_int(convert, "dst_h_chr_pos", -513, 0);
    ffmpeg.av_opt_set_int(convert, "dst_v_chr_pos", -513, 0);
    if (ffmpeg.sws_init_context(convert, NULL, NULL) < 0) {
        ffmpeg.sws_freeContext(convert);
        reader->convert = NULL;
    {
        const char *name = ffmpeg.av_get_pix_fmt_name(frame->format);
        return error_set(GLIMPSE_STATUS_UNSUPPORTED, "%s: cannot convert its %s frames to RGB", reader->label,
                         name ? name : "unknown");
    }
    }
    reader->convert_width = frame->width;
    reader->convert_height = frame->height;
    reader->convert_format = frame->format;
    return GLIMPSE_STATUS_OK;
}

static glimpse_status frame_to_rgb(video_reader *reader, const AVFrame *frame, glimpse_image **out) {
    glimpse_status status = make_converter(reader, frame);
    if (status) return status;
    /* the colour details the scale filter sets per frame */
    int *inverse_table, *table, source_full, target_full, brightness, contrast, saturation;
    ffmpeg.sws_getColorspaceDetails(reader->convert, &inverse_table, &source_full, &table, &target_full, &brightness,
                                    &contrast, &saturation);
    const int *matrix = frame_matrix(frame->colorspace);
    if (frame->color_range != AVCOL_RANGE_UNSPECIFIED) source_full = frame->color_range == AVCOL_RANGE_JPEG;
    ffmpeg.sws_setColorspaceDetails(reader->convert, matrix, source_full, matrix, target_full, brightness, contrast,
                                    saturation);
    /* into an aligned frame, as the filter's own output buffer is */
    if (!reader->rgb && !(reader->rgb = ffmpeg.av_frame_alloc())) return ERROR_OOM();
    AVFrame *rgb = reader->rgb;
    if (rgb->width != frame->width || rgb->height != frame->height) {
        ffmpeg.av_frame_unref(rgb);
        rgb->format = AV_PIX_FMT_RGB24;
        rgb->width = frame->width;
        rgb->height = frame->height;
        if (ffmpeg.av_frame_get_buffer(rgb, 0) < 0) return ERROR_OOM();
    }
    if (ffmpeg.sws_scale(reader->convert, (const uint8_t *const *)frame->data, frame->linesize, 0, frame->height,
                         rgb->data, rgb->linesize) != frame->height)
        return error_set(GLIMPSE_STATUS_INTERNAL, "%s: conversion to RGB failed", reader->label);
    if ((status = image_allocate(frame->width, frame->height, out))) return status;
    size_t row = (size_t)frame->width * 3;
    for (int y = 0; y < frame->height; y++)
        memcpy((*out)->pixels + (size_t)y * row, rgb->data[0] + (ptrdiff_t)y * rgb->linesize[0], row);
    return GLIMPSE_STATUS_OK;
}

/* ------------------------------------------------------------- sampling */

/* Mean absolute difference, of full scale, between the frame's 64×64 grey
 * thumbnail and the last frame taken's (1 for the first frame). */
static glimpse_status scene_change(video_reader *reader, const AVFrame *frame, double *change) {
    reader->thumbnail =
        ffmpeg.sws_getCachedContext(reader->thumbnail, frame->width, frame->height, frame->format, VIDEO_THUMBNAIL_SIDE,
                                    VIDEO_THUMBNAIL_SIDE, AV_PIX_FMT_GRAY8, SWS_AREA, NULL, NULL, NULL);
    if (!reader->thumbnail)
        return error_set(GLIMPSE_STATUS_UNSUPPORTED, "%s: cannot make thumbnails of its frames", reader->label);
    uint8_t *planes[4] = {reader->thumbnail_pixels, NULL, NULL, NULL};
    int strides[4] = {VIDEO_THUMBNAIL_SIDE, 0, 0, 0};
    ffmpeg.sws_scale(reader->thumbnail, (const uint8_t *const *)frame->data, frame->linesize, 0, frame->height, planes,
                     strides);
    if (!reader->have_taken) {
        *change = 1;
        return GLIMPSE_STATUS_OK;
    }
    uint64_t sum = 0;
    for (size_t i = 0; i < sizeof reader->thumbnail_pixels; i++)
        sum += (uint64_t)abs((int)reader->thumbnail_pixels[i] - (int)reader->last_thumbnail[i]);
    *change = (double)sum / (255.0 * sizeof reader->thumbnail_pixels);
    return GLIMPSE_STATUS_OK;
}

/* The frame's time in seconds from the start of the file. */
static bool frame_seconds(video_reader *reader, const AVFrame *frame, double *seconds) {
    int64_t pts = frame->best_effort_timestamp;
    if (pts != AV_NOPTS_VALUE) {
        *seconds = (double)pts * av_q2d(reader->time_base) - reader->start_seconds;
        return isfinite(*seconds);
    }
    if (reader->frame_rate > 0 && reader->frame_rate <= 1000) {
        *seconds = (double)(reader->decoded - 1) / reader->frame_rate;
        return true;
    }
    return false;
}

/* Whether the frame just decoded is one to take. */
static glimpse_status wanted(video_reader *reader, const AVFrame *frame, double seconds, bool *take) {
    if (reader->params.scene_threshold > 0) {
        double change = 0;
        glimpse_status status = scene_change(reader, frame, &change);
        if (status) return status;
        *take = change > reader->params.scene_threshold;
        if (*take) memcpy(reader->last_thumbnail, reader->thumbnail_pixels, sizeof reader->last_thumbnail);
    } else {
        *take = !reader->have_taken || seconds + VIDEO_TIME_EPSILON >= reader->next_time;
        if (*take)
            reader->next_time = (floor((seconds + VIDEO_TIME_EPSILON) / reader->params.every_seconds) + 1) *
                                reader->params.every_seconds;
    }
    if (*take) reader->have_taken = true;
    return GLIMPSE_STATUS_OK;
}

/* Feeds the decoder the next packet of our stream, or the end. */
static void feed(video_reader *reader) {
    for (;;) {
        int code = ffmpeg.av_read_frame(reader->format, reader->packet);
        if (code < 0) {
            if (ended_short(reader, code, reader->packets)) reader->read_failed = true; /* (as scan_packets found) */
            ffmpeg.avcodec_send_packet(reader->decoder, NULL);
            reader->draining = true;
            return;
        }
        bool ours = reader->packet->stream_index == reader->stream;
        reader->packets += ours;
        /* a damaged packet is skipped, as the ffmpeg tool goes on past it */
        int sent = ours ? ffmpeg.avcodec_send_packet(reader->decoder, reader->packet) : 0;
        if (sent < 0 && sent != AVERROR(EAGAIN)) reader->decode_error = sent;
        ffmpeg.av_packet_unref(reader->packet);
        if (ours) return;
    }
}

glimpse_status video_next(video_reader *reader, glimpse_image **out, double *seconds, int64_t *number) {
    if (!reader || !out || !seconds || !number)
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "video_next: a NULL argument");
    *out = NULL;
    *seconds = 0;
    *number = -1;
    while (!reader->finished) {
        int code = ffmpeg.avcodec_receive_frame(reader->decoder, reader->frame);
        if (code == AVERROR(EAGAIN)) {
            if (reader->draining) { /* a decoder that asks for more after the end: done */
                reader->finished = true;
                break;
            }
            feed(reader);
            continue;
        }
        if (code == AVERROR_EOF) {
            reader->finished = true;
            break;
        }
        if (code < 0) { /* a frame that failed to decode: the next may not */
            reader->decode_error = code;
            continue;
        }
        AVFrame *frame = reader->frame;
        reader->decoded++;
        glimpse_status status =
            check_dimensions(reader->label, (uint64_t)frame->width, (uint64_t)frame->height, reader->params.max_pixels);
        double time = 0;
        if (!status && !frame_seconds(reader, frame, &time))
            status = error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: frame %lld has no time and the video no frame rate",
                               reader->label, (long long)(reader->decoded - 1));
        bool take = false;
        if (!status) status = wanted(reader, frame, time, &take);
        const AVFrame *upright = frame;
        if (!status && take) status = turn_upright(reader, frame, &upright);
        if (!status && take) status = frame_to_rgb(reader, upright, out);
        ffmpeg.av_frame_unref(frame);
        if (status) return status;
        if (take) {
            *seconds = time;
            *number = reader->decoded - 1;
            return GLIMPSE_STATUS_OK;
        }
    }
    if (reader->decoded == 0) {
        char text[128] = "";
        if (reader->decode_error) ffmpeg_error(reader->decode_error, text, sizeof text);
        return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: no frame of its video could be decoded%s%s%s", reader->label,
                         reader->read_failed ? " (the file is damaged or cut short)" : "", text[0] ? ": " : "", text);
    }
    if (reader->cut_short && !reader->said_cut_short)
        log_message(GLIMPSE_LOG_LEVEL_WARNING, "%s: the video is damaged or cut short after %lld frames",
                    reader->label, (long long)reader->decoded);
    reader->said_cut_short = true; /* said once */
    return GLIMPSE_STATUS_OK;
}

bool video_whole(const video_reader *reader) { return reader && !reader->cut_short; }

glimpse_status video_check_whole(const video_reader *reader) {
    if (!reader || video_whole(reader)) return GLIMPSE_STATUS_OK;
    return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: the video is damaged or cut short: it ends before the frames "
                     "its container lists", reader->label);
}
