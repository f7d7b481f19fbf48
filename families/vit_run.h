/* vit_run.h — what the families built on the shared ViT (CLIP, SigLIP, BLIP, ViT-GPT2, BLIP-2) keep first in
 * their run state behind ctx->run: the tower's state, the batch of pixel values the generic calls preprocess
 * into, one picture's vision output; and the steps that make, free and show it. A family's decoder state is
 * its own, in its struct after this one. */
#ifndef GLIMPSE_FAMILIES_VIT_RUN_H
#define GLIMPSE_FAMILIES_VIT_RUN_H

#include <stdbool.h>
#include <stddef.h>

#include "families/family.h"

typedef struct vit_run {
    vit_state *vision;    /* CONTEXT_IMAGE_BATCH pictures */
    float *pixel_values;  /* [CONTEXT_IMAGE_BATCH, 3, size, size] */
    float *vision_output; /* [tokens, hidden] of one picture; NULL for an embedding family */
} vit_run;

/* ctx->run: a zeroed struct of `size` bytes that starts with a vit_run, made on first use with the state of
 * `vision` (when the model has it loaded) and, with `output`, a picture's vision output; *out is ctx->run. On
 * failure free_run frees what was made and ctx->run stays NULL. */
glimpse_status vit_run_of(glimpse_context *ctx, const vit_model *vision, bool output, size_t size,
                          void (*free_run)(void *), void **out);
/* Frees what vit_run_of made in run (not run itself). */
void vit_run_free(vit_run *run);
/* The run blocks the vit_run gives (vision, pixel_values, vision_output). */
void vit_run_blocks(const vit_run *run, family_run_blocks *out);
/* The ViT's twins by add into set, when it is loaded (a family's tower_twins). */
glimpse_status vit_run_tower_twins(vit_model *vision, kernel_twin_add add, void *set);

#endif
