/* make_model.c — glimpse-make-model: writes a snapshot folder with random
 * weights for a published configuration (../shared/configs/), with exactly
 * the tensor names, shapes and dtypes of the real checkpoint, plus tokenizer
 * and preprocessor files of our own making. Full-size models for benchmarks
 * and shape tests without any download. Outputs mean nothing. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/file.h"
#include "text/chat_template.h"
#include "tools/make_model.h"
#include "weights/config.h"

typedef enum fill { FILL_NORMAL, FILL_ONES, FILL_ZEROS, FILL_CONSTANT, FILL_POSITIONS } fill;

typedef struct tensor_spec {
    char name[160];
    int rank;
    size_t shape[4];
    fill how;
    float value; /* standard deviation or constant */
    int is_i64;
} tensor_spec;

typedef struct spec_list {
    tensor_spec *items;
    size_t count, capacity;
} spec_list;

void die(const char *format, ...) {
    va_list args;
    va_start(args, format);
    fputs("glimpse-make-model: ", stderr);
    vfprintf(stderr, format, args);
    fputc('\n', stderr);
    va_end(args);
    exit(1);
}

static void add(spec_list *list, fill how, float value, int rank, size_t d0, size_t d1, size_t d2, size_t d3,
                const char *format, ...) {
    if (list->count == list->capacity) {
        list->capacity = list->capacity ? list->capacity * 2 : 256;
        list->items = realloc(list->items, list->capacity * sizeof *list->items);
        if (!list->items) die("out of memory");
    }
    tensor_spec *t = &list->items[list->count++];
    memset(t, 0, sizeof *t);
    va_list args;
    va_start(args, format);
    vsnprintf(t->name, sizeof t->name, format, args);
    va_end(args);
    t->rank = rank;
    size_t dims[4] = {d0, d1, d2, d3};
    memcpy(t->shape, dims, sizeof dims);
    t->how = how;
    t->value = value;
    t->is_i64 = how == FILL_POSITIONS;
}

#define STD 0.02f
static void add_linear(spec_list *l, const char *prefix, size_t out, size_t in, int bias) {
    add(l, FILL_NORMAL, STD, 2, out, in, 0, 0, "%s.weight", prefix);
    if (bias) add(l, FILL_NORMAL, STD, 1, out, 0, 0, 0, "%s.bias", prefix);
}
static void add_norm(spec_list *l, const char *prefix, size_t dim) {
    add(l, FILL_ONES, 0, 1, dim, 0, 0, 0, "%s.weight", prefix);
    add(l, FILL_ZEROS, 0, 1, dim, 0, 0, 0, "%s.bias", prefix);
}

/* Linear layers [out, in] with biases, or LayerNorms of dim, named PARENT.NAME for each of names. */
static void add_linears(spec_list *l, const char *parent, const char *const *names, size_t count, size_t out,
                        size_t in) {
    char name[160];
    for (size_t i = 0; i < count; i++) {
        snprintf(name, sizeof name, "%s.%s", parent, names[i]);
        add_linear(l, name, out, in, 1);
    }
}
static void add_norms(spec_list *l, const char *parent, const char *const *names, size_t count, size_t dim) {
    char name[160];
    for (size_t i = 0; i < count; i++) {
        snprintf(name, sizeof name, "%s.%s", parent, names[i]);
        add_norm(l, name, dim);
    }
}

/* A pre-LN encoder layer's two LayerNorms and feed-forward block below `layer`: names[0..3] are its norm1,
 * norm2, fc1 [intermediate, hidden] and fc2 [hidden, intermediate] modules. */
static void add_norms_and_mlp(spec_list *l, const char *layer, const char *const names[4], size_t hidden,
                              size_t intermediate) {
    char name[160];
    for (int n = 0; n < 2; n++) {
        snprintf(name, sizeof name, "%s.%s", layer, names[n]);
        add_norm(l, name, hidden);
    }
    snprintf(name, sizeof name, "%s.%s", layer, names[2]);
    add_linear(l, name, intermediate, hidden, 1);
    snprintf(name, sizeof name, "%s.%s", layer, names[3]);
    add_linear(l, name, hidden, intermediate, 1);
}

int get_int(const cJSON *json, const char *key, int fallback) {
    int value;
    if (config_int_or(json, "config", key, 0, 1 << 24, fallback, &value)) die("config: %s", glimpse_last_error());
    return value;
}

static void clip_encoder_layers(spec_list *l, const char *prefix, int layers, size_t hidden, size_t intermediate) {
    char name[160];
    for (int i = 0; i < layers; i++) {
        const char *parts[] = {"q_proj", "k_proj", "v_proj", "out_proj"};
        for (int p = 0; p < 4; p++) {
            snprintf(name, sizeof name, "%s.layers.%d.self_attn.%s", prefix, i, parts[p]);
            add_linear(l, name, hidden, hidden, 1);
        }
        snprintf(name, sizeof name, "%s.layers.%d.layer_norm1", prefix, i);
        add_norm(l, name, hidden);
        snprintf(name, sizeof name, "%s.layers.%d.layer_norm2", prefix, i);
        add_norm(l, name, hidden);
        snprintf(name, sizeof name, "%s.layers.%d.mlp.fc1", prefix, i);
        add_linear(l, name, intermediate, hidden, 1);
        snprintf(name, sizeof name, "%s.layers.%d.mlp.fc2", prefix, i);
        add_linear(l, name, hidden, intermediate, 1);
    }
}

