/* retrieval.c — similarity scores and ranking. */
#include "retrieval.h"

#include <stdlib.h>

#include "kernels.h"

void retrieval_logits(float *logits, const float *images, size_t image_count, const float *texts, size_t text_count,
                      size_t dim, float scale) {
    /* logits = images · textsᵀ, as a linear layer whose weight is the texts. */
    kernel_linear(logits, text_count, images, dim, texts, NULL, image_count, dim, text_count, NULL);
    for (size_t i = 0; i < image_count * text_count; i++) logits[i] *= scale;
}

void retrieval_rank(size_t *order, const float *scores, size_t count) {
    for (size_t i = 0; i < count; i++) order[i] = i;
    /* insertion sort: stable, and result lists are short */
    for (size_t i = 1; i < count; i++) {
        size_t current = order[i], j = i;
        while (j > 0 && scores[order[j - 1]] < scores[current]) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = current;
    }
}
