/* fuzz_images.c — libFuzzer target: arbitrary bytes through the image
 * decoders (JPEG, PNG, WebP, TIFF, HEIF/AVIF, stb's formats), the EXIF
 * orientation readers and transposes, and, when they decode, the
 * preprocessing, with a 4-megapixel limit so the fuzzer cannot ask for
 * giant buffers. Every input also goes through the EXIF, TIFF-IFD and XMP
 * readers directly, as if it were such a block. */
#include <stdint.h>
#include <stdlib.h>

#include "vision/decoders.h"
#include "vision/image.h"
#include "vision/preprocess.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* the metadata readers on their own: every byte an EXIF block, a TIFF file, XMP */
    volatile int orientations = exif_orientation(data, size) + tiff_file_orientation(data, size) +
                                xmp_orientation(data, size) + tiff_file_has_tag(data, size, 262);
    (void)orientations;
    glimpse_image *image;
    if (image_decode(data, size, "fuzz", 4u << 20, &image) != GLIMPSE_STATUS_OK) return 0;
    preprocess_config config = preprocess_default_clip(32);
    float *pixels = malloc(3 * 32 * 32 * sizeof(float));
    if (pixels) preprocess_image(pixels, image, &config);
    free(pixels);
    glimpse_image_free(image);
    return 0;
}