static void clip_tensors(spec_list *l, const cJSON *config) {
    const cJSON *v = cJSON_GetObjectItem(config, "vision_config"), *t = cJSON_GetObjectItem(config, "text_config");
    size_t projection = (size_t)get_int(config, "projection_dim", 512);
    size_t vh = (size_t)get_int(v, "hidden_size", 768), vi = (size_t)get_int(v, "intermediate_size", 3072);
    size_t patch = (size_t)get_int(v, "patch_size", 32), image = (size_t)get_int(v, "image_size", 224);
    size_t tokens = (image / patch) * (image / patch) + 1;
    add(l, FILL_NORMAL, STD, 1, vh, 0, 0, 0, "vision_model.embeddings.class_embedding");
    add(l, FILL_NORMAL, STD, 4, vh, 3, patch, patch, "vision_model.embeddings.patch_embedding.weight");
    add(l, FILL_NORMAL, STD, 2, tokens, vh, 0, 0, "vision_model.embeddings.position_embedding.weight");
    add(l, FILL_POSITIONS, 0, 2, 1, tokens, 0, 0, "vision_model.embeddings.position_ids");
    add_norm(l, "vision_model.pre_layrnorm", vh);
    clip_encoder_layers(l, "vision_model.encoder", get_int(v, "num_hidden_layers", 12), vh, vi);
    add_norm(l, "vision_model.post_layernorm", vh);
    add_linear(l, "visual_projection", projection, vh, 0);
    size_t th = (size_t)get_int(t, "hidden_size", 512), ti = (size_t)get_int(t, "intermediate_size", 2048);
    size_t vocab = (size_t)get_int(t, "vocab_size", 49408), positions = (size_t)get_int(t, "max_position_embeddings", 77);
    add(l, FILL_NORMAL, STD, 2, vocab, th, 0, 0, "text_model.embeddings.token_embedding.weight");
    add(l, FILL_NORMAL, 0.01f, 2, positions, th, 0, 0, "text_model.embeddings.position_embedding.weight");
    add(l, FILL_POSITIONS, 0, 2, 1, positions, 0, 0, "text_model.embeddings.position_ids");
    clip_encoder_layers(l, "text_model.encoder", get_int(t, "num_hidden_layers", 12), th, ti);
    add_norm(l, "text_model.final_layer_norm", th);
    add_linear(l, "text_projection", projection, th, 0);
    double scale;
    config_double_or(config, "config", "logit_scale_init_value", 2.6592, &scale);
    add(l, FILL_CONSTANT, (float)scale, 0, 0, 0, 0, 0, "logit_scale");
}

static void blip_vision_tensors(spec_list *l, const cJSON *v) {
    size_t h = (size_t)get_int(v, "hidden_size", 768), inter = (size_t)get_int(v, "intermediate_size", 3072);
    size_t patch = (size_t)get_int(v, "patch_size", 16), image = (size_t)get_int(v, "image_size", 384);
    size_t tokens = (image / patch) * (image / patch) + 1;
    char name[160];
    add(l, FILL_NORMAL, STD, 3, 1, 1, h, 0, "vision_model.embeddings.class_embedding");
    add(l, FILL_NORMAL, STD, 4, h, 3, patch, patch, "vision_model.embeddings.patch_embedding.weight");
    add(l, FILL_NORMAL, STD, 1, h, 0, 0, 0, "vision_model.embeddings.patch_embedding.bias");
    add(l, FILL_NORMAL, STD, 3, 1, tokens, h, 0, "vision_model.embeddings.position_embedding");
    for (int i = 0; i < get_int(v, "num_hidden_layers", 12); i++) {
        snprintf(name, sizeof name, "vision_model.encoder.layers.%d.self_attn.qkv", i);
        add_linear(l, name, 3 * h, h, 1);
        snprintf(name, sizeof name, "vision_model.encoder.layers.%d.self_attn.projection", i);
        add_linear(l, name, h, h, 1);
        snprintf(name, sizeof name, "vision_model.encoder.layers.%d", i);
        add_norms_and_mlp(l, name, (const char *[4]){"layer_norm1", "layer_norm2", "mlp.fc1", "mlp.fc2"}, h, inter);
    }
    add_norm(l, "vision_model.post_layernorm", h);
}

/* BLIP's BERT text model under prefix (text_decoder.bert or text_encoder). */
static void blip_text_tensors(spec_list *l, const cJSON *t, size_t vision_hidden, const char *prefix) {
    size_t h = (size_t)get_int(t, "hidden_size", 768), inter = (size_t)get_int(t, "intermediate_size", 3072);
    size_t vocab = (size_t)get_int(t, "vocab_size", 30524), positions = (size_t)get_int(t, "max_position_embeddings", 512);
    size_t encoder = (size_t)get_int(t, "encoder_hidden_size", (int)vision_hidden);
    char name[160];
    add(l, FILL_NORMAL, STD, 2, vocab, h, 0, 0, "%s.embeddings.word_embeddings.weight", prefix);
    add(l, FILL_NORMAL, STD, 2, positions, h, 0, 0, "%s.embeddings.position_embeddings.weight", prefix);
    add(l, FILL_POSITIONS, 0, 2, 1, positions, 0, 0, "%s.embeddings.position_ids", prefix);
    snprintf(name, sizeof name, "%s.embeddings.LayerNorm", prefix);
    add_norm(l, name, h);
    for (int i = 0; i < get_int(t, "num_hidden_layers", 12); i++) {
        const char *square[] = {"attention.self.query", "attention.self.key", "attention.self.value",
                                "attention.output.dense", "crossattention.self.query", "crossattention.output.dense"};
        for (int p = 0; p < 6; p++) {
            snprintf(name, sizeof name, "%s.encoder.layer.%d.%s", prefix, i, square[p]);
            add_linear(l, name, h, h, 1);
        }
        snprintf(name, sizeof name, "%s.encoder.layer.%d.crossattention.self.key", prefix, i);
        add_linear(l, name, h, encoder, 1);
        snprintf(name, sizeof name, "%s.encoder.layer.%d.crossattention.self.value", prefix, i);
        add_linear(l, name, h, encoder, 1);
        const char *norms[] = {"attention.output.LayerNorm", "crossattention.output.LayerNorm", "output.LayerNorm"};
        for (int p = 0; p < 3; p++) {
            snprintf(name, sizeof name, "%s.encoder.layer.%d.%s", prefix, i, norms[p]);
            add_norm(l, name, h);
        }
        snprintf(name, sizeof name, "%s.encoder.layer.%d.intermediate.dense", prefix, i);
        add_linear(l, name, inter, h, 1);
        snprintf(name, sizeof name, "%s.encoder.layer.%d.output.dense", prefix, i);
        add_linear(l, name, h, inter, 1);
    }
}

static void blip_caption_tensors(spec_list *l, const cJSON *config) {
    const cJSON *v = cJSON_GetObjectItem(config, "vision_config"), *t = cJSON_GetObjectItem(config, "text_config");
    blip_vision_tensors(l, v);
    size_t h = (size_t)get_int(t, "hidden_size", 768), vocab = (size_t)get_int(t, "vocab_size", 30524);
    blip_text_tensors(l, t, (size_t)get_int(v, "hidden_size", 768), "text_decoder.bert");
    /* the decoder weight is tied to the word embeddings, and left out as the hub's files leave it out */
    add(l, FILL_ZEROS, 0, 1, vocab, 0, 0, 0, "text_decoder.cls.predictions.bias");
    add_linear(l, "text_decoder.cls.predictions.transform.dense", h, h, 1);
    add_norm(l, "text_decoder.cls.predictions.transform.LayerNorm", h);
}

