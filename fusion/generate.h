/* generate.h — turning next-token logits into a caption: greedy search,
 * beam search with transformers' semantics, and sampling (temperature,
 * top-k, top-p, seeded), with repetition penalty and minimum and maximum
 * lengths. Drives any decoder through caption_decoder (BERT for BLIP; each
 * captioner family supplies its own); knows nothing of images or files. */
#ifndef GLIMPSE_FUSION_GENERATE_H
#define GLIMPSE_FUSION_GENERATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/attention_record.h"
#include "core/error.h"
#include "core/pool.h"

/* End tokens besides caption_settings.end_id (Qwen2's generation config lists two). */
#define CAPTION_MAX_MORE_END_IDS 3

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
    /* What transformers 4.40's generate adds (every field zero: off, as the families of 4.27 need): */
    int32_t more_end_ids[CAPTION_MAX_MORE_END_IDS]; /* other tokens that end a sequence as end_id does */
    size_t more_end_count;
    int no_repeat_ngram; /* n > 0: a token that would repeat an n-gram of the sequence gets -inf */
    bool force_bos, force_eos; /* at length 1 (force_bos) and max_length - 1 (force_eos) only that token */
    int32_t forced_bos_id, forced_eos_id;
    bool early_stopping; /* beams: done as soon as `beams` hypotheses are finished */
    /* beams: a hypothesis is scored over the tokens generated after the prompt (the end token counted, open beams
     * over all they hold), the done test likewise, and the candidates kept are max(2, 1 + end tokens) × beams;
     * off: over the whole sequence without the end token (4.27) */
    bool score_generated;
} caption_settings;

/* The settings of a caption's params (glimpse.h's, resolved) after a prompt of prompt_length ids: lengths count
 * the prompt as transformers' max_length does; the 4.40 fields are left off. */
caption_settings caption_settings_of(const glimpse_caption_params *p, size_t prompt_length, int32_t end_id,
                                     int32_t pad_id);

/* The k-th largest of x[0 .. n) (1 <= k <= n), the value a descending sort would put at k - 1 (top-k sampling's
 * threshold): by three radix passes over the values' ordered bits, O(n) where the sort was O(n log n) (a
 * Qwen2 vocabulary's 151,936 scores: 30 ms a sampled step sorted). Exposed for its test. */
float generate_kth_largest(const float *x, int32_t n, int32_t k);

/* A decoder as generation sees it: a KV-cached language model whose image
 * side is already set. `self` is the family's state. */
typedef struct caption_decoder {
    void *self;
    int32_t vocab_size;
    size_t max_sequences; /* sequences the state holds (beams) */
    size_t max_length;    /* positions the state holds */
    /* Forgets every cached token (the image side stays). */
    void (*restart)(void *self);
    /* Appends `step` tokens to each of `sequences` sequences (ids[s × step + j])
     * and points *logits at each sequence's next-token logits [sequences, vocab],
     * which generation may change in place until the next step. */
    glimpse_status (*step)(void *self, const int32_t *ids, size_t sequences, size_t step, float **logits,
                           pool *threads);
    /* Sequence s becomes old sequence from[s]. */
    void (*reorder)(void *self, const size_t *from, size_t sequences);
} caption_decoder;

/* What a cached decoder's state holds: max_sequences sequences of max_length positions, length of them filled,
 * steps of max_step tokens, and (record not NULL) an attention record for `heads` heads over image_tokens. */
typedef struct caption_decoder_room {
    size_t max_sequences, max_step, max_length, length;
    const attention_record *record;
    size_t heads, image_tokens;
} caption_decoder_room;

/* Whether `sequences` sequences of `step` more tokens fit the room (and its attention record). */
glimpse_status caption_decoder_check_room(const caption_decoder_room *room, size_t sequences, size_t step);

/* The start of every cached decoder step: checks that `sequences` sequences of `step` new tokens
 * (ids[s × step + j]) fit the room and the vocabulary, then x[s·step + j] = token_embeddings row id +
 * position_embeddings row length + j, each [hidden]. */
glimpse_status caption_decoder_embed(float *x, const caption_decoder_room *room, const kernel_weight *token_embeddings,
                                     const float *position_embeddings, size_t hidden, int32_t vocab_size,
                                     const int32_t *ids, size_t sequences, size_t step);

/* out[count, hidden] = token_embeddings rows of ids (each checked against the vocabulary): the input of a
 * decoder whose positions are not added to its embeddings (OPT adds its own; Llama rotates). */
glimpse_status caption_embed_ids(float *out, const kernel_weight *token_embeddings, size_t hidden,
                                 int32_t vocab_size, const int32_t *ids, size_t count);

