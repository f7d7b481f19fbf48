/* caption.c — greedy, beam and sampled decoding as transformers 4.x
 * generate() does for BLIP. Scores stay in float32 where the reference's
 * are float32 (log-softmax, beam sums) so the same ids come out. */
#include "fusion/caption.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

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

static void apply_processors(float *scores, const int32_t *sequence, size_t length, const caption_settings *s,
                             int32_t vocab) {
    apply_repetition_penalty(scores, sequence, length, s->repetition_penalty, vocab);
    if (length < s->min_length && s->end_id >= 0 && s->end_id < vocab) scores[s->end_id] = -INFINITY;
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

/* Temperature, top-k and top-p as transformers' warpers, then a draw. */
static int32_t sample_token(float *scores, int32_t vocab, const caption_settings *s, uint64_t *random, float *sorted) {
    if (s->temperature > 0 && s->temperature != 1.0f)
        for (int32_t i = 0; i < vocab; i++) scores[i] /= s->temperature;
    if (s->top_k > 0 && s->top_k < vocab) {
        memcpy(sorted, scores, (size_t)vocab * sizeof(float));
        qsort(sorted, (size_t)vocab, sizeof(float), compare_descending);
        float threshold = sorted[s->top_k - 1];
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
    double target = (double)(next_random(random) >> 11) / 9007199254740992.0 * total, running = 0;
    int32_t last = 0;
    for (int32_t i = 0; i < vocab; i++) {
        if (scores[i] == -INFINITY) continue;
        running += exp(scores[i] - largest);
        last = i;
        if (running > target) return i;
    }
    return last;
}

/* --------------------------------------------------- greedy / sampling */

static glimpse_status generate_single(const bert_model *model, bert_state *state, const int32_t *prompt,
                                      size_t prompt_length, const caption_settings *s,
                                      caption_token_callback callback, void *user, int32_t *out, size_t *out_length,
                                      pool *threads) {
    int32_t vocab = model->config.vocab_size;
    memcpy(out, prompt, prompt_length * sizeof *out);
    size_t length = prompt_length;
    float *sorted = s->sample ? malloc((size_t)vocab * sizeof(float)) : NULL;
    if (s->sample && !sorted) return ERROR_OOM();
    uint64_t random = s->seed;
    glimpse_status status = bert_decode_step(model, state, prompt, 1, prompt_length, threads);
    while (!status && length < s->max_length) {
        float *scores = state->logits;
        apply_processors(scores, out, length, s, vocab);
        int32_t next = 0;
        if (s->sample) {
            next = sample_token(scores, vocab, s, &random, sorted);
        } else {
            for (int32_t i = 1; i < vocab; i++)
                if (scores[i] > scores[next]) next = i;
        }
        out[length++] = next;
        if (callback && callback(user, next)) {
            status = error_set(GLIMPSE_STATUS_CANCELLED, "captioning was cancelled");
            break;
        }
        if (next == s->end_id || length >= s->max_length) break;
        status = bert_decode_step(model, state, &next, 1, 1, threads);
    }
    free(sorted);
    *out_length = length;
    return status;
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
} hypotheses;

/* transformers' BeamHypotheses.add: keep the best `beams` finished sequences,
 * each scored by its summed log-probability / length^length_penalty. */
static void hypotheses_add(hypotheses *h, const int32_t *ids, size_t length, double sum_logprobs) {
    double score = sum_logprobs / pow((double)length, h->length_penalty);
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
    return h->worst >= best_sum_logprobs / pow((double)length, h->length_penalty);
}

typedef struct candidate {
    float score;
    int32_t token;
    size_t beam;
} candidate;

static glimpse_status generate_beams(const bert_model *model, bert_state *state, const int32_t *prompt,
                                     size_t prompt_length, const caption_settings *s, int32_t *out,
                                     size_t *out_length, pool *threads) {
    int32_t vocab = model->config.vocab_size;
    size_t beams = (size_t)s->beams, max_length = s->max_length, wanted = 2 * beams;
    glimpse_status status = GLIMPSE_STATUS_OK;
    int32_t *sequences = malloc(beams * max_length * sizeof *sequences);
    int32_t *next_sequences = malloc(beams * max_length * sizeof *next_sequences);
    float *beam_scores = malloc(beams * sizeof *beam_scores);
    float *next_scores = malloc(beams * sizeof *next_scores);
    int32_t *next_tokens = malloc(beams * sizeof *next_tokens);
    size_t *next_from = malloc(beams * sizeof *next_from);
    candidate *top = malloc(wanted * sizeof *top);
    int32_t *prompt_copies = malloc(beams * prompt_length * sizeof *prompt_copies);
    hypotheses finished = {calloc(beams + 1, sizeof(hypothesis)), 0, beams, 1e9, s->length_penalty};
    int ok = sequences && next_sequences && beam_scores && next_scores && next_tokens && next_from && top &&
             prompt_copies && finished.items;
    for (size_t i = 0; ok && i <= beams; i++) ok = (finished.items[i].ids = malloc(max_length * sizeof(int32_t))) != NULL;
    if (!ok) {
        status = ERROR_OOM();
        goto done;
    }
    for (size_t b = 0; b < beams; b++) {
        memcpy(sequences + b * max_length, prompt, prompt_length * sizeof *prompt);
        memcpy(prompt_copies + b * prompt_length, prompt, prompt_length * sizeof *prompt);
        beam_scores[b] = b == 0 ? 0.0f : -1e9f; /* only the first beam is live at the start */
    }
    size_t length = prompt_length;
    status = bert_decode_step(model, state, prompt_copies, beams, prompt_length, threads);
    int is_done = 0;
    while (!status) {
        /* scores of every (beam, token): log-softmax, processors, plus the beam's sum */
        size_t filled = 0;
        for (size_t b = 0; b < beams; b++) {
            float *scores = state->logits + b * (size_t)vocab;
            log_softmax(scores, vocab);
            apply_processors(scores, sequences + b * max_length, length, s, vocab);
            for (int32_t t = 0; t < vocab; t++) {
                float value = scores[t] + beam_scores[b];
                /* keep the best 2·beams, ordered by score, earlier (beam, token) first on ties */
                if (filled == wanted && !(value > top[wanted - 1].score)) continue;
                size_t at = filled < wanted ? filled++ : wanted - 1;
                while (at > 0 && value > top[at - 1].score) {
                    top[at] = top[at - 1];
                    at--;
                }
                top[at] = (candidate){value, t, b};
            }
        }
        /* BeamSearchScorer.process */
        size_t kept = 0;
        for (size_t rank = 0; rank < filled && kept < beams; rank++) {
            if (top[rank].token == s->end_id) {
                if (rank >= beams) continue;
                hypotheses_add(&finished, sequences + top[rank].beam * max_length, length, top[rank].score);
            } else {
                next_scores[kept] = top[rank].score;
                next_tokens[kept] = top[rank].token;
                next_from[kept] = top[rank].beam;
                kept++;
            }
        }
        if (kept < beams) { /* cannot happen with 2·beams candidates; guard anyway */
            status = error_set(GLIMPSE_STATUS_INTERNAL, "beam search ran out of candidates");
            break;
        }
        is_done = is_done || hypotheses_done(&finished, top[0].score, length);
        for (size_t b = 0; b < beams; b++) {
            memcpy(next_sequences + b * max_length, sequences + next_from[b] * max_length, length * sizeof(int32_t));
            next_sequences[b * max_length + length] = next_tokens[b];
            beam_scores[b] = next_scores[b];
        }
        int32_t *swap = sequences;
        sequences = next_sequences;
        next_sequences = swap;
        length++;
        if (is_done || length >= max_length) break;
        bert_reorder(model, state, next_from, beams);
        status = bert_decode_step(model, state, next_tokens, beams, 1, threads);
    }
    if (status) goto done;
    /* BeamSearchScorer.finalize: open beams compete with the finished ones */
    if (!is_done)
        for (size_t b = 0; b < beams; b++) hypotheses_add(&finished, sequences + b * max_length, length, beam_scores[b]);
    /* the best; on equal scores the one added last, as sorted(...).pop() picks */
    size_t best = 0;
    for (size_t i = 1; i < finished.count; i++)
        if (finished.items[i].score >= finished.items[best].score) best = i;
    hypothesis *winner = &finished.items[best];
    memcpy(out, winner->ids, winner->length * sizeof *out);
    *out_length = winner->length;
    if (winner->length < max_length) out[(*out_length)++] = s->end_id;
done:
    if (finished.items)
        for (size_t i = 0; i <= beams; i++) free(finished.items[i].ids);
    free(finished.items);
    free(sequences), free(next_sequences), free(beam_scores), free(next_scores), free(next_tokens), free(next_from);
    free(top), free(prompt_copies);
    return status;
}

glimpse_status caption_generate(const bert_model *model, bert_state *state, const int32_t *prompt,
                                size_t prompt_length, const caption_settings *settings,
                                caption_token_callback callback, void *user, int32_t *out, size_t *out_length,
                                pool *threads) {
    *out_length = 0;
    if (prompt_length == 0) return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "a caption needs at least the start token");
    if (settings->max_length > state->max_length)
        return error_set(GLIMPSE_STATUS_TOO_LARGE, "max length %zu is over the decoder's %zu positions",
                         settings->max_length, state->max_length);
    if (prompt_length >= settings->max_length)
        return error_set(GLIMPSE_STATUS_TOO_LARGE, "the prompt (%zu tokens with the start token) leaves no room under "
                                                   "the maximum length of %zu",
                         prompt_length, settings->max_length);
    if (settings->beams < 1 || (size_t)settings->beams > state->max_sequences)
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "beams must be 1 to %zu", state->max_sequences);
    state->length = 0;
    if (settings->beams == 1)
        return generate_single(model, state, prompt, prompt_length, settings, callback, user, out, out_length, threads);
    glimpse_status status =
        generate_beams(model, state, prompt, prompt_length, settings, out, out_length, threads);
    if (!status && callback)
        for (size_t i = prompt_length; i < *out_length; i++)
            if (callback(user, out[i])) return error_set(GLIMPSE_STATUS_CANCELLED, "captioning was cancelled");
    return status;
}