static void blip_retrieval_tensors(spec_list *l, const cJSON *config) {
    const cJSON *v = cJSON_GetObjectItem(config, "vision_config"), *t = cJSON_GetObjectItem(config, "text_config");
    blip_vision_tensors(l, v);
    size_t h = (size_t)get_int(t, "hidden_size", 768), vh = (size_t)get_int(v, "hidden_size", 768);
    size_t shared = (size_t)get_int(config, "image_text_hidden_size", 256);
    blip_text_tensors(l, t, vh, "text_encoder");
    add_linear(l, "vision_proj", shared, vh, 1);
    add_linear(l, "text_proj", shared, h, 1);
    add_linear(l, "itm_head", 2, h, 1);
}

/* SiglipModel: no class token, an attention-pooling head, a text `head`; sizes
 * left out of the config take SigLIP's defaults, as the published files do. */
static void siglip_tensors(spec_list *l, const cJSON *config) {
    const cJSON *v = cJSON_GetObjectItem(config, "vision_config"), *t = cJSON_GetObjectItem(config, "text_config");
    size_t vh = (size_t)get_int(v, "hidden_size", 768), vi = (size_t)get_int(v, "intermediate_size", 3072);
    size_t patch = (size_t)get_int(v, "patch_size", 16), image = (size_t)get_int(v, "image_size", 224);
    size_t patches = (image / patch) * (image / patch);
    add(l, FILL_NORMAL, STD, 4, vh, 3, patch, patch, "vision_model.embeddings.patch_embedding.weight");
    add(l, FILL_NORMAL, STD, 1, vh, 0, 0, 0, "vision_model.embeddings.patch_embedding.bias");
    add(l, FILL_NORMAL, STD, 2, patches, vh, 0, 0, "vision_model.embeddings.position_embedding.weight");
    clip_encoder_layers(l, "vision_model.encoder", get_int(v, "num_hidden_layers", 12), vh, vi);
    add_norm(l, "vision_model.post_layernorm", vh);
    add(l, FILL_NORMAL, STD, 3, 1, 1, vh, 0, "vision_model.head.probe");
    add(l, FILL_NORMAL, STD, 2, 3 * vh, vh, 0, 0, "vision_model.head.attention.in_proj_weight");
    add(l, FILL_ZEROS, 0, 1, 3 * vh, 0, 0, 0, "vision_model.head.attention.in_proj_bias");
    add_linear(l, "vision_model.head.attention.out_proj", vh, vh, 1);
    add_norm(l, "vision_model.head.layernorm", vh);
    add_linear(l, "vision_model.head.mlp.fc1", vi, vh, 1);
    add_linear(l, "vision_model.head.mlp.fc2", vh, vi, 1);
    size_t th = (size_t)get_int(t, "hidden_size", 768), ti = (size_t)get_int(t, "intermediate_size", 3072);
    size_t vocab = (size_t)get_int(t, "vocab_size", 32000);
    size_t positions = (size_t)get_int(t, "max_position_embeddings", 64);
    add(l, FILL_NORMAL, STD, 2, vocab, th, 0, 0, "text_model.embeddings.token_embedding.weight");
    add(l, FILL_NORMAL, 0.01f, 2, positions, th, 0, 0, "text_model.embeddings.position_embedding.weight");
    clip_encoder_layers(l, "text_model.encoder", get_int(t, "num_hidden_layers", 12), th, ti);
    add_norm(l, "text_model.final_layer_norm", th);
    add_linear(l, "text_model.head", (size_t)get_int(t, "projection_size", (int)th), th, 1);
    add(l, FILL_CONSTANT, logf(10.0f), 1, 1, 0, 0, 0, "logit_scale"); /* SigLIP's initial values */
    add(l, FILL_CONSTANT, -10.0f, 1, 1, 0, 0, 0, "logit_bias");
}

/* Blip2ForConditionalGeneration with OPT: BLIP's vision tower, the Q-Former (cross-attention in every
 * cross_attention_frequency-th layer; both its feed-forward blocks, the queries' and the text's, as the
 * published checkpoint holds them), the language projection and OPT (head tied, so absent). */
static void blip2_tensors(spec_list *l, const cJSON *config) {
    const cJSON *v = cJSON_GetObjectItem(config, "vision_config"), *q = cJSON_GetObjectItem(config, "qformer_config");
    const cJSON *t = cJSON_GetObjectItem(config, "text_config");
    blip_vision_tensors(l, v);
    size_t qh = (size_t)get_int(q, "hidden_size", 768), qi = (size_t)get_int(q, "intermediate_size", 3072);
    size_t encoder = (size_t)get_int(q, "encoder_hidden_size", get_int(v, "hidden_size", 1408));
    int frequency = get_int(q, "cross_attention_frequency", 2);
    if (frequency < 1) die("config: cross_attention_frequency must be at least 1");
    add(l, FILL_NORMAL, STD, 3, 1, (size_t)get_int(config, "num_query_tokens", 32), qh, 0, "query_tokens");
    add_norm(l, "qformer.layernorm", qh);
    char name[160];
    for (int i = 0; i < get_int(q, "num_hidden_layers", 12); i++) {
        const char *square[] = {"attention.attention.query", "attention.attention.key", "attention.attention.value",
                                "attention.output.dense", "crossattention.attention.query",
                                "crossattention.output.dense"};
        const char *norms[] = {"attention.output.LayerNorm", "output.LayerNorm", "output_query.LayerNorm",
                               "crossattention.output.LayerNorm"};
        const char *kv[] = {"crossattention.attention.key", "crossattention.attention.value"};
        const char *widen[] = {"intermediate.dense", "intermediate_query.dense"};
        const char *narrow[] = {"output.dense", "output_query.dense"};
        int cross = i % frequency == 0;
        snprintf(name, sizeof name, "qformer.encoder.layer.%d", i);
        add_linears(l, name, square, cross ? 6 : 4, qh, qh);
        add_norms(l, name, norms, cross ? 4 : 3, qh);
        add_linears(l, name, kv, cross ? 2 : 0, qh, encoder);
        add_linears(l, name, widen, 2, qi, qh);
        add_linears(l, name, narrow, 2, qh, qi);
    }
    size_t h = (size_t)get_int(t, "hidden_size", 768), ffn = (size_t)get_int(t, "ffn_dim", 3072);
    size_t proj = (size_t)get_int(t, "word_embed_proj_dim", (int)h), vocab = (size_t)get_int(t, "vocab_size", 50272);
    size_t positions = (size_t)get_int(t, "max_position_embeddings", 2048);
    add_linear(l, "language_projection", h, qh, 1);
    const char *decoder = "language_model.model.decoder";
    add(l, FILL_NORMAL, STD, 2, vocab, proj, 0, 0, "%s.embed_tokens.weight", decoder);
    add(l, FILL_NORMAL, STD, 2, positions + 2, h, 0, 0, "%s.embed_positions.weight", decoder);
    if (proj != h) {
        add(l, FILL_NORMAL, STD, 2, h, proj, 0, 0, "%s.project_in.weight", decoder);
        add(l, FILL_NORMAL, STD, 2, proj, h, 0, 0, "%s.project_out.weight", decoder);
    }
    for (int i = 0; i < get_int(t, "num_hidden_layers", 12); i++) {
        const char *square[] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.out_proj"};
        const char *norms[] = {"self_attn_layer_norm", "final_layer_norm"}, *fc1[] = {"fc1"}, *fc2[] = {"fc2"};
        snprintf(name, sizeof name, "%s.layers.%d", decoder, i);
        add_linears(l, name, square, 4, h, h);
        add_linears(l, name, fc1, 1, ffn, h);
        add_linears(l, name, fc2, 1, h, ffn);
        add_norms(l, name, norms, 2, h);
    }
    snprintf(name, sizeof name, "%s.final_layer_norm", decoder);
    add_norm(l, name, h);
}

