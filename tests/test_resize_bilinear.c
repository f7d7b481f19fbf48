/* test_resize_bilinear.c — Pillow's BILINEAR resize (ViTImageProcessor's
 * resample 2) reproduced byte for byte: a synthetic picture shrunk (where
 * Pillow's bilinear is a triangle filter widened by the ratio, as its bicubic
 * path is) and enlarged, against Pillow 9.4's own output in
 * tests/data/pillow_bilinear.json (written by pillow_bilinear.py). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <cmocka.h>

#include <cjson/cJSON.h>

#include "core/file.h"
#include "vision/image.h"
#include "vision/resize.h"

static void test_bilinear_as_pillow(void **state) {
    (void)state;
    uint8_t *text;
    size_t size;
    assert_int_equal(file_read_all(GLIMPSE_SOURCE_DIR "/tests/data/pillow_bilinear.json", 1 << 20, &text, &size),
                     GLIMPSE_STATUS_OK);
    cJSON *reference = cJSON_ParseWithLength((const char *)text, size);
    free(text);
    assert_non_null(reference);
    int width = cJSON_GetObjectItem(reference, "width")->valueint;
    int height = cJSON_GetObjectItem(reference, "height")->valueint;
    glimpse_image *source;
    assert_int_equal(image_allocate(width, height, &source), GLIMPSE_STATUS_OK);
    for (int y = 0; y < height; y++)
        for (int x = 0; x < width; x++) { /* the picture pillow_bilinear.py draws */
            uint8_t *p = source->pixels + ((size_t)y * width + x) * 3;
            p[0] = (uint8_t)((x * 7 + y * 13) % 256), p[1] = (uint8_t)((x * x + 3 * y) % 256);
            p[2] = (uint8_t)((x * y * 5 + 11) % 256);
        }
    const cJSON *item;
    int cases = 0;
    cJSON_ArrayForEach(item, cJSON_GetObjectItem(reference, "cases")) {
        int w = cJSON_GetObjectItem(item, "width")->valueint, h = cJSON_GetObjectItem(item, "height")->valueint;
        const cJSON *pixels = cJSON_GetObjectItem(item, "pixels");
        glimpse_image *out;
        assert_int_equal(image_resize(source, w, h, RESIZE_FILTER_BILINEAR, &out), GLIMPSE_STATUS_OK);
        assert_int_equal(cJSON_GetArraySize(pixels), w * h * 3);
        int i = 0;
        const cJSON *value;
        cJSON_ArrayForEach(value, pixels) {
            if (out->pixels[i] != value->valueint)
                fail_msg("%dx%d: byte %d (pixel %d, channel %d) is %d, Pillow's %d", w, h, i, i / 3, i % 3,
                         out->pixels[i], value->valueint);
            i++;
        }
        glimpse_image_free(out);
        cases++;
    }
    assert_int_equal(cases, 6);
    glimpse_image_free(source);
    cJSON_Delete(reference);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_bilinear_as_pillow)};
    return cmocka_run_group_tests_name("bilinear resize", tests, NULL, NULL);
}
