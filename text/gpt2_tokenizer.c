/* gpt2_tokenizer.c — GPT2Tokenizer's encode and decode: special tokens split
 * out as PreTrainedTokenizer.tokenize does, GPT-2's pattern by hand with
 * utf8proc's categories, and byte-level BPE from text/bpe.h. */
#include "text/gpt2_tokenizer.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <utf8proc.h>

#include "core/error.h"
#include "core/file.h"
#include "core/strmap.h"
#include "text/bpe.h"
#include "text/clean_up.h"
#include "text/utf8.h"
#include "weights/config.h"

#define GPT2_DEFAULT_TOKEN "<|endoftext|>"
/* ids above this are refused: the id table is dense (12 bytes an id, 50 MB
 * at most; the largest vocabularies in use have a few hundred thousand) */
#define MAX_TOKEN_ID ((1 << 22) - 1)
#define MAX_FILE_BYTES (64u << 20)
#define NAMED_SPECIALS 7
/* token_entry.length of an id no token has / of a token holding a character outside the byte alphabet */
#define NO_TOKEN (-1)
#define NOT_BYTES (-2)

/* What an id decodes to. */
typedef struct token_entry {
    uint32_t offset; /* of its bytes in token_bytes */
    int32_t length;  /* bytes, or NO_TOKEN / NOT_BYTES */
    uint8_t special; /* skipped by decode(skip_special_tokens=True) */
} token_entry;

typedef struct special_entry {
    char *content;
    size_t length;
    int32_t id;
    int strip_left, strip_right;
    bool from_config; /* an added token of the config files: its strip flags are the ones transformers keeps */
} special_entry;

struct gpt2_tokenizer {
    strmap *vocab; /* token text -> id */
    strmap *ranks; /* "left right" -> merge rank */
    bpe_alphabet alphabet;
    size_t id_limit;      /* 1 + the largest id */
    token_entry *tokens;  /* [id_limit] (room for token_capacity) */
    uint8_t *token_bytes; /* what the tokens stand for, one after another */
    size_t bytes_used;    /* of token_bytes (room for bytes_capacity) */
    /* both grow by half again as tokens are added: Florence-2 adds its 1,000 <loc_N> tokens one by one after
     * 50,265 others, and growing them a token at a time copied the table 1,000 times a load */
    size_t token_capacity, bytes_capacity;
    special_entry *specials; /* distinct contents, matched in the text before the pattern */
    size_t special_count, special_capacity;
    strmap *added;        /* added tokens' text -> id (those past vocab.json and those the config adds) */
    int32_t bos_id, eos_id, unk_id, pad_id;
    int add_bos_token, add_prefix_space, qwen2;
};

gpt2_tokenizer_options gpt2_tokenizer_default_options(void) {
    gpt2_tokenizer_options options = {0};
    options.bos.content = options.eos.content = options.unk.content = GPT2_DEFAULT_TOKEN;
    return options;
}

/* ------------------------------------------------------------- vocabulary */

/* vocab.json: ids checked, then the vocabulary map and each id's bytes. */
static glimpse_status read_vocabulary(gpt2_tokenizer *t, const char *json, size_t size) {
    cJSON *vocab = cJSON_ParseWithLength(json, size);
    glimpse_status status = GLIMPSE_STATUS_OK;
    if (!cJSON_IsObject(vocab)) {
        status = error_set(GLIMPSE_STATUS_BAD_FORMAT, "vocab.json is not a JSON object");
        goto done;
    }
    size_t entries = 0, key_bytes = 0;
    const cJSON *item;
    cJSON_ArrayForEach(item, vocab) {
        double id = item->valuedouble;
        if (!cJSON_IsNumber(item) || id != floor(id) || id < 0 || id > MAX_TOKEN_ID) {
            status = error_set(GLIMPSE_STATUS_BAD_FORMAT,
                               "vocab.json: the id of \"%.40s\" is not a whole number in 0..%d", item->string,
                               MAX_TOKEN_ID);
            goto done;
        }
        if ((size_t)id + 1 > t->id_limit) t->id_limit = (size_t)id + 1;
        entries++;
        key_bytes += strlen(item->string);
    }
    if (entries == 0) {
        status = error_set(GLIMPSE_STATUS_BAD_FORMAT, "vocab.json is empty");
        goto done;
    }
    if (key_bytes > UINT32_MAX) {
        status = error_set(GLIMPSE_STATUS_TOO_LARGE, "vocab.json holds %zu bytes of tokens", key_bytes);
        goto done;
    }
    t->tokens = calloc(t->id_limit, sizeof *t->tokens);
    t->token_bytes = malloc(key_bytes + 1); /* a stand-in takes 1 or 2 bytes, its byte 1 */
    t->token_capacity = t->id_limit;
    t->bytes_capacity = key_bytes + 1;
    if (!t->tokens || !t->token_bytes) {
        status = ERROR_OOM();
        goto done;
    }
    for (size_t id = 0; id < t->id_limit; id++) t->tokens[id].length = NO_TOKEN;
    if ((status = strmap_create(entries, &t->vocab))) goto done;
    /* a token listed twice keeps its later id, and an id listed twice its
     * later token, as Python's dicts built from the file do */
    size_t used = 0;
    cJSON_ArrayForEach(item, vocab) {
        const uint8_t *key = (const uint8_t *)item->string;
        size_t key_length = strlen(item->string), start = used;
        int32_t id = (int32_t)item->valuedouble;
        if ((status = strmap_put(t->vocab, item->string, key_length, id))) goto done;
        int32_t length = 0;
        for (size_t at = 0; at < key_length && length >= 0;) {
            int32_t codepoint;
            at += utf8_next(key + at, key_length - at, &codepoint);
            int byte = bpe_alphabet_byte(&t->alphabet, codepoint);
            if (byte < 0) {
                length = NOT_BYTES;
            } else {
                t->token_bytes[used++] = (uint8_t)byte;
                length++;
            }
        }
        if (length == NOT_BYTES) used = start;
        t->tokens[id] = (token_entry){(uint32_t)start, length, 0};
    }
    t->bytes_used = used;
done:
    cJSON_Delete(vocab);
    return status;
}