/* LlavaForConditionalGeneration (llava-hf's layout: vision_tower.vision_model.*, multi_modal_projector.*,
 * language_model.model.* and language_model.lm_head): a CLIP tower (class token, pre-LN) or a SigLIP one (patch
 * bias, no class token, no head), the two-layer projector, and a Llama or Qwen2 language model (Qwen2's q/k/v
 * biases; the head left out when tied). */
static void llava_tensors(spec_list *l, const cJSON *config) {
    const cJSON *v = cJSON_GetObjectItem(config, "vision_config"), *t = cJSON_GetObjectItem(config, "text_config");
    const cJSON *kind = cJSON_GetObjectItem(v, "model_type");
    int siglip = cJSON_IsString(kind) && strcmp(kind->valuestring, "siglip_vision_model") == 0;
    size_t vh = (size_t)get_int(v, "hidden_size", 1024), vi = (size_t)get_int(v, "intermediate_size", 4096);
    size_t patch = (size_t)get_int(v, "patch_size", 14), image = (size_t)get_int(v, "image_size", 336);
    size_t patches = (image / patch) * (image / patch);
    const char *tower = "vision_tower.vision_model";
    if (!siglip) add(l, FILL_NORMAL, STD, 1, vh, 0, 0, 0, "%s.embeddings.class_embedding", tower);
    add(l, FILL_NORMAL, STD, 4, vh, 3, patch, patch, "%s.embeddings.patch_embedding.weight", tower);
    if (siglip) add(l, FILL_NORMAL, STD, 1, vh, 0, 0, 0, "%s.embeddings.patch_embedding.bias", tower);
    add(l, FILL_NORMAL, STD, 2, patches + !siglip, vh, 0, 0, "%s.embeddings.position_embedding.weight", tower);
    char name[160];
    if (!siglip) {
        snprintf(name, sizeof name, "%s.pre_layrnorm", tower);
        add_norm(l, name, vh);
    }
    snprintf(name, sizeof name, "%s.encoder", tower);
    clip_encoder_layers(l, name, get_int(v, "num_hidden_layers", 24), vh, vi);
    snprintf(name, sizeof name, "%s.post_layernorm", tower);
    add_norm(l, name, vh);
    const cJSON *text_kind = cJSON_GetObjectItem(t, "model_type");
    int qwen2 = cJSON_IsString(text_kind) && strcmp(text_kind->valuestring, "qwen2") == 0;
    /* LlamaConfig's and Qwen2Config's defaults where the published configs leave sizes out */
    size_t h = (size_t)get_int(t, "hidden_size", 4096), inter = (size_t)get_int(t, "intermediate_size", qwen2 ? 22016 : 11008);
    size_t heads = (size_t)get_int(t, "num_attention_heads", 32);
    size_t kv = (size_t)get_int(t, "num_key_value_heads", (int)heads) * (h / heads);
    size_t vocab = (size_t)get_int(t, "vocab_size", get_int(config, "vocab_size", 32000));
    add_linear(l, "multi_modal_projector.linear_1", h, vh, 1);
    add_linear(l, "multi_modal_projector.linear_2", h, h, 1);
    const char *model = "language_model.model";
    add(l, FILL_NORMAL, STD, 2, vocab, h, 0, 0, "%s.embed_tokens.weight", model);
    for (int i = 0; i < get_int(t, "num_hidden_layers", 32); i++) {
        snprintf(name, sizeof name, "%s.layers.%d.self_attn", model, i);
        const char *projections[] = {"q_proj", "k_proj", "v_proj", "o_proj"};
        const size_t outs[] = {h, kv, kv, h};
        for (int p = 0; p < 4; p++) {
            char full[200];
            snprintf(full, sizeof full, "%s.%s", name, projections[p]);
            add_linear(l, full, outs[p], h, qwen2 && p < 3);
        }
        snprintf(name, sizeof name, "%s.layers.%d.mlp", model, i);
        add(l, FILL_NORMAL, STD, 2, inter, h, 0, 0, "%s.gate_proj.weight", name);
        add(l, FILL_NORMAL, STD, 2, inter, h, 0, 0, "%s.up_proj.weight", name);
        add(l, FILL_NORMAL, STD, 2, h, inter, 0, 0, "%s.down_proj.weight", name);
        add(l, FILL_ONES, 0, 1, h, 0, 0, 0, "%s.layers.%d.input_layernorm.weight", model, i);
        add(l, FILL_ONES, 0, 1, h, 0, 0, 0, "%s.layers.%d.post_attention_layernorm.weight", model, i);
    }
    add(l, FILL_ONES, 0, 1, h, 0, 0, 0, "%s.norm.weight", model);
    const cJSON *tied = cJSON_GetObjectItem(t, "tie_word_embeddings");
    if (!cJSON_IsTrue(tied)) add(l, FILL_NORMAL, STD, 2, vocab, h, 0, 0, "language_model.lm_head.weight");
}

/* A GPT-2 Conv1D layer: weight [in, out], bias [out]. */
static void add_conv1d(spec_list *l, const char *prefix, size_t in, size_t out) {
    add(l, FILL_NORMAL, STD, 2, in, out, 0, 0, "%s.weight", prefix);
    add(l, FILL_NORMAL, STD, 1, out, 0, 0, 0, "%s.bias", prefix);
}

/* VisionEncoderDecoderModel of transformers' ViTModel and GPT2LMHeadModel with
 * cross-attention (nlpconnect/vit-gpt2-image-captioning): the LM head tied to
 * wte and left out, GPT-2's causal-mask buffers left out too (nothing reads them). */
