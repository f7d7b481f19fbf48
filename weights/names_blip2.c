/* names_blip2.c — the tensor names of BLIP-2 checkpoints with OPT
 * (Salesforce/blip2-opt-2.7b and the like): BLIP's vision tower names, the
 * Q-Former, the language projection and OPT's decoder. Names only; what they
 * mean is in weights/names.h. */
#include "weights/names.h"

/* Blip2QFormerLayer: BERT's layer with the attention below "attention.attention" and, for the query tokens,
 * the intermediate_query / output_query feed-forward (the text one, intermediate / output, is not used). */
static const bert_layout qformer = {
    .embedding_norm = "layernorm",
    .layers = "encoder.layer",
    .layer = {
        .query = "attention.attention.query", .key = "attention.attention.key", .value = "attention.attention.value",
        .self_out = "attention.output.dense", .self_norm = "attention.output.LayerNorm",
        .cross_query = "crossattention.attention.query", .cross_key = "crossattention.attention.key",
        .cross_value = "crossattention.attention.value",
        .cross_out = "crossattention.output.dense", .cross_norm = "crossattention.output.LayerNorm",
        .intermediate = "intermediate_query.dense", .output = "output_query.dense",
        .output_norm = "output_query.LayerNorm",
    },
};

/* OPTDecoderLayer: pre-LN (do_layer_norm_before) with separate q, k, v. */
static const encoder_layer_names opt_layer = {
    .norm1 = "self_attn_layer_norm",
    .q = "self_attn.q_proj", .k = "self_attn.k_proj", .v = "self_attn.v_proj", .out = "self_attn.out_proj",
    .norm2 = "final_layer_norm",
    .fc1 = "fc1", .fc2 = "fc2",
};

const blip2_names names_blip2 = {
    .vision = &names_blip.vision,
    .query_tokens = "query_tokens",
    .qformer = {.model = "qformer", .layout = &qformer},
    .language_projection = "language_projection",
    .language_model = {
        .embed_tokens = "language_model.model.decoder.embed_tokens.weight",
        .embed_positions = "language_model.model.decoder.embed_positions.weight",
        .project_in = "language_model.model.decoder.project_in",
        .project_out = "language_model.model.decoder.project_out",
        .layers = "language_model.model.decoder.layers", .layer = &opt_layer,
        .final_norm = "language_model.model.decoder.final_layer_norm",
        .lm_head = "language_model.lm_head.weight",
    },
};
