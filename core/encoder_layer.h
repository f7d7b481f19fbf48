/* encoder_layer.h — the pre-LayerNorm encoder block shared by the CLIP and
 * SigLIP text towers and the CLIP, BLIP and SigLIP vision towers (and
 * SigLIP's attention-pooling head, the same block with a learned query):
 *     x = x + out_proj(attention(LN1(x)))
 *     x = x + fc2(act(fc1(LN2(x))))
 * Pure maths on weight pointers; which tensors fill them is weights/layers.c's
 * business. Several sequences can be packed into one call (rows of all of
 * them stacked) so the linear layers run as one large product. */
#ifndef GLIMPSE_CORE_ENCODER_LAYER_H
#define GLIMPSE_CORE_ENCODER_LAYER_H

#include <stddef.h>

#include "core/attention_record.h"
#include "core/kernels.h"
#include "core/quantize.h"

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
    const float *norm1_weight, *norm1_bias; /* [hidden]; NULL in an attention-pooling head */
    /* Either separate projections [hidden, hidden] (CLIP) ... */
    kernel_weight q_weight, k_weight, v_weight;
    const float *q_bias, *k_bias, *v_bias;
    /* ... or one fused [3·hidden, hidden] with bias [3·hidden] (BLIP vision; at int8, encoder_layers_fuse_q8's,
     * data NULL and q8 its twin; neither otherwise: encoder_layer_fused). */
    kernel_weight qkv_weight;
    const float *qkv_bias;
    kernel_weight out_weight; /* [hidden, hidden] */
    const float *out_bias;    /* [hidden] */
    const float *norm2_weight, *norm2_bias; /* [hidden] */
    kernel_weight fc1_weight, fc2_weight;   /* [intermediate, hidden], [hidden, intermediate] */
    const float *fc1_bias, *fc2_bias;       /* [intermediate], [hidden] */
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
    float *qkv;     /* [rows, 3·hidden], rows qkv_stride apart */
    float *context; /* [rows, hidden] */
    float *mlp;     /* [rows, intermediate], rows mlp_stride apart */
    float *scores;  /* [heads, max_sequence, max_sequence] */
    size_t qkv_stride, mlp_stride;
} encoder_scratch;

/* int8, before encoder_layers_add_twins: each layer's separate q, k and v projections quantized as one fused
 * qkv twin (qkv_weight: data NULL, q8 the twin; qkv_bias owned by set), so that the three run as one product
 * (one input quantized, one hand-off to the pool, 3·hidden columns to share out): results bit for bit the
 * same, each column's integer sum being its own. The stored values go back to the mapping as a twin's do.
 * Nothing for layers that are fused already or have no separate projections. */
glimpse_status encoder_layers_fuse_q8(encoder_layer *layers, size_t count, const encoder_shape *shape, q8_set *set);
/* Makes twins of every layer's projections with add (q8_set_add_twin: int8; bf16x3_set_add: float32 on AMX's
 * bfloat16 tiles), owned by set and pointed at by each kernel_weight; none for q, k and v fused at int8. */
glimpse_status encoder_layers_add_twins(encoder_layer *layers, size_t count, const encoder_shape *shape,
                                        kernel_twin_add add, void *set);

/* Floats of scratch needed (for one allocation carved with encoder_scratch_carve). */
size_t encoder_scratch_floats(const encoder_shape *shape, size_t rows, size_t max_sequence);
void encoder_scratch_carve(encoder_scratch *scratch, float *memory, const encoder_shape *shape, size_t rows,
                           size_t max_sequence);

/* x[rows, hidden] in place, rows = sum of lengths[0..sequences); attention
 * stays within each sequence. With a record (NULL: none) that asks for
 * self-attention of layer layer_index, sequence s's probabilities go to its
 * sequence s, rows from 0. */