/* Room for `more` special tokens. */
static glimpse_status special_room(gpt2_tokenizer *t, size_t more) {
    if (t->special_count + more <= t->special_capacity) return GLIMPSE_STATUS_OK;
    size_t capacity = (t->special_count + more) * 2;
    special_entry *grown = realloc(t->specials, capacity * sizeof *grown);
    if (!grown) return ERROR_OOM();
    t->specials = grown, t->special_capacity = capacity;
    return GLIMPSE_STATUS_OK;
}

/* Registers a named or additional special token (once per content). */
static glimpse_status add_special(gpt2_tokenizer *t, const gpt2_special_token *token, int32_t *id) {
    *id = -1;
    if (!token->content) return GLIMPSE_STATUS_OK;
    size_t length = strlen(token->content);
    if (length == 0) return error_set(GLIMPSE_STATUS_BAD_FORMAT, "a special token is the empty string");
    if (!strmap_get(t->vocab, token->content, length, id) &&
        !(t->added && strmap_get(t->added, token->content, length, id)))
        return error_set(GLIMPSE_STATUS_UNSUPPORTED,
                         "the special token \"%.60s\" is not in vocab.json (tokens added beyond the vocabulary are "
                         "not supported)", token->content);
    t->tokens[*id].special = 1;
    special_entry *entry = NULL;
    for (size_t i = 0; i < t->special_count && !entry; i++)
        if (strcmp(t->specials[i].content, token->content) == 0) entry = &t->specials[i];
    if (!entry) {
        glimpse_status status = special_room(t, 1);
        if (status) return status;
        entry = &t->specials[t->special_count];
        entry->content = strdup(token->content);
        if (!entry->content) return ERROR_OOM();
        entry->length = length;
        entry->id = *id;
        entry->from_config = false;
        t->special_count++;
    }
    /* transformers keys the stripping rules by content: added_tokens_decoder's AddedToken if there is one, else
     * the last one given */
    if (!entry->from_config) entry->strip_left = token->strip_left, entry->strip_right = token->strip_right;
    return GLIMPSE_STATUS_OK;
}

static glimpse_status add_specials(gpt2_tokenizer *t, const gpt2_tokenizer_options *o) {
    if (o->additional_count > GPT2_TOKENIZER_MAX_ADDITIONAL)
        return error_set(GLIMPSE_STATUS_UNSUPPORTED, "more than %d additional special tokens",
                         GPT2_TOKENIZER_MAX_ADDITIONAL);
    /* transformers' order of the special token attributes */
    const gpt2_special_token *named[NAMED_SPECIALS] = {&o->bos, &o->eos, &o->unk, &o->sep, &o->pad, &o->cls, &o->mask};
    int32_t ids[NAMED_SPECIALS], unused;
    glimpse_status status = GLIMPSE_STATUS_OK;
    for (size_t i = 0; i < NAMED_SPECIALS && !status; i++) status = add_special(t, named[i], &ids[i]);
    for (size_t i = 0; i < o->additional_count && !status; i++) status = add_special(t, &o->additional[i], &unused);
    if (status) return status;
    t->bos_id = ids[0];
    t->eos_id = ids[1];
    t->unk_id = ids[2];
    t->pad_id = ids[4] >= 0 ? ids[4] : ids[1];
    t->add_bos_token = o->add_bos_token;
    t->add_prefix_space = o->add_prefix_space;
    t->qwen2 = o->qwen2;
    if (t->add_bos_token && t->bos_id < 0)
        return error_set(GLIMPSE_STATUS_BAD_FORMAT, "add_bos_token is set but there is no bos_token");
    return GLIMPSE_STATUS_OK;
}

static glimpse_status read_added_tokens(gpt2_tokenizer *t, const cJSON *config, const cJSON *added_json);

