/* generate.c — greedy, beam and sampled decoding as transformers 4.x
 * generate() does. Scores stay in float32 where the reference's
 * are float32 (log-softmax, beam sums) so the same ids come out. */
#include "fusion/generate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/profile.h"

/* --------------------------------------------------- logits processors */

/* transformers' RepetitionPenaltyLogitsProcessor: every token already in the
 * sequence has its score divided by the penalty (multiplied if negative). */
static void apply_repetition_penalty(float *scores, const int32_t *sequence, size_t length, float penalty,
                                     int32_t vocab) {
    if (penalty == 1.0f) return;
    for (size_t i = 0; i < length; i++) {
        int32_t id = sequence[i];
        if (id < 0 || id >= vocab) continue;
        int seen = 0; /* each distinct token once */
        for (size_t j = 0; j < i && !seen; j++) seen = sequence[j] == id;
        if (seen) continue;
        scores[id] = scores[id] < 0 ? scores[id] * penalty : scores[id] / penalty;
    }
}

/* transformers' NoRepeatNGramLogitsProcessor: the tokens that followed the sequence's last n - 1 tokens wherever
 * they appeared before (the start token counts) would repeat an n-gram, and get -inf. */
static void apply_no_repeat_ngram(float *scores, const int32_t *sequence, size_t length, size_t n, int32_t vocab) {
    if (!n || length + 1 < n) return;
    const int32_t *prefix = sequence + length - (n - 1);
    for (size_t start = 0; start + n <= length; start++) {
        if (memcmp(sequence + start, prefix, (n - 1) * sizeof *sequence) != 0) continue;
        int32_t banned = sequence[start + n - 1];
        if (banned >= 0 && banned < vocab) scores[banned] = -INFINITY;
    }
}

/* ForcedBOSTokenLogitsProcessor and ForcedEOSTokenLogitsProcessor: every score -inf but the forced token's, 0. */
static void force_token(float *scores, int32_t id, int32_t vocab) {
    if (id < 0 || id >= vocab) return;
    for (int32_t i = 0; i < vocab; i++) scores[i] = -INFINITY;
    scores[id] = 0;
}

static bool is_end(const caption_settings *s, int32_t id) {
    if (id == s->end_id) return true;
    for (size_t i = 0; i < s->more_end_count; i++)
        if (id == s->more_end_ids[i]) return true;
    return false;
}

/* The processors in the order transformers 4.40's generate applies them. */
static void apply_processors(float *scores, const int32_t *sequence, size_t length, const caption_settings *s,
                             int32_t vocab) {
    apply_repetition_penalty(scores, sequence, length, s->repetition_penalty, vocab);
    apply_no_repeat_ngram(scores, sequence, length, s->no_repeat_ngram > 0 ? (size_t)s->no_repeat_ngram : 0, vocab);
    if (length < s->min_length) {
        if (s->end_id >= 0 && s->end_id < vocab) scores[s->end_id] = -INFINITY;
        for (size_t i = 0; i < s->more_end_count; i++)
            if (s->more_end_ids[i] >= 0 && s->more_end_ids[i] < vocab) scores[s->more_end_ids[i]] = -INFINITY;
    }
    if (s->force_bos && length == 1) force_token(scores, s->forced_bos_id, vocab);
    if (s->force_eos && length + 1 == s->max_length) force_token(scores, s->forced_eos_id, vocab);
}

static void log_softmax(float *x, int32_t n) {
    float largest = -INFINITY;
    for (int32_t i = 0; i < n; i++)
        if (x[i] > largest) largest = x[i];
    double sum = 0;
    for (int32_t i = 0; i < n; i++) sum += expf(x[i] - largest);
    float log_sum = (float)log(sum);
    for (int32_t i = 0; i < n; i++) x[i] = (x[i] - largest) - log_sum;
}

/* ----------------------------------------------------------- sampling */

/* 2^53: the top 53 bits of a random word over this are uniform in [0, 1), every value a double. */
#define RANDOM_FRACTION_SCALE 9007199254740992.0

