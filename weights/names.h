/* names.h — the tensor names of each model family's checkpoints, one table
 * per family (weights/names_<family>.c), so that a family's names stand in
 * one place and its loader reads them from there. Names as transformers
 * saves them. A field names a tensor ("...weight", or a bare parameter such
 * as "logit_scale"), a module whose tensors are MODULE.weight and
 * MODULE.bias (LayerNorms, linear layers), or a layer stack whose layer i
 * is STACK.i (a ModuleList); the comments say which. Names are whole, from
 * the checkpoint's root, except inside a layer or head (relative to it) and
 * where a checkpoint holds one part twice below two prefixes (bert_layout).
 * NULL: this family has no such tensor. Strings only: the loaders
 * (vit_model_load, clip_text_model_load, bert_model_load, itm_heads_load)
 * and weights/layers.h read them. Adding a family:
 * docs/adding-a-model-family.md. */
#ifndef GLIMPSE_WEIGHTS_NAMES_H
#define GLIMPSE_WEIGHTS_NAMES_H

#include "weights/layers.h"

/* A ViT image tower (vision/vit.h): CLIP's, BLIP's and SigLIP's vision_model. */
typedef struct vit_names {
    const char *patch_weight;       /* tensor [hidden, channels, patch, patch] */
    const char *patch_bias;         /* tensor [hidden], or NULL */
    const char *class_embedding;    /* tensor [hidden] (CLIP) or [1, 1, hidden] (BLIP), or NULL: no class token */
    const char *position_embedding; /* tensor [tokens, hidden] (CLIP, SigLIP) or [1, tokens, hidden] (BLIP) */
    const char *pre_norm;           /* module, or NULL */
    const char *layers;             /* stack of encoder layers named by `layer` */
    const encoder_layer_names *layer;
    const char *post_norm;  /* module, or NULL: not loaded (LLaVA's towers; vit_pooled and vit_post_norm_all unusable) */
    const char *projection; /* module without bias [projection_dim, hidden], or NULL */
    const char *head;       /* attention-pooling head named by `head_names`, or NULL */
    const attention_pool_names *head_names;
} vit_names;

/* CLIP's and SigLIP's text tower (text/clip_text.h). */
typedef struct clip_text_names {
    const char *token_embedding;    /* tensor [vocab, hidden] */
    const char *position_embedding; /* tensor [max_positions, hidden] */
    const char *layers;             /* stack of encoder layers named by `layer` */
    const encoder_layer_names *layer;
    const char *final_norm; /* module */
    const char *projection; /* module [projection_dim, hidden]: without bias (CLIP), with (SigLIP's head) */
} clip_text_names;

/* A BERT layer with cross-attention (fusion/bert.h's bert_layer), relative
 * to the layer; every field a module. */
typedef struct bert_layer_names {
    const char *query, *key, *value, *self_out, *self_norm;
    const char *cross_query, *cross_key, *cross_value, *cross_out, *cross_norm;
    const char *intermediate, *output, *output_norm;
} bert_layer_names;

/* BLIP's BERT text model (fusion/bert.h) relative to where it stands: a
 * BLIP checkpoint holds two, named alike below their own prefixes (the
 * captioning decoder and the retrieval encoder, bert_names). */
typedef struct bert_layout {
    const char *word_embeddings;     /* tensor [vocab, hidden] */
    const char *position_embeddings; /* tensor [position_offset + max_positions, hidden] */
    size_t position_offset;          /* rows before position 0 (BART's learned positions: 2), else 0 */
    const char *embedding_norm;      /* module */
    const char *layers;              /* stack of layers named by `layer` */
    bert_layer_names layer;
    /* the language-model head, below bert_names.head */
    const char *head_dense, *head_norm; /* modules, or NULL: logits straight from the last layer (BART) */
    const char *head_decoder_weight;    /* tensor [vocab, hidden]; absent: tied to word_embeddings */
    const char *head_decoder_bias;      /* tensor [vocab]; absent: head_bias, which must be there */
    const char *head_bias;              /* tensor [vocab], or [1, vocab] (BART's final_logits_bias) */
} bert_layout;

/* One BERT text model of a checkpoint: model.embeddings.word_embeddings.weight and so on. */
typedef struct bert_names {
    const char *model; /* prefix of the model's names ("text_decoder.bert") */
    const char *head;  /* prefix of the LM head's names, or NULL: none (a text encoder) */
    const bert_layout *layout;
} bert_names;

