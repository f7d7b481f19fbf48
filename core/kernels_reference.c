/* kernels_reference.c — the plain-loop twins of the kernels (kernels.h's
 * *_reference): the oracle the tests hold each tuned kernel to, and the
 * kernel itself on CPUs the tuned one does not run on. No dispatching and
 * no intrinsics here: kernels.c chooses. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "core/kernels.h"

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

void kernel_dot_rows_reference(float *out, const float *matrix, size_t dim, const int64_t *rows, size_t n,
                               const float *x) {
    for (size_t i = 0; i < n; i++) {
        const float *row = matrix + (rows ? (size_t)rows[i] : i) * dim;
        double dot = 0;
        for (size_t d = 0; d < dim; d++) dot += (double)row[d] * x[d];
        out[i] = (float)dot;
    }
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

void kernel_dot_codes_reference(int32_t *dots, int32_t *sums, const int8_t *query, const int8_t *codes, size_t depth,
                                size_t first, size_t count) {
    for (size_t r = first; r < first + count; r++) {
        const int8_t *row = codes + r * depth;
        int32_t dot = 0, sum = 0;
        for (size_t k = 0; k < depth; k++) dot += (int32_t)query[k] * row[k], sum += row[k];
        dots[r] = dot, sums[r] = sum;
    }
}
