/* log.c — the process-wide log callback. */
#include "core/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static glimpse_log_callback log_callback;
static void *log_user;

void glimpse_set_log_callback(glimpse_log_callback callback, void *user) {
    pthread_mutex_lock(&log_lock);
    log_callback = callback;
    log_user = user;
    pthread_mutex_unlock(&log_lock);
}

void log_message(glimpse_log_level level, const char *format, ...) {
    pthread_mutex_lock(&log_lock);
    glimpse_log_callback callback = log_callback;
    void *user = log_user;
    pthread_mutex_unlock(&log_lock);
    if (!callback) return;
    char message[1024];
    va_list args;
    va_start(args, format);
    vsnprintf(message, sizeof message, format, args);
    va_end(args);
    callback(user, level, message);
}
