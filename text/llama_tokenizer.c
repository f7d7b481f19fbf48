/* llama_tokenizer.c — llama_tokenizer.h over text/sentencepiece.h. */
#include "text/llama_tokenizer.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/file.h"
#include "text/sentencepiece.h"
#include "weights/config.h"

#define LLAMA_MODEL_MAX_BYTES (64u << 20)
#define LLAMA_MAX_ADDED 4096
#define SPIECE_UNDERLINE "\xe2\x96\x81" /* "▁" */

typedef struct added_token {
    char *content;
    size_t length;
    int32_t id;
    bool special; /* one of all_special_tokens: skipped by decode(skip_special_tokens=True) */
} added_token;

struct llama_tokenizer {
    sentencepiece_model *sp;
    added_token *added;
    size_t added_count;
    bool legacy, add_bos, add_eos, add_prefix_space;
    int32_t bos_id, eos_id;
    size_t unk_pieces; /* pieces SentencePiece makes of "<unk>" written as text */
    size_t vocab_size;
};

void llama_tokenizer_free(llama_tokenizer *t) {
    if (!t) return;
    sentencepiece_model_free(t->sp);
    for (size_t i = 0; i < t->added_count; i++) free(t->added[i].content);
    free(t->added);
    free(t);
}

int32_t llama_tokenizer_token_id(const llama_tokenizer *t, const char *content) {
    for (size_t i = 0; i < t->added_count; i++)
        if (!strcmp(t->added[i].content, content)) return t->added[i].id;
    return -1;
}

size_t llama_tokenizer_vocab_size(const llama_tokenizer *t) { return t->vocab_size; }

/* A named special token of the config (a string or {"content": ...}), or NULL. */
static const char *named(const cJSON *config, const cJSON *map, const char *key) {
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(map, key);
    if (!item) item = cJSON_GetObjectItemCaseSensitive(config, key);
    if (cJSON_IsObject(item)) item = cJSON_GetObjectItemCaseSensitive(item, "content");
    return cJSON_IsString(item) ? item->valuestring : NULL;
}

static glimpse_status add_token(llama_tokenizer *t, const char *content, int32_t id) {
    for (size_t i = 0; i < t->added_count; i++)
        if (!strcmp(t->added[i].content, content)) return GLIMPSE_STATUS_OK;
    if (t->added_count == LLAMA_MAX_ADDED || !content[0])
        return error_set(GLIMPSE_STATUS_UNSUPPORTED, "more than %d added tokens, or an empty one", LLAMA_MAX_ADDED);
    added_token *grown = realloc(t->added, (t->added_count + 1) * sizeof *grown);
    if (!grown) return ERROR_OOM();
    t->added = grown;
    t->added[t->added_count] = (added_token){strdup(content), strlen(content), id, false};
    if (!t->added[t->added_count].content) return ERROR_OOM();
    t->added_count++;
    if ((size_t)id + 1 > t->vocab_size) t->vocab_size = (size_t)id + 1;
    return GLIMPSE_STATUS_OK;
}

/* The added tokens (added_tokens_decoder, added_tokens.json) and which are special (bos, eos, unk, pad and the
 * additional special tokens: all_special_tokens). */
