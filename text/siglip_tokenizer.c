/* siglip_tokenizer.c — the steps transformers' SiglipTokenizer takes around
 * SentencePiece, in the order it takes them (tokenization_siglip.py and
 * PreTrainedTokenizer.tokenize of 4.37.2):
 *   1. "▁" + text with every "▁" replaced by a space;
 *   2. lower-case one character at a time (do_lower_case's regex "(.+?)"
 *      hands str.lower single characters: "İ" -> "i̇", but a final "Σ" stays
 *      "σ", since one character alone has no word to end);
 *   3. split out the literal special tokens "</s>" and "<unk>", stripping the
 *      whitespace beside them (their lstrip / rstrip);
 *   4. per piece of text: delete the 32 ASCII punctuation characters, collapse
 *      whitespace runs to one space, strip; encode "<unk>" + text with the
 *      model's dummy prefix switched off, and drop the pieces of "<unk>"
 *      (the pieces' strings go through PieceToId, so an unknown run is one id);
 *   5. drop a leading lone "▁" piece when a special token follows it;
 *   6. keep length - 1 ids, append </s> unless the last kept id is one, pad
 *      with </s>.
 * Character classes and case come from utf8proc, checked against Python in
 * tests/test_siglip_tokenizer.c. */
#include "text/siglip_tokenizer.h"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "core/error.h"
#include "core/file.h"
#include "text/sentencepiece.h"
#include "text/utf8.h"

#define END_TOKEN "</s>"
#define UNKNOWN_TOKEN "<unk>"
#define SPIECE_UNDERLINE 0x2581 /* "▁", SentencePiece's mark for a space */
/* File caps: published spiece.model files are 0.8-4 MB, configs a few KB. */
#define SPIECE_MODEL_MAX_BYTES (64u << 20)
#define TOKENIZER_CONFIG_MAX_BYTES (1u << 20)
/* transformers writes int(1e30) as model_max_length for "no limit". */
#define UNSET_MODEL_MAX_LENGTH 1e20

struct siglip_tokenizer {
    sentencepiece_model *model; /* loaded without the dummy prefix */
    size_t prefix_piece_count;  /* pieces of "<unk>" alone, dropped from each "<unk>" + text */
    int32_t end_id, unknown_id;
    size_t length; /* ids per encoding, padding included */
};

/* ------------------------------------------------------------ loading */

glimpse_status siglip_tokenizer_create(const uint8_t *spiece_model, size_t size, size_t length,
                                       siglip_tokenizer **out) {
    *out = NULL;
    if (length < 2 || length > SIGLIP_TOKENIZER_LENGTH_LIMIT)
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "a SigLIP encoding of %zu ids (2 ... %d)", length,
                         SIGLIP_TOKENIZER_LENGTH_LIMIT);
    siglip_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return ERROR_OOM();
    t->length = length;
    glimpse_status status = sentencepiece_model_create(spiece_model, size, true, &t->model);
    sentencepiece_pieces prefix = {0};
    if (!status) status = sentencepiece_encode(t->model, UNKNOWN_TOKEN, strlen(UNKNOWN_TOKEN), &prefix);
    if (!status) {
        t->prefix_piece_count = prefix.count;
        t->end_id = sentencepiece_piece_id(t->model, END_TOKEN);
        t->unknown_id = sentencepiece_piece_id(t->model, UNKNOWN_TOKEN);
        if (t->end_id == t->unknown_id)
            status = error_set(GLIMPSE_STATUS_UNSUPPORTED, "a SentencePiece vocabulary without %s", END_TOKEN);
    }
    sentencepiece_pieces_free(&prefix);
    if (status)
        siglip_tokenizer_free(t);
    else
        *out = t;
    return status;
}

void siglip_tokenizer_free(siglip_tokenizer *t) {
    if (!t) return;
    sentencepiece_model_free(t->model);
    free(t);
}

/* model_max_length from a tokenizer_config.json, or the default when the file
 * or the key is absent or says "no limit". */