static uint64_t next_random(uint64_t *state) { /* splitmix64 */
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static int compare_descending(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* A float's bits as an unsigned key in the floats' order (negative values reversed, below the positive ones). */
static uint32_t order_key(float value) {
    uint32_t bits;
    memcpy(&bits, &value, sizeof bits);
    return bits & 0x80000000u ? ~bits : bits | 0x80000000u;
}

static float key_value(uint32_t key) {
    uint32_t bits = key & 0x80000000u ? key & 0x7fffffffu : ~key;
    float value;
    memcpy(&value, &bits, sizeof value);
    return value;
}

float generate_kth_largest(const float *x, int32_t n, int32_t k) {
    /* the key's bits from the top, 11, 11 and 10 at a time: each pass counts the values that share the bits
     * found so far by their next bits, and takes the bucket the k-th largest falls in */
    static const int widths[3] = {11, 11, 10};
    uint32_t counts[1 << 11], prefix = 0, prefix_mask = 0;
    int shift = 32;
    for (int pass = 0; pass < 3; pass++) {
        int width = widths[pass];
        uint32_t buckets = 1u << width;
        shift -= width;
        memset(counts, 0, buckets * sizeof *counts);
        for (int32_t i = 0; i < n; i++) {
            uint32_t key = order_key(x[i]);
            if ((key & prefix_mask) == prefix) counts[(key >> shift) & (buckets - 1)]++;
        }
        uint32_t bucket = buckets - 1, left = (uint32_t)k;
        while (bucket > 0 && counts[bucket] < left) left -= counts[bucket--];
        k = (int32_t)left;
        prefix |= bucket << shift;
        prefix_mask |= (buckets - 1) << shift;
    }
    return key_value(prefix);
}

/* Temperature, top-k and top-p as transformers' warpers, then a draw. */
static int32_t sample_token(float *scores, int32_t vocab, const caption_settings *s, uint64_t *random, float *sorted) {
    if (s->temperature > 0 && s->temperature != 1.0f)
        for (int32_t i = 0; i < vocab; i++) scores[i] /= s->temperature;
    if (s->top_k > 0 && s->top_k < vocab) {
        float threshold = generate_kth_largest(scores, vocab, s->top_k);
        for (int32_t i = 0; i < vocab; i++)
            if (scores[i] < threshold) scores[i] = -INFINITY;
    }
    if (s->top_p < 1.0f) {
        /* remove the smallest tokens whose cumulative probability is <= 1 - top_p,
         * always keeping the most probable one */
        memcpy(sorted, scores, (size_t)vocab * sizeof(float));
        qsort(sorted, (size_t)vocab, sizeof(float), compare_descending);
        float largest = sorted[0];
        double total = 0;
        for (int32_t i = 0; i < vocab; i++) total += expf(sorted[i] - largest);
        double cumulative_from_bottom = 0;
        float cutoff = -INFINITY;
        for (int32_t i = vocab - 1; i >= 1; i--) {
            cumulative_from_bottom += expf(sorted[i] - largest) / total;
            if (cumulative_from_bottom > 1.0 - s->top_p) break;
            cutoff = sorted[i];
        }
        if (cutoff != -INFINITY)
            for (int32_t i = 0; i < vocab; i++)
                if (scores[i] <= cutoff) scores[i] = -INFINITY;
    }
    float largest = -INFINITY;
    for (int32_t i = 0; i < vocab; i++)
        if (scores[i] > largest) largest = scores[i];
    double total = 0;
    for (int32_t i = 0; i < vocab; i++) total += scores[i] == -INFINITY ? 0 : exp(scores[i] - largest);
    double target = (double)(next_random(random) >> 11) / RANDOM_FRACTION_SCALE * total, running = 0;
    int32_t last = 0;
    for (int32_t i = 0; i < vocab; i++) {
        if (scores[i] == -INFINITY) continue;
        running += exp(scores[i] - largest);
        last = i;
        if (running > target) return i;
    }
    return last;
}

/* ---------------------------------------------------------- beam search */

typedef struct hypothesis {
    double score;
    size_t length;
    int32_t *ids;
} hypothesis;

typedef struct hypotheses {
    hypothesis *items; /* at most beams */
    size_t count, beams;
    double worst;
    float length_penalty;
    bool early_stopping;
} hypotheses;

/* transformers' BeamHypotheses.add: keep the best `beams` finished sequences ids[0..length), each scored by its
 * summed log-probability / scored_length^length_penalty. */
static void hypotheses_add(hypotheses *h, const int32_t *ids, size_t length, size_t scored_length,
                           double sum_logprobs) {
    double score = sum_logprobs / pow((double)scored_length, h->length_penalty);
    if (h->count >= h->beams && !(score > h->worst)) return;
    hypothesis *slot = &h->items[h->count++]; /* count <= beams here: items has beams + 1 */
    slot->score = score;
    slot->length = length;
    memcpy(slot->ids, ids, length * sizeof *ids);
    if (h->count > h->beams) {
        /* drop the worst; the new worst is the second worst */
        size_t worst = 0;
        for (size_t i = 1; i < h->count; i++)
            if (h->items[i].score < h->items[worst].score) worst = i;
        hypothesis removed = h->items[worst];
        memmove(&h->items[worst], &h->items[worst + 1], (h->count - worst - 1) * sizeof *h->items);
        h->items[h->count - 1] = removed; /* keep its buffer for reuse */
        h->count--;
        double next_worst = INFINITY;
        for (size_t i = 0; i < h->count; i++)
            if (h->items[i].score < next_worst) next_worst = h->items[i].score;
        h->worst = next_worst;
    } else {
        h->worst = score < h->worst ? score : h->worst;
    }
}

static int hypotheses_done(const hypotheses *h, double best_sum_logprobs, size_t length) {
    if (h->count < h->beams) return 0;
    if (h->early_stopping) return 1;
    return h->worst >= best_sum_logprobs / pow((double)length, h->length_penalty);
}

typedef struct candidate {
    float score;
    int32_t token;
    size_t beam;
} candidate;

/* transformers' starting scores: every beam but the first is dead at the
 * start (all beams hold the same prompt), and BeamHypotheses' worst score
 * before any hypothesis is in. */
#define DEAD_BEAM_SCORE (-1e9f)
#define NO_HYPOTHESIS_WORST 1e9

/* The state of one beam search: the live sequences, one step's candidates
 * and survivors, and the finished hypotheses. */
typedef struct beam_search {
    size_t beams, max_length;
    size_t length;                       /* tokens in each live sequence */
    size_t prompt_length;
    size_t wanted;                       /* candidates kept per step */
    bool score_generated;                /* caption_settings.score_generated */
    int32_t *sequences, *next_sequences; /* [beams, max_length] */
    float *scores;                       /* [beams]: each live sequence's summed log-probabilities */
    candidate *top;                      /* [wanted]: a step's best (beam, token), best first */
    size_t filled;                       /* candidates in top */
    float *next_scores;                  /* [beams]: the step's survivors, */
    int32_t *next_tokens;                /* their new tokens (the next step's input) */
    size_t *next_from;                   /* and the sequence each continues */
    int32_t *prompt_copies;              /* [beams, prompt_length]: the first step's input */
    hypotheses finished;
} beam_search;

static void beam_search_free(beam_search *b) {
    if (b->finished.items)
        for (size_t i = 0; i <= b->beams; i++) free(b->finished.items[i].ids);
    free(b->finished.items);
    free(b->sequences), free(b->next_sequences), free(b->scores), free(b->next_scores), free(b->next_tokens);
    free(b->next_from), free(b->top), free(b->prompt_copies);
}

/* The length a sequence of `length` tokens (plus an end token when `ended`) is scored over: the whole sequence
 * without the end token (transformers before 4.38), or the tokens generated, the end token counted. */
static size_t scored_length(const beam_search *b, size_t length, int ended) {
    return b->score_generated ? length - b->prompt_length + (ended ? 1 : 0) : length;
}

/* Every beam holds the prompt; only the first is live. On failure the
 * caller still frees with beam_search_free. */
static glimpse_status beam_search_start(beam_search *b, const int32_t *prompt, size_t prompt_length,
                                        const caption_settings *s) {
    size_t beams = (size_t)s->beams, max_length = s->max_length;
    size_t ends = 1 + s->more_end_count;
    *b = (beam_search){.beams = beams, .max_length = max_length, .length = prompt_length,
                       .prompt_length = prompt_length, .score_generated = s->score_generated,
                       .wanted = (s->score_generated && ends > 1 ? 1 + ends : 2) * beams};
    b->sequences = malloc(beams * max_length * sizeof *b->sequences);
    b->next_sequences = malloc(beams * max_length * sizeof *b->next_sequences);
    b->scores = malloc(beams * sizeof *b->scores);
    b->next_scores = malloc(beams * sizeof *b->next_scores);
    b->next_tokens = malloc(beams * sizeof *b->next_tokens);
    b->next_from = malloc(beams * sizeof *b->next_from);
    b->top = malloc(b->wanted * sizeof *b->top);
    b->prompt_copies = malloc(beams * prompt_length * sizeof *b->prompt_copies);
    b->finished = (hypotheses){calloc(beams + 1, sizeof(hypothesis)), 0, beams, NO_HYPOTHESIS_WORST,
                               s->length_penalty, s->early_stopping};
    int ok = b->sequences && b->next_sequences && b->scores && b->next_scores && b->next_tokens && b->next_from &&
             b->top && b->prompt_copies && b->finished.items;
    for (size_t i = 0; ok && i <= beams; i++)
        ok = (b->finished.items[i].ids = malloc(max_length * sizeof(int32_t))) != NULL;
    if (!ok) return ERROR_OOM();
    for (size_t beam = 0; beam < beams; beam++) {
        memcpy(b->sequences + beam * max_length, prompt, prompt_length * sizeof *prompt);
        memcpy(b->prompt_copies + beam * prompt_length, prompt, prompt_length * sizeof *prompt);
        b->scores[beam] = beam == 0 ? 0.0f : DEAD_BEAM_SCORE;
    }
    return GLIMPSE_STATUS_OK;
}

/* Scores of every (beam, token) from the step's logits: log-softmax, the
 * logits processors, plus the beam's sum. Keeps the best b->wanted, ordered
 * by score, earlier (beam, token) first on ties. */
static void collect_candidates(beam_search *b, float *logits, int32_t vocab, const caption_settings *s) {
    size_t wanted = b->wanted;
    b->filled = 0;
    for (size_t beam = 0; beam < b->beams; beam++) {
        float *scores = logits + beam * (size_t)vocab;
        log_softmax(scores, vocab);
        apply_processors(scores, b->sequences + beam * b->max_length, b->length, s, vocab);
        for (int32_t t = 0; t < vocab; t++) {
            float value = scores[t] + b->scores[beam];
            if (b->filled == wanted && !(value > b->top[wanted - 1].score)) continue;
            size_t at = b->filled < wanted ? b->filled++ : wanted - 1;
            while (at > 0 && value > b->top[at - 1].score) {
                b->top[at] = b->top[at - 1];
                at--;
            }
            b->top[at] = (candidate){value, t, beam};
        }
    }
}

/* BeamSearchScorer.process: an end token among the best `beams`
 * candidates finishes its sequence as a hypothesis; the best `beams` other
 * candidates survive. Returns how many survive. */
static size_t select_survivors(beam_search *b, const caption_settings *s) {
    size_t kept = 0;
    size_t scored = scored_length(b, b->length, 1);
    for (size_t rank = 0; rank < b->filled && kept < b->beams; rank++) {
        const candidate *c = &b->top[rank];
        if (is_end(s, c->token)) {
            if (rank >= b->beams) continue;
            hypotheses_add(&b->finished, b->sequences + c->beam * b->max_length, b->length, scored, c->score);
        } else {
            b->next_scores[kept] = c->score;
            b->next_tokens[kept] = c->token;
            b->next_from[kept] = c->beam;
            kept++;
        }
    }
    return kept;
}

/* Each survivor becomes the sequence it continues plus its new token. */
static void advance_beams(beam_search *b) {
    for (size_t beam = 0; beam < b->beams; beam++) {
        memcpy(b->next_sequences + beam * b->max_length, b->sequences + b->next_from[beam] * b->max_length,
               b->length * sizeof(int32_t));
        b->next_sequences[beam * b->max_length + b->length] = b->next_tokens[beam];
        b->scores[beam] = b->next_scores[beam];
    }
    int32_t *swap = b->sequences;
    b->sequences = b->next_sequences;
    b->next_sequences = swap;
    b->length++;
}

/* BeamSearchScorer.finalize: unless the search was done, the open beams
 * compete with the finished ones. The best (on equal scores the one added
 * last, as sorted(...).pop() picks) goes to out, with the end token when
 * it is shorter than max_length. */
static void finish_beams(beam_search *b, int is_done, int32_t end_id, int32_t *out, size_t *out_length) {
    size_t scored = scored_length(b, b->length, 0);
    if (!is_done)
        for (size_t beam = 0; beam < b->beams; beam++)
            hypotheses_add(&b->finished, b->sequences + beam * b->max_length, b->length, scored, b->scores[beam]);
    size_t best = 0;
    for (size_t i = 1; i < b->finished.count; i++)
        if (b->finished.items[i].score >= b->finished.items[best].score) best = i;
    const hypothesis *winner = &b->finished.items[best];
    memcpy(out, winner->ids, winner->length * sizeof *out);
    *out_length = winner->length;
    if (winner->length < b->max_length) out[(*out_length)++] = end_id;
}

/* ------------------------------------------------------- one caption's search */

struct caption_search {
    caption_settings settings;
    int32_t vocab;
    caption_token_callback callback;
    void *user;
    /* greedy and sampling: the sequence so far, the random stream, top-p's sorted copy of the scores */
    int32_t *sequence;
    size_t length;
    uint64_t random;
    float *sorted;
    int32_t next;
    /* beams > 1 */
    beam_search beams;
    int is_done;
    /* the finished caption */
    int finished;
    int32_t *out;
    size_t out_length;
};

void caption_search_free(caption_search *search) {
    if (!search) return;
    if (search->settings.beams > 1) beam_search_free(&search->beams);
    free(search->sequence), free(search->sorted), free(search->out);
    free(search);
}

glimpse_status caption_search_create(const caption_settings *settings, int32_t vocab, const int32_t *prompt,
                                     size_t prompt_length, caption_token_callback callback, void *user,
                                     caption_search **out) {
    *out = NULL;
    if (prompt_length == 0) return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "a caption needs at least the start token");
    if (prompt_length >= settings->max_length)
        return error_set(GLIMPSE_STATUS_TOO_LARGE, "the prompt (%zu tokens with the start token) leaves no room under "
                                                   "the maximum length of %zu",
                         prompt_length, settings->max_length);
    if (settings->beams < 1) return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "beams must be at least 1");
    caption_search *search = calloc(1, sizeof *search);
    if (!search) return ERROR_OOM();
    search->settings = *settings, search->vocab = vocab, search->callback = callback, search->user = user;
    search->out = malloc(settings->max_length * sizeof *search->out);
    glimpse_status status = search->out ? GLIMPSE_STATUS_OK : ERROR_OOM();
    if (!status && settings->beams > 1) {
        status = beam_search_start(&search->beams, prompt, prompt_length, settings);
    } else if (!status) {
        search->sequence = malloc(settings->max_length * sizeof *search->sequence);
        bool top_p = settings->sample && settings->top_p < 1.0f; /* (only top-p sorts the scores) */
        search->sorted = top_p ? malloc((size_t)vocab * sizeof(float)) : NULL;
        if (!search->sequence || (top_p && !search->sorted)) status = ERROR_OOM();
        else memcpy(search->sequence, prompt, prompt_length * sizeof *prompt);
        search->length = prompt_length;
        search->random = settings->seed;
    }
    if (status) {
        caption_search_free(search);
        return status;
    }
    *out = search;
    return GLIMPSE_STATUS_OK;
}

