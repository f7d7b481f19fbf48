/* retrieval.h — scoring images against texts from their embeddings:
 * CLIP's logits (logit_scale × cosine). No model forward passes here. */
#ifndef GLIMPSE_FUSION_RETRIEVAL_H
#define GLIMPSE_FUSION_RETRIEVAL_H

#include <stddef.h>

/* logits[i, t] = scale · images[i] · texts[t]  (images [n_images, dim],
 * texts [n_texts, dim], both already L2-normalised). */
void retrieval_logits(float *logits, const float *images, size_t image_count, const float *texts, size_t text_count,
                      size_t dim, float scale);

#endif
