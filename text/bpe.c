/* bpe.c — the byte alphabet, merges.txt, and rank-ordered merging with a
 * heap of neighbouring pairs over a linked list of symbols. */
#include "text/bpe.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"

#define NO_SYMBOL UINT32_MAX

void bpe_alphabet_init(bpe_alphabet *alphabet) {
    memset(alphabet, 0, sizeof *alphabet);
    for (int i = 0; i < BPE_STAND_IN_LIMIT; i++) alphabet->byte_of[i] = -1;
    int next = 256;
    for (int byte = 0; byte < 256; byte++) {
        int printable = (byte >= 0x21 && byte <= 0x7e) || (byte >= 0xa1 && byte <= 0xac) || (byte >= 0xae);
        int codepoint = printable ? byte : next++;
        char *out = alphabet->stand_in[byte];
        if (codepoint < 0x80) {
            out[0] = (char)codepoint;
            alphabet->stand_in_length[byte] = 1;
        } else {
            out[0] = (char)(0xc0 | (codepoint >> 6));
            out[1] = (char)(0x80 | (codepoint & 0x3f));
            alphabet->stand_in_length[byte] = 2;
        }
        alphabet->byte_of[codepoint] = (int16_t)byte;
    }
}

int bpe_alphabet_byte(const bpe_alphabet *alphabet, int32_t codepoint) {
    return codepoint >= 0 && codepoint < BPE_STAND_IN_LIMIT ? alphabet->byte_of[codepoint] : -1;
}

/* ------------------------------------------------------------ merges.txt */

