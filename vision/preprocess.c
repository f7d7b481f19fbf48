/* preprocess.c — resize, crop, rescale, normalise, as transformers 4.x. */
#include "vision/preprocess.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "weights/config.h"
#include "core/error.h"
#include "vision/resize.h"

static const float clip_mean[3] = {0.48145466f, 0.4578275f, 0.40821073f};
static const float clip_std[3] = {0.26862954f, 0.26130258f, 0.27577711f};

preprocess_config preprocess_default_clip(int image_size) {
    preprocess_config config = {1, image_size, 0, 0, RESIZE_FILTER_BICUBIC, 1, image_size, image_size, 1,
                                1.0 / 255.0, 1, {0}, {0}};
    memcpy(config.mean, clip_mean, sizeof clip_mean);
    memcpy(config.std, clip_std, sizeof clip_std);
    return config;
}

preprocess_config preprocess_default_blip(int image_size) {
    preprocess_config config = preprocess_default_clip(image_size);
    config.shortest_edge = 0;
    config.resize_height = config.resize_width = image_size;
    config.do_center_crop = 0;
    return config;
}

preprocess_config preprocess_default_siglip(int image_size) {
    preprocess_config config = preprocess_default_blip(image_size);
    for (int c = 0; c < 3; c++) config.mean[c] = config.std[c] = 0.5f;
    return config;
}

preprocess_config preprocess_default_vit(int image_size) {
    preprocess_config config = preprocess_default_siglip(image_size);
    config.resample = RESIZE_FILTER_BILINEAR;
    return config;
}

static int json_flag(const cJSON *json, const char *key, int fallback) {
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(json, key);
    if (cJSON_IsBool(item)) return cJSON_IsTrue(item);
    return fallback;
}

/* "size"/"crop_size": an integer, or {"shortest_edge"}, or {"height","width"}. */
static glimpse_status read_size(const cJSON *json, const char *where, const char *key, int square_default,
                                int *shortest, int *height, int *width) {
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(json, key);
    if (!item || cJSON_IsNull(item)) return GLIMPSE_STATUS_OK;
    if (cJSON_IsNumber(item)) {
        int value;
        glimpse_status status = config_int(json, where, key, 1, 65536, &value);
        if (status) return status;
        if (square_default || !shortest) {
            if (shortest) *shortest = 0;
            *height = *width = value;
        } else {
            *shortest = value;
        }
        return GLIMPSE_STATUS_OK;
    }
    if (!cJSON_IsObject(item)) return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: \"%s\" is not a size", where, key);
    char inner[256];
    snprintf(inner, sizeof inner, "%s: %s", where, key);
    if (cJSON_GetObjectItemCaseSensitive(item, "shortest_edge")) {
        if (!shortest)
            return error_set(GLIMPSE_STATUS_UNSUPPORTED, "%s: \"shortest_edge\" is not supported here", inner);
        return config_int(item, inner, "shortest_edge", 1, 65536, shortest);
    }
    glimpse_status status = config_int(item, inner, "height", 1, 65536, height);
    if (!status) status = config_int(item, inner, "width", 1, 65536, width);
    if (!status && shortest) *shortest = 0;
    return status;
}

glimpse_status preprocess_config_read(const cJSON *json, const char *where, int square_default,
                                      preprocess_config *config) {
    glimpse_status status;
    config->do_resize = json_flag(json, "do_resize", config->do_resize);
    config->do_center_crop = json_flag(json, "do_center_crop", config->do_center_crop);
    config->do_rescale = json_flag(json, "do_rescale", config->do_rescale);
    config->do_normalize = json_flag(json, "do_normalize", config->do_normalize);
    if ((status = read_size(json, where, "size", square_default, &config->shortest_edge, &config->resize_height,
                            &config->resize_width)))
        return status;
    if ((status = read_size(json, where, "crop_size", 1, NULL, &config->crop_height, &config->crop_width)))
        return status;
    if ((status = config_int_or(json, where, "resample", 0, 5, config->resample, &config->resample))) return status;
    if (config->do_resize && !resize_filter_supported(config->resample))
        return error_set(GLIMPSE_STATUS_UNSUPPORTED,
                         "%s: resample %d is not supported (bicubic 3, bilinear 2 and lanczos 1 are)", where,
                         config->resample);
    if ((status = config_double_or(json, where, "rescale_factor", config->rescale_factor, &config->rescale_factor)))
        return status;
    double values[3];
    if (cJSON_GetObjectItemCaseSensitive(json, "image_mean")) {
        if ((status = config_doubles(json, where, "image_mean", 3, values))) return status;
        for (int i = 0; i < 3; i++) config->mean[i] = (float)values[i];
    }
    if (cJSON_GetObjectItemCaseSensitive(json, "image_std")) {
        if ((status = config_doubles(json, where, "image_std", 3, values))) return status;
        for (int i = 0; i < 3; i++) {
            if (values[i] == 0.0) return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: image_std has a zero", where);
            config->std[i] = (float)values[i];
        }
    }
    return GLIMPSE_STATUS_OK;
}

