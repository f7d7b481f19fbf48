/* caption_batch.c — the scheduler of continuous batching: admits pictures while cache slots and image slots are
 * free, steps every picture in flight as sequences of one table (a first step beside the others' next tokens
 * where its rows are few enough to be computed row-exactly, else alone as caption_generate runs it), feeds each
 * picture's logits to its own caption_search, moves beams between slots, and lets finished pictures go. */
#include "fusion/caption_batch.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/profile.h"
#include "core/kernels.h"

typedef enum phase { PHASE_WAITING = 0, PHASE_FIRST, PHASE_DECODING, PHASE_DONE } phase;

/* One picture in the run. */
typedef struct picture {
    phase phase;
    caption_search *search;
    size_t beams, image, length; /* sequences, image slot, positions each slot holds */
    size_t *slots;               /* [beams]: beam b's cache slot */
    caption_step next;           /* what the next step takes (decoding) */
} picture;

typedef struct run {
    const caption_batch_decoder *decoder;
    caption_batch_request *requests;
    picture *pictures;
    size_t count;
    size_t *free_slots, free_slot_count;
    size_t *free_images, free_image_count;
    size_t *active, active_count; /* pictures in flight, in the order they joined */
    caption_sequence *table;      /* [decoder->slots] */
    size_t *table_picture;        /* the picture of each table entry */
    float *first_logits;          /* [beams, vocab]: a first step's logits copied to every beam */
    size_t max_beams;
    size_t *reorder_scratch;          /* [2 · max_beams] */
    size_t *claimed;              /* [max_beams] */
} run;

/* Whether a first step of `copies` sequences of `rows` rows comes out of a shared row-exact step as the
 * family's own first step gives it: its products there ran on one-row-exact kernels too (few rows on
 * AVX-512, or one token a sequence: caption_decoder steps of one token are row-exact). */
static int first_step_shares(size_t rows, size_t copies) {
    return rows == 1 || kernel_linear_rows_exact(rows * copies);
}

static size_t first_copies(const run *r, const picture *p) {
    return r->decoder->first_step_each_beam ? p->beams : 1;
}

/* Feeds one picture's logits [beams, vocab] to its search: the next step, slots reordered, or the end. */
static glimpse_status feed(run *r, size_t index, float *logits, size_t rows, const caption_batch_hooks *hooks) {
    picture *p = &r->pictures[index];
    caption_batch_request *q = &r->requests[index];
    p->length += rows;
    glimpse_status status = caption_search_feed(p->search, logits, &p->next);
    if (status) return status;
    if (!p->next.ids) { /* finished: the slots and the image slot go back */
        status = caption_search_result(p->search, q->prompt_length, q->out, &q->out_length);
        for (size_t b = 0; b < p->beams; b++) r->free_slots[r->free_slot_count++] = p->slots[b];
        r->free_images[r->free_image_count++] = p->image;
        p->phase = PHASE_DONE;
        caption_search_free(p->search);
        p->search = NULL;
        if (!status && hooks->finished) status = hooks->finished(hooks->user, index);
        return status;
    }
    p->phase = PHASE_DECODING;
    if (p->next.from) {
        /* beam b continues old beam from[b]: it takes that beam's slot where no earlier beam did, else a slot
         * no beam continues, filled with a copy */
        size_t *old = r->reorder_scratch, *spare = old + r->max_beams, spares = 0;
        memcpy(old, p->slots, p->beams * sizeof *old);
        memset(r->claimed, 0, p->beams * sizeof *r->claimed);
        for (size_t b = 0; b < p->beams; b++) r->claimed[p->next.from[b]]++;
        for (size_t b = 0; b < p->beams; b++)
            if (!r->claimed[b]) spare[spares++] = old[b];
        memset(r->claimed, 0, p->beams * sizeof *r->claimed);
        for (size_t b = 0; b < p->beams; b++) {
            size_t from = p->next.from[b];
            if (!r->claimed[from]++) {
                p->slots[b] = old[from];
            } else {
                p->slots[b] = spare[--spares];
                r->decoder->copy(r->decoder->self, p->slots[b], old[from], p->length);
            }
        }
    }
    return GLIMPSE_STATUS_OK;
}

/* Table entries of a first step: `copies` sequences in the picture's first slots. */
static size_t add_first(run *r, size_t index, size_t at, size_t copies) {
    picture *p = &r->pictures[index];
    caption_batch_request *q = &r->requests[index];
    size_t step = 0;
    const int32_t *ids = caption_search_first_ids(p->search, &step);
    for (size_t c = 0; c < copies; c++, at++) {
        r->table[at] = (caption_sequence){p->slots[c], 0, q->first_rows, p->image, ids + c * step};
        r->table_picture[at] = index;
    }
    return at;
}

