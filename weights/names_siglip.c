/* names_siglip.c — the tensor names of SiglipModel checkpoints
 * (google/siglip-base-patch16-*, -large-patch16-*, -so400m-patch14-384):
 * the vision tower with its attention-pooling head, the text tower with its
 * `head`, logit_scale and logit_bias. Names only; what they mean is in
 * weights/names.h. */
#include "weights/names.h"

/* SiglipEncoderLayer names its tensors as CLIPEncoderLayer does: names_clip_layer. */

/* SiglipMultiheadAttentionPoolingHead. */
static const attention_pool_names siglip_head = {
    .probe = "probe",
    .in_proj_weight = "attention.in_proj_weight", .in_proj_bias = "attention.in_proj_bias",
    .out_proj = "attention.out_proj",
    .norm = "layernorm",
    .fc1 = "mlp.fc1", .fc2 = "mlp.fc2",
};

const siglip_names names_siglip = {
    .vision = {
        .patch_weight = "vision_model.embeddings.patch_embedding.weight",
        .patch_bias = "vision_model.embeddings.patch_embedding.bias",
        .position_embedding = "vision_model.embeddings.position_embedding.weight", /* no class token */
        .layers = "vision_model.encoder.layers", .layer = &names_clip_layer,
        .post_norm = "vision_model.post_layernorm",
        .head = "vision_model.head", .head_names = &siglip_head,
    },
    .text = {
        .token_embedding = "text_model.embeddings.token_embedding.weight",
        .position_embedding = "text_model.embeddings.position_embedding.weight",
        .layers = "text_model.encoder.layers", .layer = &names_clip_layer,
        .final_norm = "text_model.final_layer_norm",
        .projection = "text_model.head",
    },
    .logit_scale = "logit_scale",
    .logit_bias = "logit_bias",
};
