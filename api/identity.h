/* identity.h — the little that search/ needs of libglimpse beyond the
 * public header: which model a context runs, and a string that tells one
 * model's weights from another's (an index records it, and refuses a
 * context of another model). Nothing here exposes the handles' insides. */
#ifndef GLIMPSE_API_IDENTITY_H
#define GLIMPSE_API_IDENTITY_H

#include <stddef.h>

#include "glimpse.h"

/* Room for any model_identity, with its NUL. */
#define MODEL_IDENTITY_CAPACITY 128

/* The model ctx was created with (borrowed, as the context borrows it). */
const glimpse_model *context_model(const glimpse_context *ctx);

/* The threads ctx's pool runs on (the caller's counted): how many pictures
 * may be decoded at once ahead of its towers. */
int context_thread_count(const glimpse_context *ctx);

/* Writes "ARCHITECTURE/EMBEDDING_DIM/HASH" to out: the hash covers
 * config.json and the projection tensors' bytes. GLIMPSE_STATUS_INTERNAL if
 * it does not fit in capacity (MODEL_IDENTITY_CAPACITY always does). */
glimpse_status model_identity(const glimpse_model *model, char *out, size_t capacity);

#endif
