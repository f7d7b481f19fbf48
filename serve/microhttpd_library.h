/* microhttpd_library.h — libmicrohttpd, loaded when `glimpse serve` starts
 * rather than when any glimpse program does. Linked, it cost every process
 * ~5 ms (on a 2-core AMD EPYC, an empty program linked with -lmicrohttpd:
 * 2.4 → 7.2 ms): the dynamic linker maps GnuTLS and the nine libraries it
 * brings (nettle, gmp, p11-kit, ...) for every `glimpse embed`, which never
 * serves HTTP.
 *
 * microhttpd_load() opens libmicrohttpd.so.12 (the 0.9 series and 1.0) and
 * fills the table
 * `microhttpd` once; only serve/server.c calls it. */
#ifndef GLIMPSE_SERVE_MICROHTTPD_LIBRARY_H
#define GLIMPSE_SERVE_MICROHTTPD_LIBRARY_H

#include <microhttpd.h>

#include <stdbool.h>

#include "core/dynamic_library.h"

/* Every libmicrohttpd function glimpse calls. */
#define MICROHTTPD_FUNCTIONS(X)                                                                                      \
    X(MHD_add_response_header)                                                                                       \
    X(MHD_create_post_processor)                                                                                     \
    X(MHD_create_response_from_buffer)                                                                               \
    X(MHD_create_response_from_callback)                                                                             \
    X(MHD_destroy_post_processor)                                                                                    \
    X(MHD_destroy_response)                                                                                          \
    X(MHD_get_connection_info)                                                                                       \
    X(MHD_get_connection_values)                                                                                     \
    X(MHD_get_connection_values_n)                                                                                   \
    X(MHD_get_daemon_info)                                                                                           \
    X(MHD_get_reason_phrase_for)                                                                                     \
    X(MHD_lookup_connection_value)                                                                                   \
    X(MHD_post_process)                                                                                              \
    X(MHD_queue_response)                                                                                            \
    X(MHD_quiesce_daemon)                                                                                            \
    X(MHD_start_daemon)                                                                                              \
    X(MHD_stop_daemon)

/* The table: microhttpd.MHD_start_daemon(...) and so on, each of its function's own type. */
typedef struct microhttpd_functions {
    MICROHTTPD_FUNCTIONS(DYNAMIC_LIBRARY_POINTER)
} microhttpd_functions;

/* Filled by the first successful microhttpd_load(); read only after one. Prefixed and hidden, as
 * vision/ffmpeg_library.h's table is. */
extern __attribute__((visibility("hidden"))) microhttpd_functions glimpse_microhttpd_functions;
#define microhttpd glimpse_microhttpd_functions

/* Loads libmicrohttpd and fills `microhttpd` (once, whichever thread asks first; later calls give the first
 * one's answer): true when it is filled, else false with *why (when why is not NULL) saying that the library
 * could not be opened or lacked a function, and which Debian package has it. Thread-safe; sets no error. */
bool microhttpd_load(const char **why);

#endif
