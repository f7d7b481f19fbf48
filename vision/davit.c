/* davit.c — davit.h: DaViT's config, weights and forward pass. The products are kernel_linear's (the patch
 * convolutions as products over gathered patches, the attention's projections, the MLPs, channel attention's
 * channel-by-channel products); window attention is kernel_attention per window; the depthwise convolutions,
 * gathers and transposes are plain loops. */
#include "vision/davit.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/memory.h"
#include "weights/config.h"
#include "weights/layers.h"

#define DAVIT_EPS 1e-5f

/* ------------------------------------------------------------------ config */

/* An array of DAVIT_STAGES whole numbers in [1, maximum]. */
static glimpse_status read_ints(const cJSON *json, const char *where, const char *key, int maximum, int *out) {
    double values[DAVIT_STAGES];
    glimpse_status status = config_doubles(json, where, key, DAVIT_STAGES, values);
    for (int s = 0; s < DAVIT_STAGES && !status; s++) {
        if (values[s] != floor(values[s]) || values[s] < 0 || values[s] > maximum)
            return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: %s[%d] is %g, not a whole number in 0..%d", where, key,
                             s, values[s], maximum);
        out[s] = (int)values[s];
    }
    return status;
}

static glimpse_status read_prenorm(const cJSON *json, const char *where, bool *out) {
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(json, "patch_prenorm");
    if (!cJSON_IsArray(list) || cJSON_GetArraySize(list) != DAVIT_STAGES)
        return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: patch_prenorm must list %d true/false values", where,
                         DAVIT_STAGES);
    for (int s = 0; s < DAVIT_STAGES; s++) {
        const cJSON *item = cJSON_GetArrayItem(list, s);
        if (!cJSON_IsBool(item))
            return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: patch_prenorm[%d] is not true or false", where, s);
        out[s] = cJSON_IsTrue(item);
    }
    return GLIMPSE_STATUS_OK;
}

/* Each stage's token grid from the picture's size through the patch convolutions. */
static glimpse_status stage_grids(const davit_config *c, const char *where, size_t *sides) {
    long side = c->image_size;
    for (int s = 0; s < DAVIT_STAGES; s++) {
        long k = c->patch_size[s], stride = c->patch_stride[s], pad = c->patch_padding[s];
        if (stride < 1 || k < 1 || side + 2 * pad < k)
            return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: stage %d's patch embedding (size %ld, stride %ld, "
                             "padding %ld) does not fit %ld pixels", where, s, k, stride, pad, side);
        side = (side + 2 * pad - k) / stride + 1;
        sides[s] = (size_t)side;
    }
    return GLIMPSE_STATUS_OK;
}

glimpse_status davit_config_read(const cJSON *json, const char *where, int image_size, davit_config *c) {
    memset(c, 0, sizeof *c);
    c->image_size = image_size, c->mlp_ratio = 4;
    glimpse_status status;
    if ((status = read_ints(json, where, "dim_embed", CONFIG_MAX_WIDTH, c->dims)) ||
        (status = read_ints(json, where, "depths", CONFIG_MAX_LAYERS, c->depths)) ||
        (status = read_ints(json, where, "num_heads", CONFIG_MAX_HEADS, c->heads)) ||
        (status = read_ints(json, where, "num_groups", CONFIG_MAX_HEADS, c->groups)) ||
        (status = read_ints(json, where, "patch_size", 64, c->patch_size)) ||
        (status = read_ints(json, where, "patch_stride", 64, c->patch_stride)) ||
        (status = read_ints(json, where, "patch_padding", 64, c->patch_padding)) ||
        (status = read_prenorm(json, where, c->patch_prenorm)) ||
        (status = config_int(json, where, "window_size", 1, 256, &c->window_size)))
        return status;
    if (c->patch_prenorm[0])
        return error_set(GLIMPSE_STATUS_UNSUPPORTED, "%s: patch_prenorm[0] true (a norm over the pixels) is not "
                         "supported", where);
    double ratio;
    if ((status = config_double_or(json, where, "mlp_ratio", 4.0, &ratio))) return status;
    if (ratio != 4.0) return error_set(GLIMPSE_STATUS_UNSUPPORTED, "%s: mlp_ratio %g is not supported", where, ratio);
    for (int s = 0; s < DAVIT_STAGES; s++)
        if (!c->dims[s] || !c->heads[s] || !c->groups[s] || c->dims[s] % c->heads[s] || c->dims[s] % c->groups[s])
            return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: stage %d's width %d is not a multiple of its %d heads "
                             "and %d groups", where, s, c->dims[s], c->heads[s], c->groups[s]);
    size_t sides[DAVIT_STAGES];
    return stage_grids(c, where, sides);
}

