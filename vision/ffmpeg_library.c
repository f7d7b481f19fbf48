/* ffmpeg_library.c — FFmpeg's libraries opened on first use (see
 * ffmpeg_library.h; core/dynamic_library.h): by the sonames of the headers
 * compiled against, each function looked up in its own library. */
#include "vision/ffmpeg_library.h"

#include "core/dynamic_library.h"

ffmpeg_functions glimpse_ffmpeg_functions;

enum { AVUTIL, SWSCALE, AVCODEC, AVFORMAT, FFMPEG_LIBRARIES };
#define FFMPEG_PURPOSE "reading videos with FFmpeg"

#define FFMPEG_SONAME(name, major) "lib" name ".so." AV_STRINGIFY(major)
/* in the order of their dependencies; the Debian package of each is its name and major version */
static const struct {
    const char *soname, *package;
} libraries[FFMPEG_LIBRARIES] = {
    [AVUTIL] = {FFMPEG_SONAME("avutil", LIBAVUTIL_VERSION_MAJOR), "libavutil" AV_STRINGIFY(LIBAVUTIL_VERSION_MAJOR)},
    [SWSCALE] = {FFMPEG_SONAME("swscale", LIBSWSCALE_VERSION_MAJOR),
                 "libswscale" AV_STRINGIFY(LIBSWSCALE_VERSION_MAJOR)},
    [AVCODEC] = {FFMPEG_SONAME("avcodec", LIBAVCODEC_VERSION_MAJOR),
                 "libavcodec" AV_STRINGIFY(LIBAVCODEC_VERSION_MAJOR)},
    [AVFORMAT] = {FFMPEG_SONAME("avformat", LIBAVFORMAT_VERSION_MAJOR),
                  "libavformat" AV_STRINGIFY(LIBAVFORMAT_VERSION_MAJOR)},
};

static dynamic_library_loading loading = DYNAMIC_LIBRARY_LOADING;

static void load(void) {
    void *handles[FFMPEG_LIBRARIES] = {NULL};
    for (int l = 0; l < FFMPEG_LIBRARIES; l++)
        if (!(handles[l] = dynamic_library_open(&loading, libraries[l].soname, libraries[l].package, FFMPEG_PURPOSE)))
            return;
#define FFMPEG_LOOK_UP(library, name)                                                                                \
    DYNAMIC_LIBRARY_LOOK_UP(&loading, handles[library], libraries[library].soname, FFMPEG_PURPOSE, ffmpeg, name)
    FFMPEG_FUNCTIONS(FFMPEG_LOOK_UP)
#undef FFMPEG_LOOK_UP
    loading.loaded = true;
}

bool ffmpeg_load(const char **why) { return dynamic_library_load(&loading, load, why); }
