/* log.h — the library's diagnostics, handed to the application's log
 * callback (glimpse_set_log_callback); dropped when none is set. Never
 * printed by the library itself. */
#ifndef GLIMPSE_CORE_LOG_H
#define GLIMPSE_CORE_LOG_H

#include "glimpse.h"

void log_message(glimpse_log_level level, const char *format, ...) __attribute__((format(printf, 2, 3)));

#endif