/* ------------------------------------------------------------------ weights */

static glimpse_status load_dwconv(weight_store *store, const char *block, const char *module, size_t dim,
                                  davit_conv *out) {
    char name[LAYERS_NAME_CAPACITY];
    size_t shape[4] = {dim, 1, 3, 3}, bias_shape[1] = {dim};
    glimpse_status status = layers_name(name, "%s.%s.weight", block, module);
    if (!status) status = weight_store_get(store, &out->weight, 4, shape, name);
    if (!status) status = layers_name(name, "%s.%s.bias", block, module);
    if (!status) status = weight_store_get(store, &out->bias, 1, bias_shape, name);
    if (!status && !(out->taps = malloc(9 * dim * sizeof(float)))) status = ERROR_OOM();
    for (size_t c = 0; !status && c < dim; c++)
        for (size_t tap = 0; tap < 9; tap++) out->taps[tap * dim + c] = out->weight[c * 9 + tap];
    return status;
}

static glimpse_status load_block(weight_store *store, const davit_block_names *names, const char *block, size_t dim,
                                 size_t hidden, davit_block *b) {
    const projection_slot projections[] = {{names->qkv, 3 * dim, dim, &b->qkv, &b->qkv_bias},
                                           {names->proj, dim, dim, &b->proj, &b->proj_bias},
                                           {names->fc1, hidden, dim, &b->fc1, &b->fc1_bias},
                                           {names->fc2, dim, hidden, &b->fc2, &b->fc2_bias}};
    const norm_slot norms[] = {{names->attention_norm, &b->attention_norm_weight, &b->attention_norm_bias},
                               {names->ffn_norm, &b->ffn_norm_weight, &b->ffn_norm_bias}};
    glimpse_status status = load_dwconv(store, block, names->conv1, dim, &b->conv1);
    if (!status) status = load_dwconv(store, block, names->conv2, dim, &b->conv2);
    if (!status) status = layers_load_projections(store, block, projections, 4);
    if (!status) status = layers_load_norms(store, block, dim, norms, 2);
    return status;
}

