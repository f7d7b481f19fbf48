/* memory.h — large allocations (a model's scratch, its widened or transposed weights, a decoded picture's
 * pixels) on huge pages where Linux gives them: 2 MiB or more start on a 2 MiB boundary and are marked for
 * transparent huge pages, so that writing them first takes a page fault per 2 MiB instead of per 4 KiB (in a
 * virtual machine those faults were a third of loading ViT-GPT2, a second of Florence-2's first picture, and
 * half of decoding a 12-megapixel JPEG). A hint only: where huge pages are off, or
 * below the size, it is malloc. No model knowledge. */
#ifndef GLIMPSE_CORE_MEMORY_H
#define GLIMPSE_CORE_MEMORY_H

#include <stddef.h>

#define MEMORY_HUGE_PAGE_BYTES ((size_t)2 << 20)

/* bytes of uninitialised memory (NULL when out of memory; never NULL for 0 bytes); release with free(). */
void *memory_large(size_t bytes);

#endif
