/* dynamic_library.h — an optional library opened when first needed instead
 * of linked (vision/ffmpeg_library.c, vision/heif_library.c,
 * vision/tiff_library.c, serve/microhttpd_library.c, core/openblas.c,
 * tools/cli_faiss.c): each linked library costs every process its dynamic
 * linking, for the few commands that use it. These calls load it once and
 * open it and look up its functions, with the message a user gets when it is
 * not there: what needed it, which library, why, and the Debian package that
 * has it. Each caller keeps its own table of typed pointers (an X-macro over
 * the functions it calls: DYNAMIC_LIBRARY_POINTER), filled by its own load
 * function (DYNAMIC_LIBRARY_LOOK_UP). */
#ifndef GLIMPSE_CORE_DYNAMIC_LIBRARY_H
#define GLIMPSE_CORE_DYNAMIC_LIBRARY_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

/* One library's loading: run once, by whichever thread asks first; the answer kept for every later call. */
typedef struct dynamic_library_loading {
    pthread_once_t once;
    bool loaded;       /* set by the load function once every function is found */
    char failure[512]; /* why not, when not loaded */
} dynamic_library_loading;
#define DYNAMIC_LIBRARY_LOADING {PTHREAD_ONCE_INIT, false, {0}}

/* Runs load under loading->once: true when it set loading->loaded, else false with *why (when why is not NULL)
 * the failure it left. Thread-safe; sets no error. */
bool dynamic_library_load(dynamic_library_loading *loading, void (*load)(void), const char **why);

/* The library `soname` (RTLD_NOW | RTLD_LOCAL; never closed: the process keeps it as it would have kept it
 * linked; a path where it holds a '/'), or NULL with loading->failure set to "PURPOSE needs SONAME, which cannot
 * be loaded (WHY); on Debian it is the package PACKAGE" (without the package where it is NULL: one of ours). */
void *dynamic_library_open(dynamic_library_loading *loading, const char *soname, const char *package,
                           const char *purpose);

/* The function `name` of the library `handle` (opened as soname), or NULL with loading->failure set to
 * "PURPOSE needs SONAME with NAME, which this one lacks". */
void *dynamic_library_function(dynamic_library_loading *loading, void *handle, const char *soname,
                               const char *purpose, const char *name);

/* A table's field for the function `name`: a pointer of that function's own type, named as it is. */
#define DYNAMIC_LIBRARY_POINTER(name) __typeof__(&name) name;

/* In a load function: table.name set to the function `name` of handle (dynamic_library_function), else a return
 * from the load function with loading->failure saying which function the library lacks. */
#define DYNAMIC_LIBRARY_LOOK_UP(loading, handle, soname, purpose, table, name)                                       \
    if (!((table).name = (__typeof__((table).name))dynamic_library_function(loading, handle, soname, purpose, #name))) \
        return;

#endif