size_t caption_search_sequences(const caption_search *search) { return (size_t)search->settings.beams; }

const int32_t *caption_search_first_ids(const caption_search *search, size_t *step) {
    if (search->settings.beams > 1) {
        *step = search->beams.length;
        return search->beams.prompt_copies;
    }
    *step = search->length;
    return search->sequence;
}

/* greedy / sampling: the next token from the logits, as transformers' greedy_search and sample. */
static glimpse_status feed_single(caption_search *search, float *scores, caption_step *next) {
    const caption_settings *s = &search->settings;
    apply_processors(scores, search->sequence, search->length, s, search->vocab);
    int32_t chosen = 0;
    if (s->sample) {
        chosen = sample_token(scores, search->vocab, s, &search->random, search->sorted);
    } else {
        for (int32_t i = 1; i < search->vocab; i++)
            if (scores[i] > scores[chosen]) chosen = i;
    }
    search->sequence[search->length++] = chosen;
    if (search->callback && search->callback(search->user, chosen))
        return error_set(GLIMPSE_STATUS_CANCELLED, "captioning was cancelled");
    if (is_end(s, chosen) || search->length >= s->max_length) {
        memcpy(search->out, search->sequence, search->length * sizeof *search->out);
        search->out_length = search->length;
        search->finished = 1;
        return GLIMPSE_STATUS_OK;
    }
    search->next = chosen;
    next->ids = &search->next;
    next->from = NULL;
    return GLIMPSE_STATUS_OK;
}

