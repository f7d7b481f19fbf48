/* names_clip.c — the tensor names of CLIPModel checkpoints (openai/clip-vit-*,
 * laion/CLIP-ViT-*): the vision tower, the text tower, their projections and
 * logit_scale. Names only; what they mean is in weights/names.h. */
#include "weights/names.h"

/* CLIPEncoderLayer, the same in both towers: pre-LN, separate q, k, v (SigLIP's layers too). */
const encoder_layer_names names_clip_layer = {
    .norm1 = "layer_norm1",
    .q = "self_attn.q_proj", .k = "self_attn.k_proj", .v = "self_attn.v_proj", .out = "self_attn.out_proj",
    .norm2 = "layer_norm2",
    .fc1 = "mlp.fc1", .fc2 = "mlp.fc2",
};

const clip_names names_clip = {
    .vision = {
        .patch_weight = "vision_model.embeddings.patch_embedding.weight", /* a convolution without bias */
        .class_embedding = "vision_model.embeddings.class_embedding",
        .position_embedding = "vision_model.embeddings.position_embedding.weight",
        .pre_norm = "vision_model.pre_layrnorm", /* sic */
        .layers = "vision_model.encoder.layers", .layer = &names_clip_layer,
        .post_norm = "vision_model.post_layernorm",
        .projection = "visual_projection",
    },
    .text = {
        .token_embedding = "text_model.embeddings.token_embedding.weight",
        .position_embedding = "text_model.embeddings.position_embedding.weight",
        .layers = "text_model.encoder.layers", .layer = &names_clip_layer,
        .final_norm = "text_model.final_layer_norm",
        .projection = "text_projection",
    },
    .logit_scale = "logit_scale",
};
