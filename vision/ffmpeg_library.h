/* ffmpeg_library.h — FFmpeg's libraries (libavformat, libavcodec, libswscale,
 * libavutil), loaded when the first video is read rather than when a program
 * starts. Linked at start they cost every process ~70 ms (on a 2-core AMD
 * EPYC: `glimpse --version` 94 → 20 ms): the dynamic linker maps the ~130
 * libraries FFmpeg's codecs and protocols bring and resolves their symbols,
 * for every `glimpse embed` of a picture that never touches a video.
 *
 * ffmpeg_load() opens the libraries of the major versions this file was
 * compiled against (libavformat.so.59 for FFmpeg 5.1, and so on: their
 * structures are read through these headers, so no other version will do)
 * and fills the table `ffmpeg` once; only vision/video_reader.c calls it. */
#ifndef GLIMPSE_VISION_FFMPEG_LIBRARY_H
#define GLIMPSE_VISION_FFMPEG_LIBRARY_H

#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/avstring.h>
#include <libavutil/display.h>
#include <libavutil/imgutils.h>
#include <libavutil/opt.h>
#include <libavutil/pixdesc.h>
#include <libswscale/swscale.h>

#include <stdbool.h>

#include "core/dynamic_library.h"

/* Every FFmpeg function glimpse calls, by the library that has it. */
#define FFMPEG_FUNCTIONS(X)                                                                                          \
    X(AVFORMAT, av_find_best_stream)                                                                                 \
    X(AVFORMAT, av_guess_frame_rate)                                                                                 \
    X(AVFORMAT, av_probe_input_format3)                                                                              \
    X(AVFORMAT, av_read_frame)                                                                                       \
    X(AVFORMAT, av_stream_get_side_data)                                                                             \
    X(AVFORMAT, avformat_alloc_context)                                                                              \
    X(AVFORMAT, avformat_close_input)                                                                                \
    X(AVFORMAT, avformat_find_stream_info)                                                                           \
    X(AVFORMAT, avformat_free_context)                                                                               \
    X(AVFORMAT, avformat_open_input)                                                                                 \
    X(AVFORMAT, avio_alloc_context)                                                                                  \
    X(AVFORMAT, avio_context_free)                                                                                   \
    X(AVCODEC, av_packet_alloc)                                                                                      \
    X(AVCODEC, av_packet_free)                                                                                       \
    X(AVCODEC, av_packet_unref)                                                                                      \
    X(AVCODEC, avcodec_alloc_context3)                                                                               \
    X(AVCODEC, avcodec_find_decoder)                                                                                 \
    X(AVCODEC, avcodec_free_context)                                                                                 \
    X(AVCODEC, avcodec_get_name)                                                                                     \
    X(AVCODEC, avcodec_open2)                                                                                        \
    X(AVCODEC, avcodec_parameters_to_context)                                                                        \
    X(AVCODEC, avcodec_receive_frame)                                                                                \
    X(AVCODEC, avcodec_send_packet)                                                                                  \
    X(SWSCALE, sws_alloc_context)                                                                                    \
    X(SWSCALE, sws_freeContext)                                                                                      \
    X(SWSCALE, sws_getCachedContext)                                                                                 \
    X(SWSCALE, sws_getCoefficients)                                                                                  \
    X(SWSCALE, sws_getColorspaceDetails)                                                                             \
    X(SWSCALE, sws_init_context)                                                                                     \
    X(SWSCALE, sws_scale)                                                                                            \
    X(SWSCALE, sws_setColorspaceDetails)                                                                             \
    X(AVUTIL, av_dict_free)                                                                                          \
    X(AVUTIL, av_dict_set_int)                                                                                       \
    X(AVUTIL, av_display_rotation_get)                                                                               \
    X(AVUTIL, av_frame_alloc)                                                                                        \
    X(AVUTIL, av_frame_copy_props)                                                                                   \
    X(AVUTIL, av_frame_free)                                                                                         \
    X(AVUTIL, av_frame_get_buffer)                                                                                   \
    X(AVUTIL, av_frame_unref)                                                                                        \
    X(AVUTIL, av_free)                                                                                               \
    X(AVUTIL, av_freep)                                                                                              \
    X(AVUTIL, av_get_pix_fmt_name)                                                                                   \
    X(AVUTIL, av_log_format_line2)                                                                                   \
    X(AVUTIL, av_log_set_callback)                                                                                   \
    X(AVUTIL, av_malloc)                                                                                             \
    X(AVUTIL, av_match_list)                                                                                         \
    X(AVUTIL, av_opt_set_int)                                                                                        \
    X(AVUTIL, av_pix_fmt_count_planes)                                                                               \
    X(AVUTIL, av_pix_fmt_desc_get)                                                                                   \
    X(AVUTIL, av_strdup)                                                                                             \
    X(AVUTIL, av_strerror)

/* The table: ffmpeg.avformat_open_input(...) and so on, each of its function's own type. */
typedef struct ffmpeg_functions {
#define FFMPEG_POINTER(library, name) DYNAMIC_LIBRARY_POINTER(name)
    FFMPEG_FUNCTIONS(FFMPEG_POINTER)
#undef FFMPEG_POINTER
} ffmpeg_functions;

/* Filled by the first successful ffmpeg_load(); read only after one. Its symbol carries the library's prefix
 * (libglimpse.a is linked into applications that may well have an `ffmpeg` of their own) and is hidden, so
 * that libglimpse.so, which exports glimpse_*, does not export it. */
extern __attribute__((visibility("hidden"))) ffmpeg_functions glimpse_ffmpeg_functions;
#define ffmpeg glimpse_ffmpeg_functions

/* Loads the libraries and fills `ffmpeg` (once, whichever thread asks first;
 * later calls give the first one's answer): true when it is filled, else
 * false with *why (when why is not NULL) saying which library could not be
 * opened or lacked a function, and which Debian package has it. Thread-safe;
 * sets no error. */
bool ffmpeg_load(const char **why);

#endif
