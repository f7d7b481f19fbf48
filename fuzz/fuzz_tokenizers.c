/* fuzz_tokenizers.c — libFuzzer target: arbitrary bytes (invalid UTF-8
 * included) through both tokenizers, with the demo models' vocabularies;
 * the WordPiece ids are decoded back. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "text/bert_tokenizer.h"
#include "text/clip_tokenizer.h"

static clip_tokenizer *clip;
static bert_tokenizer *bert;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!clip && clip_tokenizer_load(GLIMPSE_SOURCE_DIR "/models/demo-clip", &clip)) abort();
    if (!bert && bert_tokenizer_load(GLIMPSE_SOURCE_DIR "/models/demo-blip-caption", &bert)) abort();
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
    free(text);
    return 0;
}
