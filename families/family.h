/* family.h — the table of operations through which the generic layers (api/, tools/, serve/, search/) use a
 * model family without naming it: how config.json names it, the public kind and capabilities it reports, and
 * its loader and model-info hook. Each family's own file (families/clip.c, ...) fills one model_family;
 * families/registry.c lists them. An operation a family lacks is NULL and the caller reports it unsupported. */
#ifndef GLIMPSE_FAMILIES_FAMILY_H
#define GLIMPSE_FAMILIES_FAMILY_H

#include <cjson/cJSON.h>
#include <stdbool.h>

#include "glimpse.h"

/* A capability's bit in model_family.capabilities. */
#define FAMILY_CAN(capability) (1u << (capability))

typedef struct model_family {
    /* Recognised by config.json's "architectures"[0] equal to architecture, or, without "architectures", by a
     * model_type equal to model_type (NULL: never). */
    const char *architecture;
    const char *model_type;
    const char *summary; /* how the error for an unknown architecture lists it (NULL: the architecture) */
    glimpse_model_kind kind;
    unsigned capabilities; /* FAMILY_CAN bits of glimpse_capability */
    /* config.json's two sections the loader reads (vision and text, or encoder and decoder); required: each
     * must be an object, else an absent one means all defaults */
    const char *vision_section, *text_section;
    bool sections_required;
    /* Loads the family's parts into model (its folder, config, store, family, kind and architecture set). */
    glimpse_status (*load)(glimpse_model *model, const glimpse_load_params *params, const cJSON *vision_json,
                           const cJSON *text_json);
    /* Fills the text_* and vocab_size fields of glimpse_model_info (NULL: the model has no text side). */
    void (*text_info)(const glimpse_model *model, glimpse_model_info *out);
} model_family;

/* The family config.json names (folder in the error when none does: GLIMPSE_STATUS_UNSUPPORTED). */
glimpse_status family_detect(const cJSON *config, const char *folder, const model_family **out);
/* The family that reports `kind`; NULL for none. */
const model_family *family_of_kind(glimpse_model_kind kind);
/* Makes model one of `family` (its family, kind and architecture): detection, or a loader that tells two heads
 * of one checkpoint format apart by their tensors. */
void family_assign(glimpse_model *model, const model_family *family);

#endif
