/* prefetch.h — work done ahead on its own thread: a producer thread fills a
 * bounded queue of fixed-size items that the caller takes in order (decoding
 * pictures while the towers run on the previous batch). Threads other than
 * the pool's live here; no model or file knowledge. */
#ifndef GLIMPSE_CORE_PREFETCH_H
#define GLIMPSE_CORE_PREFETCH_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "glimpse.h"

typedef struct prefetch prefetch;

/* Called on the producer thread: fills item (item_size bytes, zeroed) with
 * the next result and returns true, or returns false at the end. It may
 * read *stopping (an atomic load: set by the caller's thread when it stops
 * early) to end sooner. */
typedef bool (*prefetch_produce)(void *user, void *item, const atomic_bool *stopping);
/* Releases what an item produced but never taken owns (when stopped early). */
typedef void (*prefetch_dispose)(void *user, void *item);

/* Starts the producer thread with room for capacity items (at least 1).
 * ahead false runs the producer on the caller's thread inside prefetch_next
 * instead (no thread: the same results in the same order). */
glimpse_status prefetch_start(size_t item_size, size_t capacity, bool ahead, prefetch_produce produce,
                              prefetch_dispose dispose, void *user, prefetch **out);
/* Copies the next item into item and returns true, waiting for the producer
 * if needed; false once the producer has ended and every item was taken. */
bool prefetch_next(prefetch *p, void *item);
/* Stops the producer (it finishes the item it is making), disposes of the
 * items not taken, joins the thread and frees p. NULL does nothing. */
void prefetch_stop(prefetch *p);

#endif