/* beam search: one step of transformers' beam_search; the winner's tokens go to the callback at the end. */
static glimpse_status feed_beams(caption_search *search, float *logits, caption_step *next) {
    beam_search *b = &search->beams;
    const caption_settings *s = &search->settings;
    collect_candidates(b, logits, search->vocab, s);
    if (select_survivors(b, s) < b->beams) /* cannot happen with (1 + end tokens)·beams candidates; guard anyway */
        return error_set(GLIMPSE_STATUS_INTERNAL, "beam search ran out of candidates");
    search->is_done = search->is_done || hypotheses_done(&b->finished, b->top[0].score, scored_length(b, b->length, 1));
    advance_beams(b);
    if (!search->is_done && b->length < b->max_length) {
        next->ids = b->next_tokens;
        next->from = b->next_from;
        return GLIMPSE_STATUS_OK;
    }
    finish_beams(b, search->is_done, s->end_id, search->out, &search->out_length);
    search->finished = 1;
    return GLIMPSE_STATUS_OK;
}

glimpse_status caption_search_feed(caption_search *search, float *logits, caption_step *next) {
    next->ids = NULL, next->from = NULL;
    if (search->finished) return error_set(GLIMPSE_STATUS_INTERNAL, "the caption's search is already over");
    return search->settings.beams > 1 ? feed_beams(search, logits, next) : feed_single(search, logits, next);
}