static int is_field_separator(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

glimpse_status bpe_ranks_parse(const char *text, size_t size, strmap **ranks) {
    *ranks = NULL;
    strmap *map = NULL;
    char *key = malloc(size + 1);
    glimpse_status status = key ? strmap_create(size / 8 + 16, &map) : ERROR_OOM();
    size_t at = 0, line_number = 0;
    int32_t rank = 0;
    while (!status && at < size) {
        const char *newline = memchr(text + at, '\n', size - at);
        size_t end = newline ? (size_t)(newline - text) : size;
        const char *line = text + at;
        size_t line_length = end - at;
        at = end + 1;
        if (++line_number == 1 && line_length >= 8 && memcmp(line, "#version", 8) == 0) continue;
        /* the fields, as Python's str.split() finds them, joined by one space */
        size_t key_length = 0, fields = 0;
        for (size_t i = 0; i < line_length;) {
            while (i < line_length && is_field_separator(line[i])) i++;
            if (i == line_length) break;
            if (fields++) key[key_length++] = ' ';
            while (i < line_length && !is_field_separator(line[i])) key[key_length++] = line[i++];
        }
        if (fields == 0) continue;
        if (fields != 2) {
            status = error_set(GLIMPSE_STATUS_BAD_FORMAT, "merges.txt line %zu has %zu fields, not \"left right\"",
                               line_number, fields);
        } else if (rank == INT32_MAX) {
            status = error_set(GLIMPSE_STATUS_TOO_LARGE, "merges.txt has too many merges");
        } else {
            status = strmap_put(map, key, key_length, rank++);
        }
    }
    free(key);
    if (status) {
        strmap_free(map);
        return status;
    }
    *ranks = map;
    return GLIMPSE_STATUS_OK;
}

/* --------------------------------------------------------------- merging */

/* A pair of neighbouring symbols as it was when queued: it still stands if
 * both symbols are alive with the same sizes (a symbol keeps its start; a
 * merge grows the left one and empties the right one). */
typedef struct queued_pair {
    int32_t rank;
    uint32_t left, left_size, right_size;
} queued_pair;

typedef struct word {
    const strmap *ranks;
    const char *text;
    const size_t *starts;
    uint32_t *size, *next, *previous; /* per symbol; size 0 = merged into its left neighbour */
    char *key;                        /* "left right" being looked up */
    queued_pair *heap;                /* lowest (rank, left) first */
    size_t heap_count;
} word;

static int comes_before(const queued_pair *a, const queued_pair *b) {
    return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
}

static void heap_push(word *w, queued_pair pair) {
    size_t at = w->heap_count++;
    while (at > 0 && comes_before(&pair, &w->heap[(at - 1) / 2])) {
        w->heap[at] = w->heap[(at - 1) / 2];
        at = (at - 1) / 2;
    }
    w->heap[at] = pair;
}

static queued_pair heap_pop(word *w) {
    queued_pair top = w->heap[0], last = w->heap[--w->heap_count];
    size_t at = 0;
    for (;;) {
        size_t child = 2 * at + 1;
        if (child >= w->heap_count) break;
        if (child + 1 < w->heap_count && comes_before(&w->heap[child + 1], &w->heap[child])) child++;
        if (!comes_before(&w->heap[child], &last)) break;
        w->heap[at] = w->heap[child];
        at = child;
    }
    if (w->heap_count > 0) w->heap[at] = last;
    return top;
}

/* The pair (left, its next symbol) with its rank; 0 if it has none. */
static int rank_pair(const word *w, uint32_t left, queued_pair *pair) {
    uint32_t right = w->next[left];
    if (right == NO_SYMBOL) return 0;
    size_t left_size = w->size[left], right_size = w->size[right];
    memcpy(w->key, w->text + w->starts[left], left_size);
    w->key[left_size] = ' ';
    memcpy(w->key + left_size + 1, w->text + w->starts[right], right_size);
    pair->left = left;
    pair->left_size = (uint32_t)left_size;
    pair->right_size = (uint32_t)right_size;
    return strmap_get(w->ranks, w->key, left_size + 1 + right_size, &pair->rank);
}

static int still_stands(const word *w, const queued_pair *pair) {
    uint32_t right = w->next[pair->left];
    return w->size[pair->left] == pair->left_size && right != NO_SYMBOL && w->size[right] == pair->right_size;
}

/* Merges the pair into its left symbol and appends the pairs it forms with
 * its neighbours to formed. */
static void merge_pair(word *w, const queued_pair *pair, queued_pair *formed, size_t *formed_count) {
    uint32_t left = pair->left, right = w->next[left];
    w->size[left] += w->size[right];
    w->size[right] = 0;
    w->next[left] = w->next[right];
    if (w->next[right] != NO_SYMBOL) w->previous[w->next[right]] = left;
    queued_pair neighbour;
    if (w->previous[left] != NO_SYMBOL && rank_pair(w, w->previous[left], &neighbour))
        formed[(*formed_count)++] = neighbour;
    if (rank_pair(w, left, &neighbour)) formed[(*formed_count)++] = neighbour;
}

glimpse_status bpe_merge(const strmap *ranks, const char *text, size_t length, size_t *starts, size_t *count) {
    size_t n = *count;
    if (n < 2) return GLIMPSE_STATUS_OK;
    if (n > INT32_MAX || length > UINT32_MAX)
        return error_set(GLIMPSE_STATUS_TOO_LARGE, "a word of %zu bytes is too long to merge", length);
    /* at most n - 1 pairs at first and 2 more per merge; a round forms at most 2 per merge */
    word w = {.ranks = ranks, .text = text, .starts = starts};
    w.size = malloc(n * sizeof *w.size);
    w.next = malloc(n * sizeof *w.next);
    w.previous = malloc(n * sizeof *w.previous);
    w.key = malloc(length + 1);
    w.heap = malloc(3 * n * sizeof *w.heap);
    queued_pair *formed = malloc(2 * n * sizeof *formed);
    glimpse_status status = GLIMPSE_STATUS_OK;
    if (!w.size || !w.next || !w.previous || !w.key || !w.heap || !formed) {
        status = ERROR_OOM();
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        w.size[i] = (uint32_t)((i + 1 < n ? starts[i + 1] : length) - starts[i]);
        w.next[i] = i + 1 < n ? (uint32_t)(i + 1) : NO_SYMBOL;
        w.previous[i] = i > 0 ? (uint32_t)(i - 1) : NO_SYMBOL;
    }
    for (uint32_t i = 0; i + 1 < n; i++) {
        queued_pair pair;
        if (rank_pair(&w, i, &pair)) heap_push(&w, pair);
    }
    while (w.heap_count > 0) {
        queued_pair pair = heap_pop(&w);
        if (!still_stands(&w, &pair)) continue;
        /* one round: every standing occurrence of this pair, left to right;
         * the pairs formed meanwhile wait for the next round */
        int32_t round = pair.rank;
        size_t formed_count = 0;
        merge_pair(&w, &pair, formed, &formed_count);
        while (w.heap_count > 0 && w.heap[0].rank == round) {
            pair = heap_pop(&w);
            if (still_stands(&w, &pair)) merge_pair(&w, &pair, formed, &formed_count);
        }
        for (size_t i = 0; i < formed_count; i++) heap_push(&w, formed[i]);
    }
    size_t merged = 0;
    for (uint32_t i = 0; i != NO_SYMBOL; i = w.next[i]) starts[merged++] = starts[i];
    *count = merged;
done:
    free(w.size);
    free(w.next);
    free(w.previous);
    free(w.key);
    free(w.heap);
    free(formed);
    return status;
}