/* BART (fusion/bart.h): its encoder (no cross-attention, no head) and its decoder (with both) as two BERT
 * models of one checkpoint, each with its own position table and layers, sharing the word embeddings. */
typedef struct bart_names {
    bert_names encoder, decoder;
} bart_names;

/* BLIP's retrieval heads (fusion/itm.h); every field a module. */
typedef struct itm_names {
    const char *vision_proj, *text_proj; /* ITC projections */
    const char *itm_head;                /* [2, text hidden] */
} itm_names;

/* CLIPModel. */
typedef struct clip_names {
    vit_names vision;
    clip_text_names text;
    const char *logit_scale; /* tensor [] (a scalar; exponentiated at load) */
} clip_names;

/* BlipForConditionalGeneration (vision + text_decoder) and
 * BlipForImageTextRetrieval (vision + text_encoder + itm). */
typedef struct blip_names {
    vit_names vision;
    bert_names text_decoder;
    bert_names text_encoder;
    itm_names itm;
    const char *retrieval_only; /* tensor only retrieval checkpoints have: tells the two apart without
                                   "architectures" */
} blip_names;

/* SiglipModel. */
typedef struct siglip_names {
    vit_names vision;
    clip_text_names text;
    const char *logit_scale, *logit_bias; /* tensors [1] (logit_scale exponentiated at load) */
} siglip_names;

/* OPT's decoder (OPTForCausalLM), names whole from the checkpoint's root. */
typedef struct opt_names {
    const char *embed_tokens;    /* tensor [vocab, word_embed_proj_dim] */
    const char *embed_positions; /* tensor [max_positions + 2, hidden] (OPT's offset of 2) */
    const char *project_in, *project_out; /* modules without bias, present when word_embed_proj_dim != hidden */
    const char *layers;          /* stack of pre-LN layers named by `layer` */
    const encoder_layer_names *layer;
    const char *final_norm;      /* module (absent with _remove_final_layer_norm) */
    const char *lm_head;         /* tensor [vocab, word_embed_proj_dim]; absent: tied to embed_tokens */
} opt_names;

/* Blip2ForConditionalGeneration: BLIP's vision tower, the Q-Former (a BERT
 * without word embeddings whose layers cross-attend every
 * cross_attention_frequency-th layer, with the queries' own feed-forward
 * names), the language projection and OPT. */
typedef struct blip2_names {
    const vit_names *vision;
    const char *query_tokens; /* tensor [1, queries, qformer hidden] */
    bert_names qformer;       /* layout: embedding_norm and layers only */
    const char *language_projection; /* module [text hidden, qformer hidden] */
    opt_names language_model;
} blip2_names;

extern const clip_names names_clip; /* weights/names_clip.c */
extern const encoder_layer_names names_clip_layer; /* CLIPEncoderLayer's, which SiglipEncoderLayer shares */
extern const siglip_names names_siglip; /* weights/names_siglip.c */
extern const blip_names names_blip; /* weights/names_blip.c */
extern const blip2_names names_blip2; /* weights/names_blip2.c */

/* A GPT-2 block with cross-attention (fusion/gpt2.h's gpt2_layer), relative
 * to the block. Projections are Conv1D modules: MODULE.weight stored
 * [in, out] (transposed against a Linear's) and MODULE.bias [out]; the
 * norms LayerNorms. */
typedef struct gpt2_layer_names {
    const char *norm1;                  /* ln_1 */
    const char *qkv, *out;              /* attn.c_attn [h, 3h] (q | k | v), attn.c_proj [h, h] */
    const char *cross_norm;             /* ln_cross_attn */
    const char *cross_query, *cross_kv; /* crossattention.q_attn [h, h], crossattention.c_attn [h, 2h] (k | v) */
    const char *cross_out;              /* crossattention.c_proj [h, h] */
    const char *norm2;                  /* ln_2 */
    const char *fc1, *fc2;              /* mlp.c_fc [h, inner], mlp.c_proj [inner, h] */
} gpt2_layer_names;

/* GPT2LMHeadModel (the decoder of a VisionEncoderDecoderModel). */
typedef struct gpt2_names {
    const char *token_embedding;    /* tensor [vocab, h] (wte) */
    const char *position_embedding; /* tensor [positions, h] (wpe) */
    const char *layers;             /* stack of blocks named by `layer` */
    gpt2_layer_names layer;
    const char *final_norm; /* module (ln_f) */
    const char *head;       /* tensor [vocab, h] (lm_head.weight); absent: tied to token_embedding */
} gpt2_names;

