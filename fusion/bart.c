/* bart.c — bart.h: BART's config, its two halves loaded as BERT models, the encoder pass and the search
 * settings of its config. The layers' maths is fusion/bert.c's. */
#include "fusion/bart.h"

#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "weights/config.h"

/* One side's sizes: layers, heads and feed-forward width under PREFIX_layers and so on. */
static glimpse_status read_side(const cJSON *json, const char *where, const char *side, int hidden,
                                bert_config *out) {
    char key[64];
    glimpse_status status;
    snprintf(key, sizeof key, "%s_layers", side);
    if ((status = config_int_or(json, where, key, 1, CONFIG_MAX_LAYERS, 12, &out->layers))) return status;
    snprintf(key, sizeof key, "%s_attention_heads", side);
    if ((status = config_int_or(json, where, key, 1, CONFIG_MAX_HEADS, 16, &out->heads))) return status;
    snprintf(key, sizeof key, "%s_ffn_dim", side);
    if ((status = config_int_or(json, where, key, 1, CONFIG_MAX_INTERMEDIATE, 4096, &out->intermediate_size)))
        return status;
    if (hidden % out->heads)
        return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: d_model %d is not a multiple of %s_attention_heads %d",
                         where, hidden, side, out->heads);
    out->hidden_size = out->encoder_hidden_size = hidden;
    out->layer_norm_eps = 1e-5f; /* torch.nn.LayerNorm's default, which BART's layers keep */
    return GLIMPSE_STATUS_OK;
}

/* Settings BART's structure depends on that glimpse does not run: refused by name. */
static glimpse_status refuse_variants(const cJSON *json, const char *where) {
    static const char *const refused[] = {"scale_embedding", "normalize_before", "add_final_layer_norm",
                                          "add_bias_logits"};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        int on;
        glimpse_status status = config_bool_or(json, where, refused[i], 0, &on);
        if (status) return status;
        if (on) return error_set(GLIMPSE_STATUS_UNSUPPORTED, "%s: %s true is not supported", where, refused[i]);
    }
    return GLIMPSE_STATUS_OK;
}

/* A token id field: -1 when null or absent and fallback is -1. */
static glimpse_status read_token(const cJSON *json, const char *where, const char *key, int vocab, int fallback,
                                 int *out) {
    return config_int_or(json, where, key, -1, vocab - 1, fallback, out);
}

static glimpse_status read_generation(const cJSON *json, const char *where, int vocab, bart_generation *g) {
    glimpse_status status;
    double penalty;
    if ((status = read_token(json, where, "decoder_start_token_id", vocab, 2, &g->start_id)) ||
        (status = read_token(json, where, "bos_token_id", vocab, 0, &g->bos_id)) ||
        (status = read_token(json, where, "eos_token_id", vocab, 2, &g->eos_id)) ||
        (status = read_token(json, where, "pad_token_id", vocab, 1, &g->pad_id)) ||
        (status = read_token(json, where, "forced_bos_token_id", vocab, -1, &g->forced_bos_id)) ||
        (status = read_token(json, where, "forced_eos_token_id", vocab, 2, &g->forced_eos_id)) ||
        (status = config_int_or(json, where, "no_repeat_ngram_size", 0, 64, 0, &g->no_repeat_ngram)) ||
        (status = config_int_or(json, where, "num_beams", 1, GLIMPSE_CAPTION_MAX_BEAMS, 1, &g->beams)) ||
        (status = config_int_or(json, where, "max_length", 1, CONFIG_MAX_POSITIONS, 20, &g->max_length)) ||
        (status = config_int_or(json, where, "min_length", 0, CONFIG_MAX_POSITIONS, 0, &g->min_length)) ||
        (status = config_bool_or(json, where, "early_stopping", 0, &g->early_stopping)) ||
        (status = config_double_or(json, where, "length_penalty", 1.0, &penalty)))
        return status;
    if (g->start_id < 0 || g->eos_id < 0)
        return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: decoder_start_token_id and eos_token_id must be ids", where);
    g->length_penalty = (float)penalty;
    return GLIMPSE_STATUS_OK;
}

