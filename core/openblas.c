/* openblas.c — the only file that talks to OpenBLAS: row-major sgemm and
 * sgemv for the linear layer and attention where our own kernels do not
 * run, and one exact matrix-vector product for code outside core/ (the
 * FAISS engine's centroid scores). OpenBLAS is opened when first needed
 * (core/dynamic_library.h), not linked: on a CPU with AVX-512 no product
 * reaches it, and linked it cost every process ~6 ms of dynamic linking
 * and a thread its initialiser starts, which spins on sched_yield for about
 * 0.1 s against our pool's threads. It runs
 * single-threaded, set once when opened: parallelism is our pool's. */
#include "core/openblas.h"

#include <cblas.h>

#include "core/dynamic_library.h"

#define OPENBLAS_SONAME "libopenblas.so.0"
#define OPENBLAS_PURPOSE "running a model without AVX-512 (this CPU lacks it, or GLIMPSE_NO_AVX512 is set)"

/* Every OpenBLAS function glimpse calls. */
#define OPENBLAS_FUNCTIONS(X)                                                                                        \
    X(cblas_sgemm)                                                                                                   \
    X(cblas_sgemv)                                                                                                   \
    X(openblas_set_num_threads)

static struct {
    OPENBLAS_FUNCTIONS(DYNAMIC_LIBRARY_POINTER)
} openblas;

static dynamic_library_loading loading = DYNAMIC_LIBRARY_LOADING;

static void load(void) {
    void *handle = dynamic_library_open(&loading, OPENBLAS_SONAME, "libopenblas0", OPENBLAS_PURPOSE);
    if (!handle) return;
#define OPENBLAS_LOOK_UP(name)                                                                                       \
    DYNAMIC_LIBRARY_LOOK_UP(&loading, handle, OPENBLAS_SONAME, OPENBLAS_PURPOSE, openblas, name)
    OPENBLAS_FUNCTIONS(OPENBLAS_LOOK_UP)
#undef OPENBLAS_LOOK_UP
    openblas.openblas_set_num_threads(1);
    loading.loaded = true;
}

bool openblas_load(const char **why) { return dynamic_library_load(&loading, load, why); }

/* Where OpenBLAS cannot be opened (openblas_load said so when the model was
 * loaded; only a caller of the kernels that skipped it gets here), the same
 * products in plain loops: slower, never wrong. */
static void plain_gemm(bool transpose_b, size_t m, size_t n, size_t k, float alpha, const float *a, size_t lda,
                       const float *b, size_t ldb, float beta, float *c, size_t ldc) {
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < n; j++) {
            float sum = 0.0f;
            for (size_t d = 0; d < k; d++) sum += a[i * lda + d] * (transpose_b ? b[j * ldb + d] : b[d * ldb + j]);
            c[i * ldc + j] = alpha * sum + (beta == 0.0f ? 0.0f : beta * c[i * ldc + j]);
        }
}

void openblas_gemm(bool transpose_b, size_t m, size_t n, size_t k, float alpha, const float *a, size_t lda,
                   const float *b, size_t ldb, float beta, float *c, size_t ldc) {
    if (!openblas_load(NULL)) {
        plain_gemm(transpose_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
        return;
    }
    openblas.cblas_sgemm(CblasRowMajor, CblasNoTrans, transpose_b ? CblasTrans : CblasNoTrans, (int)m, (int)n,
                         (int)k, alpha, a, (int)lda, b, (int)ldb, beta, c, (int)ldc);
}

void openblas_gemv(size_t rows, size_t cols, float alpha, const float *matrix, size_t ld, const float *x, size_t x_step,
                   float beta, float *out, size_t out_step) {
    if (!openblas_load(NULL)) { /* (x as a [cols, 1] matrix, rows x_step apart; out's rows out_step apart) */
        plain_gemm(false, rows, 1, cols, alpha, matrix, ld, x, x_step, beta, out, out_step);
        return;
    }
    openblas.cblas_sgemv(CblasRowMajor, CblasNoTrans, (int)rows, (int)cols, alpha, matrix, (int)ld, x, (int)x_step,
                         beta, out, (int)out_step);
}

void blas_matrix_vector(float *out, const float *matrix, size_t rows, size_t cols, const float *x) {
    openblas_gemv(rows, cols, 1.0f, matrix, cols, x, 1, 0.0f, out, 1);
}
