// clip_embed.cpp — llama.cpp's LLaVA image encoder (its clip.cpp, through the mmproj file bench/llava_gguf.py
// writes) on pixel values given as float32 [3, size, size] (the processor's output, channels first), for
// bench/llava.sh: it checks that encoder's features against another's before timing it (upstream's CLIP graph
// has put the class token after the patches) and times it. Built against a llama.cpp checkout by
// bench/llava.sh; not part of glimpse.
//   clip_embed MMPROJ PIXELS.f32 FEATURES_OUT.f32 THREADS RUNS
// Writes the features [patches, projection] as float32 and prints one line per run: "encode_ms N".
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "clip.h"

// clip.cpp's own definition (not in its header): pixels row by row, the three channels of each together.
struct clip_image_f32 {
    int nx;
    int ny;
    std::vector<float> buf;
};

int main(int argc, char ** argv) {
    if (argc != 6) {
        std::fprintf(stderr, "usage: clip_embed MMPROJ PIXELS.f32 FEATURES_OUT.f32 THREADS RUNS\n");
        return 2;
    }
    clip_ctx * ctx = clip_model_load(argv[1], 0);
    if (!ctx) return 1;
    int side = clip_image_size(ctx), threads = std::atoi(argv[4]), runs = std::atoi(argv[5]);
    std::vector<float> planar((size_t)3 * side * side);
    FILE * in = std::fopen(argv[2], "rb");
    if (!in || std::fread(planar.data(), sizeof(float), planar.size(), in) != planar.size()) {
        std::fprintf(stderr, "%s: not %d x %d x 3 float32 pixels\n", argv[2], side, side);
        return 1;
    }
    std::fclose(in);
    clip_image_f32 image{side, side, std::vector<float>(planar.size())};
    for (int y = 0; y < side; y++)
        for (int x = 0; x < side; x++)
            for (int c = 0; c < 3; c++)
                image.buf[3 * ((size_t)y * side + x) + c] = planar[((size_t)c * side + y) * side + x];
    std::vector<float> features((size_t)clip_n_patches(ctx) * clip_n_mmproj_embd(ctx));
    for (int r = 0; r < runs; r++) {
        auto start = std::chrono::steady_clock::now();
        if (!clip_image_encode(ctx, threads, &image, features.data())) return 1;
        std::chrono::duration<double, std::milli> took = std::chrono::steady_clock::now() - start;
        std::printf("encode_ms %.3f\n", took.count());
    }
    FILE * out = std::fopen(argv[3], "wb");
    if (!out || std::fwrite(features.data(), sizeof(float), features.size(), out) != features.size()) return 1;
    std::fclose(out);
    std::printf("features %d x %d\n", clip_n_patches(ctx), clip_n_mmproj_embd(ctx));
    clip_free(ctx);
    return 0;
}
