/* fuzz_config.c — libFuzzer target: arbitrary bytes as config.json and
 * preprocessor_config.json, through every config reader the loaders use. */
#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#include "fusion/bart.h"
#include "fusion/bert.h"
#include "fusion/gpt2.h"
#include "text/clip_text.h"
#include "vision/davit.h"
#include "vision/preprocess.h"
#include "vision/vit.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    cJSON *json = cJSON_ParseWithLength((const char *)data, size);
    if (!json) return 0;
    const cJSON *vision = cJSON_GetObjectItemCaseSensitive(json, "vision_config");
    const cJSON *text = cJSON_GetObjectItemCaseSensitive(json, "text_config");
    vit_config v;
    clip_text_config t;
    bert_config b;
    preprocess_config p = preprocess_default_clip(224);
    vit_config_read(vision ? vision : json, "fuzz", VIT_VARIANT_CLIP, &v);
    vit_config_read(vision ? vision : json, "fuzz", VIT_VARIANT_BLIP, &v);
    vit_config_read(vision ? vision : json, "fuzz", VIT_VARIANT_SIGLIP, &v);
    clip_text_config_read(text ? text : json, "fuzz", CLIP_TEXT_VARIANT_CLIP, 512, &t);
    clip_text_config_read(text ? text : json, "fuzz", CLIP_TEXT_VARIANT_SIGLIP, 512, &t);
    bert_config_read(text ? text : json, "fuzz", 768, &b);
    bart_config bart; /* Florence-2's two towers */
    davit_config davit;
    bart_config_read(text ? text : json, "fuzz", &bart);
    davit_config_read(vision ? vision : json, "fuzz", 768, &davit);
    const cJSON *encoder = cJSON_GetObjectItemCaseSensitive(json, "encoder"); /* VisionEncoderDecoderConfig's */
    const cJSON *decoder = cJSON_GetObjectItemCaseSensitive(json, "decoder");
    gpt2_config g;
    vit_config_read(encoder ? encoder : json, "fuzz", VIT_VARIANT_VIT, &v);
    gpt2_config_read(decoder ? decoder : json, "fuzz", 768, &g);
    preprocess_config vit = preprocess_default_vit(224);
    preprocess_config_read(json, "fuzz", 1, &vit);
    preprocess_config_read(json, "fuzz", 0, &p);
    preprocess_config_read(json, "fuzz", 1, &p);
    cJSON_Delete(json);
    return 0;
}
