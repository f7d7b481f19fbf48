/* cli_faiss.h — libglimpse-faiss (include/glimpse_faiss.h) as `glimpse
 * search --faiss` uses it: opened when that option is given, not linked.
 * FAISS brings OpenMP (libgomp) and BLAS, LAPACK and OpenBLAS with its
 * Fortran runtime; linked into the program they cost every glimpse command
 * their dynamic linking and OpenBLAS's spinning thread (with OpenBLAS itself
 * opened when needed too: `glimpse --version` 17.3 → 9.4 ms on a 2-core AMD
 * EPYC), for one option. CLI only. */
#ifndef GLIMPSE_TOOLS_CLI_FAISS_H
#define GLIMPSE_TOOLS_CLI_FAISS_H

#include <stdbool.h>

#include "core/dynamic_library.h"
#include "glimpse_faiss.h"

/* Every function of libglimpse-faiss the program calls. */
#define CLI_FAISS_FUNCTIONS(X)                                                                                       \
    X(glimpse_faiss_open)                                                                                            \
    X(glimpse_faiss_close)                                                                                           \
    X(glimpse_faiss_dim)                                                                                             \
    X(glimpse_faiss_model)                                                                                           \
    X(glimpse_faiss_search)                                                                                          \
    X(glimpse_faiss_last_error)

typedef struct cli_faiss_functions {
    CLI_FAISS_FUNCTIONS(DYNAMIC_LIBRARY_POINTER)
} cli_faiss_functions;

/* The library, opened once: the one beside the program (a build folder), else the one in the install's
 * library folder relative to the program's, else the soname on the loader's path. NULL with *why set
 * (a message naming the library) when none loads. */
const cli_faiss_functions *cli_faiss_load(const char **why);

#endif
