/* prepare.h — a picture made ready for a model's vision tower ahead of it:
 * decoded (a JPEG optionally scaled down in the DCT domain first: fast
 * decoding) and resized as the model's preprocessing resizes, so that
 * glimpse_embed_images given it resizes nothing more and gives the same
 * numbers. Only reads the model: safe on any thread. Internal to libglimpse. */
#ifndef GLIMPSE_API_PREPARE_H
#define GLIMPSE_API_PREPARE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "glimpse.h"

/* Decodes bytes (label names them in errors; orientation applied unless
 * apply_orientation is 0) and resizes the picture for the model. fast: a
 * JPEG is decoded at the smallest libjpeg-turbo scale that keeps both sides
 * at least what the resize needs, then resized exactly. Caller frees *out. */
glimpse_status prepare_decode(const glimpse_model *model, const uint8_t *bytes, size_t size, const char *label,
                              uint64_t max_pixels, int apply_orientation, bool fast, glimpse_image **out);
/* Replaces *image by its resized copy for the model (freeing the original),
 * or leaves it when no resize is needed. On failure *image is kept. */
glimpse_status prepare_resize(const glimpse_model *model, glimpse_image **image);

#endif
