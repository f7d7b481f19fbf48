/* error.c — thread-local error messages behind glimpse_last_error(),
 * and the fixed names of status codes. */
#include "core/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define ERROR_CAPACITY 1024

static _Thread_local char error_text[ERROR_CAPACITY];

glimpse_status error_set(glimpse_status status, const char *format, ...) {
    va_list args;
    va_start(args, format);
    vsnprintf(error_text, sizeof error_text, format, args);
    va_end(args);
    return status;
}

glimpse_status error_prefix(glimpse_status status, const char *format, ...) {
    char prefix[ERROR_CAPACITY];
    char previous[ERROR_CAPACITY];
    va_list args;
    va_start(args, format);
    vsnprintf(prefix, sizeof prefix, format, args);
    va_end(args);
    memcpy(previous, error_text, sizeof previous);
    if (previous[0] != '\0')
        snprintf(error_text, sizeof error_text, "%s: %s", prefix, previous);
    else
        snprintf(error_text, sizeof error_text, "%s: %s", prefix, glimpse_status_string(status));
    return status;
}

const char *glimpse_last_error(void) { return error_text; }

const char *glimpse_status_string(glimpse_status status) {
    switch (status) {
    case GLIMPSE_STATUS_OK: return "ok";
    case GLIMPSE_STATUS_INVALID_ARGUMENT: return "invalid argument";
    case GLIMPSE_STATUS_IO: return "input/output error";
    case GLIMPSE_STATUS_NOT_FOUND: return "not found";
    case GLIMPSE_STATUS_BAD_FORMAT: return "malformed data";
    case GLIMPSE_STATUS_UNSUPPORTED: return "unsupported";
    case GLIMPSE_STATUS_TOO_LARGE: return "too large";
    case GLIMPSE_STATUS_OUT_OF_MEMORY: return "out of memory";
    case GLIMPSE_STATUS_WRONG_MODEL: return "wrong kind of model";
    case GLIMPSE_STATUS_CANCELLED: return "cancelled";
    case GLIMPSE_STATUS_INTERNAL: return "internal error";
    case GLIMPSE_STATUS_BUSY: return "busy";
    }
    return "unknown status";
}

const char *glimpse_version(void) { return GLIMPSE_VERSION_STRING; }
