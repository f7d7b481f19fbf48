/* cpu_gate.c — `cpu_gate FEATURE PROGRAM [ARGUMENTS...]` runs PROGRAM where this CPU, with this build's kernels,
 * has FEATURE, and elsewhere says so and exits 77 (ctest's skip). The tests run again with GLIMPSE_NO_AMX=1 or
 * GLIMPSE_FLOAT32_TILES=always or never (tests/CMakeLists.txt) run other kernels than the plain tests only on a
 * CPU with AMX; elsewhere they repeated them on the same kernels (26 s of the test script's CPU time on a machine
 * without AMX). FEATURE: amx (AMX's int8 or bfloat16 tiles), amx_bf16 (bfloat16 tiles). The hardware is asked
 * with GLIMPSE_NO_AMX unset; PROGRAM gets the environment as it came. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/cpu.h"

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: cpu_gate amx|amx_bf16 PROGRAM [ARGUMENTS...]\n");
        return 2;
    }
    const char *feature = argv[1], *no_amx = getenv("GLIMPSE_NO_AMX");
    char *kept = no_amx ? strdup(no_amx) : NULL;
    if (no_amx && !kept) { /* (run without it, a variant would take other kernels than it asks for) */
        perror("cpu_gate: strdup");
        return 1;
    }
    unsetenv("GLIMPSE_NO_AMX"); /* (read once, at the first question below) */
    bool amx = strcmp(feature, "amx") == 0, amx_bf16 = strcmp(feature, "amx_bf16") == 0;
    bool has = (amx && cpu_has_amx_int8()) || ((amx || amx_bf16) && cpu_has_amx_bf16());
    int restored = kept ? setenv("GLIMPSE_NO_AMX", kept, 1) : 0;
    free(kept);
    if (!amx && !amx_bf16) {
        fprintf(stderr, "cpu_gate: unknown feature %s (amx or amx_bf16)\n", feature);
        return 2;
    }
    if (!has) {
        printf("skipped: this CPU or build has no %s, so %s would repeat its plain run on the same kernels\n", feature,
               argv[2]);
        return 77;
    }
    if (restored != 0) {
        perror("cpu_gate: setenv");
        return 1;
    }
    execv(argv[2], argv + 2);
    fprintf(stderr, "cpu_gate: cannot run %s: ", argv[2]);
    perror(NULL);
    return 1;
}
