/* features.h — inside the library: the status and message a call into an
 * optional part returns in a build without it (core/features.c). It does not
 * decide which parts are built: the GLIMPSE_WITH_* CMake options do. */
#ifndef GLIMPSE_CORE_FEATURES_H
#define GLIMPSE_CORE_FEATURES_H

#include "glimpse.h"

/* Returns GLIMPSE_STATUS_UNSUPPORTED with the message
 * "[label: ][found, but ]PART is not in this build of glimpse (built with -DGLIMPSE_WITH_NAME=OFF)";
 * label and found may be NULL (found says what the input was, e.g. "a video"). */
glimpse_status feature_unavailable(glimpse_feature feature, const char *label, const char *found);

#endif
