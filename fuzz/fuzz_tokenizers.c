/* fuzz_tokenizers.c — libFuzzer target: arbitrary bytes (invalid UTF-8
 * included) through the tokenizers, with the demo models' vocabularies (and,
 * for GPT-2's BPE, the byte alphabet with a few merges, also in Qwen2's mode
 * with added tokens); the WordPiece, GPT-2 and Qwen2 ids are decoded back, and
 * the bytes decoded as GPT-2 ids. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "text/bert_tokenizer.h"
#include "text/bpe.h"
#include "text/clip_tokenizer.h"
#include "text/gpt2_tokenizer.h"

static clip_tokenizer *clip;
static bert_tokenizer *bert;
static gpt2_tokenizer *gpt2, *qwen2;

/* Ids 0-255 the bytes' stand-ins, then a few merged tokens and <|endoftext|>; qwen2: with Qwen2's NFC and
 * pattern, and two tokens added past the vocabulary (Florence-2's and Qwen2's added tokens take that path). */
static gpt2_tokenizer *small_gpt2(int qwen2) {
    bpe_alphabet alphabet;
    bpe_alphabet_init(&alphabet);
    cJSON *vocab = cJSON_CreateObject();
    for (int byte = 0; byte < 256; byte++) cJSON_AddNumberToObject(vocab, alphabet.stand_in[byte], byte);
    const char *merged[] = {"\xc4\xa0t", "he", "\xc4\xa0the", "<|endoftext|>"};
    for (int i = 0; i < 4; i++) cJSON_AddNumberToObject(vocab, merged[i], 256 + i);
    char *json = cJSON_PrintUnformatted(vocab);
    const char *merges = "#version: 0.2\n\xc4\xa0 t\nh e\n\xc4\xa0t he\n";
    gpt2_tokenizer *t = NULL;
    gpt2_tokenizer_options options = gpt2_tokenizer_default_options();
    options.qwen2 = qwen2;
    if (!json || gpt2_tokenizer_create(json, strlen(json), merges, strlen(merges), &options, &t)) abort();
    const char *added[] = {"<|im_start|>", "<loc_1>"};
    if (qwen2 && gpt2_tokenizer_add_tokens(t, added, 2, 300)) abort();
    cJSON_free(json);
    cJSON_Delete(vocab);
    return t;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!clip && clip_tokenizer_load(GLIMPSE_SOURCE_DIR "/examples/models/demo-clip", &clip)) abort();
    if (!bert && bert_tokenizer_load(GLIMPSE_SOURCE_DIR "/examples/models/demo-blip-caption", &bert)) abort();
    if (!gpt2) gpt2 = small_gpt2(0);
    if (!qwen2) qwen2 = small_gpt2(1);
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    int32_t ids[77];
    size_t count;
    clip_tokenizer_encode(clip, text, 77, ids, &count);
    int32_t pieces[256];
    if (bert_tokenizer_encode(bert, text, pieces, 256, &count) == GLIMPSE_STATUS_OK) {
        char *decoded = NULL;
        if (bert_tokenizer_decode(bert, pieces, count < 256 ? count : 256, &decoded) == GLIMPSE_STATUS_OK) free(decoded);
    }
    char *decoded = NULL;
    if (gpt2_tokenizer_encode(gpt2, text, 1, pieces, 256, &count) == GLIMPSE_STATUS_OK &&
        gpt2_tokenizer_decode(gpt2, pieces, count, 1, 1, &decoded, NULL) == GLIMPSE_STATUS_OK)
        free(decoded);
    int32_t as_ids[64];
    size_t id_count = size / 4 < 64 ? size / 4 : 64;
    memcpy(as_ids, data, id_count * 4);
    for (size_t i = 0; i < id_count; i++) as_ids[i] %= 300; /* mostly known ids, some unknown or negative */
    if (gpt2_tokenizer_decode(gpt2, as_ids, id_count, size % 2, 1, &decoded, NULL) == GLIMPSE_STATUS_OK) free(decoded);
    if (gpt2_tokenizer_encode(qwen2, text, 1, pieces, 256, &count) == GLIMPSE_STATUS_OK &&
        gpt2_tokenizer_decode(qwen2, pieces, count, size % 2, 0, &decoded, NULL) == GLIMPSE_STATUS_OK)
        free(decoded);
    free(text);
    return 0;
}
