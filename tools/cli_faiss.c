/* cli_faiss.c — libglimpse-faiss opened by `glimpse search --faiss` (see cli_faiss.h). */
#include "tools/cli_faiss.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/dynamic_library.h"

#define CLI_FAISS_PURPOSE "glimpse search --faiss"

static cli_faiss_functions functions;
static dynamic_library_loading loading = DYNAMIC_LIBRARY_LOADING;

/* The library where this program's folder says it is: beside it (the build folder), or in the install's
 * library folder (GLIMPSE_FAISS_FROM_BIN, relative to the program's folder). NULL where neither holds it. */
static void *open_near_program(void) {
    char program[PATH_MAX];
    ssize_t length = readlink("/proc/self/exe", program, sizeof program - 1);
    if (length <= 0) return NULL;
    program[length] = '\0';
    char *slash = strrchr(program, '/');
    if (!slash) return NULL;
    *slash = '\0';
    const char *places[] = {GLIMPSE_FAISS_SONAME, GLIMPSE_FAISS_FROM_BIN};
    for (size_t i = 0; i < sizeof places / sizeof places[0]; i++) {
        char path[PATH_MAX + 64];
        if (snprintf(path, sizeof path, "%s/%s", program, places[i]) >= (int)sizeof path) continue;
        if (access(path, F_OK) != 0) continue;
        void *handle = dynamic_library_open(&loading, path, NULL, CLI_FAISS_PURPOSE);
        if (handle) return handle;
    }
    return NULL;
}

static void load(void) {
    void *handle = open_near_program();
    if (!handle) handle = dynamic_library_open(&loading, GLIMPSE_FAISS_SONAME, NULL, CLI_FAISS_PURPOSE);
    if (!handle) return;
#define CLI_FAISS_LOOK_UP(name)                                                                                      \
    DYNAMIC_LIBRARY_LOOK_UP(&loading, handle, GLIMPSE_FAISS_SONAME, CLI_FAISS_PURPOSE, functions, name)
    CLI_FAISS_FUNCTIONS(CLI_FAISS_LOOK_UP)
#undef CLI_FAISS_LOOK_UP
    loading.loaded = true;
}

const cli_faiss_functions *cli_faiss_load(const char **why) {
    return dynamic_library_load(&loading, load, why) ? &functions : NULL;
}
