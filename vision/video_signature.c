/* video_signature.c — video containers told from pictures by their first
 * bytes alone: what a build without FFmpeg (video_reader_unavailable.c), or
 * a machine where its libraries cannot be loaded, uses in place of
 * libavformat's probe, so that a video is still refused as a video. */
#include <string.h>

#include "vision/video_reader.h"

/* MP4/MOV (an ftyp, moov or mdat box that is not a picture's), Matroska/WebM,
 * AVI, FLV, ASF, Ogg and MPEG program streams, by their signatures. */
bool video_signature_probe(const uint8_t *bytes, size_t size) {
    if (!bytes || size < 12 || image_known_format(bytes, size)) return false;
    static const uint8_t ebml[4] = {0x1a, 0x45, 0xdf, 0xa3}, asf[4] = {0x30, 0x26, 0xb2, 0x75},
                         mpeg_ps[4] = {0x00, 0x00, 0x01, 0xba};
    return memcmp(bytes + 4, "ftyp", 4) == 0 || memcmp(bytes + 4, "moov", 4) == 0 ||
           memcmp(bytes + 4, "mdat", 4) == 0 || memcmp(bytes, ebml, 4) == 0 ||
           (memcmp(bytes, "RIFF", 4) == 0 && memcmp(bytes + 8, "AVI ", 4) == 0) || memcmp(bytes, "FLV\x01", 4) == 0 ||
           memcmp(bytes, asf, 4) == 0 || memcmp(bytes, "OggS", 4) == 0 || memcmp(bytes, mpeg_ps, 4) == 0;
}