static void vit_gpt2_tensors(spec_list *l, const cJSON *config) {
    const cJSON *v = cJSON_GetObjectItem(config, "encoder"), *t = cJSON_GetObjectItem(config, "decoder");
    size_t vh = (size_t)get_int(v, "hidden_size", 768), vi = (size_t)get_int(v, "intermediate_size", 3072);
    size_t patch = (size_t)get_int(v, "patch_size", 16), image = (size_t)get_int(v, "image_size", 224);
    size_t tokens = (image / patch) * (image / patch) + 1;
    char name[160];
    add(l, FILL_NORMAL, STD, 3, 1, 1, vh, 0, "encoder.embeddings.cls_token");
    add(l, FILL_NORMAL, STD, 3, 1, tokens, vh, 0, "encoder.embeddings.position_embeddings");
    add(l, FILL_NORMAL, STD, 4, vh, 3, patch, patch, "encoder.embeddings.patch_embeddings.projection.weight");
    add(l, FILL_NORMAL, STD, 1, vh, 0, 0, 0, "encoder.embeddings.patch_embeddings.projection.bias");
    for (int i = 0; i < get_int(v, "num_hidden_layers", 12); i++) {
        const char *square[] = {"attention.attention.query", "attention.attention.key", "attention.attention.value",
                                "attention.output.dense"};
        for (int p = 0; p < 4; p++) {
            snprintf(name, sizeof name, "encoder.encoder.layer.%d.%s", i, square[p]);
            add_linear(l, name, vh, vh, 1);
        }
        snprintf(name, sizeof name, "encoder.encoder.layer.%d", i);
        const char *parts[4] = {"layernorm_before", "layernorm_after", "intermediate.dense", "output.dense"};
        add_norms_and_mlp(l, name, parts, vh, vi);
    }
    add_norm(l, "encoder.layernorm", vh);
    add_linear(l, "encoder.pooler.dense", vh, vh, 1);
    size_t h = (size_t)get_int(t, "n_embd", 768), inner = (size_t)get_int(t, "n_inner", 4 * (int)h);
    size_t vocab = (size_t)get_int(t, "vocab_size", 50257), positions = (size_t)get_int(t, "n_positions", 1024);
    if (vh != h) add_linear(l, "enc_to_dec_proj", h, vh, 1);
    add(l, FILL_NORMAL, STD, 2, vocab, h, 0, 0, "decoder.transformer.wte.weight");
    add(l, FILL_NORMAL, 0.01f, 2, positions, h, 0, 0, "decoder.transformer.wpe.weight");
    for (int i = 0; i < get_int(t, "n_layer", 12); i++) {
        const char *norms[] = {"ln_1", "ln_cross_attn", "ln_2"};
        for (int p = 0; p < 3; p++) {
            snprintf(name, sizeof name, "decoder.transformer.h.%d.%s", i, norms[p]);
            add_norm(l, name, h);
        }
        const struct {
            const char *name;
            size_t in, out;
        } conv1d[] = {{"attn.c_attn", h, 3 * h},         {"attn.c_proj", h, h},
                      {"crossattention.q_attn", h, h},   {"crossattention.c_attn", h, 2 * h},
                      {"crossattention.c_proj", h, h},   {"mlp.c_fc", h, inner},
                      {"mlp.c_proj", inner, h}};
        for (size_t p = 0; p < sizeof conv1d / sizeof conv1d[0]; p++) {
            snprintf(name, sizeof name, "decoder.transformer.h.%d.%s", i, conv1d[p].name);
            add_conv1d(l, name, conv1d[p].in, conv1d[p].out);
        }
    }
    add_norm(l, "decoder.transformer.ln_f", h);
}

/* Entry i of the config's integer list key (DaViT's per-stage lists); dies if it is missing. */
size_t list_int(const cJSON *json, const char *key, int i) {
    const cJSON *item = cJSON_GetArrayItem(cJSON_GetObjectItem(json, key), i);
    if (!cJSON_IsNumber(item) || item->valueint < 1) die("config: vision_config.%s[%d] is not a positive number", key, i);
    return (size_t)item->valueint;
}

/* DaViT (Florence-2's vision tower, the remote code's names): per stage a patch-embedding conv with its LayerNorm
 * (over the incoming channels where patch_prenorm, else the outgoing), then depths[s] pairs of a spatial (window
 * attention) and a channel block, each a depthwise conv, attention, a depthwise conv and an MLP of 4C. */
static void davit_tensors(spec_list *l, const cJSON *v) {
    size_t in = 3;
    char name[160];
    for (int s = 0; s < 4; s++) {
        size_t dim = list_int(v, "dim_embed", s), kernel = list_int(v, "patch_size", s);
        const cJSON *prenorm = cJSON_GetArrayItem(cJSON_GetObjectItem(v, "patch_prenorm"), s);
        add(l, FILL_NORMAL, STD, 4, dim, in, kernel, kernel, "vision_tower.convs.%d.proj.weight", s);
        add(l, FILL_NORMAL, STD, 1, dim, 0, 0, 0, "vision_tower.convs.%d.proj.bias", s);
        snprintf(name, sizeof name, "vision_tower.convs.%d.norm", s);
        add_norm(l, name, cJSON_IsTrue(prenorm) ? in : dim);
        for (size_t j = 0; j < list_int(v, "depths", s); j++)
            for (int b = 0; b < 2; b++) {
                const char *block = b ? "channel_block" : "spatial_block", *attention = b ? "channel_attn" : "window_attn";
                for (int c = 1; c <= 2; c++) {
                    add(l, FILL_NORMAL, STD, 4, dim, 1, 3, 3, "vision_tower.blocks.%d.%zu.%s.conv%d.fn.dw.weight", s, j,
                        block, c);
                    add(l, FILL_NORMAL, STD, 1, dim, 0, 0, 0, "vision_tower.blocks.%d.%zu.%s.conv%d.fn.dw.bias", s, j,
                        block, c);
                }
                snprintf(name, sizeof name, "vision_tower.blocks.%d.%zu.%s.%s.norm", s, j, block, attention);
                add_norm(l, name, dim);
                snprintf(name, sizeof name, "vision_tower.blocks.%d.%zu.%s.%s.fn.qkv", s, j, block, attention);
                add_linear(l, name, 3 * dim, dim, 1);
                snprintf(name, sizeof name, "vision_tower.blocks.%d.%zu.%s.%s.fn.proj", s, j, block, attention);
                add_linear(l, name, dim, dim, 1);
                snprintf(name, sizeof name, "vision_tower.blocks.%d.%zu.%s.ffn.norm", s, j, block);
                add_norm(l, name, dim);
                snprintf(name, sizeof name, "vision_tower.blocks.%d.%zu.%s.ffn.fn.net.fc1", s, j, block);
                add_linear(l, name, 4 * dim, dim, 1);
                snprintf(name, sizeof name, "vision_tower.blocks.%d.%zu.%s.ffn.fn.net.fc2", s, j, block);
                add_linear(l, name, dim, 4 * dim, 1);
            }
        in = dim;
    }
}

