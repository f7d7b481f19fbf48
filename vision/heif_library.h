/* heif_library.h — libheif, loaded when the first ISO media file (an ftyp
 * box: a HEIC or AVIF picture, or an MP4 video) is looked at rather than when
 * a program starts. Linked at start it cost every process ~9 ms (on a 2-core
 * AMD EPYC, an empty program linked with -lheif: 2.4 → 11.3 ms): the dynamic
 * linker maps libheif's decoders (libde265, x265 with libnuma, dav1d, aom),
 * resolves their symbols and runs their initialisers, for every `glimpse embed`
 * of a JPEG.
 *
 * heif_library_load() opens the libheif of the major version this file was
 * compiled against (libheif.so.1 for libheif 1.x: its structures are read
 * through these headers) and fills the table `libheif` once; only
 * vision/decode_heif.c calls it. */
#ifndef GLIMPSE_VISION_HEIF_LIBRARY_H
#define GLIMPSE_VISION_HEIF_LIBRARY_H

#include <libheif/heif.h>

#include <stdbool.h>

#include "core/dynamic_library.h"

/* Every libheif function glimpse calls. */
#define HEIF_FUNCTIONS(X)                                                                                            \
    X(heif_check_filetype)                                                                                           \
    X(heif_context_alloc)                                                                                            \
    X(heif_context_free)                                                                                             \
    X(heif_context_get_primary_image_handle)                                                                         \
    X(heif_context_read_from_memory_without_copy)                                                                    \
    X(heif_decode_image)                                                                                             \
    X(heif_decoding_options_alloc)                                                                                   \
    X(heif_decoding_options_free)                                                                                    \
    X(heif_image_get_bits_per_pixel_range)                                                                           \
    X(heif_image_get_height)                                                                                         \
    X(heif_image_get_plane_readonly)                                                                                 \
    X(heif_image_get_width)                                                                                          \
    X(heif_image_handle_get_height)                                                                                  \
    X(heif_image_handle_get_ispe_height)                                                                             \
    X(heif_image_handle_get_ispe_width)                                                                              \
    X(heif_image_handle_get_luma_bits_per_pixel)                                                                     \
    X(heif_image_handle_get_width)                                                                                   \
    X(heif_image_handle_has_alpha_channel)                                                                           \
    X(heif_image_handle_release)                                                                                     \
    X(heif_image_release)

/* The table: libheif.heif_context_alloc() and so on, each of its function's own type. */
typedef struct heif_functions {
    HEIF_FUNCTIONS(DYNAMIC_LIBRARY_POINTER)
} heif_functions;

/* Filled by the first successful heif_library_load(); read only after one. Prefixed and hidden, as
 * ffmpeg_library.h's table is (an application linking libglimpse.a may have a `libheif` of its own). */
extern __attribute__((visibility("hidden"))) heif_functions glimpse_heif_functions;
#define libheif glimpse_heif_functions

/* Loads libheif and fills `libheif` (once, whichever thread asks first; later calls give the first one's
 * answer): true when it is filled, else false with *why (when why is not NULL) saying that the library could
 * not be opened or lacked a function, and which Debian package has it. Thread-safe; sets no error. */
bool heif_library_load(const char **why);

#endif
