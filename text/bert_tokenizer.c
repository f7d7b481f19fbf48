/* bert_tokenizer.c — BERT WordPiece encode and decode. Unicode
 * normalisation, case mapping and categories from utf8proc. */
#include "text/bert_tokenizer.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "core/error.h"
#include "core/strmap.h"
#include "text/clean_up.h"
#include "text/utf8.h"
#include "weights/config.h"

#define MAX_WORD_CHARACTERS 100
#define MAX_SPECIALS 64
/* Refused above these: bert-base-uncased's vocab.txt is 0.2 MB, its other files a few hundred bytes. */
#define VOCABULARY_FILE_MAX_BYTES (64u << 20)
#define SETTINGS_FILE_MAX_BYTES (16u << 20)
/* Ids beyond this are damage, not a vocabulary (BERT's end at 30 521, BLIP's added ones at 30 523). */
#define MAX_TOKEN_ID 10000000
/* Room for bert-base's 30 522 tokens without regrowing the map. */
#define VOCABULARY_MAP_CAPACITY 32768

struct bert_tokenizer {
    strmap *vocab;     /* token -> id */
    char **tokens;     /* id -> token */
    size_t count;      /* ids 0 .. count-1 */
    size_t capacity;   /* entries allocated in tokens */
    int lowercase;
    int32_t unk_id;
    /* tokens never split or lowercased, matched in the raw text first */
    char *specials[MAX_SPECIALS];
    int32_t special_ids[MAX_SPECIALS];
    size_t special_count;
    unsigned char *is_special; /* [count]: skipped by decode */
};

static glimpse_status add_token(bert_tokenizer *t, const char *text, size_t length, int32_t id) {
    if (id < 0 || id > MAX_TOKEN_ID) return error_set(GLIMPSE_STATUS_BAD_FORMAT, "token id %d is out of range", id);
    if ((size_t)id >= t->capacity) {
        /* doubling: growing one id at a time copied the table once per token
         * (30 522 copies of up to 240 KB for BERT's vocabulary) */
        size_t capacity = t->capacity ? t->capacity : 1024;
        while (capacity <= (size_t)id) capacity *= 2;
        char **grown = realloc(t->tokens, capacity * sizeof *grown);
        if (!grown) return ERROR_OOM();
        t->tokens = grown;
        t->capacity = capacity;
    }
    if ((size_t)id >= t->count) {
        for (size_t i = t->count; i <= (size_t)id; i++) t->tokens[i] = NULL;
        t->count = (size_t)id + 1;
    }
    free(t->tokens[id]);
    t->tokens[id] = malloc(length + 1);
    if (!t->tokens[id]) return ERROR_OOM();
    memcpy(t->tokens[id], text, length);
    t->tokens[id][length] = '\0';
    return strmap_put(t->vocab, text, length, id);
}

static glimpse_status add_special(bert_tokenizer *t, const char *token) {
    int32_t id;
    if (!strmap_get(t->vocab, token, strlen(token), &id)) return GLIMPSE_STATUS_OK; /* not in this vocabulary */
    for (size_t i = 0; i < t->special_count; i++)
        if (strcmp(t->specials[i], token) == 0) return GLIMPSE_STATUS_OK;
    if (t->special_count == MAX_SPECIALS) return error_set(GLIMPSE_STATUS_UNSUPPORTED, "too many special tokens");
    t->specials[t->special_count] = strdup(token);
    if (!t->specials[t->special_count]) return ERROR_OOM();
    t->special_ids[t->special_count++] = id;
    return GLIMPSE_STATUS_OK;
}