/* BART below language_model (Florence-2's text side, as save_pretrained writes it): the shared token table and
 * the head as its own copy, final_logits_bias, each side's learned positions (2 more rows than
 * max_position_embeddings) and embedding LayerNorm, post-LN layers (the decoder's with cross-attention). */
static void bart_tensors(spec_list *l, const cJSON *t) {
    size_t d = (size_t)get_int(t, "d_model", 1024), vocab = (size_t)get_int(t, "vocab_size", 50265);
    size_t positions = (size_t)get_int(t, "max_position_embeddings", 1024);
    add(l, FILL_NORMAL, STD, 2, vocab, d, 0, 0, "language_model.model.shared.weight");
    char name[160];
    for (int side = 0; side < 2; side++) {
        const char *which = side ? "decoder" : "encoder";
        snprintf(name, sizeof name, "%s_ffn_dim", which);
        size_t ffn = (size_t)get_int(t, name, 4096);
        snprintf(name, sizeof name, "%s_layers", which);
        int layers = get_int(t, name, 12);
        add(l, FILL_NORMAL, STD, 2, positions + 2, d, 0, 0, "language_model.model.%s.embed_positions.weight", which);
        snprintf(name, sizeof name, "language_model.model.%s.layernorm_embedding", which);
        add_norm(l, name, d);
        for (int i = 0; i < layers; i++) {
            const char *square[] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.out_proj",
                                    "encoder_attn.q_proj", "encoder_attn.k_proj", "encoder_attn.v_proj",
                                    "encoder_attn.out_proj"};
            const char *norms[] = {"self_attn_layer_norm", "final_layer_norm", "encoder_attn_layer_norm"};
            const char *fc1[] = {"fc1"}, *fc2[] = {"fc2"};
            snprintf(name, sizeof name, "language_model.model.%s.layers.%d", which, i);
            add_linears(l, name, square, side ? 8 : 4, d, d);
            add_norms(l, name, norms, side ? 3 : 2, d);
            add_linears(l, name, fc1, 1, ffn, d);
            add_linears(l, name, fc2, 1, d, ffn);
        }
    }
    add(l, FILL_NORMAL, STD, 2, vocab, d, 0, 0, "language_model.lm_head.weight");
    add(l, FILL_ZEROS, 0, 2, 1, vocab, 0, 0, "language_model.final_logits_bias");
}

/* Florence2ForConditionalGeneration: DaViT, the image side's 2-D position tables (the last stage's C split
 * C - C/2 columns, C/2 rows) and temporal table, the projection [C, projection_dim] (no bias) and its norm, BART. */
static void florence2_tensors(spec_list *l, const cJSON *config) {
    const cJSON *v = cJSON_GetObjectItem(config, "vision_config"), *t = cJSON_GetObjectItem(config, "text_config");
    davit_tensors(l, v);
    size_t c = list_int(v, "dim_embed", 3), projection = (size_t)get_int(config, "projection_dim", 1024);
    size_t positions = (size_t)get_int(cJSON_GetObjectItem(v, "image_pos_embed"), "max_pos_embeddings", 50);
    size_t temporal = (size_t)get_int(cJSON_GetObjectItem(v, "visual_temporal_embedding"), "max_temporal_embeddings", 100);
    add(l, FILL_NORMAL, STD, 2, positions, c / 2, 0, 0, "image_pos_embed.row_embeddings.weight");
    add(l, FILL_NORMAL, STD, 2, positions, c - c / 2, 0, 0, "image_pos_embed.column_embeddings.weight");
    add(l, FILL_NORMAL, STD, 2, temporal, c, 0, 0, "visual_temporal_embed.pos_idx_to_embed");
    add(l, FILL_NORMAL, STD, 2, c, projection, 0, 0, "image_projection");
    add_norm(l, "image_proj_norm", projection);
    bart_tensors(l, t);
}

/* ---------------------------------------------------------------- output */


static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t next_random(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}
/* Approximately normal: sum of four uniforms, scaled to unit variance. */
static float normal(void) {
    double sum = 0;
    for (int i = 0; i < 4; i++) sum += (double)(next_random() >> 11) / 9007199254740992.0;
    return (float)((sum - 2.0) * 1.7320508075688772);
}

static size_t elements_of(const tensor_spec *t) {
    size_t n = 1;
    for (int i = 0; i < t->rank; i++) n *= t->shape[i];
    return n;
}

static uint16_t to_f16(float value) {
    uint32_t bits;
    memcpy(&bits, &value, 4);
    uint32_t sign = (bits >> 16) & 0x8000;
    int exponent = (int)((bits >> 23) & 0xff) - 127 + 15;
    uint32_t mantissa = bits & 0x7fffff;
    if (exponent <= 0) return (uint16_t)sign; /* tiny values flush to zero: fine for random weights */
    if (exponent >= 31) return (uint16_t)(sign | 0x7c00);
    uint32_t half = sign | ((uint32_t)exponent << 10) | (mantissa >> 13);
    if (mantissa & 0x1000) half++; /* round half up */
    return (uint16_t)half;
}

/* Tensor t's values written to f in blocks (one fwrite per value took most of the tool's time: 100 million
 * calls for a 0.5B model), the same values in the same order as one at a time. */
static void write_values(FILE *f, const char *path, const tensor_spec *t, int half) {
    enum { BLOCK = 16384 };
    static union {
        int64_t i64[BLOCK];
        float f32[BLOCK];
        uint16_t f16[BLOCK];
    } block;
    size_t n = elements_of(t), size = t->is_i64 ? 8 : half ? 2 : 4;
    for (size_t start = 0; start < n; start += BLOCK) {
        size_t count = n - start < BLOCK ? n - start : BLOCK;
        for (size_t j = 0; j < count; j++) {
            if (t->is_i64) {
                block.i64[j] = (int64_t)(start + j);
                continue;
            }
            float value = t->how == FILL_NORMAL ? normal() * t->value
                          : t->how == FILL_ONES ? 1.0f
                          : t->how == FILL_CONSTANT ? t->value
                                                    : 0.0f;
            if (half)
                block.f16[j] = to_f16(value);
            else
                block.f32[j] = value;
        }
        if (fwrite(&block, size, count, f) != count) die("%s: write failed", path);
    }
}

/* Writes tensors first .. end-1 of l to path, their values made as they are written (nothing held: a model of
 * several GB streams through a small buffer). */
