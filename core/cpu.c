/* cpu.c — processor feature detection for the kernels' dispatch (cpu.h).
 * Without the AVX-512 sources in the build (GLIMPSE_HAVE_AVX512 undefined,
 * any processor) the AVX-512 answers are no; off x86-64 (GLIMPSE_HAVE_AVX2
 * undefined) the AVX2 one too. */
#include "core/cpu.h"

#include <pthread.h>
#include <stdlib.h>
#if defined(GLIMPSE_HAVE_AVX512) && defined(__linux__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

static pthread_once_t detected = PTHREAD_ONCE_INIT;
static bool has_avx512, has_avx512_vnni, has_avx512_bf16, has_avx2, has_amx_int8, has_amx_bf16;

#if defined(GLIMPSE_HAVE_AVX512) && defined(__linux__)
/* AMX-TILE and AMX-INT8 (CPUID leaf 7: EDX bits 24 and 25), and Linux's leave
 * to use the tile registers: a process asks for it once (arch_prctl
 * ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA, Linux 5.16 and later); every
 * thread of the process then has it. No leave, no AMX. */
static bool amx_int8_usable(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d & (1u << 24)) || !(d & (1u << 25))) return false;
    const long request_permission = 0x1023, tile_data = 18;
    return syscall(SYS_arch_prctl, request_permission, tile_data) == 0;
}

/* AMX-BF16 (CPUID leaf 7: EDX bit 22) and AVX-512 BF16 (leaf 7 subleaf 1: EAX bit 5, the conversions that split
 * float32 into bfloat16), with the same leave to use the tiles. */
static bool amx_bf16_usable(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d & (1u << 24)) || !(d & (1u << 22))) return false;
    if (!__get_cpuid_count(7, 1, &a, &b, &c, &d) || !(a & (1u << 5))) return false;
    const long request_permission = 0x1023, tile_data = 18;
    return syscall(SYS_arch_prctl, request_permission, tile_data) == 0;
}

/* AVX-512 BF16 (leaf 7 subleaf 1: EAX bit 5): vdpbf16ps and the conversions to bfloat16. */
static bool avx512_bf16_present(void) {
    unsigned a, b, c, d;
    return __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 5));
}
#endif

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
#ifdef __linux__
    const char *no_amx = getenv("GLIMPSE_NO_AMX"); /* to run the VNNI kernels on an AMX machine */
    bool amx_allowed = !(no_amx && no_amx[0] && no_amx[0] != '0');
    has_avx512_bf16 = has_avx512_vnni && __builtin_cpu_supports("avx512vl") && avx512_bf16_present();
    has_amx_int8 = has_avx512_vnni && amx_allowed && amx_int8_usable();
    has_amx_bf16 = has_avx512_vnni && amx_allowed && amx_bf16_usable();
#endif
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

bool cpu_has_avx512_bf16(void) {
    pthread_once(&detected, detect);
    return has_avx512_bf16;
}

bool cpu_has_amx_int8(void) {
    pthread_once(&detected, detect);
    return has_amx_int8;
}

bool cpu_has_amx_bf16(void) {
    pthread_once(&detected, detect);
    return has_amx_bf16;
}

bool cpu_has_avx2(void) {
    pthread_once(&detected, detect);
    return has_avx2;
}
