/* version.c — the one source file of the shared libglimpse: everything
 * else comes whole from the module archives. Keeps the version the shared
 * object was built as, for debuggers and `strings`. */
#include "glimpse.h"

const char glimpse_build_version[] = "glimpse " GLIMPSE_VERSION_STRING;
