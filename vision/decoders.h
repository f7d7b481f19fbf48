/* decoders.h — inside vision/ only: one decoder per format (each in its own
 * decode_FORMAT.c, image_decode in decode.c sniffs and picks), the shared
 * size check, and the EXIF orientation reader and transposes (exif.c). */
#ifndef GLIMPSE_VISION_DECODERS_H
#define GLIMPSE_VISION_DECODERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vision/image.h"

/* No Orientation tag at all (so XMP may still name one, as Pillow reads it). */
#define ORIENTATION_ABSENT (-1)
/* Otherwise an orientation is 1..8 (EXIF's values), or 0 for a tag that is
 * there but names none of them (Pillow then leaves the image as it is). */

/* Every decoder: decodes bytes to RGB as Pillow 9.4's convert("RGB") does (HEIF:
 * as heif-convert writes it), checks width × height against max_pixels from the
 * header before decoding any pixel, names label in every error, and writes to
 * *orientation the EXIF orientation that Pillow's ImageOps.exif_transpose would
 * apply afterwards (ORIENTATION_ABSENT when there is none). The caller applies it. */
typedef glimpse_status image_decoder(const uint8_t *bytes, size_t size, const char *label, uint64_t max_pixels,
                                     glimpse_image **out, int *orientation);

image_decoder decode_jpeg; /* decode_jpeg.c: libjpeg-turbo; APP1 Exif */
/* decode_jpeg, scaled down in the DCT domain (libjpeg-turbo's scale_num/8)
 * to the smallest size whose sides are both at least min_side (0: full size). */
glimpse_status decode_jpeg_scaled(const uint8_t *bytes, size_t size, const char *label, uint64_t max_pixels,
                                  int min_side, glimpse_image **out, int *orientation);
image_decoder decode_png;  /* decode_png.c: libpng; eXIf, raw-profile text, XMP */
image_decoder decode_webp; /* decode_webp.c: libwebp's animation decoder, first frame; EXIF chunk */
image_decoder decode_tiff; /* decode_tiff.c: libtiff, first page; its own Orientation tag */
image_decoder decode_heif; /* decode_heif.c: libheif, primary image, irot/imir/clap applied; no EXIF */
/* Whether an ISO media file (its ftyp box at bytes + 4) has brands of a HEIF or
 * AVIF picture: libheif's own check in decode_heif.c (loading libheif, see
 * heif_library.h), heif_signature_sniff's brand list where libheif cannot be
 * loaded (decode_heif then says so) and in a build without libheif
 * (decode_unavailable.c: its decode_heif says the build lacks it). In that
 * build decode_webp and decode_tiff may be the unavailable ones too. */
bool heif_sniff(const uint8_t *bytes, size_t size);
/* heif_signature.c: the brands of HEIF and AVIF pictures that libheif 1.15 knows, in the ftyp box. */
bool heif_signature_sniff(const uint8_t *bytes, size_t size);

/* GLIMPSE_STATUS_OK, or BAD_FORMAT for an empty image, or TOO_LARGE over max_pixels. */
glimpse_status check_dimensions(const char *label, uint64_t width, uint64_t height, uint64_t max_pixels);

/* One CMYK pixel to RGB as Pillow's convert("RGB") does it (cmyk2rgb). */
void cmyk_to_rgb(uint8_t *rgb, int c, int m, int y, int k);

/* The Orientation tag (0x0112) of an EXIF block, read as Pillow 9.4's
 * Image.Exif.load reads it: an optional "Exif\0\0", a classic TIFF header, then
 * the first IFD only. Values come back as ORIENTATION_ABSENT, 0 or 1..8. */
int exif_orientation(const uint8_t *block, size_t size);
/* The same from a TIFF file's own first IFD (BigTIFF too), as Pillow reads it
 * for a TIFF image. */
int tiff_file_orientation(const uint8_t *file, size_t size);
/* Whether a TIFF file's first IFD has tag, as Pillow would find it. */
int tiff_file_has_tag(const uint8_t *file, size_t size, unsigned tag);
/* The orientation XMP text names as Pillow's regex tiff:Orientation(="|>)([0-9])
 * finds it: 1..8, 0 for a digit outside that, ORIENTATION_ABSENT for none. */
int xmp_orientation(const uint8_t *text, size_t size);

/* Turns *image as Pillow's exif_transpose does for orientation 2..8 (a new
 * image replaces *image for 5..8, where width and height swap); 0, 1 and
 * ORIENTATION_ABSENT leave it as it is. */
glimpse_status image_orient(glimpse_image **image, int orientation);

#endif
