/* heif_library.c — libheif opened on first use (see heif_library.h), by the
 * soname of the major version compiled against (core/dynamic_library.h). */
#include "vision/heif_library.h"

#include <stdio.h>

#include "core/dynamic_library.h"

heif_functions glimpse_heif_functions;

/* libheif 1.x is libheif.so.1, in Debian's package libheif1 */
#define HEIF_MAJOR (LIBHEIF_NUMERIC_VERSION >> 24)
#define HEIF_PURPOSE "reading HEIF/AVIF pictures"

static dynamic_library_loading loading = DYNAMIC_LIBRARY_LOADING;

static void load(void) {
    char soname[32], package[32];
    snprintf(soname, sizeof soname, "libheif.so.%d", HEIF_MAJOR);
    snprintf(package, sizeof package, "libheif%d", HEIF_MAJOR);
    void *handle = dynamic_library_open(&loading, soname, package, HEIF_PURPOSE);
    if (!handle) return;
#define HEIF_LOOK_UP(name) DYNAMIC_LIBRARY_LOOK_UP(&loading, handle, soname, HEIF_PURPOSE, libheif, name)
    HEIF_FUNCTIONS(HEIF_LOOK_UP)
#undef HEIF_LOOK_UP
    loading.loaded = true;
}

bool heif_library_load(const char **why) { return dynamic_library_load(&loading, load, why); }
