/* transformer.h — the pre-LayerNorm encoder block shared by the CLIP text
 * tower and the CLIP and BLIP vision towers:
 *     x = x + out_proj(attention(LN1(x)))
 *     x = x + fc2(act(fc1(LN2(x))))
 * Pure maths on weight pointers; which tensors fill them is weights/layers.c's
 * business. Several sequences can be packed into one call (rows of all of
 * them stacked) so the linear layers run as one large product. */
#ifndef GLIMPSE_CORE_TRANSFORMER_H
#define GLIMPSE_CORE_TRANSFORMER_H

#include <stddef.h>

#include "kernels.h"
#include "quantize.h"

typedef enum activation {
    ACTIVATION_GELU = 0,  /* exact erf GELU ("gelu") */
    ACTIVATION_QUICK_GELU, /* "quick_gelu" */
    ACTIVATION_GELU_TANH,  /* "gelu_new", "gelu_pytorch_tanh" */
    ACTIVATION_RELU
} activation;

/* Parses a Hugging Face hidden_act name; returns 0 if unknown. */
int activation_from_name(const char *name, activation *out);
void activation_apply(activation act, float *x, size_t n);

typedef struct encoder_layer {
    const float *norm1_weight, *norm1_bias; /* [hidden] */
    /* Either separate projections [hidden, hidden] (CLIP) ... */
    const float *q_weight, *q_bias, *k_weight, *k_bias, *v_weight, *v_bias;
    /* ... or one fused [3·hidden, hidden] with bias [3·hidden] (BLIP vision). */
    const float *qkv_weight, *qkv_bias;
    const float *out_weight, *out_bias;     /* [hidden, hidden], [hidden] */
    const float *norm2_weight, *norm2_bias; /* [hidden] */
    const float *fc1_weight, *fc1_bias;     /* [intermediate, hidden], [intermediate] */
    const float *fc2_weight, *fc2_bias;     /* [hidden, intermediate], [hidden] */
    /* int8 twins of the projections (encoder_layers_quantize), or NULL: used in their place */
    const kernel_q8 *q8_q, *q8_k, *q8_v, *q8_qkv, *q8_out, *q8_fc1, *q8_fc2;
} encoder_layer;

typedef struct encoder_shape {
    size_t hidden, heads, intermediate;
    float epsilon;
    activation act;
    kernel_mask mask;
} encoder_shape;

/* Scratch for `rows` packed rows and sequences of at most max_sequence. */
typedef struct encoder_scratch {
    float *normed;  /* [rows, hidden] */
    float *qkv;     /* [rows, 3·hidden] */
    float *context; /* [rows, hidden] */
    float *mlp;     /* [rows, intermediate] */
    float *scores;  /* [heads, max_sequence, max_sequence] */
} encoder_scratch;

/* Makes int8 twins of every layer's projections (owned by set). */
glimpse_status encoder_layers_quantize(encoder_layer *layers, size_t count, const encoder_shape *shape, q8_set *set);

/* Floats of scratch needed (for one allocation carved with encoder_scratch_carve). */
size_t encoder_scratch_floats(const encoder_shape *shape, size_t rows, size_t max_sequence);
void encoder_scratch_carve(encoder_scratch *scratch, float *memory, const encoder_shape *shape, size_t rows,
                           size_t max_sequence);

/* x[rows, hidden] in place, rows = sum of lengths[0..sequences); attention
 * stays within each sequence. */
void encoder_layer_forward(float *x, const encoder_layer *layer, const encoder_shape *shape, const size_t *lengths,
                           size_t sequences, const encoder_scratch *scratch, pool *threads);

#endif