/* gpt2_tokenizer_create with the added tokens of a snapshot's config files (NULL: none) read before the specials. */
static glimpse_status create_with(const char *vocab_json, size_t vocab_size, const char *merges_text,
                                  size_t merges_size, const gpt2_tokenizer_options *options, const cJSON *config,
                                  const cJSON *added_json, gpt2_tokenizer **out) {
    *out = NULL;
    gpt2_tokenizer_options defaults = gpt2_tokenizer_default_options();
    gpt2_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return ERROR_OOM();
    bpe_alphabet_init(&t->alphabet);
    glimpse_status status = read_vocabulary(t, vocab_json, vocab_size);
    if (!status) status = bpe_ranks_parse(merges_text, merges_size, &t->ranks);
    if (!status) status = read_added_tokens(t, config, added_json);
    if (!status) status = add_specials(t, options ? options : &defaults);
    if (!status)
        *out = t;
    else
        gpt2_tokenizer_free(t);
    return status;
}

glimpse_status gpt2_tokenizer_create(const char *vocab_json, size_t vocab_size, const char *merges_text,
                                     size_t merges_size, const gpt2_tokenizer_options *options,
                                     gpt2_tokenizer **out) {
    return create_with(vocab_json, vocab_size, merges_text, merges_size, options, NULL, NULL, out);
}

void gpt2_tokenizer_free(gpt2_tokenizer *t) {
    if (t) {
        for (size_t i = 0; i < t->special_count; i++) free(t->specials[i].content);
        free(t->specials);
        strmap_free(t->vocab), strmap_free(t->ranks), strmap_free(t->added);
        free(t->tokens), free(t->token_bytes), free(t);
    }
}

/* Token `content` at `id` split out of texts as a special token is (stripping as lstrip/rstrip say): an id past
 * the table extends it (decoded as its own text), one inside must be that content's in vocab.json. */
static glimpse_status add_token_at(gpt2_tokenizer *t, const char *content, int32_t id, bool special, int lstrip,
                                   int rstrip) {
    size_t length = strlen(content);
    int32_t known;
    if (!length) return error_set(GLIMPSE_STATUS_BAD_FORMAT, "an added token is the empty string");
    if (id < 0 || id > MAX_TOKEN_ID) return error_set(GLIMPSE_STATUS_BAD_FORMAT, "added token id %d", id);
    if ((size_t)id < t->id_limit && t->tokens[id].length != NO_TOKEN &&
        !(strmap_get(t->vocab, content, length, &known) && known == id))
        return error_set(GLIMPSE_STATUS_BAD_FORMAT, "added token \"%.40s\" takes id %d, which vocab.json gives "
                         "another token", content, id);
    if ((size_t)id >= t->token_capacity) {
        size_t capacity = t->token_capacity + t->token_capacity / 2;
        if (capacity < (size_t)id + 1) capacity = (size_t)id + 1;
        token_entry *tokens = realloc(t->tokens, capacity * sizeof *tokens);
        if (!tokens) return ERROR_OOM();
        t->tokens = tokens;
        t->token_capacity = capacity;
    }
    if ((size_t)id >= t->id_limit) {
        for (size_t i = t->id_limit; i <= (size_t)id; i++) t->tokens[i] = (token_entry){0, NO_TOKEN, 0};
        t->id_limit = (size_t)id + 1;
    }
    if (t->tokens[id].length == NO_TOKEN) { /* its bytes: its text (decode joins them as any token's) */
        if (t->bytes_used + length > UINT32_MAX) return error_set(GLIMPSE_STATUS_TOO_LARGE, "added tokens too long");
        if (t->bytes_used + length + 1 > t->bytes_capacity) {
            size_t capacity = t->bytes_capacity + t->bytes_capacity / 2;
            if (capacity < t->bytes_used + length + 1) capacity = t->bytes_used + length + 1;
            uint8_t *bytes = realloc(t->token_bytes, capacity);
            if (!bytes) return ERROR_OOM();
            t->token_bytes = bytes;
            t->bytes_capacity = capacity;
        }
        memcpy(t->token_bytes + t->bytes_used, content, length);
        t->tokens[id] = (token_entry){(uint32_t)t->bytes_used, (int32_t)length, 0};
        t->bytes_used += length;
    }
    t->tokens[id].special = special;
    glimpse_status status = t->added ? GLIMPSE_STATUS_OK : strmap_create(64, &t->added);
    if (!status) status = strmap_put(t->added, content, length, id);
    if (!status) status = special_room(t, 1);
    if (status) return status;
    special_entry *entry = &t->specials[t->special_count];
    *entry = (special_entry){strdup(content), length, id, lstrip, rstrip, true};
    if (!entry->content) return ERROR_OOM();
    t->special_count++;
    return GLIMPSE_STATUS_OK;
}

