/* decode_webp.c — WebP through libwebp as Pillow 9.4 reads it: its animation
 * decoder (libwebpdemux) in RGBA, first frame only (a still image is a
 * one-frame animation), alpha dropped. The orientation comes from the EXIF
 * chunk. An incomplete file is refused, as WebPDemux refuses it. */
#include <string.h>

#include <webp/decode.h>
#include <webp/demux.h>

#include "core/error.h"
#include "vision/decoders.h"

glimpse_status decode_webp(const uint8_t *bytes, size_t size, const char *label, uint64_t max_pixels,
                           glimpse_image **out, int *orientation) {
    WebPData data = {bytes, size};
    /* The container first: the canvas size and the EXIF chunk, nothing decoded yet. */
    WebPDemuxer *demuxer = WebPDemux(&data);
    if (!demuxer) return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: broken WebP: not a whole WebP file", label);
    uint32_t width = WebPDemuxGetI(demuxer, WEBP_FF_CANVAS_WIDTH);
    uint32_t height = WebPDemuxGetI(demuxer, WEBP_FF_CANVAS_HEIGHT);
    glimpse_status status = check_dimensions(label, width, height, max_pixels);
    if (status) {
        WebPDemuxDelete(demuxer);
        return status;
    }
    WebPChunkIterator chunk;
    if (WebPDemuxGetChunk(demuxer, "EXIF", 1, &chunk)) {
        *orientation = exif_orientation(chunk.chunk.bytes, chunk.chunk.size);
        WebPDemuxReleaseChunkIterator(&chunk);
    }
    WebPDemuxDelete(demuxer);

    WebPAnimDecoderOptions options;
    if (!WebPAnimDecoderOptionsInit(&options)) return error_set(GLIMPSE_STATUS_INTERNAL, "%s: libwebp version mismatch", label);
    options.color_mode = MODE_RGBA;
    options.use_threads = 0;
    WebPAnimDecoder *decoder = WebPAnimDecoderNew(&data, &options);
    if (!decoder) return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: broken WebP: cannot read its frames", label);
    uint8_t *canvas = NULL;
    int timestamp;
    if (!WebPAnimDecoderGetNext(decoder, &canvas, &timestamp) || !canvas) {
        WebPAnimDecoderDelete(decoder);
        return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: broken WebP: cannot decode its first frame", label);
    }
    glimpse_image *image;
    status = image_allocate((int)width, (int)height, &image);
    if (status) {
        WebPAnimDecoderDelete(decoder);
        return error_prefix(status, "%s", label);
    }
    size_t pixels = (size_t)width * height;
    for (size_t i = 0; i < pixels; i++) memcpy(image->pixels + 3 * i, canvas + 4 * i, 3);
    WebPAnimDecoderDelete(decoder);
    *out = image;
    return GLIMPSE_STATUS_OK;
}
