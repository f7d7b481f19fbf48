/* decode_unavailable.c — the decoders of a build without libwebp, libtiff or
 * libheif (GLIMPSE_WITH_WEBP/TIFF/HEIF=OFF): the format is still recognised by
 * its magic bytes, and decoding says the build lacks it instead of "not an
 * image". Compiled only into such a build; each section stands in for one decode_FORMAT.c. */
#include <string.h>

#include "core/features.h"
#include "vision/decoders.h"

#if !GLIMPSE_WITH_WEBP
glimpse_status decode_webp(const uint8_t *bytes, size_t size, const char *label, uint64_t max_pixels,
                           glimpse_image **out, int *orientation) {
    *orientation = ORIENTATION_ABSENT;
    return feature_unavailable(GLIMPSE_FEATURE_WEBP, label, "a WebP picture");
}
#endif

#if !GLIMPSE_WITH_TIFF
glimpse_status decode_tiff(const uint8_t *bytes, size_t size, const char *label, uint64_t max_pixels,
                           glimpse_image **out, int *orientation) {
    *orientation = ORIENTATION_ABSENT;
    return feature_unavailable(GLIMPSE_FEATURE_TIFF, label, "a TIFF picture");
}
#endif

#if !GLIMPSE_WITH_HEIF
bool heif_sniff(const uint8_t *bytes, size_t size) { return heif_signature_sniff(bytes, size); }

glimpse_status decode_heif(const uint8_t *bytes, size_t size, const char *label, uint64_t max_pixels,
                           glimpse_image **out, int *orientation) {
    *orientation = ORIENTATION_ABSENT;
    return feature_unavailable(GLIMPSE_FEATURE_HEIF, label, "a HEIF/AVIF picture");
}
#endif
