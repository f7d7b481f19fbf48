/* caption_frame.c — caption a decoded video frame: pixels the application
 * already holds, here BGRA with padded rows as a video decoder hands them
 * out, streamed word by word.
 *     caption_frame BLIP_MODEL IMAGE   (IMAGE stands in for the decoder's frame) */
#include <glimpse.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool print_words(void *user, size_t image, int32_t id, const char *text) {
    size_t *printed = user;
    (void)image, (void)id;
    size_t length = strlen(text);
    if (length > *printed) fwrite(text + *printed, 1, length - *printed, stdout);
    *printed = length;
    fflush(stdout);
    return false; /* true would cancel */
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s BLIP_MODEL IMAGE\n", argv[0]);
        return 2;
    }
    glimpse_model *model = NULL;
    glimpse_context *ctx = NULL;
    glimpse_image *decoded = NULL, *frame = NULL;
    if (glimpse_model_load(argv[1], NULL, &model) || glimpse_context_create(model, NULL, &ctx) ||
        glimpse_image_load_file(argv[2], NULL, &decoded)) {
        fprintf(stderr, "error: %s\n", glimpse_last_error());
        return 1;
    }
    /* the "video frame": BGRA, each row padded to a multiple of 64 bytes */
    int width = glimpse_image_width(decoded), height = glimpse_image_height(decoded);
    size_t stride = ((size_t)width * 4 + 63) / 64 * 64;
    uint8_t *bgra = calloc((size_t)height, stride);
    const uint8_t *rgb = glimpse_image_pixels(decoded);
    for (int y = 0; y < height; y++)
        for (int x = 0; x < width; x++) {
            const uint8_t *p = rgb + ((size_t)y * width + x) * 3;
            uint8_t *q = bgra + (size_t)y * stride + (size_t)x * 4;
            q[0] = p[2], q[1] = p[1], q[2] = p[0], q[3] = 255;
        }
    if (glimpse_image_from_pixels(bgra, width, height, stride, GLIMPSE_PIXEL_FORMAT_BGRA8, &frame)) {
        fprintf(stderr, "error: %s\n", glimpse_last_error());
        return 1;
    }
    free(bgra);
    glimpse_caption_params params = glimpse_caption_default_params(); /* the model's own search settings */
    size_t printed = 0;
    params.on_token = print_words;
    params.user = &printed;
    glimpse_caption caption;
    if (glimpse_caption_images(ctx, &frame, 1, &params, &caption)) {
        fprintf(stderr, "\nerror: %s\n", glimpse_last_error());
        return 1;
    }
    printf("\n(%zu token ids)\n", caption.id_count);
    glimpse_caption_free(&caption);
    glimpse_image_free(decoded);
    glimpse_image_free(frame);
    glimpse_context_free(ctx);
    glimpse_model_free(model);
    return 0;
}
