/* names_florence2.c — the tensor names of Florence-2 checkpoints (microsoft/Florence-2-base, -large, and the
 * fine-tunes saved from them): the DaViT vision tower, the image projection with its 2-D and temporal position
 * embeddings, and BART's encoder and decoder sharing one embedding table. Names only; what they mean is in
 * weights/names.h. */
#include "weights/names.h"

/* BART's layers: post-LayerNorm, q/k/v/out projections with biases; the decoder's also attend to the encoder. */
#define BART_SELF_ATTENTION                                                                                       \
    .query = "self_attn.q_proj", .key = "self_attn.k_proj", .value = "self_attn.v_proj",                       \
    .self_out = "self_attn.out_proj", .self_norm = "self_attn_layer_norm", .intermediate = "fc1", .output = "fc2", \
    .output_norm = "final_layer_norm"

static const bert_layout bart_encoder = {
    .word_embeddings = "shared.weight",
    .position_embeddings = "encoder.embed_positions.weight",
    .position_offset = 2,
    .embedding_norm = "encoder.layernorm_embedding",
    .layers = "encoder.layers",
    .layer = {BART_SELF_ATTENTION},
};

static const bert_layout bart_decoder = {
    .word_embeddings = "shared.weight",
    .position_embeddings = "decoder.embed_positions.weight",
    .position_offset = 2,
    .embedding_norm = "decoder.layernorm_embedding",
    .layers = "decoder.layers",
    .layer = {BART_SELF_ATTENTION, .cross_query = "encoder_attn.q_proj", .cross_key = "encoder_attn.k_proj",
              .cross_value = "encoder_attn.v_proj", .cross_out = "encoder_attn.out_proj",
              .cross_norm = "encoder_attn_layer_norm"},
    .head_decoder_weight = "lm_head.weight",
    .head_bias = "final_logits_bias",
};

/* The blocks of a DaViT stage: each module wrapped as PreNorm / Residual (".fn"), MLP's layers in ".net". */
#define DAVIT_BLOCK(attention)                                                                                    \
    {.conv1 = "conv1.fn.dw", .attention_norm = attention ".norm", .qkv = attention ".fn.qkv",                   \
     .proj = attention ".fn.proj", .conv2 = "conv2.fn.dw", .ffn_norm = "ffn.norm", .fc1 = "ffn.fn.net.fc1",     \
     .fc2 = "ffn.fn.net.fc2"}

const florence2_names names_florence2 = {
    .vision = {
        .convs = "vision_tower.convs", .conv = "proj", .conv_norm = "norm",
        .blocks = "vision_tower.blocks", .spatial = "spatial_block", .channel = "channel_block",
        .spatial_block = DAVIT_BLOCK("window_attn"),
        .channel_block = DAVIT_BLOCK("channel_attn"),
    },
    .column_embeddings = "image_pos_embed.column_embeddings.weight",
    .row_embeddings = "image_pos_embed.row_embeddings.weight",
    .temporal_embeddings = "visual_temporal_embed.pos_idx_to_embed",
    .image_projection = "image_projection",
    .image_projection_norm = "image_proj_norm",
    .language = {
        .encoder = {.model = "language_model.model", .layout = &bart_encoder},
        .decoder = {.model = "language_model.model", .head = "language_model", .layout = &bart_decoder},
    },
};