glimpse_status gpt2_tokenizer_add_tokens(gpt2_tokenizer *t, const char *const *contents, size_t count,
                                         int32_t first_id) {
    if (first_id < 0 || (size_t)first_id < t->id_limit || count > MAX_TOKEN_ID ||
        first_id > MAX_TOKEN_ID - (int32_t)count)
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "added tokens from id %d: not after the vocabulary's %zu ids",
                         first_id, t->id_limit);
    glimpse_status status = GLIMPSE_STATUS_OK;
    for (size_t i = 0; i < count && !status; i++)
        status = add_token_at(t, contents[i], first_id + (int32_t)i, true, 0, 0);
    return status;
}

/* The added tokens a snapshot lists: tokenizer_config.json's added_tokens_decoder ({"ID": {"content", "lstrip",
 * "rstrip", ...}}) and added_tokens.json ({"CONTENT": ID}). decode(skip_special_tokens=True) skips only the
 * named and additional special tokens (all_special_ids), whatever an entry's "special" says. */
static glimpse_status read_added_tokens(gpt2_tokenizer *t, const cJSON *config, const cJSON *added_json) {
    const cJSON *decoder = cJSON_GetObjectItemCaseSensitive(config, "added_tokens_decoder"), *item;
    glimpse_status status = GLIMPSE_STATUS_OK;
    cJSON_ArrayForEach(item, decoder) {
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(item, "content");
        char *end;
        long id = strtol(item->string, &end, 10);
        if (!cJSON_IsString(content) || *end || id < 0 || id > MAX_TOKEN_ID)
            return error_set(GLIMPSE_STATUS_BAD_FORMAT, "tokenizer_config.json: added_tokens_decoder entry \"%.20s\" "
                             "is not {\"content\": ...} under an id", item->string);
        status = add_token_at(t, content->valuestring, (int32_t)id, false,
                              cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(item, "lstrip")),
                              cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(item, "rstrip")));
        if (status) return status;
    }
    cJSON_ArrayForEach(item, added_json) {
        int32_t known;
        if (!cJSON_IsNumber(item) || item->valuedouble < 0 || item->valuedouble > MAX_TOKEN_ID)
            return error_set(GLIMPSE_STATUS_BAD_FORMAT, "added_tokens.json: \"%.20s\" has no id", item->string);
        if (t->added && strmap_get(t->added, item->string, strlen(item->string), &known)) continue;
        if ((status = add_token_at(t, item->string, (int32_t)item->valuedouble, false, 0, 0))) return status;
    }
    return status;
}

/* --------------------------------------------------------- configuration */

/* One special token of a config file: a string, an AddedToken object
 * ({"content", "lstrip", "rstrip", ...}) or null. A plain string strips the
 * whitespace around it when plain_strips (it stays a str in transformers,
 * which then strips both sides; GPT2Tokenizer makes its bos, eos, unk and
 * pad given as strings AddedTokens that strip nothing). */
static glimpse_status read_special(const cJSON *item, const char *where, const char *key, int plain_strips,
                                   gpt2_special_token *out) {
    gpt2_special_token token = {0};
    if (cJSON_IsString(item)) {
        token.content = item->valuestring;
        token.strip_left = token.strip_right = plain_strips;
    } else if (cJSON_IsObject(item)) {
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(item, "content");
        if (!cJSON_IsString(content))
            return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: \"%s\" has no \"content\" string", where, key);
        token.content = content->valuestring;
        token.strip_left = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(item, "lstrip"));
        token.strip_right = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(item, "rstrip"));
    } else if (!cJSON_IsNull(item)) {
        return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: \"%s\" is not a token", where, key);
    }
    *out = token;
    return GLIMPSE_STATUS_OK;
}

/* Applies what a config file sets (the strings stay owned by json). */
static glimpse_status read_options(const cJSON *json, const char *where, int is_special_tokens_map,
                                   gpt2_tokenizer_options *options) {
    static const char *const keys[NAMED_SPECIALS] = {"bos_token", "eos_token", "unk_token", "sep_token",
                                                     "pad_token", "cls_token", "mask_token"};
    gpt2_special_token *named[NAMED_SPECIALS] = {&options->bos, &options->eos, &options->unk, &options->sep,
                                                 &options->pad, &options->cls, &options->mask};
    glimpse_status status = GLIMPSE_STATUS_OK;
    for (size_t i = 0; i < NAMED_SPECIALS && !status; i++) {
        const cJSON *item = cJSON_GetObjectItemCaseSensitive(json, keys[i]);
        int wrapped_by_gpt2 = !is_special_tokens_map && (i == 0 || i == 1 || i == 2 || i == 4);
        if (item) status = read_special(item, where, keys[i], !wrapped_by_gpt2, named[i]);
    }
    const cJSON *additional = cJSON_GetObjectItemCaseSensitive(json, "additional_special_tokens");
    if (!status && additional && !cJSON_IsNull(additional)) {
        if (!cJSON_IsArray(additional))
            return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: \"additional_special_tokens\" is not a list", where);
        options->additional_count = 0;
        const cJSON *item;
        cJSON_ArrayForEach(item, additional) {
            if (options->additional_count == GPT2_TOKENIZER_MAX_ADDITIONAL)
                return error_set(GLIMPSE_STATUS_UNSUPPORTED, "%s: more than %d additional special tokens", where,
                                 GPT2_TOKENIZER_MAX_ADDITIONAL);
            gpt2_special_token *token = &options->additional[options->additional_count++];
            if ((status = read_special(item, where, "additional_special_tokens", 1, token))) return status;
            if (!token->content) options->additional_count--;
        }
    }
    const cJSON *flag;
    if (!status && cJSON_IsBool(flag = cJSON_GetObjectItemCaseSensitive(json, "add_bos_token")))
        options->add_bos_token = cJSON_IsTrue(flag);
    if (!status && cJSON_IsBool(flag = cJSON_GetObjectItemCaseSensitive(json, "add_prefix_space")))
        options->add_prefix_space = cJSON_IsTrue(flag);
    return status;
}