static glimpse_status read_tokens(llama_tokenizer *t, const cJSON *config, const cJSON *map, const cJSON *added) {
    const cJSON *item;
    glimpse_status status = GLIMPSE_STATUS_OK;
    cJSON_ArrayForEach(item, cJSON_GetObjectItemCaseSensitive(config, "added_tokens_decoder")) {
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(item, "content");
        long id = strtol(item->string, NULL, 10);
        if (!cJSON_IsString(content) || id < 0 || id > (1 << 24))
            return error_set(GLIMPSE_STATUS_BAD_FORMAT, "tokenizer_config.json: a malformed added token");
        if ((status = add_token(t, content->valuestring, (int32_t)id))) return status;
    }
    cJSON_ArrayForEach(item, added) {
        if (!cJSON_IsNumber(item) || item->valuedouble < 0 || item->valuedouble > (1 << 24))
            return error_set(GLIMPSE_STATUS_BAD_FORMAT, "added_tokens.json: \"%.20s\" has no id", item->string);
        if ((status = add_token(t, item->string, (int32_t)item->valuedouble))) return status;
    }
    static const char *const keys[] = {"bos_token", "eos_token", "unk_token", "pad_token"};
    for (size_t k = 0; k < 4; k++) {
        const char *content = named(config, map, keys[k]);
        if (!content) continue;
        int32_t id = llama_tokenizer_token_id(t, content);
        if (id < 0) id = sentencepiece_piece_id(t->sp, content);
        if ((status = add_token(t, content, id))) return status;
        for (size_t i = 0; i < t->added_count; i++)
            if (!strcmp(t->added[i].content, content)) t->added[i].special = true;
        if (k == 0) t->bos_id = id;
        if (k == 1) t->eos_id = id;
    }
    cJSON_ArrayForEach(item, cJSON_GetObjectItemCaseSensitive(map ? map : config, "additional_special_tokens"))
        for (size_t i = 0; i < t->added_count; i++)
            if (cJSON_IsString(item) && !strcmp(t->added[i].content, item->valuestring)) t->added[i].special = true;
    return status;
}

static bool flag(const cJSON *config, const char *key, bool fallback) {
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(config, key);
    return cJSON_IsBool(item) ? cJSON_IsTrue(item) : fallback;
}

glimpse_status llama_tokenizer_load(const char *folder, llama_tokenizer **out) {
    *out = NULL;
    llama_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return ERROR_OOM();
    t->bos_id = t->eos_id = -1;
    char *path = file_join(folder, "tokenizer.model");
    uint8_t *bytes = NULL;
    size_t size = 0;
    cJSON *config = NULL, *map = NULL, *added = NULL;
    glimpse_status status = path ? file_read_all(path, LLAMA_MODEL_MAX_BYTES, &bytes, &size) : ERROR_OOM();
    if (!status) status = config_read_json_optional(folder, "tokenizer_config.json", &config);
    if (!status) status = config_read_json_optional(folder, "special_tokens_map.json", &map);
    if (!status) status = config_read_json_optional(folder, "added_tokens.json", &added);
    if (!status) {
        t->legacy = flag(config, "legacy", true); /* LlamaTokenizer's default: legacy, with a warning */
        t->add_bos = flag(config, "add_bos_token", true), t->add_eos = flag(config, "add_eos_token", false);
        t->add_prefix_space = flag(config, "add_prefix_space", true);
        status = sentencepiece_model_create(bytes, size, !t->legacy, &t->sp);
    }
    if (!status) {
        t->vocab_size = sentencepiece_piece_count(t->sp);
        status = read_tokens(t, config, map, added);
    }
    sentencepiece_pieces pieces = {0};
    if (!status && !t->legacy) { /* what _tokenize drops: the pieces of "<unk>" encoded as text */
        status = sentencepiece_encode(t->sp, "<unk>", 5, &pieces);
        t->unk_pieces = pieces.count;
    }
    sentencepiece_pieces_free(&pieces);
    if (status) error_prefix(status, "%s", folder);
    cJSON_Delete(config), cJSON_Delete(map), cJSON_Delete(added);
    free(bytes), free(path);
    if (status) llama_tokenizer_free(t);
    else *out = t;
    return status;
}

/* ------------------------------------------------------------------ encoding */

typedef struct id_list {
    int32_t *ids;
    size_t count, capacity;
    bool lone_underline_first; /* the first token was a lone "▁" piece */
} id_list;

static glimpse_status push(id_list *l, int32_t id) {
    if (l->count == l->capacity) {
        size_t capacity = l->capacity ? 2 * l->capacity : 64;
        int32_t *grown = realloc(l->ids, capacity * sizeof *grown);
        if (!grown) return ERROR_OOM();
        l->ids = grown, l->capacity = capacity;
    }
    l->ids[l->count++] = id;
    return GLIMPSE_STATUS_OK;
}

