/* openblas.h — row-major products on OpenBLAS (openblas.c, the only file
 * that includes cblas.h), single-threaded, the library opened at the first
 * call. Models do not call these: they call kernel_linear (kernels.h), which
 * chooses between them and our own kernels. blas_matrix_vector is also for
 * C++ (the FAISS engine). */
#ifndef GLIMPSE_CORE_OPENBLAS_H
#define GLIMPSE_CORE_OPENBLAS_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Opens libopenblas.so.0 once: true when it is there, else false with *why
 * (when why is not NULL) saying what is missing and its Debian package.
 * weight_store_open asks where products will need it (no AVX-512), so that a
 * model fails to load with that message; the products below call it too and,
 * should it fail, compute the same in plain loops. Thread-safe; sets no error. */
bool openblas_load(const char **why);

/* c[m, n] = alpha · a[m, k] · b + beta · c, b being [k, n], or [n, k] read
 * transposed (transpose_b); lda, ldb, ldc the row strides in floats. */
void openblas_gemm(bool transpose_b, size_t m, size_t n, size_t k, float alpha, const float *a, size_t lda,
                   const float *b, size_t ldb, float beta, float *c, size_t ldc);
/* out[rows] (out_step apart) = alpha · matrix[rows, cols] (rows ld apart) · x
 * (x_step apart) + beta · out. */
void openblas_gemv(size_t rows, size_t cols, float alpha, const float *matrix, size_t ld, const float *x, size_t x_step,
                   float beta, float *out, size_t out_step);
/* out[rows] = matrix[rows, cols] · x[cols], rows contiguous, in one sgemv call.
 */
void blas_matrix_vector(float *out, const float *matrix, size_t rows, size_t cols, const float *x);

#ifdef __cplusplus
}
#endif

#endif