static glimpse_status load_stage(davit_model *model, const davit_names *names, weight_store *store, int s) {
    const davit_config *c = &model->config;
    davit_stage *stage = &model->stages[s];
    size_t dim = (size_t)c->dims[s], in = s ? (size_t)c->dims[s - 1] : 3, k = (size_t)c->patch_size[s];
    size_t conv_shape[4] = {dim, in, k, k}, bias_shape[1] = {dim};
    char name[LAYERS_NAME_CAPACITY];
    const float *conv;
    glimpse_status status = layers_name(name, "%s.%d.%s.weight", names->convs, s, names->conv);
    if (!status) status = weight_store_get(store, &conv, 4, conv_shape, name);
    if (!status) stage->conv = kernel_weight_f32(conv);
    if (!status) status = layers_name(name, "%s.%d.%s.bias", names->convs, s, names->conv);
    if (!status) status = weight_store_get(store, &stage->conv_bias, 1, bias_shape, name);
    if (!status) status = layers_name(name, "%s.%d", names->convs, s);
    norm_slot norm = {names->conv_norm, &stage->norm_weight, &stage->norm_bias};
    if (!status) status = layers_load_norms(store, name, c->patch_prenorm[s] ? in : dim, &norm, 1);
    size_t depth = (size_t)c->depths[s];
    stage->spatial = calloc(depth ? depth : 1, sizeof *stage->spatial);
    stage->channel = calloc(depth ? depth : 1, sizeof *stage->channel);
    if (!status && (!stage->spatial || !stage->channel)) status = ERROR_OOM();
    for (size_t i = 0; i < depth && !status; i++) {
        size_t hidden = dim * (size_t)c->mlp_ratio;
        status = layers_name(name, "%s.%d.%zu.%s", names->blocks, s, i, names->spatial);
        if (!status) status = load_block(store, &names->spatial_block, name, dim, hidden, &stage->spatial[i]);
        if (!status) status = layers_name(name, "%s.%d.%zu.%s", names->blocks, s, i, names->channel);
        if (!status) status = load_block(store, &names->channel_block, name, dim, hidden, &stage->channel[i]);
    }
    return status;
}

glimpse_status davit_model_load(davit_model *model, const davit_config *config, const davit_names *names,
                                weight_store *store) {
    memset(model, 0, sizeof *model);
    model->config = *config;
    size_t sides[DAVIT_STAGES];
    glimpse_status status = stage_grids(config, "config.json: vision_config", sides);
    for (int s = 0; s < DAVIT_STAGES && !status; s++) {
        model->stages[s].height = model->stages[s].width = sides[s];
        status = load_stage(model, names, store, s);
    }
    if (status) davit_model_free(model);
    return status;
}

void davit_model_free(davit_model *model) {
    for (int s = 0; s < DAVIT_STAGES; s++) {
        for (int i = 0; i < model->config.depths[s]; i++) /* (blocks are zeroed until loaded: taps NULL) */
            for (int kind = 0; kind < 2; kind++) {
                davit_block *b = kind ? model->stages[s].channel : model->stages[s].spatial;
                if (b) free(b[i].conv1.taps), free(b[i].conv2.taps);
            }
        free(model->stages[s].spatial), free(model->stages[s].channel);
        model->stages[s].spatial = model->stages[s].channel = NULL;
    }
}

glimpse_status davit_model_add_twins(davit_model *model, kernel_twin_add add, void *set) {
    glimpse_status status = GLIMPSE_STATUS_OK;
    for (int s = 0; s < DAVIT_STAGES && !status; s++) {
        size_t dim = (size_t)model->config.dims[s], hidden = dim * (size_t)model->config.mlp_ratio;
        for (int i = 0; i < model->config.depths[s] && !status; i++) {
            davit_block *blocks[2] = {&model->stages[s].spatial[i], &model->stages[s].channel[i]};
            for (int k = 0; k < 2 && !status; k++) {
                status = add(set, &blocks[k]->qkv, 3 * dim, dim);
                if (!status) status = add(set, &blocks[k]->proj, dim, dim);
                if (!status) status = add(set, &blocks[k]->fc1, hidden, dim);
                if (!status) status = add(set, &blocks[k]->fc2, dim, hidden);
            }
        }
    }
    return status;
}

size_t davit_output_tokens(const davit_model *model) {
    const davit_stage *last = &model->stages[DAVIT_STAGES - 1];
    return last->height * last->width;
}

size_t davit_output_dim(const davit_model *model) { return (size_t)model->config.dims[DAVIT_STAGES - 1]; }

/* ------------------------------------------------------------------ run state */