glimpse_status caption_search_result(const caption_search *search, size_t prompt_length, int32_t *out,
                                     size_t *out_length) {
    *out_length = 0;
    if (!search->finished) return error_set(GLIMPSE_STATUS_INTERNAL, "the caption's search is not over");
    memcpy(out, search->out, search->out_length * sizeof *out);
    *out_length = search->out_length;
    if (search->settings.beams > 1 && search->callback) /* beams: the winner's tokens once it is known */
        for (size_t i = prompt_length; i < search->out_length; i++)
            if (search->callback(search->user, search->out[i]))
                return error_set(GLIMPSE_STATUS_CANCELLED, "captioning was cancelled");
    return GLIMPSE_STATUS_OK;
}

glimpse_status caption_generate(const caption_decoder *decoder, const int32_t *prompt,
                                size_t prompt_length, const caption_settings *settings,
                                caption_token_callback callback, void *user, int32_t *out, size_t *out_length,
                                pool *threads) {
    *out_length = 0;
    if (prompt_length == 0) return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "a caption needs at least the start token");
    /* the last token is chosen, never fed: max_length - 1 positions are read */
    if (settings->max_length > decoder->max_length + 1)
        return error_set(GLIMPSE_STATUS_TOO_LARGE, "max length %zu is over the decoder's %zu positions",
                         settings->max_length, decoder->max_length);
    caption_search *search = NULL;
    glimpse_status status = caption_search_create(settings, decoder->vocab_size, prompt, prompt_length, callback,
                                                  user, &search);
    if (status) return status;
    if ((size_t)settings->beams > decoder->max_sequences) {
        caption_search_free(search);
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "beams must be 1 to %zu", decoder->max_sequences);
    }
    uint64_t started = profile_start();
    decoder->restart(decoder->self);
    size_t sequences = caption_search_sequences(search), step = 0;
    const int32_t *ids = caption_search_first_ids(search, &step);
    float *logits = NULL;
    status = decoder->step(decoder->self, ids, sequences, step, &logits, threads);
    while (!status) {
        caption_step next;
        status = caption_search_feed(search, logits, &next);
        if (status || !next.ids) break;
        if (next.from) decoder->reorder(decoder->self, next.from, sequences);
        status = decoder->step(decoder->self, next.ids, sequences, 1, &logits, threads);
    }
    if (!status) status = caption_search_result(search, prompt_length, out, out_length);
    caption_search_free(search);
    profile_stop_decoding(started);
    return status;
}