glimpse_status bert_tokenizer_create(const char *vocab_text, size_t vocab_size, const char *added_tokens_json,
                                     int lowercase, bert_tokenizer **out) {
    *out = NULL;
    bert_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return ERROR_OOM();
    t->lowercase = lowercase;
    glimpse_status status = strmap_create(VOCABULARY_MAP_CAPACITY, &t->vocab);
    size_t at = 0;
    int32_t id = 0;
    while (!status && at < vocab_size) {
        size_t end = at;
        while (end < vocab_size && vocab_text[end] != '\n') end++;
        size_t length = end - at;
        if (length > 0 && vocab_text[at + length - 1] == '\r') length--;
        /* transformers strips each line; an empty line still takes an id */
        status = add_token(t, vocab_text + at, length, id++);
        at = end + 1;
    }
    cJSON *added = NULL;
    if (!status && added_tokens_json) {
        added = cJSON_Parse(added_tokens_json);
        if (!cJSON_IsObject(added)) {
            status = error_set(GLIMPSE_STATUS_BAD_FORMAT, "added_tokens.json is not a JSON object");
        } else {
            const cJSON *item;
            cJSON_ArrayForEach(item, added) {
                if (!cJSON_IsNumber(item)) {
                    status = error_set(GLIMPSE_STATUS_BAD_FORMAT, "added_tokens.json: '%.40s' has no id", item->string);
                    break;
                }
                if ((status = add_token(t, item->string, strlen(item->string), (int32_t)item->valuedouble))) break;
                if ((status = add_special(t, item->string))) break;
            }
        }
    }
    cJSON_Delete(added);
    const char *standard[] = {"[CLS]", "[SEP]", "[PAD]", "[MASK]", "[UNK]"};
    for (size_t i = 0; !status && i < sizeof standard / sizeof standard[0]; i++) status = add_special(t, standard[i]);
    if (!status && !strmap_get(t->vocab, "[UNK]", 5, &t->unk_id))
        status = error_set(GLIMPSE_STATUS_BAD_FORMAT, "vocab.txt has no [UNK] token");
    if (!status) {
        t->is_special = calloc(t->count, 1);
        if (!t->is_special) status = ERROR_OOM();
        for (size_t i = 0; !status && i < t->special_count; i++) t->is_special[t->special_ids[i]] = 1;
    }
    if (status) {
        bert_tokenizer_free(t);
        return status;
    }
    *out = t;
    return GLIMPSE_STATUS_OK;
}

glimpse_status bert_tokenizer_load(const char *folder, bert_tokenizer **out) {
    *out = NULL;
    uint8_t *vocab, *added = NULL, *config = NULL;
    size_t vocab_size, size;
    glimpse_status status = config_read_file(folder, "vocab.txt", VOCABULARY_FILE_MAX_BYTES, 0, &vocab, &vocab_size);
    if (!status) status = config_read_file(folder, "added_tokens.json", SETTINGS_FILE_MAX_BYTES, 1, &added, &size);
    if (!status) status = config_read_file(folder, "tokenizer_config.json", SETTINGS_FILE_MAX_BYTES, 1, &config, &size);
    int lowercase = 1;
    if (!status && config) { /* an unreadable tokenizer_config.json leaves the default */
        cJSON *json = cJSON_Parse((const char *)config);
        const cJSON *flag = cJSON_GetObjectItemCaseSensitive(json, "do_lower_case");
        if (cJSON_IsBool(flag)) lowercase = cJSON_IsTrue(flag);
        cJSON_Delete(json);
    }
    if (!status) {
        status = bert_tokenizer_create((const char *)vocab, vocab_size, (const char *)added, lowercase, out);
        if (status) error_prefix(status, "%s", folder);
    }
    free(vocab), free(added), free(config);
    return status;
}

void bert_tokenizer_free(bert_tokenizer *t) {
    if (!t) return;
    strmap_free(t->vocab);
    for (size_t i = 0; i < t->count; i++) free(t->tokens[i]);
    free(t->tokens);
    for (size_t i = 0; i < t->special_count; i++) free(t->specials[i]);
    free(t->is_special);
    free(t);
}

const char *bert_tokenizer_token(const bert_tokenizer *t, int32_t id) {
    return id >= 0 && (size_t)id < t->count ? t->tokens[id] : NULL;
}

int32_t bert_tokenizer_id(const bert_tokenizer *t, const char *token) {
    int32_t id;
    return strmap_get(t->vocab, token, strlen(token), &id) ? id : -1;
}

int bert_tokenizer_is_special(const bert_tokenizer *t, int32_t id) {
    return id >= 0 && (size_t)id < t->count && t->is_special[id];
}

size_t bert_tokenizer_vocab_size(const bert_tokenizer *t) { return t->count; }

/* ---------------------------------------------------------- pre-tokenising */

static int is_whitespace(utf8proc_int32_t c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || utf8proc_category(c) == UTF8PROC_CATEGORY_ZS;
}