/* After a first step whose `copies` sequences' logits start at logits: the other beams copy the first's cache and
 * logits, then the search takes them. */
static glimpse_status after_first(run *r, size_t index, float *logits, size_t copies,
                                  const caption_batch_hooks *hooks) {
    picture *p = &r->pictures[index];
    size_t vocab = (size_t)r->decoder->vocab_size, rows = r->requests[index].first_rows;
    if (copies < p->beams) {
        for (size_t b = 0; b < p->beams; b++) {
            if (b >= copies) r->decoder->copy(r->decoder->self, p->slots[b], p->slots[0], rows);
            memcpy(r->first_logits + b * vocab, logits + (b < copies ? b : 0) * vocab, vocab * sizeof(float));
        }
        logits = r->first_logits;
    }
    return feed(r, index, logits, rows, hooks);
}

/* Admits the next picture if its slots, an image slot and (sharing the next step) its rows are free; a first
 * step that cannot share runs at once, alone. 1 when admitted. */
static int admit_next(run *r, size_t *next_picture, size_t *planned_rows, size_t *planned_sequences,
                      const caption_batch_hooks *hooks, pool *threads, glimpse_status *status) {
    size_t index = *next_picture;
    if (index >= r->count || !r->free_image_count) return 0;
    picture *p = &r->pictures[index];
    caption_batch_request *q = &r->requests[index];
    p->beams = (size_t)q->settings.beams;
    size_t copies = first_copies(r, p);
    int shares = first_step_shares(q->first_rows, copies);
    if (r->free_slot_count < p->beams) return 0;
    if (shares && (*planned_rows + q->first_rows > r->decoder->max_rows || *planned_sequences + 1 > r->decoder->slots))
        return 0;
    (*next_picture)++;
    p->image = r->free_images[--r->free_image_count];
    for (size_t b = 0; b < p->beams; b++) p->slots[b] = r->free_slots[--r->free_slot_count];
    p->length = 0;
    r->active[r->active_count++] = index;
    *status = caption_search_create(&q->settings, r->decoder->vocab_size, q->prompt, q->prompt_length, q->callback,
                                    q->user, &p->search);
    if (!*status) *status = hooks->admit(hooks->user, index, p->image);
    if (*status) return 0;
    if (shares) {
        p->phase = PHASE_FIRST;
        *planned_rows += q->first_rows;
        *planned_sequences += 1;
        return 1;
    }
    /* alone, with the family's own products for these rows (caption_generate's first step) */
    size_t sequences = add_first(r, index, 0, copies);
    float *logits = NULL;
    uint64_t started = profile_start();
    *status = r->decoder->step(r->decoder->self, r->table, sequences, 0, &logits, threads);
    if (!*status) *status = after_first(r, index, logits, copies, hooks);
    profile_stop_decoding(started);
    if (!*status && p->phase == PHASE_DECODING) *planned_rows += p->beams, *planned_sequences += p->beams;
    return !*status;
}

/* One shared step over every picture in flight; then each picture's search takes its logits. */
static glimpse_status shared_step(run *r, const caption_batch_hooks *hooks, pool *threads) {
    size_t at = 0;
    for (size_t a = 0; a < r->active_count; a++) {
        size_t index = r->active[a];
        picture *p = &r->pictures[index];
        if (p->phase == PHASE_FIRST) {
            at = add_first(r, index, at, 1);
        } else if (p->phase == PHASE_DECODING) {
            for (size_t b = 0; b < p->beams; b++, at++) {
                r->table[at] = (caption_sequence){p->slots[b], p->length, 1, p->image, &p->next.ids[b]};
                r->table_picture[at] = index;
            }
        }
    }
    if (!at) return GLIMPSE_STATUS_OK;
    uint64_t started = profile_start();
    float *logits = NULL;
    glimpse_status status = r->decoder->step(r->decoder->self, r->table, at, 1, &logits, threads);
    size_t vocab = (size_t)r->decoder->vocab_size;
    for (size_t t = 0; t < at && !status;) {
        size_t index = r->table_picture[t];
        picture *p = &r->pictures[index];
        if (p->phase == PHASE_FIRST) {
            status = after_first(r, index, logits + t * vocab, 1, hooks);
            t += 1;
        } else {
            status = feed(r, index, logits + t * vocab, 1, hooks);
            t += p->beams;
        }
    }
    /* the finished leave the pictures in flight */
    size_t kept = 0;
    for (size_t a = 0; a < r->active_count; a++)
        if (r->pictures[r->active[a]].phase != PHASE_DONE) r->active[kept++] = r->active[a];
    r->active_count = kept;
    profile_stop_decoding(started);
    return status;
}

