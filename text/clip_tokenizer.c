/* clip_tokenizer.c — byte-level BPE with CLIP's pre-tokenisation. Unicode
 * normalisation, case mapping and character classes come from utf8proc. */
#include "text/clip_tokenizer.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "core/error.h"
#include "core/strmap.h"
#include "text/utf8.h"
#include "weights/config.h"

#define START_TOKEN "<|startoftext|>"
#define END_TOKEN "<|endoftext|>"
#define WORD_END "</w>"
/* Refused above this: CLIP's vocab.json is 1.1 MB, its merges.txt 0.5 MB. */
#define VOCABULARY_FILE_MAX_BYTES (64u << 20)
/* Ids in vocab.json beyond this are damage, not a vocabulary (CLIP's end at 49 407). */
#define MAX_TOKEN_ID 1e7
/* A pre-token longer than this many bytes is cut: BPE cost grows with the
 * square of a word's length, and no real word comes near it. */
#define MAX_WORD_BYTES 1024

struct clip_tokenizer {
    strmap *vocab;  /* token string -> id */
    strmap *ranks;  /* "left right" -> merge rank */
    int32_t start_id, end_id;
    size_t vocab_size;
    char byte_chars[256][3]; /* UTF-8 of the printable stand-in for each byte */
};

/* GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves,
 * the rest map to 256, 257, ... in byte order. */
static void build_byte_map(clip_tokenizer *t) {
    int next = 256;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
        int codepoint = printable ? b : next++;
        utf8proc_uint8_t encoded[4] = {0};
        utf8proc_ssize_t length = utf8proc_encode_char(codepoint, encoded);
        memset(t->byte_chars[b], 0, 3);
        memcpy(t->byte_chars[b], encoded, (size_t)length);
    }
}

glimpse_status clip_tokenizer_create(const char *vocab_json, size_t vocab_size, const char *merges_text,
                                     size_t merges_size, clip_tokenizer **out) {
    *out = NULL;
    clip_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return ERROR_OOM();
    build_byte_map(t);
    glimpse_status status = GLIMPSE_STATUS_OK;
    cJSON *vocab = cJSON_ParseWithLength(vocab_json, vocab_size);
    if (!cJSON_IsObject(vocab)) {
        status = error_set(GLIMPSE_STATUS_BAD_FORMAT, "vocab.json is not a JSON object");
        goto done;
    }
    if ((status = strmap_create((size_t)cJSON_GetArraySize(vocab), &t->vocab))) goto done;
    const cJSON *item;
    cJSON_ArrayForEach(item, vocab) {
        if (!cJSON_IsNumber(item) || item->valuedouble < 0 || item->valuedouble > MAX_TOKEN_ID) {
            status = error_set(GLIMPSE_STATUS_BAD_FORMAT, "vocab.json: the id of '%.40s' is not a valid id", item->string);
            goto done;
        }
        if ((status = strmap_put(t->vocab, item->string, strlen(item->string), (int32_t)item->valuedouble))) goto done;
        if ((size_t)item->valuedouble + 1 > t->vocab_size) t->vocab_size = (size_t)item->valuedouble + 1;
    }
    if (!strmap_get(t->vocab, START_TOKEN, strlen(START_TOKEN), &t->start_id) ||
        !strmap_get(t->vocab, END_TOKEN, strlen(END_TOKEN), &t->end_id)) {
        status = error_set(GLIMPSE_STATUS_BAD_FORMAT, "vocab.json lacks %s or %s", START_TOKEN, END_TOKEN);
        goto done;
    }
    if ((status = strmap_create(65536, &t->ranks))) goto done;
    /* merges.txt: an optional "#version" line, then "left right" per line. */
    size_t at = 0;
    int32_t rank = 0;
    while (at < merges_size) {
        size_t end = at;
        while (end < merges_size && merges_text[end] != '\n') end++;
        size_t length = end;
        if (length > at && merges_text[length - 1] == '\r') length--;
        const char *line = merges_text + at;
        size_t line_length = length - at;
        int header = rank == 0 && line_length >= 8 && memcmp(line, "#version", 8) == 0;
        if (line_length > 0 && !header) {
            const char *space = memchr(line, ' ', line_length);
            if (!space || space == line || space == line + line_length - 1) {
                status = error_set(GLIMPSE_STATUS_BAD_FORMAT, "merges.txt line %d is not \"left right\"", (int)rank + 2);
                goto done;
            }
            if ((status = strmap_put(t->ranks, line, line_length, rank++))) goto done;
        }
        at = end + 1;
    }
done:
    cJSON_Delete(vocab);
    if (status) {
        clip_tokenizer_free(t);
        return status;
    }
    *out = t;
    return GLIMPSE_STATUS_OK;
}

