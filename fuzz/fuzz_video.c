/* fuzz_video.c — libFuzzer target: arbitrary bytes through the video
 * reader (vision/video_reader.c: the container probe, libavformat's demuxers we
 * allow, the decoders, rotation and the conversion to RGB), every frame
 * sampled and scene changes measured, with a 1-megapixel limit so the fuzzer
 * cannot ask for giant frames. Each input is read twice: every 0.05 s and at
 * scene changes. */
#include <stdint.h>

#include "vision/video_reader.h"

static void read_all_frames(const uint8_t *data, size_t size, double every, double scenes) {
    video_params params = video_default_params();
    params.every_seconds = every;
    params.scene_threshold = scenes;
    params.max_pixels = 1u << 20;
    video_reader *reader;
    if (video_open(data, size, "fuzz", &params, &reader) != GLIMPSE_STATUS_OK) return;
    for (int frames = 0; frames < 1000; frames++) {
        glimpse_image *frame;
        double seconds;
        int64_t number;
        if (video_next(reader, &frame, &seconds, &number) != GLIMPSE_STATUS_OK || !frame) break;
        glimpse_image_free(frame);
    }
    video_close(reader);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    volatile bool probed = video_probe(data, size);
    (void)probed;
    read_all_frames(data, size, 0.05, 0);
    read_all_frames(data, size, 1, VIDEO_DEFAULT_SCENE_THRESHOLD);
    return 0;
}