static int is_control(utf8proc_int32_t c) {
    if (c == '\t' || c == '\n' || c == '\r') return 0;
    utf8proc_category_t category = utf8proc_category(c);
    return category == UTF8PROC_CATEGORY_CC || category == UTF8PROC_CATEGORY_CF || category == UTF8PROC_CATEGORY_CN ||
           category == UTF8PROC_CATEGORY_CO || category == UTF8PROC_CATEGORY_CS;
}

static int is_punctuation(utf8proc_int32_t c) {
    if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126)) return 1;
    utf8proc_category_t category = utf8proc_category(c);
    return category >= UTF8PROC_CATEGORY_PC && category <= UTF8PROC_CATEGORY_PO;
}

static int is_cjk(utf8proc_int32_t c) {
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
           (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

/* Growable array of code points. */
typedef struct points {
    utf8proc_int32_t *data;
    size_t count, capacity;
} points;

static int points_push(points *p, utf8proc_int32_t c) {
    if (p->count == p->capacity) {
        size_t capacity = p->capacity ? p->capacity * 2 : 64;
        utf8proc_int32_t *grown = realloc(p->data, capacity * sizeof *grown);
        if (!grown) return 0;
        p->data = grown;
        p->capacity = capacity;
    }
    p->data[p->count++] = c;
    return 1;
}

/* Decodes UTF-8 (invalid bytes become U+FFFD, which clean-up drops). */
static int decode_utf8(const char *text, size_t length, points *out) {
    for (size_t at = 0; at < length;)
        if (!points_push(out, utf8_next_bytewise(text, length, &at))) return 0;
    return 1;
}

/* Lowercase and strip accents (NFD, drop Mn) of one word. */
static int fold_word(const utf8proc_int32_t *word, size_t n, int lowercase, points *out) {
    for (size_t i = 0; i < n; i++) {
        utf8proc_int32_t c = lowercase ? utf8proc_tolower(word[i]) : word[i];
        if (!lowercase) {
            if (!points_push(out, c)) return 0;
            continue;
        }
        utf8proc_int32_t decomposed[8];
        int last_boundclass = 0;
        utf8proc_ssize_t k = utf8proc_decompose_char(c, decomposed, 8, UTF8PROC_DECOMPOSE, &last_boundclass);
        if (k < 0 || k > 8) {
            decomposed[0] = c;
            k = 1;
        }
        for (utf8proc_ssize_t j = 0; j < k; j++)
            if (utf8proc_category(decomposed[j]) != UTF8PROC_CATEGORY_MN && !points_push(out, decomposed[j])) return 0;
    }
    return 1;
}

typedef struct id_output {
    int32_t *ids;
    size_t capacity, count;
} id_output;

static void emit(id_output *out, int32_t id) {
    if (out->count < out->capacity) out->ids[out->count] = id;
    out->count++;
}

/* WordPiece on one word (code points without spaces or punctuation). */
static glimpse_status wordpiece(const bert_tokenizer *t, const utf8proc_int32_t *word, size_t n, id_output *out) {
    if (n == 0) return GLIMPSE_STATUS_OK;
    if (n > MAX_WORD_CHARACTERS) {
        emit(out, t->unk_id);
        return GLIMPSE_STATUS_OK;
    }
    char piece[2 + MAX_WORD_CHARACTERS * 4 + 1];
    int32_t found[MAX_WORD_CHARACTERS];
    size_t pieces = 0, start = 0;
    while (start < n) {
        size_t end = n;
        int32_t id = -1;
        while (start < end) {
            size_t length = 0;
            if (start > 0) {
                piece[0] = '#', piece[1] = '#';
                length = 2;
            }
            for (size_t i = start; i < end; i++)
                length += (size_t)utf8proc_encode_char(word[i], (utf8proc_uint8_t *)piece + length);
            if (strmap_get(t->vocab, piece, length, &id)) break;
            id = -1;
            end--;
        }
        if (id < 0) { /* no piece matches: the whole word is unknown */
            emit(out, t->unk_id);
            return GLIMPSE_STATUS_OK;
        }
        found[pieces++] = id;
        start = end;
    }
    for (size_t i = 0; i < pieces; i++) emit(out, found[i]);
    return GLIMPSE_STATUS_OK;
}

/* Basic tokenisation and WordPiece of a stretch of text without special tokens. */
static glimpse_status encode_plain(const bert_tokenizer *t, const char *text, size_t length, id_output *out) {
    points raw = {0}, clean = {0}, folded = {0};
    glimpse_status status = GLIMPSE_STATUS_OK;
    if (!decode_utf8(text, length, &raw)) status = ERROR_OOM();
    /* clean-up: drop NUL, U+FFFD and controls; whitespace to ' '; CJK set apart */
    for (size_t i = 0; !status && i < raw.count; i++) {
        utf8proc_int32_t c = raw.data[i];
        if (c == 0 || c == UTF8_REPLACEMENT || is_control(c)) continue;
        int ok = 1;
        if (is_whitespace(c))
            ok = points_push(&clean, ' ');
        else if (is_cjk(c))
            ok = points_push(&clean, ' ') && points_push(&clean, c) && points_push(&clean, ' ');
        else
            ok = points_push(&clean, c);
        if (!ok) status = ERROR_OOM();
    }
    size_t at = 0;
    while (!status && at < clean.count) {
        while (at < clean.count && clean.data[at] == ' ') at++;
        size_t end = at;
        while (end < clean.count && clean.data[end] != ' ') end++;
        if (end == at) break;
        folded.count = 0;
        if (!fold_word(clean.data + at, end - at, t->lowercase, &folded)) {
            status = ERROR_OOM();
            break;
        }
        /* a word of accents only folds to nothing */
        if (folded.count == 0) {
            at = end;
            continue;
        }
        /* split on punctuation: each punctuation mark is a word of its own */
        size_t piece = 0;
        for (size_t i = 0; i <= folded.count && !status; i++) {
            if (i == folded.count || is_punctuation(folded.data[i]) || is_whitespace(folded.data[i])) {
                status = wordpiece(t, folded.data + piece, i - piece, out);
                if (!status && i < folded.count && is_punctuation(folded.data[i]))
                    status = wordpiece(t, folded.data + i, 1, out);
                piece = i + 1;
            }
        }
        at = end;
    }
    free(raw.data), free(clean.data), free(folded.data);
    return status;
}

glimpse_status bert_tokenizer_encode(const bert_tokenizer *t, const char *text, int32_t *ids, size_t capacity,
                                     size_t *count) {
    *count = 0;
    if (!text) text = "";
    id_output out = {ids, capacity, 0};
    size_t length = strlen(text), at = 0, plain = 0;
    glimpse_status status = GLIMPSE_STATUS_OK;
    /* special tokens are matched in the raw text, longest first on ties */
    while (at <= length && !status) {
        size_t matched = 0;
        int32_t matched_id = -1;
        if (at < length && text[at] == '[')
            for (size_t s = 0; s < t->special_count; s++) {
                size_t n = strlen(t->specials[s]);
                if (n > matched && strncmp(text + at, t->specials[s], n) == 0) {
                    matched = n;
                    matched_id = t->special_ids[s];
                }
            }
        if (matched || at == length) {
            status = encode_plain(t, text + plain, at - plain, &out);
            if (matched && !status) emit(&out, matched_id);
            at += matched ? matched : 1;
            plain = at;
        } else {
            at++;
        }
    }
    *count = out.count;
    return status;
}

/* ---------------------------------------------------------------- decode */

glimpse_status bert_tokenizer_decode(const bert_tokenizer *t, const int32_t *ids, size_t count, char **text) {
    *text = NULL;
    size_t total = 1;
    for (size_t i = 0; i < count; i++) {
        const char *token = bert_tokenizer_token(t, ids[i]);
        if (!token) return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "token id %d is not in the vocabulary", ids[i]);
        total += strlen(token) + 1;
    }
    char *out = malloc(total);
    if (!out) return ERROR_OOM();
    size_t used = 0;
    int first = 1;
    for (size_t i = 0; i < count; i++) {
        if (t->is_special[ids[i]]) continue;
        const char *token = t->tokens[ids[i]];
        if (!first && strncmp(token, "##", 2) == 0) {
            token += 2; /* " ".join(tokens).replace(" ##", "") */
        } else if (!first) {
            out[used++] = ' ';
        }
        size_t n = strlen(token);
        memcpy(out + used, token, n);
        used += n;
        first = 0;
    }
    out[used] = '\0';
    size_t start = 0, end = clean_up_tokenization(out, used); /* then .strip() of the joined tokens */
    while (start < end && (out[start] == ' ')) start++;
    while (end > start && out[end - 1] == ' ') end--;
    memmove(out, out + start, end - start);
    out[end - start] = '\0';
    *text = out;
    return GLIMPSE_STATUS_OK;
}
