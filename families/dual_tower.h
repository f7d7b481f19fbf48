/* dual_tower.h — the parts CLIP (clip.c) and SigLIP (siglip.c) share: a ViT and a CLIP-style text tower
 * embedding into one space, a tokenizer, the score's scale and bias; their run state; and the family-table hooks
 * both lines take (dual_tower.c). Each family's loader fills the struct its own way. */
#ifndef GLIMPSE_FAMILIES_DUAL_TOWER_H
#define GLIMPSE_FAMILIES_DUAL_TOWER_H

#include "families/family.h"

/* What load makes (model->parts). */
typedef struct dual_tower_parts {
    vit_model vision;
    clip_text_model text;            /* CLIP's, or SigLIP's (its variant) */
    clip_tokenizer *tokenizer;       /* CLIP */
    siglip_tokenizer *sentencepiece; /* SigLIP */
    float logit_scale;               /* exponentiated */
    float logit_bias;                /* SigLIP; 0 for CLIP */
} dual_tower_parts;

/* The hooks of both table lines: the parts behind model->parts, the run state behind ctx->run (the ViT's for
 * CONTEXT_IMAGE_BATCH pictures, the text tower's for CONTEXT_TEXT_BATCH texts, made with the context), the
 * towers' twins, and the text side of the model info. */
void dual_tower_free_parts(void *parts);
void dual_tower_free_run(void *run);
void dual_tower_blocks(const glimpse_model *model, family_blocks *out);
glimpse_status dual_tower_run_blocks(glimpse_context *ctx, family_run_blocks *out);
glimpse_status dual_tower_twins(glimpse_model *model, kernel_twin_add add, void *set);
void dual_tower_text_info(const glimpse_model *model, glimpse_model_info *out);

#endif
