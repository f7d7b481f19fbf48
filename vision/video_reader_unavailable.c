/* video_reader_unavailable.c — vision/video_reader.h in a build without FFmpeg
 * (GLIMPSE_WITH_VIDEO=OFF): the common containers are still told from
 * pictures by their first bytes, and opening one says the build has no video
 * support. It decodes nothing. */
#include "core/features.h"
#include "vision/video_reader.h"

bool video_probe(const uint8_t *bytes, size_t size) { return video_signature_probe(bytes, size); }

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
