/* retrieval.h — scoring images against texts from their embeddings:
 * CLIP's logits (logit_scale × cosine), SigLIP's (the same + logit_bias) and
 * SigLIP's per-pair sigmoid probabilities. No model forward passes here. */
#ifndef GLIMPSE_FUSION_RETRIEVAL_H
#define GLIMPSE_FUSION_RETRIEVAL_H

#include <stddef.h>

/* logits[i, t] = scale · images[i] · texts[t] + bias  (images [n_images, dim],
 * texts [n_texts, dim], both already L2-normalised; bias 0 for CLIP). */
void retrieval_logits(float *logits, const float *images, size_t image_count, const float *texts, size_t text_count,
                      size_t dim, float scale, float bias);

/* probabilities[i] = sigmoid(logits[i]) for i < count: SigLIP's, each pair on
 * its own (they do not sum to 1 over the texts). May work in place. */
void retrieval_sigmoid(float *probabilities, const float *logits, size_t count);

#endif
