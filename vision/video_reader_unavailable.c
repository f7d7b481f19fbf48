/* video_reader_unavailable.c — vision/video_reader.h in a build without FFmpeg
 * (GLIMPSE_WITH_VIDEO=OFF): the common containers are still told from
 * pictures by their first bytes, and opening one says the build has no video
 * support. It decodes nothing. */
#include <string.h>

#include "core/features.h"
#include "vision/video_reader.h"

/* MP4/MOV (an ftyp, moov or mdat box that is not a picture's), Matroska/WebM,
 * AVI, FLV, ASF, Ogg and MPEG program streams, by their signatures. */
bool video_probe(const uint8_t *bytes, size_t size) {
    if (!bytes || size < 12 || image_known_format(bytes, size)) return false;
    static const uint8_t ebml[4] = {0x1a, 0x45, 0xdf, 0xa3}, asf[4] = {0x30, 0x26, 0xb2, 0x75},
                         mpeg_ps[4] = {0x00, 0x00, 0x01, 0xba};
    return memcmp(bytes + 4, "ftyp", 4) == 0 || memcmp(bytes + 4, "moov", 4) == 0 ||
           memcmp(bytes + 4, "mdat", 4) == 0 || memcmp(bytes, ebml, 4) == 0 ||
           (memcmp(bytes, "RIFF", 4) == 0 && memcmp(bytes + 8, "AVI ", 4) == 0) || memcmp(bytes, "FLV\x01", 4) == 0 ||
           memcmp(bytes, asf, 4) == 0 || memcmp(bytes, "OggS", 4) == 0 || memcmp(bytes, mpeg_ps, 4) == 0;
}

glimpse_status video_open(const uint8_t *bytes, size_t size, const char *label, const video_params *params,
                          video_reader **out) {
    *out = NULL;
    return feature_unavailable(GLIMPSE_FEATURE_VIDEO, label, "a video");
}

glimpse_status video_next(video_reader *reader, glimpse_image **frame, double *seconds, int64_t *number) {
    *frame = NULL;
    return feature_unavailable(GLIMPSE_FEATURE_VIDEO, NULL, NULL);
}

void video_close(video_reader *reader) { (void)reader; }

bool video_whole(const video_reader *reader) {
    (void)reader;
    return true;
}

glimpse_status video_check_whole(const video_reader *reader) {
    (void)reader;
    return GLIMPSE_STATUS_OK;
}