static void run_free(run *r) {
    if (r->pictures)
        for (size_t i = 0; i < r->count; i++) {
            caption_search_free(r->pictures[i].search);
            free(r->pictures[i].slots);
        }
    free(r->pictures), free(r->free_slots), free(r->free_images), free(r->active), free(r->table);
    free(r->table_picture), free(r->first_logits), free(r->reorder_scratch), free(r->claimed);
}

glimpse_status caption_batch_run(const caption_batch_decoder *decoder, caption_batch_request *requests, size_t count,
                                 size_t images, const caption_batch_hooks *hooks, pool *threads) {
    if (!count) return GLIMPSE_STATUS_OK;
    if (!images) return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "batched captioning needs an image slot");
    size_t max_beams = 1;
    for (size_t i = 0; i < count; i++) {
        const caption_batch_request *q = &requests[i];
        if (q->settings.beams < 1 || (size_t)q->settings.beams > decoder->slots)
            return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "beams must be 1 to %zu", decoder->slots);
        size_t copies = decoder->first_step_each_beam ? (size_t)q->settings.beams : 1;
        if (q->first_rows * copies > decoder->max_rows || q->first_rows > decoder->max_length ||
            q->settings.max_length > decoder->max_length + q->prompt_length - q->first_rows)
            return error_set(GLIMPSE_STATUS_TOO_LARGE, "a caption of %zu tokens after %zu first rows is more than "
                             "the decoder state holds", q->settings.max_length, q->first_rows);
        if ((size_t)q->settings.beams > max_beams) max_beams = (size_t)q->settings.beams;
    }
    run r = {.decoder = decoder, .requests = requests, .count = count, .max_beams = max_beams};
    r.pictures = calloc(count, sizeof *r.pictures);
    r.free_slots = malloc(decoder->slots * sizeof *r.free_slots);
    r.free_images = malloc(images * sizeof *r.free_images);
    r.active = malloc(count * sizeof *r.active);
    r.table = malloc(decoder->slots * sizeof *r.table);
    r.table_picture = malloc(decoder->slots * sizeof *r.table_picture);
    r.first_logits = malloc(max_beams * (size_t)decoder->vocab_size * sizeof(float));
    r.reorder_scratch = malloc(2 * max_beams * sizeof(size_t));
    r.claimed = malloc(max_beams * sizeof *r.claimed);
    int ok = r.pictures && r.free_slots && r.free_images && r.active && r.table && r.table_picture &&
             r.first_logits && r.reorder_scratch && r.claimed;
    for (size_t i = 0; ok && i < count; i++)
        ok = (r.pictures[i].slots = malloc((size_t)requests[i].settings.beams * sizeof(size_t))) != NULL;
    if (!ok) {
        run_free(&r);
        return ERROR_OOM();
    }
    /* slots and image slots are taken from the top: the first pictures get the lowest */
    for (size_t i = 0; i < decoder->slots; i++) r.free_slots[i] = decoder->slots - 1 - i;
    for (size_t i = 0; i < images; i++) r.free_images[i] = images - 1 - i;
    r.free_slot_count = decoder->slots, r.free_image_count = images;
    glimpse_status status = GLIMPSE_STATUS_OK;
    size_t next_picture = 0;
    while (!status) {
        size_t planned_rows = 0, planned_sequences = 0;
        for (size_t a = 0; a < r.active_count; a++) {
            const picture *p = &r.pictures[r.active[a]];
            planned_rows += p->beams, planned_sequences += p->beams;
        }
        while (!status && admit_next(&r, &next_picture, &planned_rows, &planned_sequences, hooks, threads, &status))
            ;
        if (status) break;
        size_t kept = 0; /* (a picture whose first step, alone, finished it) */
        for (size_t a = 0; a < r.active_count; a++)
            if (r.pictures[r.active[a]].phase != PHASE_DONE) r.active[kept++] = r.active[a];
        r.active_count = kept;
        if (!r.active_count && next_picture >= count) break;
        status = shared_step(&r, hooks, threads);
    }
    run_free(&r);
    return status;
}
