/* caption_batch.h — continuous batching of captions: the decoder steps of many pictures' captions (and their
 * beams) run as the rows of one step, so the decoder's weights are read once per step for all of them;
 * pictures join as cache slots free up and leave when their captions finish. Drives any family's
 * caption_batch_decoder (fusion/generate.h); knows nothing of images or files. Every caption comes out token for
 * token as caption_generate makes it alone. */
#ifndef GLIMPSE_FUSION_CAPTION_BATCH_H
#define GLIMPSE_FUSION_CAPTION_BATCH_H

#include "fusion/generate.h"

/* One picture's caption. */
typedef struct caption_batch_request {
    caption_settings settings;
    const int32_t *prompt; /* what the search starts from (start token first), prompt_length ids */
    size_t prompt_length;
    /* rows the picture's first step takes in each sequence: prompt_length, or for OPT the prefix and the
     * prompt (the ids then stand for them) */
    size_t first_rows;
    caption_token_callback callback; /* may be NULL */
    void *user;
    int32_t *out; /* capacity settings.max_length: the whole sequence, as caption_generate writes it */
    size_t out_length;
} caption_batch_request;

/* The caller's side of a run: admit sets picture `picture`'s image side into image slot `image` (called in
 * picture order, as slots free up); finished hears that picture's caption is in its request's out. Either
 * failing ends the run with its status. */
typedef struct caption_batch_hooks {
    glimpse_status (*admit)(void *user, size_t picture, size_t image);
    glimpse_status (*finished)(void *user, size_t picture);
    void *user;
} caption_batch_hooks;

/* Captions requests[0..count) with at most `images` pictures in flight (image slots 0 .. images-1 of the
 * decoder's state) in the decoder's slots; each request needs settings.beams <= decoder->slots and its first
 * step's rows within decoder->max_rows. On failure the outs written so far stay written; the caller frees them. */
glimpse_status caption_batch_run(const caption_batch_decoder *decoder, caption_batch_request *requests, size_t count,
                                 size_t images, const caption_batch_hooks *hooks, pool *threads);

#endif
