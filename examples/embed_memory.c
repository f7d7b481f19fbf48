/* embed_memory.c — embed an image held in memory (as a media app holds a
 * downloaded or decoded-from-container file) and a text, and score them.
 *     embed_memory CLIP_MODEL IMAGE "a text" */
#include <glimpse.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s CLIP_MODEL IMAGE TEXT\n", argv[0]);
        return 2;
    }
    FILE *file = fopen(argv[2], "rb");
    if (!file) {
        perror(argv[2]);
        return 1;
    }
    fseek(file, 0, SEEK_END);
    long size = ftell(file);
    fseek(file, 0, SEEK_SET);
    unsigned char *bytes = malloc((size_t)size);
    if (!bytes || fread(bytes, 1, (size_t)size, file) != (size_t)size) return 1;
    fclose(file);

    glimpse_model *model = NULL;
    glimpse_context *ctx = NULL;
    glimpse_image *image = NULL;
    if (glimpse_model_load(argv[1], NULL, &model) || glimpse_context_create(model, NULL, &ctx) ||
        glimpse_image_load_memory(bytes, (size_t)size, NULL, &image)) {
        fprintf(stderr, "error: %s\n", glimpse_last_error());
        return 1;
    }
    free(bytes); /* the image holds its own pixels */
    size_t dim = glimpse_model_embedding_dim(model);
    float *image_embedding = malloc(dim * sizeof(float)), *text_embedding = malloc(dim * sizeof(float));
    const char *text = argv[3];
    float logit;
    if (glimpse_embed_images(ctx, &image, 1, image_embedding) ||
        glimpse_embed_texts(ctx, &text, 1, text_embedding) ||
        glimpse_score(model, image_embedding, 1, text_embedding, 1, &logit)) {
        fprintf(stderr, "error: %s\n", glimpse_last_error());
        return 1;
    }
    printf("%d-dimensional embedding of a %dx%d image; score against \"%s\": %.4f\n", (int)dim,
           glimpse_image_width(image), glimpse_image_height(image), text, logit);
    free(image_embedding), free(text_embedding);
    glimpse_image_free(image);
    glimpse_context_free(ctx);
    glimpse_model_free(model);
    return 0;
}