/* The merges of folder/tokenizer.json (model.merges: "left right" strings, or [left, right] pairs in newer
 * files) as merges.txt's text, for snapshots that ship no merges.txt (Florence-2's). */
static glimpse_status merges_of_tokenizer_json(const char *folder, uint8_t **out, size_t *size) {
    *out = NULL, *size = 0;
    cJSON *json = NULL;
    glimpse_status status = config_read_json(folder, "tokenizer.json", &json);
    const cJSON *merges = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(json, "model"), "merges");
    if (!status && !cJSON_IsArray(merges))
        status = error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s/tokenizer.json has no model.merges list (and there is no "
                           "merges.txt)", folder);
    size_t total = 1;
    const cJSON *item, *list = status ? NULL : merges;
    cJSON_ArrayForEach(item, list) {
        const cJSON *left = cJSON_GetArrayItem(item, 0), *right = cJSON_GetArrayItem(item, 1);
        if (cJSON_IsString(item)) total += strlen(item->valuestring) + 1;
        else if (cJSON_IsString(left) && cJSON_IsString(right))
            total += strlen(left->valuestring) + strlen(right->valuestring) + 2;
        else status = error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s/tokenizer.json: a merge is not \"left right\"", folder);
        if (status) break;
    }
    char *text = status ? NULL : malloc(total);
    if (!status && !text) status = ERROR_OOM();
    size_t used = 0;
    list = status ? NULL : merges;
    cJSON_ArrayForEach(item, list) {
        if (cJSON_IsString(item))
            used += (size_t)sprintf(text + used, "%s\n", item->valuestring);
        else
            used += (size_t)sprintf(text + used, "%s %s\n", cJSON_GetArrayItem(item, 0)->valuestring,
                                    cJSON_GetArrayItem(item, 1)->valuestring);
    }
    cJSON_Delete(json);
    if (status) return status;
    *out = (uint8_t *)text, *size = used;
    return GLIMPSE_STATUS_OK;
}

glimpse_status gpt2_tokenizer_load(const char *folder, gpt2_tokenizer **out) {
    gpt2_tokenizer_options defaults = gpt2_tokenizer_default_options();
    return gpt2_tokenizer_load_with(folder, &defaults, out);
}

glimpse_status gpt2_tokenizer_load_with(const char *folder, const gpt2_tokenizer_options *defaults,
                                        gpt2_tokenizer **out) {
    *out = NULL;
    char *vocab_path = file_join(folder, "vocab.json"), *merges_path = file_join(folder, "merges.txt");
    uint8_t *vocab = NULL, *merges = NULL;
    size_t vocab_size = 0, merges_size = 0;
    cJSON *config = NULL, *special_map = NULL, *added = NULL;
    gpt2_tokenizer_options options = *defaults;
    glimpse_status status = !vocab_path || !merges_path ? ERROR_OOM() : GLIMPSE_STATUS_OK;
    if (!status) status = file_read_all(vocab_path, MAX_FILE_BYTES, &vocab, &vocab_size);
    if (!status)
        status = file_is_regular(merges_path) ? file_read_all(merges_path, MAX_FILE_BYTES, &merges, &merges_size)
                                              : merges_of_tokenizer_json(folder, &merges, &merges_size);
    /* from_pretrained: tokenizer_config.json's arguments, then
     * special_tokens_map.json's tokens set over them */
    if (!status) status = config_read_json_optional(folder, "tokenizer_config.json", &config);
    if (!status) status = config_read_json_optional(folder, "special_tokens_map.json", &special_map);
    if (!status) status = config_read_json_optional(folder, "added_tokens.json", &added);
    const cJSON *class_name = cJSON_GetObjectItemCaseSensitive(config, "tokenizer_class");
    if (cJSON_IsString(class_name) && !strcmp(class_name->valuestring, "Qwen2Tokenizer")) options.qwen2 = 1;
    /* the errors so far name their file's path, those below only the file */
    if (!status) {
        if (config) status = read_options(config, "tokenizer_config.json", 0, &options);
        if (!status && special_map) status = read_options(special_map, "special_tokens_map.json", 1, &options);
        if (!status)
            status = create_with((const char *)vocab, vocab_size, (const char *)merges, merges_size, &options, config,
                                 added, out);
        if (status) error_prefix(status, "%s", folder);
    }
    cJSON_Delete(config);
    cJSON_Delete(special_map);
    cJSON_Delete(added);
    free(vocab);
    free(merges);
    free(vocab_path);
    free(merges_path);
    return status;
}

