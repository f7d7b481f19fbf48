/* openblas.c — the only file that talks to OpenBLAS: row-major sgemm and
 * sgemv for the linear layer and attention where our own kernels do not
 * run, and one exact matrix-vector product for code outside core/ (the
 * FAISS engine's centroid scores). OpenBLAS runs single-threaded, set once
 * before its first call: parallelism is our pool's. */
#include "core/openblas.h"

#include <cblas.h>
#include <pthread.h>

static pthread_once_t once = PTHREAD_ONCE_INIT;

static void single_threaded(void) { openblas_set_num_threads(1); }

void openblas_gemm(bool transpose_b, size_t m, size_t n, size_t k, float alpha, const float *a, size_t lda,
                   const float *b, size_t ldb, float beta, float *c, size_t ldc) {
    pthread_once(&once, single_threaded);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, transpose_b ? CblasTrans : CblasNoTrans, (int)m, (int)n, (int)k, alpha, a,
                (int)lda, b, (int)ldb, beta, c, (int)ldc);
}

void openblas_gemv(size_t rows, size_t cols, float alpha, const float *matrix, size_t ld, const float *x, size_t x_step,
                   float beta, float *out, size_t out_step) {
    pthread_once(&once, single_threaded);
    cblas_sgemv(CblasRowMajor, CblasNoTrans, (int)rows, (int)cols, alpha, matrix, (int)ld, x, (int)x_step, beta, out,
                (int)out_step);
}

void blas_matrix_vector(float *out, const float *matrix, size_t rows, size_t cols, const float *x) {
    openblas_gemv(rows, cols, 1.0f, matrix, cols, x, 1, 0.0f, out, 1);
}