static glimpse_status read_model_max_length(const char *path, size_t *length) {
    *length = SIGLIP_TOKENIZER_DEFAULT_LENGTH;
    if (!file_is_regular(path)) return GLIMPSE_STATUS_OK;
    uint8_t *bytes = NULL;
    size_t size = 0;
    glimpse_status status = file_read_all(path, TOKENIZER_CONFIG_MAX_BYTES, &bytes, &size);
    if (status) return status;
    cJSON *config = cJSON_ParseWithLength((const char *)bytes, size);
    free(bytes);
    if (!cJSON_IsObject(config)) {
        cJSON_Delete(config);
        return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: not a JSON object", path);
    }
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(config, "model_max_length");
    if (item) {
        double value = cJSON_IsNumber(item) ? item->valuedouble : -1;
        if (value >= UNSET_MODEL_MAX_LENGTH) {
            /* the default stays */
        } else if (value < 2 || value != (double)(size_t)value) {
            status = error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: model_max_length is not a length of 2 or more", path);
        } else if (value > SIGLIP_TOKENIZER_LENGTH_LIMIT) {
            status = error_set(GLIMPSE_STATUS_TOO_LARGE, "%s: model_max_length %.0f is over %d", path, value,
                               SIGLIP_TOKENIZER_LENGTH_LIMIT);
        } else {
            *length = (size_t)value;
        }
    }
    cJSON_Delete(config);
    return status;
}

glimpse_status siglip_tokenizer_load(const char *folder, siglip_tokenizer **out) {
    *out = NULL;
    size_t length = 0, size = 0;
    char *config_path = file_join(folder, "tokenizer_config.json");
    glimpse_status status = config_path ? read_model_max_length(config_path, &length) : ERROR_OOM();
    free(config_path);
    if (status) return status;
    char *model_path = file_join(folder, "spiece.model");
    if (!model_path) return ERROR_OOM();
    uint8_t *model = NULL;
    status = file_read_all(model_path, SPIECE_MODEL_MAX_BYTES, &model, &size);
    if (!status && (status = siglip_tokenizer_create(model, size, length, out))) error_prefix(status, "%s", model_path);
    free(model);
    free(model_path);
    return status;
}

size_t siglip_tokenizer_length(const siglip_tokenizer *t) { return t->length; }
size_t siglip_tokenizer_vocab_size(const siglip_tokenizer *t) { return sentencepiece_piece_count(t->model); }
int32_t siglip_tokenizer_end_id(const siglip_tokenizer *t) { return t->end_id; }
int32_t siglip_tokenizer_unknown_id(const siglip_tokenizer *t) { return t->unknown_id; }

/* ------------------------------------------------------------ characters */

int siglip_lowercase(int32_t codepoint, int32_t lower[2]) {
    /* SpecialCasing.txt's one unconditional lower-case mapping to more than
     * one code point; utf8proc gives the simple mappings, which Python's
     * agree with everywhere else. */
    if (codepoint == 0x130) {
        lower[0] = 'i';
        lower[1] = 0x307;
        return 2;
    }
    lower[0] = utf8proc_tolower(codepoint);
    return 1;
}

/* Python's string.punctuation: the ASCII characters that are neither letters,
 * digits, whitespace nor controls. */
static bool is_ascii_punctuation(int32_t c) {
    return (c >= 0x21 && c <= 0x2f) || (c >= 0x3a && c <= 0x40) || (c >= 0x5b && c <= 0x60) ||
           (c >= 0x7b && c <= 0x7e);
}

/* Steps 1 and 2: the text's code points (each byte that starts no valid
 * UTF-8 sequence read as U+FFFD) behind a "▁", spaces for "▁", lower-cased.
 * *points has room for 1 + 2 * strlen(text). Caller frees. */
