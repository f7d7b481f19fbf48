/* cpu.c — processor feature detection for the kernels' dispatch (cpu.h).
 * Without the AVX-512 sources in the build (GLIMPSE_HAVE_AVX512 undefined,
 * any processor) the AVX-512 answers are no; off x86-64 (GLIMPSE_HAVE_AVX2
 * undefined) the AVX2 one too. */
#include "core/cpu.h"

#include <pthread.h>
#include <stdlib.h>

static pthread_once_t detected = PTHREAD_ONCE_INIT;
static bool has_avx512, has_avx512_vnni, has_avx2;

static void detect(void) {
    const char *off = getenv("GLIMPSE_NO_AVX512"); /* to run the plain paths anywhere */
    if (off && off[0] && off[0] != '0') return;
#ifdef GLIMPSE_HAVE_AVX2
    __builtin_cpu_init();
    has_avx2 = __builtin_cpu_supports("avx2");
#endif
#ifdef GLIMPSE_HAVE_AVX512
    __builtin_cpu_init();
    has_avx512 = __builtin_cpu_supports("avx512f");
    has_avx512_vnni = has_avx512 && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vnni");
#endif
}

bool cpu_has_avx512(void) {
    pthread_once(&detected, detect);
    return has_avx512;
}

bool cpu_has_avx512_vnni(void) {
    pthread_once(&detected, detect);
    return has_avx512_vnni;
}

bool cpu_has_avx2(void) {
    pthread_once(&detected, detect);
    return has_avx2;
}
