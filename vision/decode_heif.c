/* decode_heif.c — HEIC and AVIF through libheif (its libde265, dav1d and aom
 * decoders), the way libheif's heif-convert makes a PNG: the primary image
 * with its transformations (irot, imir, clap) applied by libheif, RGB(A) at 8
 * bits, or 16-bit big-endian for deeper images (of which a PNG reader keeps
 * the high byte, as here). EXIF orientation is never applied on top: in HEIF
 * the transformations are the orientation. libheif is opened at the first
 * ISO media file (heif_library.h), not linked. */
#include <string.h>

#include "core/error.h"
#include "vision/decoders.h"
#include "vision/heif_library.h"

static glimpse_status heif_failure(const char *label, struct heif_error error, const char *doing) {
    glimpse_status status = error.code == heif_error_Memory_allocation_error ? GLIMPSE_STATUS_OUT_OF_MEMORY
                            : error.code == heif_error_Unsupported_feature ||
                                      error.code == heif_error_Unsupported_filetype
                                ? GLIMPSE_STATUS_UNSUPPORTED
                                : GLIMPSE_STATUS_BAD_FORMAT;
    return error_set(status, "%s: broken HEIF: %s: %s", label, doing, error.message ? error.message : "failed");
}

bool heif_sniff(const uint8_t *bytes, size_t size) {
    if (!heif_library_load(NULL)) return heif_signature_sniff(bytes, size); /* (decode_heif then says why) */
    return libheif.heif_check_filetype(bytes, size > 4096 ? 4096 : (int)size) != heif_filetype_no;
}

glimpse_status decode_heif(const uint8_t *bytes, size_t size, const char *label, uint64_t max_pixels,
                           glimpse_image **out, int *orientation) {
    *orientation = ORIENTATION_ABSENT;
    const char *why = NULL;
    if (!heif_library_load(&why)) return error_set(GLIMPSE_STATUS_UNSUPPORTED, "%s: %s", label, why);
    struct heif_context *context = libheif.heif_context_alloc();
    if (!context) return ERROR_OOM();
    struct heif_image_handle *handle = NULL;
    struct heif_image *decoded = NULL;
    struct heif_decoding_options *options = NULL;
    glimpse_image *image = NULL;
    glimpse_status status = GLIMPSE_STATUS_OK;
    struct heif_error error = libheif.heif_context_read_from_memory_without_copy(context, bytes, size, NULL);
    if (error.code) {
        status = heif_failure(label, error, "cannot read the file");
        goto done;
    }
    error = libheif.heif_context_get_primary_image_handle(context, &handle);
    if (error.code) {
        status = heif_failure(label, error, "no primary image");
        goto done;
    }
    /* The limit holds for the coded size (ispe) and the size after the transformations. */
    int coded_width = libheif.heif_image_handle_get_ispe_width(handle);
    int coded_height = libheif.heif_image_handle_get_ispe_height(handle);
    int width = libheif.heif_image_handle_get_width(handle), height = libheif.heif_image_handle_get_height(handle);
    if (coded_width < 0 || coded_height < 0) coded_width = coded_height = 0;
    status = check_dimensions(label, (uint64_t)width, (uint64_t)height, max_pixels);
    if (!status && (uint64_t)coded_width * (uint64_t)coded_height > max_pixels)
        status = check_dimensions(label, (uint64_t)coded_width, (uint64_t)coded_height, max_pixels);
    if (status) goto done;
    int alpha = libheif.heif_image_handle_has_alpha_channel(handle);
    int depth = libheif.heif_image_handle_get_luma_bits_per_pixel(handle);
    if (depth < 8 || depth > 16) {
        status = error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: broken HEIF: %d bits per sample", label, depth);
        goto done;
    }
    enum heif_chroma chroma = depth == 8 ? (alpha ? heif_chroma_interleaved_RGBA : heif_chroma_interleaved_RGB)
                                         : (alpha ? heif_chroma_interleaved_RRGGBBAA_BE : heif_chroma_interleaved_RRGGBB_BE);
    options = libheif.heif_decoding_options_alloc(); /* heif-convert's defaults: transformations applied */
    if (!options) {
        status = ERROR_OOM();
        goto done;
    }
    error = libheif.heif_decode_image(handle, &decoded, heif_colorspace_RGB, chroma, options);
    if (error.code) {
        status = heif_failure(label, error, "cannot decode the image");
        goto done;
    }
    int stride = 0;
    const uint8_t *plane = libheif.heif_image_get_plane_readonly(decoded, heif_channel_interleaved, &stride);
    width = libheif.heif_image_get_width(decoded, heif_channel_interleaved);
    height = libheif.heif_image_get_height(decoded, heif_channel_interleaved);
    int range = libheif.heif_image_get_bits_per_pixel_range(decoded, heif_channel_interleaved);
    if (!plane || stride <= 0 || width <= 0 || height <= 0 || (depth > 8 && (range <= 8 || range > 16))) {
        status = error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: broken HEIF: no decoded pixels", label);
        goto done;
    }
    status = check_dimensions(label, (uint64_t)width, (uint64_t)height, max_pixels);
    if (status) goto done;
    status = image_allocate(width, height, &image);
    if (status) {
        status = error_prefix(status, "%s", label);
        goto done;
    }
    size_t channels = alpha ? 4 : 3, sample_bytes = depth == 8 ? 1 : 2;
    for (int y = 0; y < height; y++) {
        const uint8_t *source = plane + (size_t)y * (size_t)stride;
        uint8_t *target = image->pixels + (size_t)y * (size_t)width * 3;
        for (int x = 0; x < width; x++, source += channels * sample_bytes)
            for (int c = 0; c < 3; c++) {
                if (depth == 8) {
                    target[3 * x + c] = source[c];
                } else { /* heif-convert widens to 16 bits by shifting up; the high byte is value >> (range - 8) */
                    unsigned value = ((unsigned)source[2 * c] << 8) | source[2 * c + 1];
                    target[3 * x + c] = (uint8_t)((value >> (range - 8)) & 0xff);
                }
            }
    }
done:
    libheif.heif_image_release(decoded);
    libheif.heif_decoding_options_free(options);
    libheif.heif_image_handle_release(handle);
    libheif.heif_context_free(context);
    if (status) glimpse_image_free(image);
    else *out = image;
    return status;
}
