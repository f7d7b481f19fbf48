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
/* The major and compatible brands of HEIF (HEVC and other codecs, image
 * sequences) and AVIF pictures, as libheif's heif_check_filetype knows them. */
bool heif_sniff(const uint8_t *bytes, size_t size) {
    static const char brands[][5] = {"heic", "heix", "heim", "heis", "hevc", "hevx", "hevm",
                                     "hevs", "mif1", "msf1", "avif", "avis", "mif2"};
    uint64_t box = (uint64_t)bytes[0] << 24 | (uint64_t)bytes[1] << 16 | (uint64_t)bytes[2] << 8 | bytes[3];
    if (box < 16 || box > size) box = size < 4096 ? size : 4096;
    for (size_t at = 8; at + 4 <= box; at += at == 8 ? 8 : 4) /* the major brand, its version, then the list */
        for (size_t b = 0; b < sizeof brands / sizeof brands[0]; b++)
            if (memcmp(bytes + at, brands[b], 4) == 0) return true;
    return false;
}

glimpse_status decode_heif(const uint8_t *bytes, size_t size, const char *label, uint64_t max_pixels,
                           glimpse_image **out, int *orientation) {
    *orientation = ORIENTATION_ABSENT;
    return feature_unavailable(GLIMPSE_FEATURE_HEIF, label, "a HEIF/AVIF picture");
}
#endif
