/* stb_truetype_impl.h — what stb_truetype_impl.c adds to stb_truetype: whether one of its allocations
 * failed, which stb_truetype does not report (it leaves the glyph out). Inside explain/ only. */
#ifndef GLIMPSE_EXPLAIN_STB_TRUETYPE_IMPL_H
#define GLIMPSE_EXPLAIN_STB_TRUETYPE_IMPL_H

#include <stdbool.h>

/* Whether an allocation of stb_truetype's failed on this thread since the last call; clears the mark. */
bool truetype_allocation_failed(void);

#endif