int32_t gpt2_tokenizer_bos_id(const gpt2_tokenizer *t) { return t->bos_id; }
int32_t gpt2_tokenizer_eos_id(const gpt2_tokenizer *t) { return t->eos_id; }
int32_t gpt2_tokenizer_unk_id(const gpt2_tokenizer *t) { return t->unk_id; }
int32_t gpt2_tokenizer_pad_id(const gpt2_tokenizer *t) { return t->pad_id; }
int gpt2_tokenizer_adds_bos(const gpt2_tokenizer *t) { return t->add_bos_token; }
size_t gpt2_tokenizer_vocab_size(const gpt2_tokenizer *t) { return strmap_count(t->vocab); }

int gpt2_tokenizer_is_special(const gpt2_tokenizer *t, int32_t id) {
    return id >= 0 && (size_t)id < t->id_limit && t->tokens[id].special;
}

const uint8_t *gpt2_tokenizer_token_bytes(const gpt2_tokenizer *t, int32_t id, size_t *length) {
    *length = 0;
    if (id < 0 || (size_t)id >= t->id_limit || t->tokens[id].length < 0) return NULL;
    *length = (size_t)t->tokens[id].length;
    return t->token_bytes + t->tokens[id].offset;
}

/* ------------------------------------------------------ pre-tokenisation */

typedef enum char_class { CLASS_SPACE, CLASS_LETTER, CLASS_NUMBER, CLASS_OTHER } char_class;

static char_class class_of(int32_t c) {
    if (utf8_is_white_space(c)) return CLASS_SPACE;
    utf8proc_category_t category = utf8proc_category(c);
    if (category >= UTF8PROC_CATEGORY_LU && category <= UTF8PROC_CATEGORY_LO) return CLASS_LETTER;
    if (category >= UTF8PROC_CATEGORY_ND && category <= UTF8PROC_CATEGORY_NO) return CLASS_NUMBER;
    return CLASS_OTHER;
}

static size_t read_char(const char *text, size_t length, size_t at, int32_t *codepoint) {
    return utf8_next((const uint8_t *)text + at, length - at, codepoint);
}

size_t gpt2_pretokenize_next(const char *text, size_t length, size_t at) {
    static const char *const contractions[] = {"'s", "'t", "'re", "'ve", "'m", "'ll", "'d"};
    int32_t first;
    size_t first_size = read_char(text, length, at, &first);
    if (first == '\'')
        for (size_t i = 0; i < sizeof contractions / sizeof contractions[0]; i++) {
            size_t n = strlen(contractions[i]);
            if (length - at >= n && memcmp(text + at, contractions[i], n) == 0) return at + n;
        }
    /* ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+`: an optional space, then a run of one class */
    size_t run = at;
    char_class run_class = class_of(first);
    if (first == ' ' && at + 1 < length) {
        int32_t second;
        read_char(text, length, at + 1, &second);
        if (class_of(second) != CLASS_SPACE) {
            run = at + 1;
            run_class = class_of(second);
        }
    }
    if (run_class != CLASS_SPACE) {
        size_t end = run;
        while (end < length) {
            int32_t c;
            size_t size = read_char(text, length, end, &c);
            if (class_of(c) != run_class) break;
            end += size;
        }
        return end;
    }
    /* `\s+(?!\S)|\s+`: a whitespace run to the end of the text whole; else
     * all but its last character, which goes with what follows; one alone */
    size_t end = at + first_size, last = at;
    while (end < length) {
        int32_t c;
        size_t size = read_char(text, length, end, &c);
        if (!utf8_is_white_space(c)) return last > at ? last : end;
        last = end;
        end += size;
    }
    return end;
}

static bool is_line_break(int32_t c) { return c == '\r' || c == '\n'; }

/* The end of the run from `at` of characters `keep` accepts. */
static size_t run_while(const char *text, size_t length, size_t at, bool (*keep)(int32_t)) {
    while (at < length) {
        int32_t c;
        size_t size = read_char(text, length, at, &c);
        if (!keep(c)) break;
        at += size;
    }
    return at;
}

static bool is_letter(int32_t c) { return class_of(c) == CLASS_LETTER; }
static bool is_other(int32_t c) { return class_of(c) == CLASS_OTHER; }
static bool is_space(int32_t c) { return class_of(c) == CLASS_SPACE; }

