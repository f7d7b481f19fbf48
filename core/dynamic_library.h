/* dynamic_library.h — an optional library opened when first needed instead
 * of linked (vision/ffmpeg_library.c, vision/heif_library.c,
 * serve/microhttpd_library.c): each linked library costs every process its
 * dynamic linking, for the few commands that use it. These two calls open it
 * and look up its functions, with the message a user gets when it is not
 * there: what needed it, which library, why, and the Debian package that has
 * it. Each caller keeps its own table of typed pointers (an X-macro over the
 * functions it calls) and loads it once under pthread_once. */
#ifndef GLIMPSE_CORE_DYNAMIC_LIBRARY_H
#define GLIMPSE_CORE_DYNAMIC_LIBRARY_H

#include <stdbool.h>
#include <stddef.h>

/* The library `soname` (RTLD_NOW | RTLD_LOCAL; never closed: the process keeps it as it would have kept it
 * linked), or NULL with failure (room bytes) set to "PURPOSE needs SONAME, which cannot be loaded (WHY); on
 * Debian it is the package PACKAGE". */
void *dynamic_library_open(const char *soname, const char *package, const char *purpose, char *failure,
                           size_t room);

/* The function `name` of the library `handle` (opened as soname), or NULL with failure set to "PURPOSE needs
 * SONAME with NAME, which this one lacks". */
void *dynamic_library_function(void *handle, const char *soname, const char *purpose, const char *name,
                               char *failure, size_t room);

#endif
