/* kernels.c — element-wise and row-wise kernels (LayerNorm, activations,
 * softmax, normalisation): each dispatching function and its plain-loop
 * *_reference twin, and the plain-loop twins of the linear layer and
 * attention. Everything touching OpenBLAS is in blas.c. */
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

void kernel_layernorm_reference(float *out, const float *in, const float *weight, const float *bias, size_t rows,
                                size_t dim, float epsilon) {
    for (size_t r = 0; r < rows; r++) {
        const float *x = in + r * dim;
        float *y = out + r * dim;
        double sum = 0.0;
        for (size_t i = 0; i < dim; i++) sum += x[i];
        double mean = sum / (double)dim;
        double squares = 0.0;
        for (size_t i = 0; i < dim; i++) {
            double d = x[i] - mean;
            squares += d * d;
        }
        double inverse = 1.0 / sqrt(squares / (double)dim + (double)epsilon);
        for (size_t i = 0; i < dim; i++)
            y[i] = (float)((x[i] - mean) * inverse) * weight[i] + bias[i];
    }
}

void kernel_gelu_reference(float *x, size_t n) {
    /* erff, not erf: float precision is what torch computes in, and the
     * double version made GELU a third of a BLIP vision tower's time */
    for (size_t i = 0; i < n; i++) x[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678118654752440f));
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

void kernel_gelu_tanh_reference(float *x, size_t n) {
    /* in float, as torch's gelu(approximate="tanh") computes it (the double version took 18% of a SigLIP
     * vision tower's time) */
    for (size_t i = 0; i < n; i++) {
        float v = x[i], inner = 0.7978845608028654f * (v + 0.044715f * v * v * v);
        x[i] = 0.5f * v * (1.0f + tanhf(inner));
    }
}

void kernel_quick_gelu_reference(float *x, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = x[i] / (1.0f + expf(-1.702f * x[i]));
}

void kernel_add(float *x, const float *y, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] += y[i];
}

void kernel_softmax_reference(float *x, size_t rows, size_t n) {
    for (size_t r = 0; r < rows; r++) {
        float *row = x + r * n;
        float largest = -INFINITY;
        for (size_t i = 0; i < n; i++)
            if (row[i] > largest) largest = row[i];
        if (largest == -INFINITY) { /* every entry masked: define as uniform zero */
            for (size_t i = 0; i < n; i++) row[i] = 0.0f;
            continue;
        }
        double sum = 0.0;
        for (size_t i = 0; i < n; i++) {
            row[i] = expf(row[i] - largest);
            sum += row[i];
        }
        float inverse = (float)(1.0 / sum);
        for (size_t i = 0; i < n; i++) row[i] *= inverse;
    }
}

void kernel_l2_normalize(float *x, size_t n) {
    double squares = 0.0;
    for (size_t i = 0; i < n; i++) squares += (double)x[i] * x[i];
    if (squares == 0.0) return;
    float inverse = (float)(1.0 / sqrt(squares));
    for (size_t i = 0; i < n; i++) x[i] *= inverse;
}

void kernel_dot_rows_reference(float *out, const float *matrix, size_t dim, const int64_t *rows, size_t n,
                               const float *x) {
    for (size_t i = 0; i < n; i++) {
        const float *row = matrix + (rows ? (size_t)rows[i] : i) * dim;
        double dot = 0;
        for (size_t d = 0; d < dim; d++) dot += (double)row[d] * x[d];
        out[i] = (float)dot;
    }
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

void kernel_linear_reference(float *out, size_t out_stride, const float *in, size_t in_stride,
                             const float *weight, const float *bias, size_t rows, size_t in_features,
                             size_t out_features) {
    for (size_t r = 0; r < rows; r++)
        for (size_t o = 0; o < out_features; o++) {
            double sum = bias ? bias[o] : 0.0;
            for (size_t i = 0; i < in_features; i++)
                sum += (double)in[r * in_stride + i] * weight[o * in_features + i];
            out[r * out_stride + o] = (float)sum;
        }
}

void kernel_attention_reference(float *out, size_t out_stride, const float *q, size_t q_stride,
                                const float *k, const float *v, size_t kv_stride, size_t queries, size_t keys,
                                size_t heads, size_t head_dim, float scale, kernel_mask mask) {
    for (size_t h = 0; h < heads; h++)
        for (size_t i = 0; i < queries; i++) {
            size_t visible = mask == KERNEL_MASK_CAUSAL ? i + (keys - queries) + 1 : keys;
            double weights[visible];
            double largest = -INFINITY;
            for (size_t j = 0; j < visible; j++) {
                double dot = 0.0;
                for (size_t d = 0; d < head_dim; d++)
                    dot += (double)q[i * q_stride + h * head_dim + d] * k[j * kv_stride + h * head_dim + d];
                weights[j] = dot * scale;
                if (weights[j] > largest) largest = weights[j];
            }
            double sum = 0.0;
            for (size_t j = 0; j < visible; j++) {
                weights[j] = exp(weights[j] - largest);
                sum += weights[j];
            }
            for (size_t d = 0; d < head_dim; d++) {
                double acc = 0.0;
                for (size_t j = 0; j < visible; j++) acc += weights[j] * v[j * kv_stride + h * head_dim + d];
                out[i * out_stride + h * head_dim + d] = (float)(acc / sum);
            }
        }
}