static glimpse_status prepared_codepoints(const char *text, int32_t **points, size_t *count) {
    size_t length = strlen(text);
    *count = 0;
    *points = length < (SIZE_MAX / sizeof(int32_t) - 1) / 2 ? malloc((1 + 2 * length) * sizeof(int32_t)) : NULL;
    if (!*points) return ERROR_OOM();
    size_t n = 0;
    (*points)[n++] = SPIECE_UNDERLINE;
    for (size_t at = 0; at < length;) {
        utf8proc_int32_t c;
        utf8proc_ssize_t used =
            utf8proc_iterate((const utf8proc_uint8_t *)text + at, (utf8proc_ssize_t)(length - at), &c);
        if (used <= 0) {
            c = 0xfffd;
            used = 1;
        }
        at += (size_t)used;
        if (c == SPIECE_UNDERLINE) c = ' ';
        n += (size_t)siglip_lowercase(c, *points + n);
    }
    *count = n;
    return GLIMPSE_STATUS_OK;
}

/* ------------------------------------------------------------ splitting */

typedef enum segment_kind { SEGMENT_KIND_TEXT, SEGMENT_KIND_END, SEGMENT_KIND_UNKNOWN } segment_kind;

static bool special_token_at(const int32_t *points, size_t count, size_t at, const char *token) {
    size_t length = strlen(token);
    if (count - at < length) return false;
    for (size_t i = 0; i < length; i++)
        if (points[at + i] != (unsigned char)token[i]) return false;
    return true;
}

/* The kind of the special token starting at `at` (SEGMENT_KIND_TEXT if none)
 * and its length in code points. The two tokens cannot overlap each other or
 * themselves, so the leftmost match is the one transformers' trie cuts. */
static segment_kind special_token(const int32_t *points, size_t count, size_t at, size_t *length) {
    if (special_token_at(points, count, at, END_TOKEN)) {
        *length = strlen(END_TOKEN);
        return SEGMENT_KIND_END;
    }
    if (special_token_at(points, count, at, UNKNOWN_TOKEN)) {
        *length = strlen(UNKNOWN_TOKEN);
        return SEGMENT_KIND_UNKNOWN;
    }
    return SEGMENT_KIND_TEXT;
}

/* ------------------------------------------------------------ tokens */

typedef struct token {
    int32_t id;
    bool lone_space;     /* the piece "▁" */
    bool special_string; /* the string "</s>" or "<unk>" */
} token;

typedef struct token_list {
    token *items;
    size_t count, capacity;
} token_list;

/* Room for `more` tokens after the ones held. */
static glimpse_status token_list_reserve(token_list *list, size_t more) {
    if (more <= list->capacity - list->count) return GLIMPSE_STATUS_OK;
    if (more > SIZE_MAX / (4 * sizeof(token)) - list->count) return ERROR_OOM();
    size_t capacity = 2 * (list->count + more);
    token *items = realloc(list->items, capacity * sizeof *items);
    if (!items) return ERROR_OOM();
    list->items = items;
    list->capacity = capacity;
    return GLIMPSE_STATUS_OK;
}

/* Step 4 for the code points [begin, end) of one piece of text: appends its
 * SentencePiece tokens. */
static glimpse_status encode_text(const siglip_tokenizer *t, const int32_t *points, size_t begin, size_t end,
                                  token_list *tokens) {
    size_t prefix_length = strlen(UNKNOWN_TOKEN);
    char *utf8 = malloc(prefix_length + 4 * (end - begin) + 1);
    if (!utf8) return ERROR_OOM();
    memcpy(utf8, UNKNOWN_TOKEN, prefix_length);
    size_t used = prefix_length;
    bool pending_space = false;
    for (size_t i = begin; i < end; i++) {
        int32_t c = points[i];
        if (is_ascii_punctuation(c)) continue;
        if (utf8_is_python_space(c)) {
            pending_space = used > prefix_length;
            continue;
        }
        if (pending_space) utf8[used++] = ' ';
        pending_space = false;
        used += (size_t)utf8proc_encode_char(c, (utf8proc_uint8_t *)utf8 + used);
    }
    utf8[used] = '\0';
    if (used == prefix_length) { /* nothing left: "<unk>" alone, all of it dropped */
        free(utf8);
        return GLIMPSE_STATUS_OK;
    }
    sentencepiece_pieces pieces = {0};
    glimpse_status status = sentencepiece_encode(t->model, utf8, used, &pieces);
    free(utf8);
    /* transformers keeps every piece when there are fewer than "<unk>" has */
    size_t first = pieces.count >= t->prefix_piece_count ? t->prefix_piece_count : 0;
    if (!status) status = token_list_reserve(tokens, pieces.count - first);
    for (size_t i = first; !status && i < pieces.count; i++) {
        const char *piece = pieces.text + pieces.starts[i];
        tokens->items[tokens->count++] = (token){
            .id = pieces.ids[i],
            .lone_space = strcmp(piece, "\xe2\x96\x81") == 0,
            .special_string = strcmp(piece, END_TOKEN) == 0 || strcmp(piece, UNKNOWN_TOKEN) == 0,
        };
    }
    sentencepiece_pieces_free(&pieces);
    return status;
}

