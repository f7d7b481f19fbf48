/* microhttpd_library.c — libmicrohttpd opened when the server starts (see
 * microhttpd_library.h; core/dynamic_library.h). */
#include "serve/microhttpd_library.h"

#include "core/dynamic_library.h"

/* The soname of the 0.9 series and of 1.0, which kept its ABI (Debian 12's package libmicrohttpd12); unlike
 * FFmpeg's and libheif's, it cannot be read off the header's version. */
#define MICROHTTPD_SONAME "libmicrohttpd.so.12"
#define MICROHTTPD_PACKAGE "libmicrohttpd12"
#define MICROHTTPD_PURPOSE "glimpse serve"

microhttpd_functions glimpse_microhttpd_functions;

static dynamic_library_loading loading = DYNAMIC_LIBRARY_LOADING;

static void load(void) {
    void *handle = dynamic_library_open(&loading, MICROHTTPD_SONAME, MICROHTTPD_PACKAGE, MICROHTTPD_PURPOSE);
    if (!handle) return;
#define MICROHTTPD_LOOK_UP(name)                                                                                     \
    DYNAMIC_LIBRARY_LOOK_UP(&loading, handle, MICROHTTPD_SONAME, MICROHTTPD_PURPOSE, microhttpd, name)
    MICROHTTPD_FUNCTIONS(MICROHTTPD_LOOK_UP)
#undef MICROHTTPD_LOOK_UP
    loading.loaded = true;
}

bool microhttpd_load(const char **why) { return dynamic_library_load(&loading, load, why); }