/* ------------------------------------------------------ decoders' steps */

glimpse_status caption_decoder_check_room(const caption_decoder_room *room, size_t sequences, size_t step) {
    size_t end = room->length + step;
    if (sequences > room->max_sequences || step > room->max_step || end > room->max_length)
        return error_set(GLIMPSE_STATUS_TOO_LARGE, "%zu tokens is more than the %zu this decoder state holds", end,
                         room->max_length);
    if (room->record && !attention_record_fits(room->record, sequences, room->heads, end, end, room->image_tokens))
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT,
                         "the attention record has no room for %zu sequences of %zu tokens over %zu image tokens",
                         sequences, end, room->image_tokens);
    return GLIMPSE_STATUS_OK;
}

/* x[hidden] = token_embeddings row id + position_embeddings row position, id checked against the vocabulary. */
static glimpse_status embed_row(float *x, const kernel_weight *token_embeddings, const float *position_embeddings,
                                size_t hidden, int32_t vocab_size, int32_t id, size_t position) {
    if (id < 0 || id >= vocab_size)
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "token id %d is outside the vocabulary of %d", id,
                         vocab_size);
    kernel_weight_row_add(x, token_embeddings, (size_t)id, hidden, position_embeddings + position * hidden);
    return GLIMPSE_STATUS_OK;
}

