/* prepare.c — decoding and resizing ahead of the towers (prepare.h): the
 * model's own preprocess_resize, so the later preprocessing is a no-op resize. */
#include "api/prepare.h"
#include "api/model.h"
#include "vision/image.h"
#include "vision/preprocess.h"

glimpse_status prepare_resize(const glimpse_model *model, glimpse_image **image) {
    glimpse_image *resized = NULL;
    glimpse_status status = preprocess_resize(&model->preprocess, *image, &resized);
    if (status || !resized) return status;
    glimpse_image_free(*image);
    *image = resized;
    return GLIMPSE_STATUS_OK;
}

glimpse_status prepare_decode(const glimpse_model *model, const uint8_t *bytes, size_t size, const char *label,
                              uint64_t max_pixels, int apply_orientation, bool fast, glimpse_image **out) {
    int side = fast ? preprocess_decode_side(&model->preprocess) : 0;
    glimpse_status status = image_decode_scaled(bytes, size, label, max_pixels, apply_orientation, side, out);
    if (status) return status;
    status = prepare_resize(model, out);
    if (status) {
        glimpse_image_free(*out);
        *out = NULL;
    }
    return status;
}
