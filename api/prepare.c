/* prepare.c — decoding and resizing ahead of the towers (prepare.h, and the public glimpse_image_decode and
 * glimpse_image_prepare): the model's own preprocess_resize, so the later preprocessing is a no-op resize. */
#include "api/prepare.h"
#include "api/model.h"
#include "core/error.h"
#include "vision/image.h"
#include "vision/preprocess.h"
#include "vision/resize.h"

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

glimpse_status glimpse_image_decode(const void *bytes, size_t size, const char *label,
                                    const glimpse_image_params *params, const glimpse_model *prepare_for,
                                    bool fast_decode, glimpse_image **out) {
    if (!out) return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_image_decode: out is NULL");
    *out = NULL;
    if (!bytes && size) return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_image_decode: bytes is NULL");
    glimpse_image_params defaults = glimpse_image_default_params();
    if (!params) params = &defaults;
    if (!label) label = "image in memory";
    int orient = !params->ignore_exif_orientation;
    if (prepare_for)
        return prepare_decode(prepare_for, bytes, size, label, params->max_pixels, orient, fast_decode, out);
    return image_decode_with(bytes, size, label, params->max_pixels, orient, out);
}

glimpse_status glimpse_image_prepare(const glimpse_model *model, glimpse_image **image) {
    if (!model || !image || !*image)
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_image_prepare: NULL argument");
    return prepare_resize(model, image);
}

glimpse_status glimpse_image_resize(const glimpse_image *image, int width, int height, glimpse_image **out) {
    if (!out) return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_image_resize: out is NULL");
    *out = NULL;
    if (!image || width < 1 || height < 1)
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_image_resize: no image, or a size below 1 (%d x %d)",
                         width, height);
    return image_resize(image, width, height, RESIZE_FILTER_BICUBIC, out);
}
