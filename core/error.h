/* error.h — how library code reports a failure: a status plus a detailed,
 * thread-local message that glimpse_last_error() returns.
 * It never prints; the CLI decides what to show. */
#ifndef GLIMPSE_CORE_ERROR_H
#define GLIMPSE_CORE_ERROR_H

#include "glimpse.h"

/* Records a formatted message for this thread and returns status, so a
 * failure is one line: return error_set(GLIMPSE_STATUS_IO, "%s: %s", path, why); */
glimpse_status error_set(glimpse_status status, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

/* Puts "prefix: " in front of the current message (to add which file or which
 * input failed) and returns status unchanged. */
glimpse_status error_prefix(glimpse_status status, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

/* Tiny helpers so allocation failures read as one line. */
#define ERROR_OOM() error_set(GLIMPSE_STATUS_OUT_OF_MEMORY, "out of memory")

#endif
