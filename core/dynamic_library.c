/* dynamic_library.c — dlopen and dlsym, once, with a user's message (see dynamic_library.h). */
#include "core/dynamic_library.h"

#include <dlfcn.h>
#include <stdio.h>

bool dynamic_library_load(dynamic_library_loading *loading, void (*load)(void), const char **why) {
    pthread_once(&loading->once, load);
    if (why) *why = loading->loaded ? NULL : loading->failure;
    return loading->loaded;
}

void *dynamic_library_open(dynamic_library_loading *loading, const char *soname, const char *package,
                           const char *purpose) {
    void *handle = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
        const char *why = dlerror();
        snprintf(loading->failure, sizeof loading->failure, "%s needs %s, which cannot be loaded (%s)%s%s", purpose,
                 soname, why ? why : "no reason given", package ? "; on Debian it is the package " : "",
                 package ? package : "");
    }
    return handle;
}

void *dynamic_library_function(dynamic_library_loading *loading, void *handle, const char *soname,
                               const char *purpose, const char *name) {
    void *function = dlsym(handle, name);
    if (!function)
        snprintf(loading->failure, sizeof loading->failure, "%s needs %s with %s, which this one lacks", purpose,
                 soname, name);
    return function;
}
