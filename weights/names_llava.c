/* names_llava.c — the tensor names of LlavaForConditionalGeneration checkpoints (llava-hf/llava-1.5-*-hf,
 * llava-hf/llava-interleave-qwen-*-hf) in both layouts transformers has saved, and of the Llama / Qwen2 decoder
 * inside (LlamaForCausalLM's names, which Qwen2ForCausalLM shares). Names only; what they mean is in
 * weights/names.h. */
#include "weights/names.h"

const llama_names names_llama = {
    .embed_tokens = "embed_tokens.weight",
    .layers = "layers",
    .layer = {
        .input_norm = "input_layernorm", .post_attention_norm = "post_attention_layernorm",
        .q = "self_attn.q_proj", .k = "self_attn.k_proj", .v = "self_attn.v_proj", .o = "self_attn.o_proj",
        .gate = "mlp.gate_proj", .up = "mlp.up_proj", .down = "mlp.down_proj",
    },
    .final_norm = "norm",
    .lm_head = "lm_head.weight",
};

/* The vision tower below PREFIX: CLIP's (class token, pre_layrnorm, patches without bias) or SigLIP's. */
#define LLAVA_CLIP_VISION(PREFIX)                                                                           \
    {                                                                                                       \
        .patch_weight = PREFIX "vision_model.embeddings.patch_embedding.weight",                            \
        .class_embedding = PREFIX "vision_model.embeddings.class_embedding",                                \
        .position_embedding = PREFIX "vision_model.embeddings.position_embedding.weight",                   \
        .pre_norm = PREFIX "vision_model.pre_layrnorm", /* sic */                                           \
        .layers = PREFIX "vision_model.encoder.layers", .layer = &names_clip_layer,                         \
    }
#define LLAVA_SIGLIP_VISION(PREFIX)                                                                         \
    {                                                                                                       \
        .patch_weight = PREFIX "vision_model.embeddings.patch_embedding.weight",                            \
        .patch_bias = PREFIX "vision_model.embeddings.patch_embedding.bias",                                \
        .position_embedding = PREFIX "vision_model.embeddings.position_embedding.weight",                   \
        .layers = PREFIX "vision_model.encoder.layers", .layer = &names_clip_layer,                         \
    }

/* Both towers below PREFIX, and PREFIX itself (the tower's pages are given back by it). */
#define LLAVA_VISION(PREFIX)                                                                                \
    .clip_vision = LLAVA_CLIP_VISION(PREFIX), .siglip_vision = LLAVA_SIGLIP_VISION(PREFIX), .vision = PREFIX

const llava_names names_llava[2] = {
    {
        LLAVA_VISION("vision_tower."),
        .projector_1 = "multi_modal_projector.linear_1", .projector_2 = "multi_modal_projector.linear_2",
        .language_model = "language_model.model.", .head = "language_model.",
        .text = &names_llama,
    },
    {
        LLAVA_VISION("model.vision_tower."),
        .projector_1 = "model.multi_modal_projector.linear_1", .projector_2 = "model.multi_modal_projector.linear_2",
        .language_model = "model.language_model.", .head = "",
        .text = &names_llama,
    },
};
