/* itm.h — BLIP's retrieval heads: the image-text matching head (two logits,
 * no-match and match, read from the text encoder's first token when it ran
 * with cross-attention over the image) and the contrastive projections
 * (ITC: vision_proj of the image's first token, text_proj of the text's
 * first token without the image, both L2-normalised). */
#ifndef GLIMPSE_FUSION_ITM_H
#define GLIMPSE_FUSION_ITM_H

#include <stddef.h>

#include "weights/names.h"
#include "weights/store.h"

typedef struct itm_heads {
    size_t vision_hidden, text_hidden, shared; /* shared = image_text_hidden_size */
    const float *vision_proj_weight, *vision_proj_bias; /* [shared, vision_hidden], [shared] */
    const float *text_proj_weight, *text_proj_bias;     /* [shared, text_hidden], [shared] */
    const float *itm_weight, *itm_bias;                 /* [2, text_hidden], [2] */
} itm_heads;

/* Loads the heads `names` gives (names_blip.itm). */
glimpse_status itm_heads_load(itm_heads *heads, const itm_names *names, weight_store *store, size_t vision_hidden,
                              size_t text_hidden, size_t shared);

/* softmax(itm_head(first_token))[1]; logits[2] receives the raw logits if not NULL. */
float itm_match_probability(const itm_heads *heads, const float *first_token, float *logits);
/* out[shared] = normalize(vision_proj(image_first_token)) */
void itm_image_feature(const itm_heads *heads, const float *image_first_token, float *out);
/* out[shared] = normalize(text_proj(text_first_token)) */
void itm_text_feature(const itm_heads *heads, const float *text_first_token, float *out);

#endif