static void write_safetensors(const char *path, const spec_list *l, size_t first, size_t end, int half) {
    cJSON *header = cJSON_CreateObject();
    cJSON *metadata = cJSON_AddObjectToObject(header, "__metadata__");
    cJSON_AddStringToObject(metadata, "format", "pt");
    size_t offset = 0;
    for (size_t i = first; i < end; i++) {
        const tensor_spec *t = &l->items[i];
        size_t bytes = elements_of(t) * (t->is_i64 ? 8 : half ? 2 : 4);
        cJSON *entry = cJSON_AddObjectToObject(header, t->name);
        cJSON_AddStringToObject(entry, "dtype", t->is_i64 ? "I64" : half ? "F16" : "F32");
        cJSON *shape = cJSON_AddArrayToObject(entry, "shape");
        for (int d = 0; d < t->rank; d++) cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)t->shape[d]));
        cJSON *offsets = cJSON_AddArrayToObject(entry, "data_offsets");
        cJSON_AddItemToArray(offsets, cJSON_CreateNumber((double)offset));
        cJSON_AddItemToArray(offsets, cJSON_CreateNumber((double)(offset + bytes)));
        offset += bytes;
    }
    char *text = cJSON_PrintUnformatted(header);
    size_t length = strlen(text), padded = (length + 7) & ~(size_t)7;
    FILE *f = fopen(path, "wb");
    if (!f) die("%s: %s", path, strerror(errno));
    uint8_t size_bytes[8];
    for (int i = 0; i < 8; i++) size_bytes[i] = (uint8_t)((uint64_t)padded >> (8 * i));
    fwrite(size_bytes, 1, 8, f);
    fwrite(text, 1, length, f);
    for (size_t i = length; i < padded; i++) fputc(' ', f);
    free(text);
    cJSON_Delete(header);
    for (size_t i = first; i < end; i++) write_values(f, path, &l->items[i], half);
    if (fclose(f) != 0) die("%s: write failed", path);
}

/* The weights as one model.safetensors, or in `shards` files model-0000N-of-0000M.safetensors of about equal
 * size with the model.safetensors.index.json that maps each tensor to its file, as the hub shards them. */
static void write_weights(const char *folder, const spec_list *l, int half, size_t shards) {
    if (shards <= 1) {
        char *path = file_join(folder, "model.safetensors");
        write_safetensors(path, l, 0, l->count, half);
        free(path);
        return;
    }
    size_t total = 0, first = 0, done = 0;
    for (size_t i = 0; i < l->count; i++) total += elements_of(&l->items[i]);
    cJSON *index = cJSON_CreateObject(), *map = cJSON_CreateObject();
    cJSON_AddItemToObject(cJSON_AddObjectToObject(index, "metadata"), "total_size",
                          cJSON_CreateNumber((double)total * (half ? 2 : 4)));
    cJSON_AddItemToObject(index, "weight_map", map);
    for (size_t shard = 0; shard < shards; shard++) {
        size_t end = first;
        while (end < l->count && (shard == shards - 1 || done < total / shards * (shard + 1)))
            done += elements_of(&l->items[end++]);
        char name[64];
        snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", shard + 1, shards);
        for (size_t i = first; i < end; i++) cJSON_AddStringToObject(map, l->items[i].name, name);
        char *path = file_join(folder, name);
        write_safetensors(path, l, first, end, half);
        free(path);
        first = end;
    }
    char *text = cJSON_Print(index);
    write_text(folder, "model.safetensors.index.json", text);
    free(text);
    cJSON_Delete(index);
}


static const char usage[] =
    "Usage: glimpse-make-model CONFIG.json OUTPUT_FOLDER [--f16 | --f32] [--shards N] [--seed N] [--layers N]\n"
    "Writes a snapshot folder with random weights shaped as CONFIG describes\n"
    "(e.g. ../shared/configs/openai--clip-vit-base-patch32.json), with the\n"
    "published tensor names, plus tokenizer and preprocessor files of our own.\n"
    "Float16 with --f16 or where CONFIG's torch_dtype is float16 (Salesforce/blip2-opt-2.7b,\n"
    "the LLaVA and Florence-2 checkpoints), unless --f32;\n"
    "--shards N writes N files and model.safetensors.index.json, as the hub shards large\n"
    "models (BLIP-2's default: 2). --layers N keeps at most N layers in every stack (and\n"
    "N blocks in every DaViT stage), config.json saying so: the published widths, vocabularies\n"
    "and picture sizes in a model that loads and runs quickly. Values are made as they are\n"
    "written: memory stays small whatever the model's size.\n";

typedef struct options {
    const char *config_path, *folder;
    int precision; /* 0: the config's torch_dtype; 16 or 32 */
    long shards;   /* 0: the family's default */
    long layers;   /* 0: as the config says */
} options;

static options parse_arguments(int argc, char **argv) {
    options o = {0};
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--f16") == 0 || strcmp(argv[i], "--f32") == 0) {
            o.precision = argv[i][3] == '1' ? 16 : 32;
        } else if ((strcmp(argv[i], "--shards") == 0 || strcmp(argv[i], "--layers") == 0) && i + 1 < argc) {
            long *value = argv[i][2] == 's' ? &o.shards : &o.layers;
            *value = strtol(argv[i + 1], NULL, 10);
            if (*value < 1 || *value > 99999) die("%s takes 1 to 99999", argv[i]);
            i++;
        } else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
            rng_state = strtoull(argv[++i], NULL, 10) * 0x9e3779b97f4a7c15ull + 1;
        } else if (strcmp(argv[i], "--help") == 0) {
            fputs(usage, stdout);
            exit(0);
        } else if (!o.config_path) {
            o.config_path = argv[i];
        } else if (!o.folder) {
            o.folder = argv[i];
        } else {
            die("unexpected argument '%s'\n%s", argv[i], usage);
        }
    }
    if (!o.config_path || !o.folder) die("need a config and an output folder\n%s", usage);
    return o;
}

/* --layers: every layer count of json and its sub-configs (num_hidden_layers, encoder_layers, decoder_layers,
 * n_layer, DaViT's depths) at most `most`; a text_config, vision_config ... naming none given num_hidden_layers. */
static void cap_layers(cJSON *json, int most) {
    static const char *const keys[] = {"num_hidden_layers", "encoder_layers", "decoder_layers", "n_layer", "depths"};
    size_t key_count = sizeof keys / sizeof keys[0], named = 0;
    for (size_t k = 0; k < key_count; k++) named += cJSON_HasObjectItem(json, keys[k]);
    const char *suffix = json->string ? strstr(json->string, "_config") : NULL;
    if (!named && suffix && !suffix[7]) { /* a sub-config relying on its class's count: 12 or more in all of them */
        if (most > 12) die("--layers above 12 needs %s to name its layer count", json->string);
        cJSON_AddNumberToObject(json, "num_hidden_layers", most);
    }
    cJSON *item;
    cJSON_ArrayForEach(item, json) {
        if (cJSON_IsObject(item)) cap_layers(item, most);
        int counted = 0;
        for (size_t k = 0; k < key_count; k++) counted |= item->string && !strcmp(item->string, keys[k]);
        if (!counted) continue;
        for (cJSON *count = cJSON_IsArray(item) ? item->child : item; count; count = cJSON_IsArray(item) ? count->next : NULL)
            if (cJSON_IsNumber(count) && count->valueint > most) cJSON_SetNumberValue(count, most);
    }
}

