/* names_blip.c — the tensor names of BLIP checkpoints
 * (Salesforce/blip-image-captioning-*, blip-itm-*): the vision tower, the
 * BERT text decoder (captioning) or text encoder (retrieval), both with
 * cross-attention, and the ITM/ITC heads. Names only; what they mean is in
 * weights/names.h. */
#include "weights/names.h"

/* BlipEncoderLayer: pre-LN, q | k | v in one projection. */
static const encoder_layer_names vision_layer = {
    .norm1 = "layer_norm1",
    .qkv = "self_attn.qkv", .out = "self_attn.projection",
    .norm2 = "layer_norm2",
    .fc1 = "mlp.fc1", .fc2 = "mlp.fc2",
};

/* BlipTextModel, a BERT whose layers cross-attend to the image, below its prefix; and BlipTextLMPredictionHead. */
static const bert_layout text_model = {
    .word_embeddings = "embeddings.word_embeddings.weight",
    .position_embeddings = "embeddings.position_embeddings.weight",
    .embedding_norm = "embeddings.LayerNorm",
    .layers = "encoder.layer",
    .layer = {
        .query = "attention.self.query", .key = "attention.self.key", .value = "attention.self.value",
        .self_out = "attention.output.dense", .self_norm = "attention.output.LayerNorm",
        .cross_query = "crossattention.self.query", .cross_key = "crossattention.self.key",
        .cross_value = "crossattention.self.value",
        .cross_out = "crossattention.output.dense", .cross_norm = "crossattention.output.LayerNorm",
        .intermediate = "intermediate.dense", .output = "output.dense", .output_norm = "output.LayerNorm",
    },
    .head_dense = "transform.dense", .head_norm = "transform.LayerNorm",
    .head_decoder_weight = "decoder.weight", .head_decoder_bias = "decoder.bias", .head_bias = "bias",
};

const blip_names names_blip = {
    .vision = {
        .patch_weight = "vision_model.embeddings.patch_embedding.weight",
        .patch_bias = "vision_model.embeddings.patch_embedding.bias",
        .class_embedding = "vision_model.embeddings.class_embedding",
        .position_embedding = "vision_model.embeddings.position_embedding", /* a parameter, not an embedding */
        .layers = "vision_model.encoder.layers", .layer = &vision_layer,
        .post_norm = "vision_model.post_layernorm",
    },
    .text_decoder = {.model = "text_decoder.bert", .head = "text_decoder.cls.predictions", .layout = &text_model},
    .text_encoder = {.model = "text_encoder", .layout = &text_model},
    .itm = {.vision_proj = "vision_proj", .text_proj = "text_proj", .itm_head = "itm_head"},
    .retrieval_only = "itm_head.weight",
};