/* _tokenize of one stretch: SentencePiece, behind "<unk>" when it begins with a space (legacy false). */
static glimpse_status encode_stretch(const llama_tokenizer *t, const char *text, size_t length, id_list *out) {
    bool behind_unk = !t->legacy && (length && (text[0] == ' ' || !strncmp(text, SPIECE_UNDERLINE, 3)));
    char *buffer = malloc(length + 6);
    if (!buffer) return ERROR_OOM();
    size_t used = 0;
    if (behind_unk) memcpy(buffer, "<unk>", 5), used = 5;
    memcpy(buffer + used, text, length);
    used += length;
    sentencepiece_pieces pieces;
    glimpse_status status = sentencepiece_encode(t->sp, buffer, used, &pieces);
    free(buffer);
    size_t skip = behind_unk && pieces.count >= t->unk_pieces ? t->unk_pieces : 0;
    for (size_t i = skip; !status && i < pieces.count; i++) {
        if (out->count == 0 && !strcmp(pieces.text + pieces.starts[i], SPIECE_UNDERLINE))
            out->lone_underline_first = true;
        status = push(out, pieces.ids[i]);
    }
    sentencepiece_pieces_free(&pieces);
    return status;
}

/* The added token that starts at text[at], longest; NULL for none. */
static const added_token *added_at(const llama_tokenizer *t, const char *text, size_t length, size_t at) {
    const added_token *found = NULL;
    for (size_t i = 0; i < t->added_count; i++) {
        const added_token *a = &t->added[i];
        if (a->length <= length - at && !memcmp(text + at, a->content, a->length) &&
            (!found || a->length > found->length))
            found = a;
    }
    return found;
}

/* tokenize(): "▁" as a space and one "▁" in front (legacy false), the added tokens split out, each stretch
 * encoded; a lone leading "▁" dropped before a special token. */
static glimpse_status tokenize(const llama_tokenizer *t, const char *text, id_list *out) {
    size_t length = strlen(text);
    if (!length) return GLIMPSE_STATUS_OK;
    char *clean = malloc(length + 4);
    if (!clean) return ERROR_OOM();
    size_t used = 0;
    if (!t->legacy && t->add_prefix_space) memcpy(clean, SPIECE_UNDERLINE, 3), used = 3;
    for (size_t i = 0; i < length;)
        if (!t->legacy && !strncmp(text + i, SPIECE_UNDERLINE, 3)) clean[used++] = ' ', i += 3;
        else clean[used++] = text[i++];
    glimpse_status status = GLIMPSE_STATUS_OK;
    size_t stretch = 0, first_special_at = SIZE_MAX;
    for (size_t at = 0; !status && at <= used;) {
        const added_token *a = at < used ? added_at(t, clean, used, at) : NULL;
        if (!a && at < used) {
            at++;
            continue;
        }
        if (at > stretch) status = encode_stretch(t, clean + stretch, at - stretch, out);
        if (!a) break;
        if (a->special && first_special_at == SIZE_MAX) first_special_at = out->count;
        if (!status) status = push(out, a->id);
        at += a->length;
        stretch = at;
    }
    free(clean);
    /* tokens[0] == "▁" and tokens[1] a special token: the "▁" goes */
    if (!status && !t->legacy && out->lone_underline_first && out->count > 1 && first_special_at == 1) {
        memmove(out->ids, out->ids + 1, (out->count - 1) * sizeof *out->ids);
        out->count--;
    }
    return status;
}

