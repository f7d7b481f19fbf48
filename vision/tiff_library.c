/* tiff_library.c — libtiff opened at the first TIFF picture (see tiff_library.h; core/dynamic_library.h). */
#include "vision/tiff_library.h"

#include <tiffvers.h>

#include "core/dynamic_library.h"

tiff_functions glimpse_tiff_functions;

#if !defined(TIFFLIB_AT_LEAST) || TIFFLIB_MAJOR_VERSION != 4
#error "libtiff 4.5 or a later 4.x is needed (TIFFOpenOptionsSetErrorHandlerExtR; the soname libtiff.so.6)"
#endif
#define TIFF_SONAME "libtiff.so.6"
#define TIFF_PURPOSE "reading TIFF pictures"

static dynamic_library_loading loading = DYNAMIC_LIBRARY_LOADING;

static void load(void) {
    void *handle = dynamic_library_open(&loading, TIFF_SONAME, "libtiff6", TIFF_PURPOSE);
    if (!handle) return;
#define TIFF_LOOK_UP(name) DYNAMIC_LIBRARY_LOOK_UP(&loading, handle, TIFF_SONAME, TIFF_PURPOSE, libtiff, name)
    TIFF_FUNCTIONS(TIFF_LOOK_UP)
#undef TIFF_LOOK_UP
    loading.loaded = true;
}

bool tiff_library_load(const char **why) { return dynamic_library_load(&loading, load, why); }