glimpse_status clip_tokenizer_load(const char *folder, clip_tokenizer **out) {
    *out = NULL;
    uint8_t *vocab, *merges = NULL;
    size_t vocab_size, merges_size;
    glimpse_status status = config_read_file(folder, "vocab.json", VOCABULARY_FILE_MAX_BYTES, 0, &vocab, &vocab_size);
    if (!status) status = config_read_file(folder, "merges.txt", VOCABULARY_FILE_MAX_BYTES, 0, &merges, &merges_size);
    if (!status) {
        status = clip_tokenizer_create((const char *)vocab, vocab_size, (const char *)merges, merges_size, out);
        if (status) error_prefix(status, "%s", folder);
    }
    free(vocab);
    free(merges);
    return status;
}

void clip_tokenizer_free(clip_tokenizer *t) {
    if (!t) return;
    strmap_free(t->vocab);
    strmap_free(t->ranks);
    free(t);
}

size_t clip_tokenizer_vocab_size(const clip_tokenizer *t) { return t->vocab_size; }

/* ------------------------------------------------------------ normalising */

static int is_letter(utf8proc_int32_t c) {
    utf8proc_category_t category = utf8proc_category(c);
    return category >= UTF8PROC_CATEGORY_LU && category <= UTF8PROC_CATEGORY_LO;
}

static int is_number(utf8proc_int32_t c) {
    utf8proc_category_t category = utf8proc_category(c);
    return category >= UTF8PROC_CATEGORY_ND && category <= UTF8PROC_CATEGORY_NO;
}

/* Valid UTF-8 copy of text with invalid sequences replaced by U+FFFD. */
static char *sanitize_utf8(const char *text) {
    size_t length = strlen(text);
    if (length > (SIZE_MAX - 1) / 3) return NULL;
    char *clean = malloc(length * 3 + 1);
    if (!clean) return NULL;
    size_t at = 0, out = 0;
    while (at < length)
        out += (size_t)utf8proc_encode_char(utf8_next_bytewise(text, length, &at), (utf8proc_uint8_t *)clean + out);
    clean[out] = '\0';
    return clean;
}

/* NFC, whitespace runs to one space, lowercase; as codepoints. */
static glimpse_status normalize(const char *text, utf8proc_int32_t **codepoints, size_t *count) {
    *codepoints = NULL;
    *count = 0;
    char *clean = sanitize_utf8(text);
    if (!clean) return ERROR_OOM();
    utf8proc_uint8_t *composed = utf8proc_NFC((const utf8proc_uint8_t *)clean);
    free(clean);
    if (!composed) return ERROR_OOM();
    size_t length = strlen((const char *)composed);
    utf8proc_int32_t *points = malloc((length + 1) * sizeof *points);
    if (!points) {
        free(composed);
        return ERROR_OOM();
    }
    size_t n = 0, at = 0;
    int in_space = 0;
    while (at < length) {
        utf8proc_int32_t c;
        utf8proc_ssize_t used = utf8proc_iterate(composed + at, (utf8proc_ssize_t)(length - at), &c);
        if (used <= 0) break; /* cannot happen after sanitising */
        at += (size_t)used;
        if (utf8_is_white_space(c)) {
            if (!in_space) points[n++] = ' ';
            in_space = 1;
            continue;
        }
        in_space = 0;
        points[n++] = utf8proc_tolower(c);
    }
    free(composed);
    *codepoints = points;
    *count = n;
    return GLIMPSE_STATUS_OK;
}

/* ------------------------------------------------------------------- BPE */

typedef struct id_sink {
    int32_t *ids;
    size_t count, capacity; /* capacity: content tokens wanted */
} id_sink;

static int sink_full(const id_sink *sink) { return sink->count >= sink->capacity; }

static void sink_push(id_sink *sink, int32_t id) {
    if (!sink_full(sink)) sink->ids[sink->count++] = id;
}

