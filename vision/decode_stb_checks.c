/* decode_stb_checks.c — checks of our own before stb_image decodes a BMP, GIF or TGA, for the published
 * bugs of stb_image 2.27 that its first-frame, no-flip use in decode.c can still reach. The animated-GIF
 * and vertical-flip ones (CVE-2023-45661, -45662, -45664, -45666, -45667) it cannot: decode.c never calls
 * stbi_load_gif_* nor flips; JPEG, PNG, HDR, PIC and PNM are not compiled into stb_image_impl.c at all. */
#include "vision/decode_stb_checks.h"

#include "core/error.h"

/* CVE-2023-45663 (GHSL-2023-147): stbi__tga_load reads an uncompressed true-colour or grey TGA row by row
 * with stbi__getn and ignores a short read, so a file cut inside its last row comes back as a picture
 * whose missing pixels are uninitialised heap memory. Such a file must hold every row: the 18-byte
 * header, the image ID, then width × height pixels of bits/8 bytes each. */
static glimpse_status check_tga(const uint8_t *bytes, size_t size, const char *label) {
    if (size < 18) return GLIMPSE_STATUS_OK; /* stb refuses it as no TGA */
    int colour_map = bytes[1], type = bytes[2], bits = bytes[16];
    int read_by_rows = colour_map == 0 && (type == 2 || type == 3) &&
                       (bits == 8 || bits == 24 || bits == 32 || (bits == 16 && type == 3));
    if (!read_by_rows) return GLIMPSE_STATUS_OK; /* colour-mapped, run-length or 15/16-bit RGB: byte by byte */
    uint64_t width = (uint64_t)bytes[12] | (uint64_t)bytes[13] << 8;
    uint64_t height = (uint64_t)bytes[14] | (uint64_t)bytes[15] << 8;
    uint64_t needed = 18 + (uint64_t)bytes[0] + width * height * (uint64_t)(bits / 8);
    if ((uint64_t)size < needed)
        return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: broken image: image file is truncated (%llu of %llu bytes)",
                         label, (unsigned long long)size, (unsigned long long)needed);
    return GLIMPSE_STATUS_OK;
}

glimpse_status stb_check_data(const uint8_t *bytes, size_t size, const char *label) {
    /* a TGA has no magic number: stb_image tries it last, after BMP and GIF */
    if (size >= 2 && bytes[0] == 'B' && bytes[1] == 'M') return GLIMPSE_STATUS_OK;
    if (size >= 4 && bytes[0] == 'G' && bytes[1] == 'I' && bytes[2] == 'F' && bytes[3] == '8')
        return GLIMPSE_STATUS_OK;
    return check_tga(bytes, size, label);
}