/* transformers' get_resize_output_image_size(default_to_square=False):
 * the short side becomes `size`, the long side int(size · long / short). */
static void resized_size(const preprocess_config *config, int width, int height, int *out_width, int *out_height) {
    if (!config->do_resize) {
        *out_width = width;
        *out_height = height;
    } else if (config->shortest_edge > 0) {
        int short_side = width <= height ? width : height, long_side = width <= height ? height : width;
        int new_short = config->shortest_edge;
        int new_long = short_side == new_short ? long_side : (int)((double)new_short * long_side / short_side);
        if (short_side == new_short) new_short = short_side;
        *out_width = width <= height ? new_short : new_long;
        *out_height = width <= height ? new_long : new_short;
    } else {
        *out_width = config->resize_width;
        *out_height = config->resize_height;
    }
}

void preprocess_output_size(const preprocess_config *config, int image_width, int image_height, int *height,
                            int *width) {
    int w, h;
    resized_size(config, image_width, image_height, &w, &h);
    if (config->do_center_crop) {
        w = config->crop_width;
        h = config->crop_height;
    }
    *height = h;
    *width = w;
}

static int floor_half(int value) { return value >= 0 ? value / 2 : -((-value + 1) / 2); }

void preprocess_geometry(const preprocess_config *config, int image_width, int image_height, int *resized_width,
                         int *resized_height, int *left, int *top) {
    resized_size(config, image_width, image_height, resized_width, resized_height);
    *left = config->do_center_crop ? floor_half(*resized_width - config->crop_width) : 0;
    *top = config->do_center_crop ? floor_half(*resized_height - config->crop_height) : 0;
}

glimpse_status preprocess_resize(const preprocess_config *config, const glimpse_image *image, glimpse_image **out) {
    *out = NULL;
    int width, height;
    resized_size(config, image->width, image->height, &width, &height);
    if (!config->do_resize || (width == image->width && height == image->height)) return GLIMPSE_STATUS_OK;
    /* a picture thousands of times longer than wide (a lying header among them) would be resized into
     * gigabytes before the crop keeps a square of it: refused, as no photograph is */
    if ((double)width * height > PREPROCESS_MAX_RESIZED_PIXELS)
        return error_set(GLIMPSE_STATUS_TOO_LARGE,
                         "a %dx%d picture is too elongated to preprocess: resized for the model it would be "
                         "%dx%d pixels",
                         image->width, image->height, width, height);
    return image_resize(image, width, height, (resize_filter)config->resample, out);
}

int preprocess_decode_side(const preprocess_config *config) {
    if (!config->do_resize) return 0;
    if (config->shortest_edge > 0) return config->shortest_edge;
    return config->resize_width > config->resize_height ? config->resize_width : config->resize_height;
}

glimpse_status preprocess_image(float *pixel_values, const glimpse_image *image, const preprocess_config *config) {
    glimpse_image *resized = NULL;
    glimpse_status status = preprocess_resize(config, image, &resized);
    if (status) return status;
    const glimpse_image *source = resized ? resized : image;
    int width = source->width, height = source->height;
    /* transformers' center_crop: offsets floor((orig - crop) / 2); a crop
     * larger than the image pads with zeros around it. */
    int out_height = height, out_width = width, top = 0, left = 0;
    if (config->do_center_crop) {
        out_height = config->crop_height;
        out_width = config->crop_width;
        top = floor_half(height - out_height);
        left = floor_half(width - out_width);
    }
    size_t plane = (size_t)out_height * out_width;
    float scale = 1.0f;
    for (int c = 0; c < 3; c++) {
        for (int y = 0; y < out_height; y++)
            for (int x = 0; x < out_width; x++) {
                int sy = y + top, sx = x + left;
                int value = 0;
                if (sy >= 0 && sy < height && sx >= 0 && sx < width)
                    value = source->pixels[((size_t)sy * width + sx) * 3 + c];
                /* numpy: uint8 × python float is float64, then cast to float32;
                 * normalisation is float32 arithmetic. */
                float v = config->do_rescale ? (float)(value * config->rescale_factor) : (float)value * scale;
                if (config->do_normalize) v = (v - config->mean[c]) / config->std[c];
                pixel_values[c * plane + (size_t)y * out_width + x] = v;
            }
    }
    glimpse_image_free(resized);
    return GLIMPSE_STATUS_OK;
}