/* VisionEncoderDecoderModel with a ViT encoder and a GPT-2 decoder. */
typedef struct vit_gpt2_names {
    vit_names encoder;
    gpt2_names decoder;
    const char *encoder_to_decoder; /* module [decoder h, encoder h] (enc_to_dec_proj): only when the widths differ */
} vit_gpt2_names;

extern const vit_gpt2_names names_vit_gpt2; /* weights/names_vit_gpt2.c */

/* DaViT (vision/davit.h), Florence-2's vision tower: stage s's patch embedding below CONVS.s, its blocks below
 * BLOCKS.s.i, each a spatial block (window attention) and a channel block (channel attention). */
typedef struct davit_block_names {
    const char *conv1;          /* depthwise 3×3 conv module (weight [C, 1, 3, 3], bias [C]) before attention */
    const char *attention_norm; /* LayerNorm module */
    const char *qkv, *proj;     /* modules [3C, C] and [C, C] */
    const char *conv2;          /* depthwise conv module after attention */
    const char *ffn_norm;       /* LayerNorm module */
    const char *fc1, *fc2;      /* modules [4C, C], [C, 4C] */
} davit_block_names;

typedef struct davit_names {
    const char *convs;            /* stack of patch embeddings */
    const char *conv, *conv_norm; /* relative to one: the conv module (weight [C, C_in, k, k], bias) and LayerNorm */
    const char *blocks;           /* stack of stages, each a stack of block pairs */
    const char *spatial, *channel; /* relative to a pair */
    davit_block_names spatial_block, channel_block;
} davit_names;

/* Florence2ForConditionalGeneration: DaViT, the image projection with its position embeddings, and BART. */
typedef struct florence2_names {
    davit_names vision;
    const char *column_embeddings, *row_embeddings; /* tensors [positions, dim / 2] (learned_abs_2d) */
    const char *temporal_embeddings;                 /* tensor [frames, dim]: row 0 is a still picture's */
    const char *image_projection;                    /* tensor [dim, projection_dim], used as x · P */
    const char *image_projection_norm;               /* LayerNorm module */
    bart_names language;
} florence2_names;

extern const florence2_names names_florence2; /* weights/names_florence2.c */
/* A Llama or Qwen2 decoder layer (fusion/llama.h's llama_layer), relative to the layer: norms are tensors
 * (RMSNorm: NAME.weight only), projections modules (NAME.weight, and NAME.bias where the config says). */
typedef struct llama_layer_names {
    const char *input_norm, *post_attention_norm; /* modules: their .weight [hidden] */
    const char *q, *k, *v, *o;                    /* self_attn.q_proj ... */
    const char *gate, *up, *down;                 /* mlp.gate_proj ... */
} llama_layer_names;

/* LlamaForCausalLM / Qwen2ForCausalLM, relative to the prefixes the loader is given (a LLaVA checkpoint holds
 * the model below "language_model.model." or, in newer files, "model.language_model."). */
typedef struct llama_names {
    const char *embed_tokens; /* tensor [vocab, hidden], below the model prefix */
    const char *layers;       /* stack of layers named by `layer`, below the model prefix */
    llama_layer_names layer;
    const char *final_norm;   /* module (RMSNorm), below the model prefix */
    const char *lm_head;      /* tensor [vocab, hidden] below the head prefix; absent: tied to embed_tokens */
} llama_names;

extern const llama_names names_llama; /* weights/names_llava.c */

/* LlavaForConditionalGeneration: a CLIP or SigLIP vision tower (vision_config's model_type says which; its
 * post_layernorm and SigLIP's head NULL: LLaVA reads a hidden layer), the projector and a Llama or Qwen2
 * decoder. Names whole, as one layout of the checkpoint spells them: transformers 4.40's state_dict
 * ("vision_tower.…", "language_model.model.…") or, from 4.52, "model.vision_tower.…", "lm_head.weight". */
typedef struct llava_names {
    vit_names clip_vision, siglip_vision;
    const char *vision;                    /* prefix of every name of the vision tower */
    const char *projector_1, *projector_2; /* modules [text hidden, vision hidden], [text hidden, text hidden] */
    const char *language_model;           /* prefix of the decoder's names (llama_names) */
    const char *head;                     /* prefix of its lm_head */
    const llama_names *text;
} llava_names;

/* [0]: transformers 4.40's names, [1]: the newer ones (weights/names_llava.c). */
extern const llava_names names_llava[2];

#endif