struct davit_state {
    float *x, *next;        /* tokens [N, C] of the stage, and the patch embedding's output */
    float *normed, *patches; /* [N, C]; the gathered patches [N, C_in · k · k] */
    float *windows, *qkv, *context, *projected; /* [N padded, C], [.., 3C], [.., C], [.., C] */
    float *mlp;              /* [N, 4C] */
    float *qt, *kt, *affinity; /* channel attention: q and k transposed [C, N], a group's [C/g, C/g] */
    float *scores;           /* window attention's scratch [heads, window², window²] */
    float *conv;             /* a depthwise conv's output [N, C] */
    /* Buffers no step uses at the same time share memory (at 768 px, 155 of 320 MB that each process's first
     * picture has the kernel zero): qkv (attention), mlp (the feed-forward) and patches (a stage's patch
     * embedding) are `shared`; qt and kt lie in windows and projected, which channel attention leaves unused;
     * conv, the depthwise convs' output, lies in context, which no attention step holds while they run. */
    float *shared;
};

/* The largest of each buffer over the stages, in floats (shared: the largest of qkv, mlp and patches). */
typedef struct davit_sizes {
    size_t tokens, shared, padded, affinity, scores;
} davit_sizes;

static size_t padded_side(size_t side, size_t window) { return (side + window - 1) / window * window; }

static davit_sizes state_sizes(const davit_model *model) {
    const davit_config *c = &model->config;
    davit_sizes z = {0};
    size_t window = (size_t)c->window_size, in_dim = 3;
    for (int s = 0; s < DAVIT_STAGES; s++) {
        const davit_stage *stage = &model->stages[s];
        size_t dim = (size_t)c->dims[s], n = stage->height * stage->width, k = (size_t)c->patch_size[s];
        size_t padded = padded_side(stage->height, window) * padded_side(stage->width, window);
        size_t group = dim / (size_t)c->groups[s];
        /* a stage's input is the one before's tokens (stage 0's, the caller's pixels) */
        size_t sizes[7] = {n * dim, n * in_dim * k * k, 3 * padded * dim, n * dim * (size_t)c->mlp_ratio,
                           padded * dim, group * group, (size_t)c->heads[s] * window * window * window * window};
        size_t *fields[7] = {&z.tokens, &z.shared, &z.shared, &z.shared, &z.padded, &z.affinity, &z.scores};
        for (int i = 0; i < 7; i++)
            if (sizes[i] > *fields[i]) *fields[i] = sizes[i];
        in_dim = dim;
    }
    return z;
}

glimpse_status davit_state_create(const davit_model *model, davit_state **out) {
    *out = NULL;
    davit_sizes z = state_sizes(model);
    davit_state *s = calloc(1, sizeof *s);
    if (!s) return ERROR_OOM();
    float **buffers[] = {&s->x,         &s->next,     &s->normed, &s->windows, &s->context,
                         &s->projected, &s->affinity, &s->scores, &s->shared};
    size_t floats[] = {z.tokens, z.tokens, z.tokens, z.padded, z.padded, z.padded, z.affinity, z.scores, z.shared};
    for (size_t i = 0; i < sizeof floats / sizeof floats[0]; i++)
        if (!(*buffers[i] = memory_large(floats[i] * sizeof(float)))) { /* (4.7M floats a map at 768 px) */
            davit_state_free(s);
            return ERROR_OOM();
        }
    s->qkv = s->mlp = s->patches = s->shared; /* (z.padded >= z.tokens: a stage pads its grid, never crops it) */
    s->qt = s->windows, s->kt = s->projected, s->conv = s->context;
    *out = s;
    return GLIMPSE_STATUS_OK;
}

void davit_state_free(davit_state *s) {
    if (!s) return;
    free(s->x), free(s->next), free(s->normed), free(s->windows), free(s->context), free(s->projected);
    free(s->affinity), free(s->scores), free(s->shared);
    free(s);
}

/* ------------------------------------------------------------------ forward */

/* Where a stage's input is: value (c, y, x) at data[c·c_stride + (y·width + x)·pixel_stride]. */
typedef struct grid {
    const float *data;
    size_t height, width, channels, c_stride, pixel_stride;
} grid;

