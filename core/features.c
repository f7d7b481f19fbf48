/* features.c — which optional parts this build of glimpse has (the
 * GLIMPSE_WITH_* options, passed to this file alone as definitions) and the
 * one message a call into a missing part gives. It knows nothing else of the parts. */
#include "core/features.h"

#include <stddef.h>

#include "core/error.h"

typedef struct feature_entry {
    const char *option; /* GLIMPSE_WITH_<option> */
    const char *part;   /* what the part does, for the message */
    bool built;
} feature_entry;

/* Indexed by glimpse_feature; CMake defines every GLIMPSE_WITH_* here as 0 or 1. */
static const feature_entry features[] = {
    {"VIDEO", "video (FFmpeg)", GLIMPSE_WITH_VIDEO},
    {"HEIF", "HEIF/AVIF decoding (libheif)", GLIMPSE_WITH_HEIF},
    {"TIFF", "TIFF decoding (libtiff)", GLIMPSE_WITH_TIFF},
    {"WEBP", "WebP decoding (libwebp)", GLIMPSE_WITH_WEBP},
    {"INDEX", "the search index (SQLite)", GLIMPSE_WITH_INDEX},
    {"SERVER", "the HTTP server (libmicrohttpd)", GLIMPSE_WITH_SERVER},
    {"FAISS", "FAISS index folders", GLIMPSE_WITH_FAISS},
};
#define FEATURE_COUNT (sizeof features / sizeof features[0])

bool glimpse_has_feature(glimpse_feature feature) {
    return (size_t)feature < FEATURE_COUNT && features[feature].built;
}

const char *glimpse_build_features(void) {
    /* the names in glimpse_feature's order, each with a space before it */
    static const char list[] = ""
#if GLIMPSE_WITH_VIDEO
                               " video"
#endif
#if GLIMPSE_WITH_HEIF
                               " heif"
#endif
#if GLIMPSE_WITH_TIFF
                               " tiff"
#endif
#if GLIMPSE_WITH_WEBP
                               " webp"
#endif
#if GLIMPSE_WITH_INDEX
                               " index"
#endif
#if GLIMPSE_WITH_SERVER
                               " server"
#endif
#if GLIMPSE_WITH_FAISS
                               " faiss"
#endif
        ;
    return list[0] ? list + 1 : list;
}

glimpse_status feature_unavailable(glimpse_feature feature, const char *label, const char *found) {
    const feature_entry *entry = &features[(size_t)feature < FEATURE_COUNT ? (size_t)feature : 0];
    return error_set(GLIMPSE_STATUS_UNSUPPORTED,
                     "%s%s%s%s%s is not in this build of glimpse (built with -DGLIMPSE_WITH_%s=OFF)",
                     label ? label : "", label ? ": " : "", found ? found : "", found ? ", but " : "", entry->part,
                     entry->option);
}