/* The tensors of architecture's model (CONFIG's sizes) and its tokenizer and preprocessor files; *shards set to
 * the family's default if 0. */
static void write_family(const char *architecture, const cJSON *config, const char *folder, spec_list *tensors,
                         long *shards) {
    const cJSON *t = cJSON_GetObjectItem(config, "text_config"), *v = cJSON_GetObjectItem(config, "vision_config");
    if (strcmp(architecture, "CLIPModel") == 0) {
        clip_tensors(tensors, config);
        write_clip_tokenizer(folder, get_int(t, "vocab_size", 49408));
        write_clip_preprocessor(folder, get_int(v, "image_size", 224));
    } else if (strcmp(architecture, "BlipForConditionalGeneration") == 0 ||
               strcmp(architecture, "BlipForImageTextRetrieval") == 0) {
        if (strcmp(architecture, "BlipForConditionalGeneration") == 0)
            blip_caption_tensors(tensors, config);
        else
            blip_retrieval_tensors(tensors, config);
        write_bert_tokenizer(folder, get_int(t, "vocab_size", 30524));
        write_blip_preprocessor(folder, get_int(v, "image_size", 384));
    } else if (strcmp(architecture, "SiglipModel") == 0) {
        siglip_tensors(tensors, config);
        write_siglip_tokenizer(folder);
        int image = get_int(v, "image_size", 224);
        char preprocessor[1024];
        snprintf(preprocessor, sizeof preprocessor,
                 "{\"do_normalize\": true, \"do_rescale\": true, \"do_resize\": true, "
                 "\"image_mean\": [0.5, 0.5, 0.5], \"image_std\": [0.5, 0.5, 0.5], "
                 "\"image_processor_type\": \"SiglipImageProcessor\", \"processor_class\": \"SiglipProcessor\", "
                 "\"resample\": 3, \"rescale_factor\": 0.00392156862745098, "
                 "\"size\": {\"height\": %d, \"width\": %d}}\n",
                 image, image);
        write_text(folder, "preprocessor_config.json", preprocessor);
    } else if (strcmp(architecture, "Blip2ForConditionalGeneration") == 0) {
        blip2_tensors(tensors, config);
        write_opt_tokenizer(folder);
        write_blip_preprocessor(folder, get_int(v, "image_size", 224));
        if (!*shards) *shards = 2; /* Salesforce/blip2-opt-2.7b's two files */
    } else if (strcmp(architecture, "VisionEncoderDecoderModel") == 0) {
        vit_gpt2_tensors(tensors, config);
        write_gpt2_tokenizer(folder, get_int(cJSON_GetObjectItem(config, "decoder"), "vocab_size", 50257));
        int image = get_int(cJSON_GetObjectItem(config, "encoder"), "image_size", 224);
        char preprocessor[1024];
        snprintf(preprocessor, sizeof preprocessor,
                 "{\"do_normalize\": true, \"do_rescale\": true, \"do_resize\": true, "
                 "\"image_mean\": [0.5, 0.5, 0.5], \"image_std\": [0.5, 0.5, 0.5], "
                 "\"image_processor_type\": \"ViTImageProcessor\", \"resample\": 2, "
                 "\"rescale_factor\": 0.00392156862745098, \"size\": {\"height\": %d, \"width\": %d}}\n",
                 image, image);
        write_text(folder, "preprocessor_config.json", preprocessor);
    } else if (strcmp(architecture, "LlavaForConditionalGeneration") == 0) {
        llava_tensors(tensors, config);
        write_llava_files(folder, config);
    } else if (strcmp(architecture, "Florence2ForConditionalGeneration") == 0) {
        florence2_tensors(tensors, config);
        write_florence2_files(folder, config);
    } else {
        die("architecture '%s' is not one this tool writes (CLIPModel, BlipForConditionalGeneration, "
            "BlipForImageTextRetrieval, SiglipModel, VisionEncoderDecoderModel, Blip2ForConditionalGeneration, "
            "LlavaForConditionalGeneration, Florence2ForConditionalGeneration)",
            architecture);
    }
}

int main(int argc, char **argv) {
    options o = parse_arguments(argc, argv);
    uint8_t *bytes;
    size_t size;
    if (file_read_all(o.config_path, 1 << 24, &bytes, &size)) die("%s", glimpse_last_error());
    cJSON *config = cJSON_ParseWithLength((const char *)bytes, size);
    if (!config) die("%s: not JSON", o.config_path);
    if (o.layers) cap_layers(config, (int)o.layers);
    const cJSON *architectures = cJSON_GetObjectItem(config, "architectures");
    const char *architecture = cJSON_GetArrayItem(architectures, 0) ? cJSON_GetArrayItem(architectures, 0)->valuestring : "";
    if (mkdir(o.folder, 0755) != 0 && errno != EEXIST) die("%s: %s", o.folder, strerror(errno));
    spec_list tensors = {0};
    write_family(architecture ? architecture : "", config, o.folder, &tensors, &o.shards);
    const cJSON *dtype = cJSON_GetObjectItem(config, "torch_dtype");
    int half = o.precision ? o.precision == 16 : cJSON_IsString(dtype) && strcmp(dtype->valuestring, "float16") == 0;
    write_weights(o.folder, &tensors, half, o.shards ? (size_t)o.shards : 1);
    /* the published file as it is, or as --layers changed it */
    char *changed = o.layers ? cJSON_Print(config) : NULL;
    char *config_out = file_join(o.folder, "config.json");
    FILE *f = fopen(config_out, "wb");
    if (!f) die("%s: %s", config_out, strerror(errno));
    if (changed) fprintf(f, "%s\n", changed);
    else fwrite(bytes, 1, size, f);
    if (fclose(f) != 0) die("%s: write failed", config_out);
    free(config_out), free(changed);
    size_t parameters = 0;
    for (size_t i = 0; i < tensors.count; i++)
        if (!tensors.items[i].is_i64) parameters += elements_of(&tensors.items[i]);
    printf("wrote %s: %s, %zu tensors, %zu parameters (%s)\n", o.folder, architecture, tensors.count, parameters,
           half ? "F16" : "F32");
    free(tensors.items);
    free(bytes);
    cJSON_Delete(config);
    return 0;
}
