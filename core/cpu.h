/* cpu.h — which of the tuned kernels this processor runs, asked once per
 * process: AVX-512 F (the float kernels), AVX-512 VNNI (the int8 ones),
 * AVX-512 BF16 (the int8 models' attention), AMX (Intel's tile unit: the
 * int8 kernel of many rows) and AVX2 (the int8 kernel of processors without
 * VNNI).
 * The dispatching kernels and the few places that shape data for them ask
 * here; nothing else needs to know. No model knowledge. */
#ifndef GLIMPSE_CORE_CPU_H
#define GLIMPSE_CORE_CPU_H

#include <stdbool.h>

/* true if the AVX-512 float kernels run here: the CPU has AVX-512 F, the
 * library was built with them (GLIMPSE_AVX512, x86-64 only) and the
 * environment variable GLIMPSE_NO_AVX512 is unset, empty or "0" (set, it
 * sends every product down the plain paths, as on a machine without). */
bool cpu_has_avx512(void);

/* true if the int8 VNNI kernels run here: cpu_has_avx512() and the CPU has
 * AVX-512 BW and VNNI too. */
bool cpu_has_avx512_vnni(void);

/* true if the int8 models' encoder attention runs on bfloat16 here
 * (attention_bf16_avx512.c): cpu_has_avx512_vnni() and the CPU has AVX-512
 * VL and BF16 (Linux builds). */
bool cpu_has_avx512_bf16(void);

/* true if the int8 AMX kernel runs here: cpu_has_avx512_vnni(), the CPU has
 * AMX-TILE and AMX-INT8, Linux let the process use the tiles, and the
 * environment variable GLIMPSE_NO_AMX is unset, empty or "0". */
bool cpu_has_amx_int8(void);

/* true if the float32 products on AMX's bfloat16 tiles run here (bf16x3.h):
 * cpu_has_avx512_vnni(), the CPU has AMX-TILE, AMX-BF16 and AVX-512 BF16,
 * Linux let the process use the tiles, and GLIMPSE_NO_AMX is unset, empty or
 * "0" (set, float32 products run on the AVX-512 FMA kernels). */
bool cpu_has_amx_bf16(void);

/* true if the AVX2 int8 kernel runs here (x86-64 builds, the CPU has AVX2;
 * GLIMPSE_NO_AVX512 turns it off too, so that variable still means "the
 * plain loops everywhere"). */
bool cpu_has_avx2(void);

#endif
