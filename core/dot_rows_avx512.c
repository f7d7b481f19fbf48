/* dot_rows_avx512.c — kernel_dot_rows on one thread with AVX-512: the
 * inner products of a query with rows picked out of a large stored matrix
 * (a search's candidates, gathered from a mapped vectors.npy of millions of
 * rows). Each row is a few kilobytes at a random place, so the time is the
 * memory's, not the arithmetic's: the rows DOT_ROWS_AHEAD ahead are
 * prefetched whole while the current one is summed, so that several rows'
 * cache lines are asked for at once (docs/benchmarks.md's 10M FAISS figures give
 * what the whole re-scoring takes). */
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

#include "core/kernels_avx512.h"

#define DOT_ROWS_AHEAD 4

static inline const float *row_at(const float *matrix, size_t dim, const int64_t *rows, size_t i) {
    return matrix + (rows ? (size_t)rows[i] : i) * dim;
}

/* Every cache line of row i asked for. */
static inline void prefetch_row(const float *matrix, size_t dim, const int64_t *rows, size_t i) {
    const char *row = (const char *)row_at(matrix, dim, rows, i);
    for (size_t b = 0; b < dim * sizeof(float); b += 64) _mm_prefetch(row + b, _MM_HINT_T0);
}

void kernel_dot_rows_avx512(float *out, const float *matrix, size_t dim, const int64_t *rows, size_t n,
                            const float *x) {
    for (size_t i = 0; i < n && i < DOT_ROWS_AHEAD; i++) prefetch_row(matrix, dim, rows, i);
    for (size_t i = 0; i < n; i++) {
        if (i + DOT_ROWS_AHEAD < n) prefetch_row(matrix, dim, rows, i + DOT_ROWS_AHEAD);
        const float *row = row_at(matrix, dim, rows, i);
        __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
        size_t d = 0;
        for (; d + 64 <= dim; d += 64) {
            s0 = _mm512_fmadd_ps(_mm512_loadu_ps(row + d), _mm512_loadu_ps(x + d), s0);
            s1 = _mm512_fmadd_ps(_mm512_loadu_ps(row + d + 16), _mm512_loadu_ps(x + d + 16), s1);
            s2 = _mm512_fmadd_ps(_mm512_loadu_ps(row + d + 32), _mm512_loadu_ps(x + d + 32), s2);
            s3 = _mm512_fmadd_ps(_mm512_loadu_ps(row + d + 48), _mm512_loadu_ps(x + d + 48), s3);
        }
        for (; d + 16 <= dim; d += 16) s0 = _mm512_fmadd_ps(_mm512_loadu_ps(row + d), _mm512_loadu_ps(x + d), s0);
        if (d < dim) {
            __mmask16 tail = (__mmask16)((1u << (dim - d)) - 1);
            s1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, row + d), _mm512_maskz_loadu_ps(tail, x + d), s1);
        }
        out[i] = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)));
    }
}