/* The patch embedding: zero-padded k×k patches (channel, row, column order, as the conv weight's) gathered
 * for each output position, times the conv weight, plus its bias: out [out_h · out_w, C]. */
static void patch_embed(const davit_stage *stage, const grid *in, size_t k, size_t stride, size_t padding, size_t dim,
                        float *patches, float *out, pool *threads) {
    size_t columns = in->channels * k * k, rows = stage->height * stage->width;
    for (size_t oy = 0; oy < stage->height; oy++)
        for (size_t ox = 0; ox < stage->width; ox++) {
            float *row = patches + (oy * stage->width + ox) * columns;
            for (size_t c = 0; c < in->channels; c++)
                for (size_t ky = 0; ky < k; ky++) {
                    long y = (long)(oy * stride + ky) - (long)padding;
                    for (size_t kx = 0; kx < k; kx++) {
                        long x = (long)(ox * stride + kx) - (long)padding;
                        bool inside = y >= 0 && x >= 0 && (size_t)y < in->height && (size_t)x < in->width;
                        *row++ = inside ? in->data[c * in->c_stride + ((size_t)y * in->width + (size_t)x) *
                                                                         in->pixel_stride]
                                        : 0.0f;
                    }
                }
        }
    kernel_linear(out, dim, patches, columns, &stage->conv, stage->conv_bias, rows, columns, dim, false, threads);
}

/* A depthwise conv's rows of the grid, split over the pool (conv_rows), then x += out (add_rows). */
typedef struct dwconv_job {
    float *x, *out;
    const davit_conv *conv;
    size_t height, width, dim, block; /* (block: grid rows per task) */
} dwconv_job;

/* out = depthwise 3×3 conv(x) (zero padding 1, with bias) for grid rows index · block onwards: per output
 * token, the bias, then each tap in turn, its weights side by side (conv->taps), the sums in the order the
 * stored [C, 1, 3, 3] weights gave them. */
static void conv_rows(void *argument, size_t index, float *scratch) {
    (void)scratch;
    const dwconv_job *job = argument;
    size_t width = job->width, height = job->height, dim = job->dim, first = index * job->block;
    size_t end = first + job->block < height ? first + job->block : height;
    for (size_t y = first; y < end; y++)
        for (size_t xx = 0; xx < width; xx++) {
            float *o = job->out + (y * width + xx) * dim;
            memcpy(o, job->conv->bias, dim * sizeof *o);
            for (int dy = -1; dy <= 1; dy++) {
                long sy = (long)y + dy;
                if (sy < 0 || (size_t)sy >= height) continue;
                for (int dx = -1; dx <= 1; dx++) {
                    long sx = (long)xx + dx;
                    if (sx < 0 || (size_t)sx >= width) continue;
                    const float *in = job->x + ((size_t)sy * width + (size_t)sx) * dim;
                    const float *w = job->conv->taps + (size_t)((dy + 1) * 3 + dx + 1) * dim;
                    kernel_multiply_add(o, w, in, dim);
                }
            }
        }
}

static void add_rows(void *argument, size_t index, float *scratch) {
    (void)scratch;
    const dwconv_job *job = argument;
    size_t first = index * job->block, end = first + job->block < job->height ? first + job->block : job->height;
    size_t row = job->width * job->dim;
    kernel_add(job->x + first * row, job->out + first * row, (end - first) * row);
}

/* x += depthwise 3×3 conv(x) (zero padding 1, with bias) over the height × width grid of dim channels: the conv
 * into out over every thread, then the sum (the conv reads x's neighbours, so it is whole before x changes). */
static void dwconv_residual(float *x, const davit_conv *conv, size_t height, size_t width, size_t dim, float *out,
                            pool *threads) {
    size_t share = (size_t)pool_threads(threads) * 4;
    dwconv_job job = {x, out, conv, height, width, dim, (height + share - 1) / share};
    size_t tasks = (height + job.block - 1) / job.block;
    pool_for(threads, tasks, conv_rows, &job);
    pool_for(threads, tasks, add_rows, &job);
}

