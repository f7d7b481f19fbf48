/* retrieval.c — similarity scores between embeddings. */
#include "fusion/retrieval.h"

#include "core/kernels.h"

void retrieval_logits(float *logits, const float *images, size_t image_count, const float *texts, size_t text_count,
                      size_t dim, float scale) {
    /* logits = images · textsᵀ, as a linear layer whose weight is the texts. */
    const kernel_weight weight = kernel_weight_f32(texts);
    kernel_linear(logits, text_count, images, dim, &weight, NULL, image_count, dim, text_count, false, NULL);
    for (size_t i = 0; i < image_count * text_count; i++) logits[i] *= scale;
}