glimpse_status caption_embed_ids(float *out, const kernel_weight *token_embeddings, size_t hidden,
                                 int32_t vocab_size, const int32_t *ids, size_t count) {
    size_t row_bytes = hidden * weight_type_bytes(token_embeddings->type);
    for (size_t i = 0; i < count; i++) {
        if (ids[i] < 0 || ids[i] >= vocab_size)
            return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "token id %d is outside the vocabulary of %d", ids[i],
                             vocab_size);
        kernel_widen(out + i * hidden, (const char *)token_embeddings->data + (size_t)ids[i] * row_bytes,
                     token_embeddings->type, hidden);
    }
    return GLIMPSE_STATUS_OK;
}

glimpse_status caption_decoder_embed(float *x, const caption_decoder_room *room, const kernel_weight *token_embeddings,
                                     const float *position_embeddings, size_t hidden, int32_t vocab_size,
                                     const int32_t *ids, size_t sequences, size_t step) {
    glimpse_status status = caption_decoder_check_room(room, sequences, step);
    for (size_t q = 0; q < sequences && !status; q++)
        for (size_t j = 0; j < step && !status; j++)
            status = embed_row(x + (q * step + j) * hidden, token_embeddings, position_embeddings, hidden, vocab_size,
                               ids[q * step + j], room->length + j);
    return status;
}

size_t caption_sequences_rows(const caption_sequence *sequences, size_t count) {
    size_t rows = 0;
    for (size_t q = 0; q < count; q++) rows += sequences[q].step;
    return rows;
}

glimpse_status caption_decoder_embed_table(float *x, const caption_decoder_room *room,
                                           const kernel_weight *token_embeddings, const float *position_embeddings,
                                           size_t hidden, int32_t vocab_size, const caption_sequence *sequences,
                                           size_t count) {
    if (caption_sequences_rows(sequences, count) > room->max_step)
        return error_set(GLIMPSE_STATUS_TOO_LARGE, "%zu rows is more than the %zu a step of this decoder state holds",
                         caption_sequences_rows(sequences, count), room->max_step);
    glimpse_status status = GLIMPSE_STATUS_OK;
    for (size_t q = 0; q < count && !status; q++) {
        const caption_sequence *c = &sequences[q];
        if (c->slot >= room->max_sequences || c->length + c->step > room->max_length)
            return error_set(GLIMPSE_STATUS_TOO_LARGE, "%zu positions in slot %zu: more than the %zu positions of "
                             "%zu slots this decoder state holds", c->length + c->step, c->slot, room->max_length,
                             room->max_sequences);
        for (size_t j = 0; j < c->step && !status; j++, x += hidden)
            status = embed_row(x, token_embeddings, position_embeddings, hidden, vocab_size, c->ids[j], c->length + j);
    }
    return status;
}

caption_settings caption_settings_of(const glimpse_caption_params *p, size_t prompt_length, int32_t end_id,
                                     int32_t pad_id) {
    return (caption_settings){.max_length = prompt_length + (size_t)p->max_tokens,
                              .min_length = prompt_length + (size_t)p->min_tokens,
                              .beams = p->beams,
                              .length_penalty = p->length_penalty,
                              .repetition_penalty = p->repetition_penalty,
                              .sample = p->sample,
                              .temperature = p->temperature,
                              .top_k = p->top_k,
                              .top_p = p->top_p,
                              .seed = p->seed,
                              .end_id = end_id,
                              .pad_id = pad_id};
}
