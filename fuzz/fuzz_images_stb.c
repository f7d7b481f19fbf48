/* fuzz_images_stb.c — libFuzzer target: arbitrary bytes through the decoders of the simple formats, stb_image's
 * BMP, GIF and TGA (compiled as our own, instrumented object) and decode_pnm.c's PNM, behind the checks
 * decode.c makes before stb sees the data; 4 megapixels at most. Seeds of each format: scripts/fuzz.sh. */
#include <stdint.h>

#include "vision/decoders.h"
#include "vision/image.h"

static volatile unsigned sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* bytes another decoder claims by its magic number go to it in image_decode: not this target's */
    if (image_known_format(data, size)) return 0;
    glimpse_image *image;
    if (image_decode(data, size, "fuzz", 4u << 20, &image) != GLIMPSE_STATUS_OK) return 0;
    /* every pixel read: a pixel stb left unwritten shows under MemorySanitizer or valgrind */
    size_t count = (size_t)image->width * (size_t)image->height * 3;
    unsigned sum = 0;
    for (size_t i = 0; i < count; i++) sum += image->pixels[i];
    sink = sum;
    glimpse_image_free(image);
    return 0;
}