size_t qwen2_pretokenize_next(const char *text, size_t length, size_t at) {
    static const char *const contractions[] = {"'s", "'t", "'re", "'ve", "'m", "'ll", "'d"};
    int32_t first, second = -1;
    size_t first_size = read_char(text, length, at, &first);
    if (at + first_size < length) read_char(text, length, at + first_size, &second);
    if (first == '\'') /* (?i:'s|'t|'re|'ve|'m|'ll|'d) */
        for (size_t i = 0; i < sizeof contractions / sizeof contractions[0]; i++) {
            size_t n = strlen(contractions[i]);
            if (length - at >= n && !strncasecmp(text + at, contractions[i], n)) return at + n;
        }
    char_class c0 = class_of(first);
    if (c0 == CLASS_LETTER) return run_while(text, length, at, is_letter); /* [^\r\n\p{L}\p{N}]?\p{L}+ */
    if (c0 != CLASS_NUMBER && !is_line_break(first) && second >= 0 && class_of(second) == CLASS_LETTER)
        return run_while(text, length, at + first_size, is_letter);
    if (c0 == CLASS_NUMBER) return at + first_size; /* \p{N} */
    /* ` ?[^\s\p{L}\p{N}]+[\r\n]*` */
    size_t from = first == ' ' && second >= 0 && class_of(second) == CLASS_OTHER ? at + 1 : at;
    size_t end = run_while(text, length, from, is_other);
    if (end > from) return run_while(text, length, end, is_line_break);
    /* whitespace: `\s*[\r\n]+` ends after the run's last line break; else `\s+(?!\S)|\s+` */
    size_t run_end = run_while(text, length, at, is_space), last_break = 0, last = at;
    for (size_t i = at; i < run_end;) {
        int32_t c;
        size_t size = read_char(text, length, i, &c);
        if (is_line_break(c)) last_break = i + size;
        last = i;
        i += size;
    }
    if (last_break) return last_break;
    if (run_end == length || last == at) return run_end;
    return last; /* all but the run's last character, which goes with what follows */
}

/* ------------------------------------------------------------- encoding */

typedef struct id_sink {
    int32_t *ids;
    size_t capacity, count; /* count may pass capacity: the ids needed */
} id_sink;

static void emit(id_sink *sink, int32_t id) {
    if (sink->count < sink->capacity) sink->ids[sink->count] = id;
    sink->count++;
}

/* Per-call buffers for one piece's stand-ins and symbol starts. */
typedef struct piece_scratch {
    char *stand_ins; /* 2 bytes a byte at most */
    size_t *starts;  /* one a byte */
} piece_scratch;

/* BPE of one pre-token's bytes, its symbols looked up (unk where absent). */
static glimpse_status encode_piece(const gpt2_tokenizer *t, const uint8_t *bytes, size_t length, piece_scratch *s,
                                   id_sink *sink) {
    size_t used = 0;
    for (size_t i = 0; i < length; i++) {
        s->starts[i] = used;
        memcpy(s->stand_ins + used, t->alphabet.stand_in[bytes[i]], t->alphabet.stand_in_length[bytes[i]]);
        used += t->alphabet.stand_in_length[bytes[i]];
    }
    size_t symbols = length;
    glimpse_status status = bpe_merge(t->ranks, s->stand_ins, used, s->starts, &symbols);
    for (size_t i = 0; i < symbols && !status; i++) {
        size_t end = i + 1 < symbols ? s->starts[i + 1] : used;
        int32_t id;
        if (!strmap_get(t->vocab, s->stand_ins + s->starts[i], end - s->starts[i], &id)) {
            if (t->unk_id < 0)
                return error_set(GLIMPSE_STATUS_BAD_FORMAT,
                                 "a token merged is not in vocab.json and there is no unk_token");
            id = t->unk_id;
        }
        emit(sink, id);
    }
    return status;
}

/* GPT2Tokenizer._tokenize of one stretch of text between special tokens. */
static glimpse_status encode_stretch(const gpt2_tokenizer *t, const char *text, size_t length, piece_scratch *s,
                                     id_sink *sink) {
    glimpse_status status = GLIMPSE_STATUS_OK;
    for (size_t at = 0; at < length && !status;) {
        size_t end = t->qwen2 ? qwen2_pretokenize_next(text, length, at) : gpt2_pretokenize_next(text, length, at);
        status = encode_piece(t, (const uint8_t *)text + at, end - at, s, sink);
        at = end;
    }
    return status;
}

/* The special token that starts at text[at], longest first; NULL if none. */
static const special_entry *special_at(const gpt2_tokenizer *t, const char *text, size_t length, size_t at) {
    const special_entry *found = NULL;
    for (size_t i = 0; i < t->special_count; i++) {
        const special_entry *s = &t->specials[i];
        if (s->content[0] == text[at] && s->length <= length - at && memcmp(text + at, s->content, s->length) == 0 &&
            (!found || s->length > found->length))
            found = s;
    }
    return found;
}