/* Steps 3 to 5 over the prepared code points. Stops once more tokens than the
 * encoding keeps are known: later pieces of text cannot change earlier ids. */
static glimpse_status tokenize(const siglip_tokenizer *t, const int32_t *points, size_t count, token_list *tokens) {
    glimpse_status status = GLIMPSE_STATUS_OK;
    size_t text_begin = 0;
    bool after_special = false;
    for (size_t at = 0; !status && at <= count && tokens->count <= t->length;) {
        size_t special_length = 0;
        segment_kind kind = at < count ? special_token(points, count, at, &special_length) : SEGMENT_KIND_TEXT;
        if (kind == SEGMENT_KIND_TEXT && at < count) {
            at++;
            continue;
        }
        /* [text_begin, at) is text, between specials, the start or the end */
        size_t begin = text_begin, end = at;
        if (after_special)
            while (begin < end && utf8_is_python_space(points[begin])) begin++;
        if (kind != SEGMENT_KIND_TEXT)
            while (end > begin && utf8_is_python_space(points[end - 1])) end--;
        if (begin < end) status = encode_text(t, points, begin, end, tokens);
        if (!status && kind != SEGMENT_KIND_TEXT && !(status = token_list_reserve(tokens, 1)))
            tokens->items[tokens->count++] =
                (token){.id = kind == SEGMENT_KIND_END ? t->end_id : t->unknown_id, .special_string = true};
        if (kind == SEGMENT_KIND_TEXT) break; /* the end of the text */
        at += special_length;
        text_begin = at;
        after_special = true;
    }
    if (!status && tokens->count > 1 && tokens->items[0].lone_space && tokens->items[1].special_string) {
        memmove(tokens->items, tokens->items + 1, (tokens->count - 1) * sizeof *tokens->items);
        tokens->count--;
    }
    return status;
}

glimpse_status siglip_tokenizer_encode(const siglip_tokenizer *t, const char *text, int32_t *ids, size_t capacity,
                                       size_t *unpadded_count) {
    *unpadded_count = 0;
    if (!t || !text || !ids)
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "siglip_tokenizer_encode: a NULL argument");
    if (capacity < t->length)
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "room for %zu ids, a SigLIP encoding has %zu", capacity,
                         t->length);
    int32_t *points = NULL;
    size_t count = 0;
    token_list tokens = {0};
    glimpse_status status = prepared_codepoints(text, &points, &count);
    if (!status) status = tokenize(t, points, count, &tokens);
    if (!status) {
        /* prepare_for_model: one place is kept for </s>, which is added only
         * if the kept ids do not already end with it */
        size_t kept = tokens.count < t->length ? tokens.count : t->length - 1;
        for (size_t i = 0; i < kept; i++) ids[i] = tokens.items[i].id;
        if (kept == 0 || ids[kept - 1] != t->end_id) ids[kept++] = t->end_id;
        *unpadded_count = kept;
        for (size_t i = kept; i < t->length; i++) ids[i] = t->end_id;
    }
    free(points);
    free(tokens.items);
    return status;
}