/* One sequence of a decoder step over a table of sequences (a batched step: many pictures' captions, each
 * beam a sequence): `step` new tokens ids[0..step) appended to cache slot `slot` after the `length` positions
 * it holds, attending to image slot `image`. */
typedef struct caption_sequence {
    size_t slot, length, step, image;
    const int32_t *ids;
} caption_sequence;

/* Rows of a table: the sum of its steps. */
size_t caption_sequences_rows(const caption_sequence *sequences, size_t count);

/* caption_decoder_embed for a table (each sequence at its own positions), room.length unused: checks each
 * against the room (slots max_sequences, positions max_length, rows max_step in all) and the vocabulary. */
glimpse_status caption_decoder_embed_table(float *x, const caption_decoder_room *room,
                                           const kernel_weight *token_embeddings, const float *position_embeddings,
                                           size_t hidden, int32_t vocab_size, const caption_sequence *sequences,
                                           size_t count);

/* A decoder whose state holds many cache slots and image slots, stepped over a table of sequences
 * (fusion/caption_batch.c drives it). Each row of a step comes out as it does in the family's own
 * caption_decoder step, bit for bit, when `rowwise` is set (kernel_linear_rowwise) and the family's one-picture
 * steps of one token are rowwise too. */
typedef struct caption_batch_decoder {
    void *self;
    int32_t vocab_size;
    size_t slots;      /* cache slots: sequences in flight */
    size_t max_rows;   /* rows one step holds */
    size_t max_length; /* positions each slot holds */
    /* How the family's caption_decoder runs a picture's first step: once per beam (BERT, GPT-2: beams ×
     * prompt rows), or once, copied to the other beams (OPT). */
    int first_step_each_beam;
    /* One step over the table; *logits [count, vocab]: each sequence's next-token logits (its last row),
     * which the caller may change until the next step. */
    glimpse_status (*step)(void *self, const caption_sequence *sequences, size_t count, int rowwise, float **logits,
                           pool *threads);
    /* Cache slot `to` takes the first `length` positions of slot `from`. */
    void (*copy)(void *self, size_t to, size_t from, size_t length);
} caption_batch_decoder;

/* Called with each token as it is chosen (greedy and sampling only);
 * returning non-zero stops generation (GLIMPSE_STATUS_CANCELLED). */
typedef int (*caption_token_callback)(void *user, int32_t id);

/* Generates from prompt[0..prompt_length) (the start token first), with the
 * image already set in the decoder. Writes the whole sequence —
 * prompt, generated tokens, and the end token when generation stopped on it
 * — to out (capacity >= max_length) and its length to *out_length. The
 * decoder must hold settings->beams sequences of max_length tokens. */
glimpse_status caption_generate(const caption_decoder *decoder, const int32_t *prompt,
                                size_t prompt_length, const caption_settings *settings,
                                caption_token_callback callback, void *user, int32_t *out, size_t *out_length,
                                pool *threads);

/* ------------------------------------------------------ one caption's search, step by step */

/* The search for one caption (greedy, sampled or beam) as a state that takes one decoder step's logits at a
 * time, so that a scheduler can step many captions together (fusion/caption_batch.h); caption_generate
 * drives one alone. The same settings and logits give the same tokens either way. */
typedef struct caption_search caption_search;

/* What the next decoder step takes: ids[s] the one new token of each of the search's sequences, which first
 * become old sequence from[s] (from NULL: no reordering). ids NULL: the caption is finished. */
typedef struct caption_step {
    const int32_t *ids;
    const size_t *from;
} caption_step;

/* A search from prompt[0..prompt_length) (copied), tokens streamed to callback (may be NULL) as
 * caption_generate streams them. Free with caption_search_free. */
glimpse_status caption_search_create(const caption_settings *settings, int32_t vocab, const int32_t *prompt,
                                     size_t prompt_length, caption_token_callback callback, void *user,
                                     caption_search **out);
void caption_search_free(caption_search *search);
/* Sequences the search's decoder steps carry (its beams). */
size_t caption_search_sequences(const caption_search *search);
/* The first step's ids [sequences × step] (the prompt, once per beam). */
const int32_t *caption_search_first_ids(const caption_search *search, size_t *step);
/* Takes a step's logits [sequences, vocab] (changed in place) and says what the next step takes. */
glimpse_status caption_search_feed(caption_search *search, float *logits, caption_step *next);
/* The finished caption's whole sequence (capacity max_length); beam search streams the winner's tokens after
 * the prompt's prompt_length to the callback here. */
glimpse_status caption_search_result(const caption_search *search, size_t prompt_length, int32_t *out,
                                     size_t *out_length);

#endif
