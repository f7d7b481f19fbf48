/* decode_pnm.h — inside vision/ only: the Netpbm decoder (decode_pnm.c) and the test decode.c picks it by.
 * Not PAM (P7) nor Pillow's private P0CMYK / Py* variants, which are not pictures anyone sends. */
#ifndef GLIMPSE_VISION_DECODE_PNM_H
#define GLIMPSE_VISION_DECODE_PNM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vision/decoders.h"

/* "P1".."P6" followed by whitespace: a magic number Pillow's PpmImagePlugin reads as PBM, PGM or PPM. */
bool pnm_signature(const uint8_t *bytes, size_t size);

/* P1–P6, maxval 1..65535, comments anywhere Pillow allows them, to RGB as Pillow 9.4's
 * Image.open(f).convert("RGB") gives it; no EXIF (*orientation is ORIENTATION_ABSENT). Short data is
 * refused (BAD_FORMAT) before anything is allocated for pixels. */
image_decoder decode_pnm;

#endif
