/* memory.c — large allocations on transparent huge pages (memory.h). */
#include "core/memory.h"

#include <stdlib.h>
#include <sys/mman.h>

void *memory_large(size_t bytes) {
    if (bytes < MEMORY_HUGE_PAGE_BYTES) return malloc(bytes ? bytes : 1);
    void *data = NULL;
    if (posix_memalign(&data, MEMORY_HUGE_PAGE_BYTES, bytes)) return NULL;
#ifdef MADV_HUGEPAGE
    (void)madvise(data, bytes / MEMORY_HUGE_PAGE_BYTES * MEMORY_HUGE_PAGE_BYTES, MADV_HUGEPAGE);
#endif
    return data;
}
