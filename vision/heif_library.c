/* heif_library.c — libheif opened on first use (see heif_library.h), by the
 * soname of the major version compiled against (core/dynamic_library.h). */
#include "vision/heif_library.h"

#include <pthread.h>
#include <stdio.h>

#include "core/dynamic_library.h"

heif_functions glimpse_heif_functions;

/* libheif 1.x is libheif.so.1, in Debian's package libheif1 */
#define HEIF_MAJOR (LIBHEIF_NUMERIC_VERSION >> 24)
#define HEIF_PURPOSE "reading HEIF/AVIF pictures"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static bool loaded;
static char failure[512]; /* why not, when not loaded */

static void load(void) {
    char soname[32], package[32];
    snprintf(soname, sizeof soname, "libheif.so.%d", HEIF_MAJOR);
    snprintf(package, sizeof package, "libheif%d", HEIF_MAJOR);
    void *handle = dynamic_library_open(soname, package, HEIF_PURPOSE, failure, sizeof failure);
    if (!handle) return;
#define HEIF_LOOK_UP(name)                                                                                           \
    if (!(libheif.name = (__typeof__(libheif.name))dynamic_library_function(handle, soname, HEIF_PURPOSE, #name,    \
                                                                            failure, sizeof failure)))              \
        return;
    HEIF_FUNCTIONS(HEIF_LOOK_UP)
#undef HEIF_LOOK_UP
    loaded = true;
}

bool heif_library_load(const char **why) {
    pthread_once(&once, load);
    if (why) *why = loaded ? NULL : failure;
    return loaded;
}
