/* kernels.c — element-wise and row-wise kernels (LayerNorm, activations,
 * softmax, normalisation, dot products of stored rows and codes): each
 * dispatching function, choosing its tuned kernel where core/cpu.h says it
 * runs, else its plain-loop twin (kernels_reference.c). Everything touching
 * OpenBLAS is in openblas.c. */
#include "core/kernels.h"

#include <math.h>
#include <string.h>

#include "core/cpu.h"
#include "core/kernels_avx512.h"

float kernel_f16_to_f32(uint16_t half) {
    uint32_t sign = (uint32_t)(half >> 15) << 31;
    uint32_t exponent = (half >> 10) & 0x1f;
    uint32_t mantissa = half & 0x3ff;
    uint32_t bits;
    if (exponent == 0) {
        if (mantissa == 0) {
            bits = sign;
        } else { /* subnormal: value = mantissa · 2^-24 */
            float value = (float)mantissa * 5.9604644775390625e-08f;
            return sign ? -value : value;
        }
    } else if (exponent == 31) {
        bits = sign | 0x7f800000u | (mantissa << 13);
    } else {
        bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
    }
    float result;
    memcpy(&result, &bits, sizeof result);
    return result;
}

float kernel_bf16_to_f32(uint16_t half) {
    uint32_t bits = (uint32_t)half << 16;
    float result;
    memcpy(&result, &bits, sizeof result);
    return result;
}

void kernel_weight_row_add(float *out, const kernel_weight *weight, size_t row, size_t width, const float *add) {
    kernel_widen(out, (const char *)weight->data + row * width * weight_type_bytes(weight->type), weight->type, width);
    for (size_t i = 0; i < width; i++) out[i] += add[i];
}

void kernel_widen(float *out, const void *data, weight_type type, size_t n) {
    if (type == WEIGHT_TYPE_F32) {
        memcpy(out, data, n * sizeof(float));
        return;
    }
#ifdef GLIMPSE_HAVE_AVX512
    if (cpu_has_avx512()) { /* (a BLIP-2 OPT-2.7B loaded --int8 widens 2.7 G values: 5 s of its load this way) */
        kernel_widen_avx512(out, data, type, n);
        return;
    }
#endif
    const uint8_t *bytes = data; /* little-endian, any alignment */
    for (size_t i = 0; i < n; i++) {
        uint16_t half = (uint16_t)(bytes[2 * i] | (bytes[2 * i + 1] << 8));
        out[i] = type == WEIGHT_TYPE_F16 ? kernel_f16_to_f32(half) : kernel_bf16_to_f32(half);
    }
}

/* The row-wise kernels: their AVX-512 version where it runs, else the plain loop. */
#ifdef GLIMPSE_HAVE_AVX512
#define FAST_OR_REFERENCE(fast, reference) (cpu_has_avx512() ? (fast) : (reference))
#else
#define FAST_OR_REFERENCE(fast, reference) (reference)
#endif

void kernel_layernorm(float *out, const float *in, const float *weight, const float *bias, size_t rows,
                      size_t dim, float epsilon) {
    FAST_OR_REFERENCE(kernel_layernorm_avx512, kernel_layernorm_reference)(out, in, weight, bias, rows, dim, epsilon);
}
void kernel_gelu(float *x, size_t n) { FAST_OR_REFERENCE(kernel_gelu_avx512, kernel_gelu_reference)(x, n); }
void kernel_quick_gelu(float *x, size_t n) {
    FAST_OR_REFERENCE(kernel_quick_gelu_avx512, kernel_quick_gelu_reference)(x, n);
}
void kernel_softmax(float *x, size_t rows, size_t n) {
    FAST_OR_REFERENCE(kernel_softmax_avx512, kernel_softmax_reference)(x, rows, n);
}

void kernel_gelu_tanh(float *x, size_t n) {
#ifdef GLIMPSE_HAVE_AVX2
    if (cpu_has_avx2()) {
        kernel_gelu_tanh_avx2(x, n);
        return;
    }
#endif
    kernel_gelu_tanh_reference(x, n);
}

static void kernel_add_reference(float *x, const float *y, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] += y[i];
}
void kernel_add(float *x, const float *y, size_t n) {
    FAST_OR_REFERENCE(kernel_add_avx512, kernel_add_reference)(x, y, n);
}

static void kernel_multiply_add_reference(float *x, const float *a, const float *b, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] += a[i] * b[i];
}
void kernel_multiply_add(float *x, const float *a, const float *b, size_t n) {
    FAST_OR_REFERENCE(kernel_multiply_add_avx512, kernel_multiply_add_reference)(x, a, b, n);
}

void kernel_l2_normalize(float *x, size_t n) {
    double squares = 0.0;
    for (size_t i = 0; i < n; i++) squares += (double)x[i] * x[i];
    if (squares == 0.0) return;
    float inverse = (float)(1.0 / sqrt(squares));
    for (size_t i = 0; i < n; i++) x[i] *= inverse;
}

/* Rows a task of kernel_dot_rows takes: enough that its first rows' misses (not prefetched) weigh little. */
#define DOT_ROWS_BLOCK 256

typedef struct dot_rows_job {
    float *out;
    const float *matrix, *x;
    size_t dim, n;
    const int64_t *rows;
} dot_rows_job;

static void dot_rows_block(void *argument, size_t block, float *scratch) {
    (void)scratch;
    const dot_rows_job *job = argument;
    size_t first = block * DOT_ROWS_BLOCK, n = job->n - first < DOT_ROWS_BLOCK ? job->n - first : DOT_ROWS_BLOCK;
    const float *matrix = job->rows ? job->matrix : job->matrix + first * job->dim;
    const int64_t *rows = job->rows ? job->rows + first : NULL;
    FAST_OR_REFERENCE(kernel_dot_rows_avx512, kernel_dot_rows_reference)(job->out + first, matrix, job->dim, rows, n,
                                                                        job->x);
}

void kernel_dot_rows(float *out, const float *matrix, size_t dim, const int64_t *rows, size_t n, const float *x,
                     pool *threads) {
    dot_rows_job job = {out, matrix, x, dim, n, rows};
    pool_for(threads, (n + DOT_ROWS_BLOCK - 1) / DOT_ROWS_BLOCK, dot_rows_block, &job);
}

void kernel_dot_codes(int32_t *dots, int32_t *sums, const int8_t *query, const int8_t *codes, size_t depth,
                      size_t first, size_t count) {
#ifdef GLIMPSE_HAVE_AVX2
    if (cpu_has_avx2()) {
        kernel_dot_codes_avx2(dots, sums, query, codes, depth, first, count);
        return;
    }
#endif
    kernel_dot_codes_reference(dots, sums, query, codes, depth, first, count);
}

double kernel_dot_double(const float *x, const float *y, size_t n, double *y_l1) {
    double dot = 0, l1 = 0;
    for (size_t d = 0; d < n; d++) dot += (double)x[d] * y[d], l1 += fabs((double)y[d]);
    if (y_l1) *y_l1 = l1;
    return dot;
}