void encoder_layer_forward(float *x, const attention_record *record, size_t layer_index, const encoder_layer *layer,
                           const encoder_shape *shape, const size_t *lengths, size_t sequences,
                           const encoder_scratch *scratch, pool *threads);

/* The same layer when only one row of each sequence is wanted afterwards
 * (CLIP's class token or end-of-text token, the tower's last layer): keys
 * and values are made for every row, everything else for row pooled[s] of
 * each sequence only, which alone is updated in x. The other rows are left
 * as they came in. With a causal mask the pooled row sees rows 0..pooled[s]. */
void encoder_layer_forward_pooled(float *x, const encoder_layer *layer, const encoder_shape *shape,
                                  const size_t *lengths, const size_t *pooled, size_t sequences,
                                  const encoder_scratch *scratch, pool *threads);

/* Layers 0 .. count-1 over x, each as encoder_layer_forward (record as there); with pooled (NULL: none) the last
 * as encoder_layer_forward_pooled. Where the layers are int8 (whose rows come out bit for bit alike whatever
 * rows run beside them), there is no record and the pool has several threads, a batch of several sequences is
 * shared out by sequences: each thread takes its share of them through every layer alone, so the rows a layer
 * makes stay in the cache of the core that reads them next (split by columns, as a product is, every layer
 * hands half of each row from one core to the other). Results are the same either way. */
void encoder_stack_forward(float *x, const attention_record *record, const encoder_layer *layers, size_t count,
                           const size_t *pooled, const encoder_shape *shape, const size_t *lengths, size_t sequences,
                           const encoder_scratch *scratch, pool *threads);
/* How many shares encoder_stack_forward splits such a batch into (1: it runs the layers on the whole batch). */
size_t encoder_stack_shares(const encoder_layer *layers, size_t count, const attention_record *record,
                            const size_t *lengths, size_t sequences, pool *threads);

/* Attention pooling (SigLIP's vision head: torch.nn.MultiheadAttention whose
 * one query is a learned probe[hidden]): for each sequence s of x,
 *     a = out(attention(q(probe), k(rows of s), v(rows of s)))
 *     out[s] = a + fc2(act(fc1(LN2(a))))
 * with the layer's q, k, v, out, norm2, fc1 and fc2, and no LayerNorm before
 * the attention (its norm1 is NULL: keys and values come from x as it is).
 * out [sequences, hidden]; x is only read. With a record (NULL: none) asking for
 * self-attention of layer layer_index, sequence s's probabilities (the probe's
 * one query over its keys) go to its sequence s, row 0. */
void encoder_attention_pool(float *out, const attention_record *record, size_t layer_index, const float *x,
                            const encoder_layer *layer, const float *probe, const encoder_shape *shape,
                            const size_t *lengths, size_t sequences, const encoder_scratch *scratch, pool *threads);

/* A decoder's key/value cache, *keys and *values each [sequences][layers][max_length][hidden], with spares of
 * the same size: sequence s becomes old sequence from[s] (its first `length` positions of every layer; a beam
 * search's reordering). The first `shared` positions, the same in every sequence (a prompt all beams began
 * from), are left as they are; a sequence that keeps its own is not copied; the spares hold, for the time of
 * the call, the sequences that are both overwritten and copied elsewhere. */
typedef struct kv_cache {
    float **keys, **values, **spare_keys, **spare_values;
    size_t layers, max_length, hidden;
} kv_cache;
void kv_cache_reorder(const kv_cache *cache, size_t shared, size_t length, const size_t *from, size_t sequences);

/* What a tower's caller reads afterwards: every row's last hidden state, or
 * only the pooled rows (the last layer then runs encoder_layer_forward_pooled:
 * of a 12-layer tower's products it skips about 7%, all but the last layer's
 * keys and values). */
typedef enum encoder_output {
    ENCODER_OUTPUT_ALL_ROWS = 0,
    ENCODER_OUTPUT_POOLED_ROWS = 1
} encoder_output;

#endif
