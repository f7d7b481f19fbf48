/* stb_truetype_impl.c — stb_truetype's implementation (Debian's libstb-dev header) compiled as our own
 * object for explain/render.c's labels, so sanitizers and fuzzers see its reads; its allocations go
 * through truetype_allocate, which remembers a failure that stb_truetype itself would only skip a glyph for. */
#include <assert.h>
#include <stdbool.h>
#include <stdlib.h>

#include "explain/stb_truetype_impl.h"

static _Thread_local bool allocation_failed;

static void *truetype_allocate(size_t size) {
    void *memory = malloc(size);
    if (!memory) allocation_failed = true;
    return memory;
}

bool truetype_allocation_failed(void) {
    bool failed = allocation_failed;
    allocation_failed = false;
    return failed;
}

#define STBTT_malloc(size, user) ((void)(user), truetype_allocate(size))
#define STBTT_free(memory, user) ((void)(user), free(memory))
/* stb_truetype asserts that an allocation worked before it handles the failure: not an error of ours */
#define STBTT_assert(condition) assert((condition) || allocation_failed)
#define STB_TRUETYPE_IMPLEMENTATION
#include <stb/stb_truetype.h>
