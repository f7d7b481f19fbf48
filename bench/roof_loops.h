/* roof_loops.h — bench/roof.c's FMA, VNNI and bfloat16 loops, the first two of which bench/clock.c also runs
 * (timing the clock they run at):
 * 16 independent chains each, in registers, enough to hide the instructions' latency on two pipes. Each returns
 * a value of its sums (to keep the loop alive); compiled for its instructions by target attributes, so that a
 * program built without -mavx512f runs them only where the CPU has them. */
#ifndef GLIMPSE_BENCH_ROOF_LOOPS_H
#define GLIMPSE_BENCH_ROOF_LOOPS_H

#include <immintrin.h>

#define ROOF_CHAINS 16

/* iterations × 16 chains of 512-bit fused multiply-adds: iterations × 16 × 16 × 2 floating-point operations. */
__attribute__((target("avx512f"))) static float roof_fma_chains(long iterations) {
    __m512 acc[ROOF_CHAINS];
    for (int i = 0; i < ROOF_CHAINS; i++) acc[i] = _mm512_set1_ps((float)i * 1e-3f);
    const __m512 a = _mm512_set1_ps(0.9999f), b = _mm512_set1_ps(1e-5f);
    for (long n = 0; n < iterations; n++)
#pragma GCC unroll 16
        for (int i = 0; i < ROOF_CHAINS; i++) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
    float sum = 0;
    for (int i = 0; i < ROOF_CHAINS; i++) sum += _mm512_reduce_add_ps(acc[i]);
    return sum;
}

/* iterations × 16 chains of vpdpbusd (64 byte products added into 32-bit sums each): iterations × 16 × 64 × 2
 * operations, a byte product counted as 2 like a multiply-add. In assembly blocks: GCC 12 keeps an array of
 * accumulators in memory around each instruction it cannot see into (and copies them around
 * _mm512_dpbusd_epi32). */
#define ROOF_DPBUSD(N) "vpdpbusd %9, %8, %" #N "\n\t"
#define ROOF_DPBUSD8                                                                                                 \
    ROOF_DPBUSD(0) ROOF_DPBUSD(1) ROOF_DPBUSD(2) ROOF_DPBUSD(3) ROOF_DPBUSD(4) ROOF_DPBUSD(5) ROOF_DPBUSD(6)          \
        ROOF_DPBUSD(7)
__attribute__((target("avx512f,avx512vnni"))) static float roof_vnni_chains(long iterations) {
    __m512i c0 = _mm512_set1_epi32(0), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0, c6 = c0, c7 = c0, c8 = c0,
            c9 = c0, c10 = c0, c11 = c0, c12 = c0, c13 = c0, c14 = c0, c15 = c0;
    const __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-2);
    for (long n = 0; n < iterations; n++) { /* (an asm takes at most 30 operands: two of 8 chains) */
        __asm__(ROOF_DPBUSD8 : "+v"(c0), "+v"(c1), "+v"(c2), "+v"(c3), "+v"(c4), "+v"(c5), "+v"(c6), "+v"(c7)
                : "v"(a), "v"(b));
        __asm__(ROOF_DPBUSD8 : "+v"(c8), "+v"(c9), "+v"(c10), "+v"(c11), "+v"(c12), "+v"(c13), "+v"(c14), "+v"(c15)
                : "v"(a), "v"(b));
    }
    __m512i sum = _mm512_add_epi32(_mm512_add_epi32(_mm512_add_epi32(c0, c1), _mm512_add_epi32(c2, c3)),
                                   _mm512_add_epi32(_mm512_add_epi32(c4, c5), _mm512_add_epi32(c6, c7)));
    sum = _mm512_add_epi32(sum, _mm512_add_epi32(_mm512_add_epi32(c8, c9), _mm512_add_epi32(c10, c11)));
    sum = _mm512_add_epi32(sum, _mm512_add_epi32(_mm512_add_epi32(c12, c13), _mm512_add_epi32(c14, c15)));
    return (float)_mm512_reduce_add_epi32(sum);
}

/* iterations × 16 chains of vdpbf16ps (16 lanes × 2 products of bfloat16 pairs added into float32 sums each):
 * iterations × 16 × 32 × 2 floating-point operations, the roof of the int8 models' attention
 * (core/attention_bf16_avx512.c). In assembly blocks, as the VNNI loop. */
#define ROOF_DPBF16(N) "vdpbf16ps %9, %8, %" #N "\n\t"
#define ROOF_DPBF16_8                                                                                                \
    ROOF_DPBF16(0) ROOF_DPBF16(1) ROOF_DPBF16(2) ROOF_DPBF16(3) ROOF_DPBF16(4) ROOF_DPBF16(5) ROOF_DPBF16(6)          \
        ROOF_DPBF16(7)
__attribute__((target("avx512f,avx512bf16"))) static float roof_bf16_chains(long iterations) {
    __m512 c0 = _mm512_set1_ps(0.0f), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0, c6 = c0, c7 = c0, c8 = c0, c9 = c0,
           c10 = c0, c11 = c0, c12 = c0, c13 = c0, c14 = c0, c15 = c0;
    const __m512i a = _mm512_set1_epi16(0x3f80), b = _mm512_set1_epi16(0x3727); /* 1 and about 1e-5 */
    for (long n = 0; n < iterations; n++) {
        __asm__(ROOF_DPBF16_8 : "+v"(c0), "+v"(c1), "+v"(c2), "+v"(c3), "+v"(c4), "+v"(c5), "+v"(c6), "+v"(c7)
                : "v"(a), "v"(b));
        __asm__(ROOF_DPBF16_8 : "+v"(c8), "+v"(c9), "+v"(c10), "+v"(c11), "+v"(c12), "+v"(c13), "+v"(c14), "+v"(c15)
                : "v"(a), "v"(b));
    }
    const __m512 chains[ROOF_CHAINS] = {c0, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12, c13, c14, c15};
    float sum = 0;
    for (int i = 0; i < ROOF_CHAINS; i++) sum += _mm512_reduce_add_ps(chains[i]);
    return sum;
}

#endif