/* Applies BPE to one pre-token given as raw UTF-8 bytes. */
static glimpse_status bpe_word(const clip_tokenizer *t, const uint8_t *bytes, size_t length, id_sink *sink) {
    if (length > MAX_WORD_BYTES) length = MAX_WORD_BYTES;
    if (length == 0) return GLIMPSE_STATUS_OK;
    /* Symbols are strings in one buffer: each byte's stand-in, the last
     * followed by "</w>". Merging concatenates neighbours. */
    size_t capacity = length * 2 + 5;
    char *symbols = malloc(length * (2 + 5) + 8);
    size_t *start = malloc(length * sizeof *start), *size = malloc(length * sizeof *size);
    char *key = malloc(capacity * 4 + 2);
    if (!symbols || !start || !size || !key) {
        free(symbols);
        free(start);
        free(size);
        free(key);
        return ERROR_OOM();
    }
    size_t count = 0, used = 0;
    for (size_t i = 0; i < length; i++) {
        const char *stand_in = t->byte_chars[bytes[i]];
        size_t n = strlen(stand_in);
        start[count] = used;
        memcpy(symbols + used, stand_in, n);
        used += n;
        if (i == length - 1) {
            memcpy(symbols + used, WORD_END, 4);
            used += 4;
            n += 4;
        }
        size[count++] = n;
    }
    /* Each symbol's text is symbols[start, start+size); merged symbols are
     * rebuilt at the end of the buffer (only shrinking count). */
    char *text = malloc(used * 2 + 16);
    if (!text) {
        free(symbols);
        free(start);
        free(size);
        free(key);
        return ERROR_OOM();
    }
    memcpy(text, symbols, used);
    free(symbols);
    for (;;) {
        int32_t best = INT32_MAX;
        size_t best_at = 0;
        for (size_t i = 0; i + 1 < count; i++) {
            size_t k = 0;
            memcpy(key, text + start[i], size[i]);
            k += size[i];
            key[k++] = ' ';
            memcpy(key + k, text + start[i + 1], size[i + 1]);
            k += size[i + 1];
            int32_t rank;
            if (strmap_get(t->ranks, key, k, &rank) && rank < best) {
                best = rank;
                best_at = i;
            }
        }
        if (best == INT32_MAX) break;
        /* Merge every non-overlapping occurrence of the best pair, left to right. */
        size_t left_size = size[best_at], right_size = size[best_at + 1];
        char left[left_size + 1], right[right_size + 1];
        memcpy(left, text + start[best_at], left_size);
        memcpy(right, text + start[best_at + 1], right_size);
        size_t write = 0;
        for (size_t i = 0; i < count;) {
            if (i + 1 < count && size[i] == left_size && size[i + 1] == right_size &&
                memcmp(text + start[i], left, left_size) == 0 && memcmp(text + start[i + 1], right, right_size) == 0) {
                /* adjacent in the buffer: start[i] + size[i] == start[i+1] */
                start[write] = start[i];
                size[write] = left_size + right_size;
                write++;
                i += 2;
            } else {
                start[write] = start[i];
                size[write] = size[i];
                write++;
                i++;
            }
        }
        count = write;
    }
    for (size_t i = 0; i < count && !sink_full(sink); i++) {
        int32_t id;
        if (!strmap_get(t->vocab, text + start[i], size[i], &id)) id = t->end_id; /* unk is end-of-text in CLIP */
        sink_push(sink, id);
    }
    free(text);
    free(start);
    free(size);
    free(key);
    return GLIMPSE_STATUS_OK;
}

static size_t match_literal(const utf8proc_int32_t *points, size_t n, size_t at, const char *literal) {
    size_t length = strlen(literal);
    if (at + length > n) return 0;
    for (size_t i = 0; i < length; i++)
        if (points[at + i] != (utf8proc_int32_t)(unsigned char)literal[i]) return 0;
    return length;
}

static size_t match_contraction(const utf8proc_int32_t *points, size_t n, size_t at) {
    static const char *contractions[] = {"'s", "'t", "'re", "'ve", "'m", "'ll", "'d"};
    for (size_t i = 0; i < sizeof contractions / sizeof contractions[0]; i++) {
        size_t length = match_literal(points, n, at, contractions[i]);
        if (length) return length;
    }
    return 0;
}

glimpse_status clip_tokenizer_encode(const clip_tokenizer *t, const char *text, size_t max_length, int32_t *ids,
                                     size_t *count) {
    *count = 0;
    if (max_length < 2) return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "max_length must be at least 2");
    if (!text) text = "";
    utf8proc_int32_t *points;
    size_t n;
    glimpse_status status = normalize(text, &points, &n);
    if (status) return status;
    id_sink sink = {ids + 1, 0, max_length - 2};
    uint8_t *word = malloc(n * 4 + 4);
    if (!word) {
        free(points);
        return ERROR_OOM();
    }
    size_t at = 0;
    while (at < n && !sink_full(&sink) && !status) {
        utf8proc_int32_t c = points[at];
        if (c == ' ') {
            at++;
            continue;
        }
        size_t special;
        if ((special = match_literal(points, n, at, START_TOKEN))) {
            sink_push(&sink, t->start_id);
            at += special;
            continue;
        }
        if ((special = match_literal(points, n, at, END_TOKEN))) {
            sink_push(&sink, t->end_id);
            at += special;
            continue;
        }
        size_t end = at + match_contraction(points, n, at);
        if (end == at) {
            if (is_letter(c)) {
                while (end < n && is_letter(points[end])) end++;
            } else if (is_number(c)) {
                end = at + 1;
            } else {
                while (end < n && !utf8_is_white_space(points[end]) && !is_letter(points[end]) && !is_number(points[end]) &&
                       !match_literal(points, n, end, START_TOKEN) && !match_literal(points, n, end, END_TOKEN))
                    end++;
            }
        }
        size_t length = 0;
        for (size_t i = at; i < end; i++) length += (size_t)utf8proc_encode_char(points[i], word + length);
        status = bpe_word(t, word, length, &sink);
        at = end;
    }
    free(word);
    free(points);
    if (status) return status;
    ids[0] = t->start_id;
    ids[sink.count + 1] = t->end_id;
    *count = sink.count + 2;
    return GLIMPSE_STATUS_OK;
}