glimpse_status llama_tokenizer_encode(const llama_tokenizer *t, const char *text, bool add_special_tokens,
                                      int32_t **ids, size_t *count) {
    *ids = NULL, *count = 0;
    id_list list = {0};
    glimpse_status status = add_special_tokens && t->add_bos && t->bos_id >= 0 ? push(&list, t->bos_id)
                                                                               : GLIMPSE_STATUS_OK;
    if (!status) {
        id_list body = {0};
        status = tokenize(t, text ? text : "", &body);
        for (size_t i = 0; !status && i < body.count; i++) status = push(&list, body.ids[i]);
        free(body.ids);
    }
    if (!status && add_special_tokens && t->add_eos && t->eos_id >= 0) status = push(&list, t->eos_id);
    if (status) {
        free(list.ids);
        return status;
    }
    if (!list.ids && (list.ids = malloc(sizeof *list.ids)) == NULL) return ERROR_OOM();
    *ids = list.ids, *count = list.count;
    return GLIMPSE_STATUS_OK;
}

/* ------------------------------------------------------------------ decoding */

static const added_token *added_of_id(const llama_tokenizer *t, int32_t id) {
    for (size_t i = 0; i < t->added_count; i++)
        if (t->added[i].id == id) return &t->added[i];
    return NULL;
}

/* text[used..] += bytes[0..length) (NUL kept after). */
static glimpse_status append(char **text, size_t *used, const char *bytes, size_t length) {
    char *grown = realloc(*text, *used + length + 1);
    if (!grown) return ERROR_OOM();
    *text = grown;
    memcpy(*text + *used, bytes, length);
    *used += length;
    (*text)[*used] = '\0';
    return GLIMPSE_STATUS_OK;
}

/* convert_tokens_to_string of one run of pieces (its first piece's "▁" dropped), appended to *text. */
static glimpse_status append_pieces(const llama_tokenizer *t, const char **pieces, size_t count, char **text,
                                    size_t *used) {
    char *stripped = NULL;
    if (t->add_prefix_space && !strncmp(pieces[0], SPIECE_UNDERLINE, 3)) {
        stripped = strdup(pieces[0] + 3);
        if (!stripped) return ERROR_OOM();
        pieces[0] = stripped;
    }
    char *decoded = NULL;
    glimpse_status status = sentencepiece_decode_pieces(t->sp, pieces, count, &decoded);
    free(stripped);
    if (!status) status = append(text, used, decoded, strlen(decoded));
    free(decoded);
    return status;
}

/* _decode: runs of pieces and the added tokens that are not skipped, each a part, parts joined by spaces
 * (spaces_between_special_tokens). */
glimpse_status llama_tokenizer_decode(const llama_tokenizer *t, const int32_t *ids, size_t count,
                                      bool skip_special_tokens, char **text) {
    *text = calloc(1, 1);
    const char **pieces = malloc((count ? count : 1) * sizeof *pieces);
    if (!*text || !pieces) {
        free(pieces), free(*text), *text = NULL;
        return ERROR_OOM();
    }
    size_t used = 0, run = 0, parts = 0;
    glimpse_status status = GLIMPSE_STATUS_OK;
    for (size_t i = 0; i <= count && !status; i++) {
        const added_token *a = i < count ? added_of_id(t, ids[i]) : NULL;
        if (i < count && !a) {
            if (ids[i] < 0 || (size_t)ids[i] >= sentencepiece_piece_count(t->sp))
                status = error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "token id %d is outside the vocabulary", ids[i]);
            else pieces[run++] = sentencepiece_id_piece(t->sp, ids[i]);
            continue;
        }
        if (a && a->special && skip_special_tokens) continue;
        if (run) { /* the pieces so far make a part (an empty one is left out) */
            size_t before = used;
            if (parts) status = append(text, &used, " ", 1);
            if (!status) status = append_pieces(t, pieces, run, text, &used);
            if (!status && used == before + (parts ? 1 : 0)) used = before, (*text)[used] = '\0';
            else parts++;
            run = 0;
        }
        if (a && !status) {
            if (parts) status = append(text, &used, " ", 1);
            if (!status) status = append(text, &used, a->content, a->length);
            parts++;
        }
    }
    free(pieces);
    if (status) free(*text), *text = NULL;
    return status;
}
