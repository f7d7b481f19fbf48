/* caption.h — turning next-token logits into a caption: greedy search,
 * beam search with transformers' semantics, and sampling (temperature,
 * top-k, top-p, seeded), with repetition penalty and minimum and maximum
 * lengths. Drives a bert decoder; knows nothing of images or files. */
#ifndef GLIMPSE_FUSION_CAPTION_H
#define GLIMPSE_FUSION_CAPTION_H

#include <stddef.h>
#include <stdint.h>

#include "fusion/bert.h"

typedef struct caption_settings {
    size_t max_length;  /* whole sequence: start token + prompt + generated (transformers' max_length) */
    size_t min_length;  /* likewise: [SEP] is forbidden while shorter */
    int beams;          /* 1 = greedy or sampling */
    float length_penalty;
    float repetition_penalty; /* 1 = none */
    int sample;
    float temperature;
    int top_k;          /* 0 = off */
    float top_p;        /* 1 = off */
    uint64_t seed;
    int32_t end_id;     /* [SEP] */
    int32_t pad_id;
} caption_settings;

/* Called with each token as it is chosen (greedy and sampling only);
 * returning non-zero stops generation (GLIMPSE_STATUS_CANCELLED). */
typedef int (*caption_token_callback)(void *user, int32_t id);

/* Generates from prompt[0..prompt_length) (the start token first), with the
 * image already set in state (bert_set_image). Writes the whole sequence —
 * prompt, generated tokens, and [SEP] when generation stopped on it — to
 * out (capacity >= max_length) and its length to *out_length. The state
 * must hold settings->beams sequences of max_length tokens. */
glimpse_status caption_generate(const bert_model *model, bert_state *state, const int32_t *prompt,
                                size_t prompt_length, const caption_settings *settings,
                                caption_token_callback callback, void *user, int32_t *out, size_t *out_length,
                                pool *threads);

#endif
