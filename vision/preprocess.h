/* preprocess.h — turning an RGB image into a model's pixel_values exactly as
 * transformers' CLIPImageProcessor, BlipImageProcessor and
 * SiglipImageProcessor do: resize (shortest edge, or a fixed size), centre
 * crop (padding with zeros when the image is smaller), rescale, normalise,
 * channels first. Reads the settings from preprocessor_config.json. */
#ifndef GLIMPSE_VISION_PREPROCESS_H
#define GLIMPSE_VISION_PREPROCESS_H

#include <cjson/cJSON.h>

#include "vision/image.h"

/* The most pixels a picture may have once resized for the model, before the
 * centre crop (2^26: a 224-pixel model takes aspect ratios up to 1337:1). */
#define PREPROCESS_MAX_RESIZED_PIXELS ((double)(1 << 26))

typedef struct preprocess_config {
    int do_resize;
    int shortest_edge;              /* > 0: resize so the short side is this (CLIP) */
    int resize_height, resize_width; /* otherwise: resize to exactly this (BLIP) */
    int resample;                   /* Pillow code: 3 bicubic, 2 bilinear, 1 lanczos */
    int do_center_crop;
    int crop_height, crop_width;
    int do_rescale;
    double rescale_factor;
    int do_normalize;
    float mean[3], std[3];
} preprocess_config;

/* CLIP-style defaults for a given image size. */
preprocess_config preprocess_default_clip(int image_size);
/* BLIP-style defaults: fixed square resize, no crop. */
preprocess_config preprocess_default_blip(int image_size);
/* SiglipImageProcessor's: BLIP's with mean and std 0.5. */
preprocess_config preprocess_default_siglip(int image_size);
/* ViTImageProcessor's: SigLIP's with Pillow's bilinear filter. */
preprocess_config preprocess_default_vit(int image_size);

/* Reads preprocessor_config.json (already parsed) over defaults.
 * square_default: how a bare integer "size" is read — as a square (BLIP) or
 * as the shortest edge (CLIP), as the processors themselves read it. */
glimpse_status preprocess_config_read(const cJSON *json, const char *where, int square_default,
                                      preprocess_config *config);

/* The final height and width pixel_values will have. */
void preprocess_output_size(const preprocess_config *config, int image_width, int image_height, int *height,
                            int *width);

/* Where pixel_values come from in an image_width × image_height picture: the size it is resized to, and the
 * offset in the resized picture of pixel_values' top-left pixel (the centre crop's; negative where the crop
 * pads). */
void preprocess_geometry(const preprocess_config *config, int image_width, int image_height, int *resized_width,
                         int *resized_height, int *left, int *top);

/* The picture resized as preprocess_image resizes it, as a new image in *out
 * (caller frees), or *out NULL when it needs no resizing. preprocess_image
 * given the resized picture resizes nothing more: the same pixel_values. */
glimpse_status preprocess_resize(const preprocess_config *config, const glimpse_image *image, glimpse_image **out);

/* The side both of a picture's sides must keep for its resize to see what it
 * would see at full size (the short side CLIP resizes to; the larger of a
 * fixed size): what a decoder scaling down in the DCT domain may not go
 * below. 0 when the preprocessing does not resize (nothing may be scaled). */
int preprocess_decode_side(const preprocess_config *config);

/* Writes pixel_values [3, height, width] (height, width from
 * preprocess_output_size) for one image. */
glimpse_status preprocess_image(float *pixel_values, const glimpse_image *image, const preprocess_config *config);

#endif