/* Token (y, x) of a grid cut into window × window windows, padded to whole windows: its row among the
 * windows laid out one after another (windows row-major, tokens row-major inside). */
static size_t window_row(size_t y, size_t x, size_t padded_width, size_t window) {
    size_t windows_across = padded_width / window;
    size_t index = (y / window) * windows_across + x / window;
    return index * window * window + (y % window) * window + x % window;
}

/* x += proj(window attention(LN(x))): windows padded with zero rows at the right and bottom, no mask. */
static void window_attention(const davit_block *b, davit_state *s, float *x, size_t height, size_t width, size_t dim,
                             size_t heads, size_t window, pool *threads) {
    size_t n = height * width, ph = padded_side(height, window), pw = padded_side(width, window);
    size_t padded = ph * pw, per_window = window * window, head_dim = dim / heads;
    kernel_layernorm(s->normed, x, b->attention_norm_weight, b->attention_norm_bias, n, dim, DAVIT_EPS);
    memset(s->windows, 0, padded * dim * sizeof(float));
    for (size_t y = 0; y < height; y++)
        for (size_t xx = 0; xx < width; xx++)
            memcpy(s->windows + window_row(y, xx, pw, window) * dim, s->normed + (y * width + xx) * dim,
                   dim * sizeof(float));
    kernel_linear(s->qkv, 3 * dim, s->windows, dim, &b->qkv, b->qkv_bias, padded, dim, 3 * dim, false, threads);
    float scale = 1.0f / sqrtf((float)head_dim);
    for (size_t w = 0; w < padded / per_window; w++) {
        const float *q = s->qkv + w * per_window * 3 * dim;
        kernel_attention(s->context + w * per_window * dim, dim, NULL, q, 3 * dim, q + dim, q + 2 * dim, 3 * dim,
                         per_window, per_window, heads, head_dim, scale, KERNEL_MASK_NONE, s->scores, threads);
    }
    kernel_linear(s->projected, dim, s->context, dim, &b->proj, b->proj_bias, padded, dim, dim, false, threads);
    for (size_t y = 0; y < height; y++)
        for (size_t xx = 0; xx < width; xx++)
            kernel_add(x + (y * width + xx) * dim, s->projected + window_row(y, xx, pw, window) * dim, dim);
}

/* x += proj(channel attention(LN(x))): per group of dim / groups channels, A = softmax over j of
 * Σ_n q[n][i] · k[n][j] / √N, then out[n][i] = Σ_j A[i][j] · v[n][j]. */
static void channel_attention(const davit_block *b, davit_state *s, float *x, size_t n, size_t dim, size_t groups,
                              pool *threads) {
    size_t group = dim / groups;
    kernel_layernorm(s->normed, x, b->attention_norm_weight, b->attention_norm_bias, n, dim, DAVIT_EPS);
    kernel_linear(s->qkv, 3 * dim, s->normed, dim, &b->qkv, b->qkv_bias, n, dim, 3 * dim, false, threads);
    float scale = 1.0f / sqrtf((float)n);
    for (size_t t0 = 0; t0 < n; t0 += 16) /* (16 tokens at a time: each channel's line of qt and kt written whole,
                                             * where a token at a time wrote a float per line, n floats apart) */
        for (size_t c = 0; c < dim; c++)
            for (size_t t = t0; t < n && t < t0 + 16; t++) {
                s->qt[c * n + t] = s->qkv[t * 3 * dim + c] * scale;
                s->kt[c * n + t] = s->qkv[t * 3 * dim + dim + c];
            }
    for (size_t g = 0; g < groups; g++) {
        kernel_weight keys = kernel_weight_f32(s->kt + g * group * n);
        kernel_linear(s->affinity, group, s->qt + g * group * n, n, &keys, NULL, group, n, group, false, threads);
        kernel_softmax(s->affinity, group, group);
        kernel_weight affinity = kernel_weight_f32(s->affinity);
        kernel_linear(s->context + g * group, dim, s->qkv + 2 * dim + g * group, 3 * dim, &affinity, NULL, n, group,
                      group, false, threads);
    }
    kernel_linear(x, dim, s->context, dim, &b->proj, b->proj_bias, n, dim, dim, true, threads);
}