glimpse_status bart_config_read(const cJSON *json, const char *where, bart_config *c) {
    memset(c, 0, sizeof *c);
    int hidden, vocab, positions;
    const char *act_name;
    activation act;
    glimpse_status status;
    if ((status = refuse_variants(json, where)) ||
        (status = config_int_or(json, where, "d_model", 1, CONFIG_MAX_WIDTH, 1024, &hidden)) ||
        (status = config_int_or(json, where, "vocab_size", 1, CONFIG_MAX_VOCABULARY, 50265, &vocab)) ||
        (status = config_int_or(json, where, "max_position_embeddings", 1, CONFIG_MAX_POSITIONS, 1024, &positions)) ||
        (status = config_string_or(json, where, "activation_function", "gelu", &act_name)))
        return status;
    if (!activation_from_name(act_name, &act))
        return error_set(GLIMPSE_STATUS_UNSUPPORTED, "%s: activation_function \"%s\" is not supported", where,
                         act_name);
    if ((status = read_side(json, where, "encoder", hidden, &c->encoder)) ||
        (status = read_side(json, where, "decoder", hidden, &c->decoder)))
        return status;
    bert_config *sides[] = {&c->encoder, &c->decoder};
    for (int i = 0; i < 2; i++) {
        sides[i]->vocab_size = vocab, sides[i]->max_positions = positions;
        sides[i]->act = act, sides[i]->act_name = act_name;
    }
    return read_generation(json, where, vocab, &c->generation);
}

glimpse_status bart_model_load(bart_model *model, const bart_config *config, const bart_names *names,
                               weight_store *store) {
    memset(model, 0, sizeof *model);
    glimpse_status status = bert_model_load(&model->encoder, &config->encoder, &names->encoder, store);
    if (!status) status = bert_model_load(&model->decoder, &config->decoder, &names->decoder, store);
    if (status) bart_model_free(model);
    return status;
}

void bart_model_free(bart_model *model) {
    bert_model_free(&model->encoder);
    bert_model_free(&model->decoder);
}

glimpse_status bart_embed_tokens(const bart_model *model, const int32_t *ids, size_t count, float *out) {
    const bert_config *c = &model->encoder.config;
    return caption_embed_ids(out, &model->encoder.word_embeddings, (size_t)c->hidden_size, c->vocab_size, ids, count);
}

glimpse_status bart_encoder_state_create(const bart_model *model, size_t max_length, bert_state **out) {
    if (max_length > (size_t)model->encoder.config.max_positions)
        return error_set(GLIMPSE_STATUS_TOO_LARGE, "%zu encoder positions is more than BART's %d", max_length,
                         model->encoder.config.max_positions);
    return bert_state_create(&model->encoder, 1, max_length, max_length, 1, out);
}

glimpse_status bart_encode(const bart_model *model, bert_state *state, const float *inputs, size_t length,
                           pool *threads) {
    const bert_model *encoder = &model->encoder;
    size_t h = (size_t)encoder->config.hidden_size;
    if (length > state->max_length)
        return error_set(GLIMPSE_STATUS_TOO_LARGE, "%zu encoder rows is more than the %zu this state holds", length,
                         state->max_length);
    /* inputs_embeds + embed_positions(2 + i), into the state's rows; bert_encode_embedded normalises in place */
    for (size_t i = 0; i < length; i++)
        for (size_t d = 0; d < h; d++)
            state->x[i * h + d] = inputs[i * h + d] + encoder->position_embeddings[i * h + d];
    return bert_encode_embedded(encoder, state, state->x, length, 0, threads);
}

caption_settings bart_caption_settings(const bart_generation *g, size_t max_length, size_t min_length, int beams,
                                       float length_penalty) {
    return (caption_settings){.max_length = max_length,
                              .min_length = min_length,
                              .beams = beams,
                              .length_penalty = length_penalty,
                              .repetition_penalty = 1.0f,
                              .end_id = g->eos_id,
                              .pad_id = g->pad_id,
                              .no_repeat_ngram = g->no_repeat_ngram,
                              .force_bos = g->forced_bos_id >= 0,
                              .forced_bos_id = g->forced_bos_id,
                              .force_eos = g->forced_eos_id >= 0,
                              .forced_eos_id = g->forced_eos_id,
                              .early_stopping = g->early_stopping,
                              .score_generated = true};
}
