/* heif_signature.c — HEIF and AVIF pictures told from other ISO media files
 * by their brands alone: what a build without libheif (decode_unavailable.c),
 * or a machine where it cannot be loaded (decode_heif.c), uses in place of
 * libheif's own check, so that such a picture is still named as one. */
#include <string.h>

#include "vision/decoders.h"

/* The major and compatible brands of HEIF (HEVC and other codecs, image
 * sequences) and AVIF pictures, as libheif's heif_check_filetype knows them. */
bool heif_signature_sniff(const uint8_t *bytes, size_t size) {
    static const char brands[][5] = {"heic", "heix", "heim", "heis", "hevc", "hevx", "hevm",
                                     "hevs", "mif1", "msf1", "avif", "avis", "mif2"};
    if (size < 12) return false;
    uint64_t box = (uint64_t)bytes[0] << 24 | (uint64_t)bytes[1] << 16 | (uint64_t)bytes[2] << 8 | bytes[3];
    if (box < 16 || box > size) box = size < 4096 ? size : 4096;
    for (size_t at = 8; at + 4 <= box; at += at == 8 ? 8 : 4) /* the major brand, its version, then the list */
        for (size_t b = 0; b < sizeof brands / sizeof brands[0]; b++)
            if (memcmp(bytes + at, brands[b], 4) == 0) return true;
    return false;
}