/* x += fc2(gelu(fc1(LN(x)))). */
static void mlp(const davit_block *b, davit_state *s, float *x, size_t n, size_t dim, size_t hidden, pool *threads) {
    kernel_layernorm(s->normed, x, b->ffn_norm_weight, b->ffn_norm_bias, n, dim, DAVIT_EPS);
    kernel_linear(s->mlp, hidden, s->normed, dim, &b->fc1, b->fc1_bias, n, dim, hidden, false, threads);
    kernel_gelu(s->mlp, n * hidden);
    kernel_linear(x, dim, s->mlp, hidden, &b->fc2, b->fc2_bias, n, hidden, dim, true, threads);
}

static void run_stage(const davit_model *model, davit_state *s, int index, pool *threads) {
    const davit_config *c = &model->config;
    const davit_stage *stage = &model->stages[index];
    size_t h = stage->height, w = stage->width, n = h * w, dim = (size_t)c->dims[index];
    size_t hidden = dim * (size_t)c->mlp_ratio;
    for (int i = 0; i < c->depths[index]; i++) {
        const davit_block *blocks[2] = {&stage->spatial[i], &stage->channel[i]};
        for (int kind = 0; kind < 2; kind++) {
            const davit_block *b = blocks[kind];
            dwconv_residual(s->x, &b->conv1, h, w, dim, s->conv, threads);
            if (kind == 0)
                window_attention(b, s, s->x, h, w, dim, (size_t)c->heads[index], (size_t)c->window_size, threads);
            else
                channel_attention(b, s, s->x, n, dim, (size_t)c->groups[index], threads);
            dwconv_residual(s->x, &b->conv2, h, w, dim, s->conv, threads);
            mlp(b, s, s->x, n, dim, hidden, threads);
        }
    }
}

glimpse_status davit_forward(const davit_model *model, davit_state *s, const float *pixel_values, float *out,
                             davit_stage_fn on_stage, void *user, pool *threads) {
    if (!model || !s || !pixel_values || !out)
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "davit_forward: NULL argument");
    const davit_config *c = &model->config;
    size_t side = (size_t)c->image_size;
    grid in = {pixel_values, side, side, 3, side * side, 1};
    for (int index = 0; index < DAVIT_STAGES; index++) {
        const davit_stage *stage = &model->stages[index];
        size_t dim = (size_t)c->dims[index], n = stage->height * stage->width;
        if (c->patch_prenorm[index]) { /* the incoming tokens normalised, then the conv */
            kernel_layernorm(s->normed, s->x, stage->norm_weight, stage->norm_bias, in.height * in.width,
                             in.channels, DAVIT_EPS);
            in.data = s->normed;
        }
        patch_embed(stage, &in, (size_t)c->patch_size[index], (size_t)c->patch_stride[index],
                    (size_t)c->patch_padding[index], dim, s->patches, s->next, threads);
        if (!c->patch_prenorm[index])
            kernel_layernorm(s->next, s->next, stage->norm_weight, stage->norm_bias, n, dim, DAVIT_EPS);
        float *swap = s->x;
        s->x = s->next, s->next = swap;
        run_stage(model, s, index, threads);
        if (on_stage) on_stage(user, index, s->x, n, dim);
        in = (grid){s->x, stage->height, stage->width, dim, 1, dim};
    }
    memcpy(out, s->x, davit_output_tokens(model) * davit_output_dim(model) * sizeof(float));
    return GLIMPSE_STATUS_OK;
}
