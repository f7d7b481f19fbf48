/* tiff_library.h — libtiff, loaded at the first TIFF picture rather than when
 * a program starts. Linked, it cost every process ~3.4 ms (on a 2-core AMD
 * EPYC, an empty program linked with -ltiff: 2.3 → 5.7 ms): the dynamic
 * linker maps libtiff's codecs (LERC in C++, JBIG, libdeflate, LZMA, Zstandard)
 * and resolves their symbols, for every `glimpse embed` of a JPEG.
 *
 * tiff_library_load() opens libtiff.so.6 (libtiff 4.5 and later: this code
 * calls 4.5's TIFFOpenOptionsSetErrorHandlerExtR, and 4.5 is the release that
 * took the soname to 6) and fills the table `libtiff` once; only
 * vision/decode_tiff.c calls it. A TIFF is known by its first bytes without it. */
#ifndef GLIMPSE_VISION_TIFF_LIBRARY_H
#define GLIMPSE_VISION_TIFF_LIBRARY_H

#include <tiffio.h>

#include <stdbool.h>

#include "core/dynamic_library.h"

/* Every libtiff function glimpse calls. */
#define TIFF_FUNCTIONS(X)                                                                                            \
    X(TIFFClientOpenExt)                                                                                             \
    X(TIFFClose)                                                                                                     \
    X(TIFFComputeStrip)                                                                                              \
    X(TIFFComputeTile)                                                                                               \
    X(TIFFGetField)                                                                                                  \
    X(TIFFGetFieldDefaulted)                                                                                         \
    X(TIFFIsBigEndian)                                                                                               \
    X(TIFFIsTiled)                                                                                                   \
    X(TIFFOpenOptionsAlloc)                                                                                          \
    X(TIFFOpenOptionsFree)                                                                                           \
    X(TIFFOpenOptionsSetErrorHandlerExtR)                                                                            \
    X(TIFFOpenOptionsSetMaxSingleMemAlloc)                                                                           \
    X(TIFFOpenOptionsSetWarningHandlerExtR)                                                                          \
    X(TIFFReadEncodedStrip)                                                                                          \
    X(TIFFReadEncodedTile)                                                                                           \
    X(TIFFScanlineSize)                                                                                              \
    X(TIFFSetField)                                                                                                  \
    X(TIFFStripSize)                                                                                                 \
    X(TIFFTileRowSize)                                                                                               \
    X(TIFFTileSize)

/* The table: libtiff.TIFFClose() and so on, each of its function's own type. */
typedef struct tiff_functions {
    TIFF_FUNCTIONS(DYNAMIC_LIBRARY_POINTER)
} tiff_functions;

/* Filled by the first successful tiff_library_load(); read only after one. Prefixed and hidden, as
 * heif_library.h's table is (an application linking libglimpse.a may have a `libtiff` of its own). */
extern __attribute__((visibility("hidden"))) tiff_functions glimpse_tiff_functions;
#define libtiff glimpse_tiff_functions

/* Loads libtiff and fills `libtiff` (once, whichever thread asks first; later calls give the first one's
 * answer): true when it is filled, else false with *why (when why is not NULL) saying that the library could
 * not be opened or lacked a function, and which Debian package has it. Thread-safe; sets no error. */
bool tiff_library_load(const char **why);

#endif
