/* dynamic_library.c — dlopen and dlsym with a user's message (see dynamic_library.h). */
#include "core/dynamic_library.h"

#include <dlfcn.h>
#include <stdio.h>

void *dynamic_library_open(const char *soname, const char *package, const char *purpose, char *failure,
                           size_t room) {
    void *handle = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
        const char *why = dlerror();
        snprintf(failure, room, "%s needs %s, which cannot be loaded (%s); on Debian it is the package %s", purpose,
                 soname, why ? why : "no reason given", package);
    }
    return handle;
}

void *dynamic_library_function(void *handle, const char *soname, const char *purpose, const char *name,
                               char *failure, size_t room) {
    void *function = dlsym(handle, name);
    if (!function) snprintf(failure, room, "%s needs %s with %s, which this one lacks", purpose, soname, name);
    return function;
}