/* Length of the whitespace at the start / end of text[0..length) (valid UTF-8). */
static size_t leading_space(const char *text, size_t length) {
    size_t at = 0;
    while (at < length) {
        int32_t c;
        size_t size = read_char(text, length, at, &c);
        if (!utf8_is_python_space(c)) break;
        at += size;
    }
    return at;
}

static size_t trailing_space(const char *text, size_t length) {
    size_t end = length;
    while (end > 0) {
        size_t start = end - 1;
        while (start > 0 && ((uint8_t)text[start] & 0xc0) == 0x80) start--;
        int32_t c;
        read_char(text, end, start, &c);
        if (!utf8_is_python_space(c)) break;
        end = start;
    }
    return length - end;
}

glimpse_status gpt2_tokenizer_encode(const gpt2_tokenizer *t, const char *text, int add_special_tokens,
                                     int32_t *ids, size_t capacity, size_t *count) {
    *count = 0;
    if (!text) text = "";
    size_t raw_length = strlen(text), length;
    char *repaired = utf8_repair((const uint8_t *)text, raw_length, &length);
    if (repaired && t->qwen2) { /* Qwen2Tokenizer: unicodedata.normalize("NFC", text) first */
        char *composed = (char *)utf8proc_NFC((const utf8proc_uint8_t *)repaired);
        free(repaired);
        repaired = composed;
        length = composed ? strlen(composed) : 0;
    }
    char *clean = repaired;
    if (repaired && t->add_prefix_space) { /* prepare_for_tokenization puts a space in front */
        clean = malloc(length + 2);
        if (clean) {
            clean[0] = ' ';
            memcpy(clean + 1, repaired, length + 1);
            length++;
        }
        free(repaired);
    }
    piece_scratch scratch = {malloc(2 * length + 1), malloc((length + 1) * sizeof(size_t))};
    glimpse_status status = clean && scratch.stand_ins && scratch.starts ? GLIMPSE_STATUS_OK : ERROR_OOM();
    id_sink sink = {ids, capacity, 0};
    if (!status && add_special_tokens && t->add_bos_token) emit(&sink, t->bos_id);
    /* tokenize(): the text cut at special tokens (leftmost, longest first);
     * a token's strip flags trim the whitespace of the stretch beside it;
     * each stretch goes through the pattern and BPE on its own */
    size_t stretch = 0, at = 0;
    int strip_next = 0;
    while (!status && stretch <= length) {
        const special_entry *special = NULL;
        while (at < length && !(special = special_at(t, clean, length, at))) {
            int32_t c;
            at += read_char(clean, length, at, &c);
        }
        size_t start = stretch, end = at;
        if (strip_next) start += leading_space(clean + start, end - start);
        if (special && special->strip_left) end -= trailing_space(clean + start, end - start);
        if (end > start) status = encode_stretch(t, clean + start, end - start, &scratch, &sink);
        if (!special) break;
        emit(&sink, special->id);
        at += special->length;
        stretch = at;
        strip_next = special->strip_right;
    }
    free(clean);
    free(scratch.stand_ins);
    free(scratch.starts);
    if (status) return status;
    *count = sink.count;
    if (sink.count > capacity)
        return error_set(GLIMPSE_STATUS_TOO_LARGE, "the text is %zu tokens, more than the %zu given room", sink.count,
                         capacity);
    return GLIMPSE_STATUS_OK;
}

/* ------------------------------------------------------------- decoding */

glimpse_status gpt2_tokenizer_decode(const gpt2_tokenizer *t, const int32_t *ids, size_t count,
                                     int skip_special_tokens, int clean_up_spaces, char **text, size_t *length) {
    *text = NULL;
    if (length) *length = 0;
    size_t total = 0;
    for (size_t i = 0; i < count; i++) {
        const token_entry *token = ids[i] >= 0 && (size_t)ids[i] < t->id_limit ? &t->tokens[ids[i]] : NULL;
        if (!token || token->length == NO_TOKEN)
            return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "token id %d is not in vocab.json", ids[i]);
        if (skip_special_tokens && token->special) continue;
        if (token->length == NOT_BYTES)
            return error_set(GLIMPSE_STATUS_BAD_FORMAT, "token %d of vocab.json has characters outside GPT-2's "
                             "byte alphabet", ids[i]);
        total += (size_t)token->length;
    }
    uint8_t *bytes = malloc(total + 1);
    if (!bytes) return ERROR_OOM();
    size_t used = 0;
    for (size_t i = 0; i < count; i++) {
        const token_entry *token = &t->tokens[ids[i]];
        if (skip_special_tokens && token->special) continue;
        memcpy(bytes + used, t->token_bytes + token->offset, (size_t)token->length);
        used += (size_t)token->length;
    }
    size_t decoded_length;
    char *decoded = utf8_repair(bytes, used, &decoded_length);
    free(bytes);
    if (!decoded) return ERROR_OOM();
    if (clean_up_spaces) decoded_length = clean_up_tokenization(decoded, decoded_length);
    *text = decoded;
    if (length) *length = decoded_length;
    return GLIMPSE_STATUS_OK;
}
