/* rank_images.c — rank image files against a text with CLIP.
 *     rank_images CLIP_MODEL "a text" IMAGE... */
#include <glimpse.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s CLIP_MODEL TEXT IMAGE...\n", argv[0]);
        return 2;
    }
    size_t count = (size_t)argc - 3;
    glimpse_model *model = NULL;
    glimpse_context *ctx = NULL;
    if (glimpse_model_load(argv[1], NULL, &model) || glimpse_context_create(model, NULL, &ctx)) {
        fprintf(stderr, "error: %s\n", glimpse_last_error());
        return 1;
    }
    glimpse_image **images = calloc(count, sizeof *images);
    for (size_t i = 0; i < count; i++)
        if (glimpse_image_load_file(argv[3 + i], NULL, &images[i])) {
            fprintf(stderr, "error: %s\n", glimpse_last_error());
            return 1;
        }
    size_t dim = glimpse_model_embedding_dim(model);
    float *image_embeddings = malloc(count * dim * sizeof(float)), *text_embedding = malloc(dim * sizeof(float));
    float *logits = malloc(count * sizeof(float));
    const char *text = argv[2];
    if (glimpse_embed_images(ctx, images, count, image_embeddings) ||
        glimpse_embed_texts(ctx, &text, 1, text_embedding) ||
        glimpse_score(model, image_embeddings, count, text_embedding, 1, logits)) {
        fprintf(stderr, "error: %s\n", glimpse_last_error());
        return 1;
    }
    for (size_t printed = 0; printed < count; printed++) { /* best first */
        size_t best = count;
        for (size_t i = 0; i < count; i++)
            if (images[i] && (best == count || logits[i] > logits[best])) best = i;
        printf("%8.4f  %s\n", logits[best], argv[3 + best]);
        glimpse_image_free(images[best]);
        images[best] = NULL;
    }
    free(images), free(image_embeddings), free(text_embedding), free(logits);
    glimpse_context_free(ctx);
    glimpse_model_free(model);
    return 0;
}
