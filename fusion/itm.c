/* itm.c — BLIP's ITM head and ITC projections. */
#include "fusion/itm.h"

#include <math.h>

#include "core/kernels.h"
#include "weights/layers.h"

glimpse_status itm_heads_load(itm_heads *heads, const itm_names *names, weight_store *store, size_t vision_hidden,
                              size_t text_hidden, size_t shared) {
    heads->vision_hidden = vision_hidden;
    heads->text_hidden = text_hidden;
    heads->shared = shared;
    glimpse_status status = layers_load_linear(store, names->vision_proj, shared, vision_hidden,
                                               &heads->vision_proj_weight, &heads->vision_proj_bias);
    if (!status)
        status = layers_load_linear(store, names->text_proj, shared, text_hidden, &heads->text_proj_weight,
                                    &heads->text_proj_bias);
    if (!status)
        status = layers_load_linear(store, names->itm_head, 2, text_hidden, &heads->itm_weight, &heads->itm_bias);
    return status;
}

float itm_match_probability(const itm_heads *heads, const float *first_token, float *logits) {
    float two[2];
    const kernel_weight weight = kernel_weight_f32(heads->itm_weight);
    kernel_linear(two, 2, first_token, heads->text_hidden, &weight, heads->itm_bias, 1, heads->text_hidden, 2, false,
                  NULL);
    if (logits) logits[0] = two[0], logits[1] = two[1];
    kernel_softmax(two, 1, 2);
    return two[1];
}

void itm_image_feature(const itm_heads *heads, const float *image_first_token, float *out) {
    const kernel_weight weight = kernel_weight_f32(heads->vision_proj_weight);
    kernel_linear(out, heads->shared, image_first_token, heads->vision_hidden, &weight, heads->vision_proj_bias, 1,
                  heads->vision_hidden, heads->shared, false, NULL);
    kernel_l2_normalize(out, heads->shared);
}

void itm_text_feature(const itm_heads *heads, const float *text_first_token, float *out) {
    const kernel_weight weight = kernel_weight_f32(heads->text_proj_weight);
    kernel_linear(out, heads->shared, text_first_token, heads->text_hidden, &weight, heads->text_proj_bias, 1,
                  heads->text_hidden, heads->shared, false, NULL);
    kernel_l2_normalize(out, heads->shared);
}
