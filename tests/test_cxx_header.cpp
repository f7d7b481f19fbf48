// test_cxx_header.cpp — glimpse.h must compile as C++ and link from C++:
// media applications written in C++ include it directly.
#include <cstdio>
#include <cstring>

#include "glimpse.h"

int main() {
    glimpse_load_params load = glimpse_load_default_params();
    glimpse_context_params context = glimpse_context_default_params();
    glimpse_image_params image = glimpse_image_default_params();
    glimpse_model *model = nullptr;
    glimpse_status status = glimpse_model_load("/nonexistent-model-folder", &load, &model);
    bool ok = status == GLIMPSE_STATUS_NOT_FOUND && model == nullptr && std::strlen(glimpse_last_error()) > 0 &&
              std::strcmp(glimpse_version(), GLIMPSE_VERSION_STRING) == 0 && context.threads == 0 &&
              image.max_pixels > 0 && load.load_text == 1;
    std::printf("%s\n", ok ? "1 passed, 0 failed" : "0 passed, 1 failed");
    return ok ? 0 : 1;
}
