/* names_vit_gpt2.c — the tensor names of VisionEncoderDecoderModel
 * checkpoints with a ViT encoder and a GPT-2 decoder
 * (nlpconnect/vit-gpt2-image-captioning). Names only; what they mean is in
 * weights/names.h. GPT-2's buffers (attn.bias, masked_bias) are not read. */
#include "weights/names.h"

/* ViTLayer: pre-LN, separate q, k, v with biases. */
static const encoder_layer_names vit_layer = {
    .norm1 = "layernorm_before",
    .q = "attention.attention.query", .k = "attention.attention.key", .v = "attention.attention.value",
    .out = "attention.output.dense",
    .norm2 = "layernorm_after",
    .fc1 = "intermediate.dense", .fc2 = "output.dense",
};

const vit_gpt2_names names_vit_gpt2 = {
    .encoder = {
        .patch_weight = "encoder.embeddings.patch_embeddings.projection.weight",
        .patch_bias = "encoder.embeddings.patch_embeddings.projection.bias",
        .class_embedding = "encoder.embeddings.cls_token",
        .position_embedding = "encoder.embeddings.position_embeddings",
        .layers = "encoder.encoder.layer", .layer = &vit_layer,
        .post_norm = "encoder.layernorm",
    },
    .decoder = {
        .token_embedding = "decoder.transformer.wte.weight",
        .position_embedding = "decoder.transformer.wpe.weight",
        .layers = "decoder.transformer.h",
        .layer = {
            .norm1 = "ln_1",
            .qkv = "attn.c_attn", .out = "attn.c_proj",
            .cross_norm = "ln_cross_attn",
            .cross_query = "crossattention.q_attn", .cross_kv = "crossattention.c_attn",
            .cross_out = "crossattention.c_proj",
            .norm2 = "ln_2",
            .fc1 = "mlp.c_fc", .fc2 = "mlp.c_proj",
        },
        .final_norm = "decoder.transformer.ln_f",
        .head = "decoder.lm_head.weight",
    },
    .encoder_to_decoder = "enc_to_dec_proj",
};
