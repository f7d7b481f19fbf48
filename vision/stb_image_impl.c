/* stb_image_impl.c — stb_image's implementation (Debian's libstb-dev header) compiled as our own object,
 * with only the formats decode.c takes from it (BMP, GIF, TGA), so sanitizers and fuzzers see its reads.
 * PNM is read by decode_pnm.c instead; no stdio, HDR or float paths. */
#define STB_IMAGE_IMPLEMENTATION
#define STBI_ONLY_BMP
#define STBI_ONLY_GIF
#define STBI_ONLY_TGA
#define STBI_NO_STDIO
#define STBI_NO_LINEAR
#define STBI_NO_HDR
#include <stb/stb_image.h>
