/* blas_gemv.h — one matrix-vector product on OpenBLAS (sgemv), for the code
 * outside core/ that needs that exact product and may be C++ (the FAISS
 * engine's centroid scores): core/blas.c stays the only file that talks to
 * OpenBLAS. Not the linear layer: models call kernel_linear (kernels.h). */
#ifndef GLIMPSE_CORE_BLAS_GEMV_H
#define GLIMPSE_CORE_BLAS_GEMV_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* out[rows] = matrix[rows, cols] · x[cols], rows contiguous, in one sgemv
 * call (OpenBLAS single-threaded, as everywhere in glimpse). */
void blas_matrix_vector(float *out, const float *matrix, size_t rows, size_t cols, const float *x);

#ifdef __cplusplus
}
#endif

#endif
