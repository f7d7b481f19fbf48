/* make_model_files.c — glimpse-make-model's tokenizer and preprocessor files (make_model.h): byte-level BPE
 * (GPT-2's, OPT's, CLIP's, BART's), BERT's WordPiece, SigLIP's and Llama's SentencePiece models, Qwen2's BPE, the
 * added tokens and chat templates LLaVA's and Florence-2's processors read, and the preprocessors' configs; each
 * in the hub's format, with ids at the places the configs name. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/file.h"
#include "text/chat_template.h"
#include "tools/make_model.h"

void write_text(const char *folder, const char *name, const char *text) {
    char *path = file_join(folder, name);
    FILE *f = fopen(path, "w");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0) die("%s: cannot write", path);
    free(path);
}

/* The byte-level BPE's stand-in of each byte, as UTF-8: printable bytes stand
 * for themselves, the others for 256, 257, ... in order. */
static void byte_stand_ins(char out[256][4]) {
    int next = 256;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
        int codepoint = printable ? b : next++;
        memset(out[b], 0, 4);
        if (codepoint < 0x80) {
            out[b][0] = (char)codepoint;
        } else {
            out[b][0] = (char)(0xc0 | (codepoint >> 6));
            out[b][1] = (char)(0x80 | (codepoint & 0x3f));
        }
    }
}

/* vocab.json from vocab (deleted here) and a merges.txt without merges: text encodes byte by byte. */
static void write_byte_bpe_files(const char *folder, cJSON *vocab) {
    char *text = cJSON_PrintUnformatted(vocab);
    write_text(folder, "vocab.json", text);
    free(text);
    cJSON_Delete(vocab);
    write_text(folder, "merges.txt", "#version: 0.2\n");
}

/* A vocabulary in fairseq's order (OPT's and BART's): <s>, <pad>, </s>, <unk>, then the 256 byte stand-ins. */
static cJSON *fairseq_byte_vocab(void) {
    cJSON *vocab = cJSON_CreateObject();
    const char *specials[] = {"<s>", "<pad>", "</s>", "<unk>"};
    for (int i = 0; i < 4; i++) cJSON_AddNumberToObject(vocab, specials[i], i);
    char stand_ins[256][4];
    byte_stand_ins(stand_ins);
    for (int b = 0; b < 256; b++) cJSON_AddNumberToObject(vocab, stand_ins[b], 4 + b);
    return vocab;
}

/* Ids from .. to-1 of vocab: tokens of two, then three, then four printable ASCII characters, in order (all
 * distinct, and each decodes to text). */
static void add_filler_tokens(cJSON *vocab, int from, int to) {
    for (int id = from; id < to; id++) {
        char token[5] = {0};
        int n = id - from, length = n < 94 * 94 ? 2 : n < 94 * 94 + 94 * 94 * 94 ? 3 : 4;
        n -= length == 2 ? 0 : length == 3 ? 94 * 94 : 94 * 94 + 94 * 94 * 94;
        for (int c = length - 1; c >= 0; c--, n /= 94) token[c] = (char)(33 + n % 94);
        cJSON_AddNumberToObject(vocab, token, id);
    }
}

/* OPT's tokenizer files with a vocabulary of our own in fairseq's order: <s>, <pad>, </s>, <unk>, then the
 * 256 byte stand-ins, no merges (every byte its own token); OPT's special tokens (bos = eos = unk = </s>). */
void write_opt_tokenizer(const char *folder) {
    write_byte_bpe_files(folder, fairseq_byte_vocab());
    write_text(folder, "tokenizer_config.json",
               "{\"add_bos_token\": true, \"add_prefix_space\": false, \"tokenizer_class\": \"GPT2Tokenizer\"}\n");
    write_text(folder, "special_tokens_map.json",
               "{\"bos_token\": \"</s>\", \"eos_token\": \"</s>\", \"pad_token\": \"<pad>\", "
               "\"unk_token\": \"</s>\"}\n");
}

/* A CLIP-format vocabulary of our own: the 256 byte stand-ins, each also
 * with "</w>", then the special tokens at the ids the config implies. */
void write_clip_tokenizer(const char *folder, int vocab_size) {
    cJSON *vocab = cJSON_CreateObject();
    char stand_ins[256][4];
    byte_stand_ins(stand_ins);
    for (int b = 0; b < 256; b++) {
        char word_end[16];
        snprintf(word_end, sizeof word_end, "%s</w>", stand_ins[b]);
        cJSON_AddNumberToObject(vocab, stand_ins[b], b);
        cJSON_AddNumberToObject(vocab, word_end, 256 + b);
    }
    cJSON_AddNumberToObject(vocab, "<|startoftext|>", vocab_size - 2);
    cJSON_AddNumberToObject(vocab, "<|endoftext|>", vocab_size - 1);
    write_byte_bpe_files(folder, vocab);
}

/* A BERT-format vocabulary of our own: the special tokens at BERT's ids,
 * lowercase letters, digits and punctuation with their ## forms, a few
 * words, and [unusedN] fillers up to the config's size less [DEC] and [ENC]. */
void write_bert_tokenizer(const char *folder, int vocab_size) {
    char *path = file_join(folder, "vocab.txt");
    FILE *f = fopen(path, "w");
    if (!f) die("%s: %s", path, strerror(errno));
    static const char *words[] = {"a", "an", "the", "of", "picture", "photo", "cat", "dog", "on", "in", "with", "and"};
    const char *specials[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
    int special_ids[] = {0, 100, 101, 102, 103};
    int base = vocab_size - 2, filler = 0, next_char = 0, next_word = 0;
    const char *characters = "abcdefghijklmnopqrstuvwxyz0123456789.,!?'-";
    size_t character_count = strlen(characters);
    for (int id = 0; id < base; id++) {
        int written = 0;
        for (int s = 0; s < 5 && !written; s++)
            if (id == special_ids[s]) written = fprintf(f, "%s\n", specials[s]);
        if (written) continue;
        if (id > 103 && (size_t)next_char < 2 * character_count) {
            size_t c = (size_t)next_char % character_count;
            fprintf(f, next_char < (int)character_count ? "%c\n" : "##%c\n", characters[c]);
            next_char++;
        } else if (id > 103 && (size_t)next_word < sizeof words / sizeof words[0]) {
            fprintf(f, "%s\n", words[next_word++]);
        } else {
            fprintf(f, "[unused%d]\n", filler++);
        }
    }
    fclose(f);
    free(path);
    char added[128];
    snprintf(added, sizeof added, "{\"[DEC]\": %d, \"[ENC]\": %d}\n", base, base + 1);
    write_text(folder, "added_tokens.json", added);
    write_text(folder, "special_tokens_map.json",
               "{\"additional_special_tokens\": [\"[ENC]\"], \"bos_token\": \"[DEC]\", \"cls_token\": \"[CLS]\", "
               "\"mask_token\": \"[MASK]\", \"pad_token\": \"[PAD]\", \"sep_token\": \"[SEP]\", \"unk_token\": "
               "\"[UNK]\"}\n");
    write_text(folder, "tokenizer_config.json",
               "{\"do_lower_case\": true, \"tokenizer_class\": \"BertTokenizer\", \"processor_class\": "
               "\"BlipProcessor\"}\n");
}

/* A growing buffer of protocol-buffer fields (SentencePiece's model format). */
typedef struct proto {
    uint8_t *data;
    size_t size, capacity;
} proto;

static void proto_put(proto *p, const void *bytes, size_t size) {
    if (p->size + size > p->capacity) {
        p->capacity = (p->size + size) * 2;
        p->data = realloc(p->data, p->capacity);
        if (!p->data) die("out of memory");
    }
    memcpy(p->data + p->size, bytes, size);
    p->size += size;
}

static void proto_varint(proto *p, uint64_t value) {
    do {
        uint8_t byte = (uint8_t)(value & 0x7f) | (value > 0x7f ? 0x80 : 0);
        proto_put(p, &byte, 1);
        value >>= 7;
    } while (value);
}

/* Field `number` holding bytes (wire type 2: strings and messages). */
static void proto_bytes(proto *p, int number, const void *bytes, size_t size) {
    proto_varint(p, (uint64_t)number << 3 | 2);
    proto_varint(p, size);
    proto_put(p, bytes, size);
}

/* A SentencePiece unigram model of our own (spiece.model): SigLIP's special
 * pieces at its ids (<pad> 0, </s> 1, <unk> 2), "▁", the lower-case letters
 * and digits, a few words; no normalisation beyond SentencePiece's whitespace
 * handling. */
void write_siglip_tokenizer(const char *folder) {
    enum { NORMAL = 1, UNKNOWN = 2, CONTROL = 3 };
#define WORD_START "\xe2\x96\x81" /* U+2581, SentencePiece's mark of a space */
    static const char *words[] = {WORD_START "a", WORD_START "photo", WORD_START "of", WORD_START "cat",
                                  WORD_START "dog", WORD_START "the"};
    char pieces[3 + 1 + 36 + sizeof words / sizeof words[0]][16] = {"<pad>", "</s>", "<unk>", WORD_START};
    size_t count = 4;
    for (const char *c = "abcdefghijklmnopqrstuvwxyz0123456789"; *c; c++) snprintf(pieces[count++], 16, "%c", *c);
    for (size_t w = 0; w < sizeof words / sizeof words[0]; w++) snprintf(pieces[count++], 16, "%s", words[w]);
    proto model = {0};
    for (size_t i = 0; i < count; i++) {
        proto piece = {0};
        float score = i < 3 ? 0.0f : i < 40 ? -5.0f : -2.0f; /* whole words beat their letters */
        uint32_t score_bits;
        memcpy(&score_bits, &score, 4);
        proto_bytes(&piece, 1, pieces[i], strlen(pieces[i]));
        proto_varint(&piece, 2 << 3 | 5); /* score: a little-endian float */
        for (int b = 0; b < 4; b++) proto_put(&piece, &(uint8_t){(uint8_t)(score_bits >> (8 * b))}, 1);
        proto_varint(&piece, 3 << 3 | 0);
        proto_varint(&piece, i == 2 ? UNKNOWN : i < 2 ? CONTROL : NORMAL);
        proto_bytes(&model, 1, piece.data, piece.size);
        free(piece.data);
    }
    proto normalizer = {0};
    proto_bytes(&normalizer, 1, "identity", 8);
    proto_bytes(&model, 3, normalizer.data, normalizer.size);
    char *path = file_join(folder, "spiece.model");
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(model.data, 1, model.size, f) != model.size || fclose(f) != 0) die("%s: cannot write", path);
    free(path);
    free(model.data);
    free(normalizer.data);
    write_text(folder, "special_tokens_map.json",
               "{\"eos_token\": \"</s>\", \"pad_token\": \"</s>\", \"unk_token\": \"<unk>\"}\n");
    write_text(folder, "tokenizer_config.json",
               "{\"do_lower_case\": true, \"eos_token\": \"</s>\", \"model_input_names\": [\"input_ids\"], "
               "\"model_max_length\": 64, \"pad_token\": \"</s>\", \"processor_class\": \"SiglipProcessor\", "
               "\"tokenizer_class\": \"SiglipTokenizer\", \"unk_token\": \"<unk>\"}\n");
}

/* CLIPImageProcessor's settings: the shortest side resized to image, a centre crop of image × image, OpenAI CLIP's
 * mean and std. */
void write_clip_preprocessor(const char *folder, int image) {
    char preprocessor[1024];
    snprintf(preprocessor, sizeof preprocessor,
             "{\"crop_size\": {\"height\": %d, \"width\": %d}, \"do_center_crop\": true, \"do_convert_rgb\": true, "
             "\"do_normalize\": true, \"do_rescale\": true, \"do_resize\": true, "
             "\"image_mean\": [0.48145466, 0.4578275, 0.40821073], "
             "\"image_std\": [0.26862954, 0.26130258, 0.27577711], \"image_processor_type\": "
             "\"CLIPImageProcessor\", \"resample\": 3, \"rescale_factor\": 0.00392156862745098, "
             "\"size\": {\"shortest_edge\": %d}}\n",
             image, image, image);
    write_text(folder, "preprocessor_config.json", preprocessor);
}

/* tokenizer_config.json's added_tokens_decoder entry of id: content, special. */
static void add_added_token(cJSON *decoder, cJSON *list, int id, const char *content) {
    char key[16];
    snprintf(key, sizeof key, "%d", id);
    cJSON *entry = cJSON_AddObjectToObject(decoder, key);
    cJSON_AddStringToObject(entry, "content", content);
    cJSON_AddBoolToObject(entry, "lstrip", 0);
    cJSON_AddBoolToObject(entry, "normalized", 0);
    cJSON_AddBoolToObject(entry, "rstrip", 0);
    cJSON_AddBoolToObject(entry, "single_word", 0);
    cJSON_AddBoolToObject(entry, "special", 1);
    if (list) cJSON_AddNumberToObject(list, content, id);
}

/* Writes tokenizer_config.json (settings plus added_tokens_decoder) and added_tokens.json (the added list). */
static void write_added_tokens(const char *folder, cJSON *settings, cJSON *added) {
    char *text = cJSON_Print(settings);
    write_text(folder, "tokenizer_config.json", text);
    free(text);
    text = cJSON_Print(added);
    write_text(folder, "added_tokens.json", text);
    free(text);
    cJSON_Delete(settings), cJSON_Delete(added);
}

/* Llama's tokenizer files with a SentencePiece model of our own (tokenizer.model, unigram with byte fallback):
 * <unk>, <s>, </s>, the 256 byte pieces <0x00>..<0xFF>, "▁" and letter pieces up to 32,000; then <image> at the
 * config's image_token_index and <pad> after it. */
static void write_llama_tokenizer(const char *folder, int image_token) {
    enum { NORMAL = 1, UNKNOWN = 2, CONTROL = 3, BYTE = 6 };
    proto model = {0};
    for (int i = 0; i < 32000; i++) {
        char piece[16];
        if (i < 3) snprintf(piece, sizeof piece, "%s", (const char *[]){"<unk>", "<s>", "</s>"}[i]);
        else if (i < 259) snprintf(piece, sizeof piece, "<0x%02X>", i - 3);
        else if (i == 259) snprintf(piece, sizeof piece, WORD_START);
        else /* "▁" and 1 to 4 lower-case letters, then the letters alone: unique pieces */
            for (int n = i - 260, at = (n % 2 ? 0 : snprintf(piece, sizeof piece, WORD_START)), k = n / 2;; k /= 26) {
                piece[at++] = (char)('a' + k % 26), piece[at] = 0;
                if (k < 26) break;
            }
        proto one = {0};
        proto_bytes(&one, 1, piece, strlen(piece));
        float score = i < 259 ? 0.0f : -(float)(i - 258) / 1000.0f;
        uint32_t bits;
        memcpy(&bits, &score, 4);
        proto_varint(&one, 2 << 3 | 5);
        for (int b = 0; b < 4; b++) proto_put(&one, &(uint8_t){(uint8_t)(bits >> (8 * b))}, 1);
        proto_varint(&one, 3 << 3 | 0);
        proto_varint(&one, i == 0 ? UNKNOWN : i < 3 ? CONTROL : i < 259 ? BYTE : NORMAL);
        proto_bytes(&model, 1, one.data, one.size);
        free(one.data);
    }
    proto trainer = {0}, normalizer = {0};
    proto_varint(&trainer, 35 << 3 | 0); /* byte_fallback */
    proto_varint(&trainer, 1);
    proto_bytes(&model, 2, trainer.data, trainer.size);
    proto_bytes(&normalizer, 1, "identity", 8);
    proto_varint(&normalizer, 3 << 3 | 0); /* add_dummy_prefix */
    proto_varint(&normalizer, 1);
    proto_bytes(&model, 3, normalizer.data, normalizer.size);
    char *path = file_join(folder, "tokenizer.model");
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(model.data, 1, model.size, f) != model.size || fclose(f) != 0) die("%s: cannot write", path);
    free(path), free(model.data), free(trainer.data), free(normalizer.data);
    cJSON *settings = cJSON_CreateObject(), *added = cJSON_CreateObject();
    cJSON_AddBoolToObject(settings, "add_bos_token", 1);
    cJSON_AddBoolToObject(settings, "add_eos_token", 0);
    cJSON *decoder = cJSON_AddObjectToObject(settings, "added_tokens_decoder");
    const char *specials[] = {"<unk>", "<s>", "</s>"};
    for (int i = 0; i < 3; i++) add_added_token(decoder, NULL, i, specials[i]);
    add_added_token(decoder, added, image_token, "<image>");
    add_added_token(decoder, added, image_token + 1, "<pad>");
    cJSON_AddStringToObject(settings, "bos_token", "<s>");
    cJSON_AddStringToObject(settings, "eos_token", "</s>");
    cJSON_AddStringToObject(settings, "pad_token", "<pad>");
    cJSON_AddStringToObject(settings, "unk_token", "<unk>");
    cJSON_AddBoolToObject(settings, "legacy", 0);
    cJSON_AddStringToObject(settings, "tokenizer_class", "LlamaTokenizer");
    write_added_tokens(folder, settings, added);
}

/* Qwen2's tokenizer files with a byte-level vocabulary of our own (write_gpt2_tokenizer's, no merges) up to
 * <|endoftext|>, then <|im_start|>, <|im_end|> and <image> at the config's image_token_index. */
static void write_qwen2_tokenizer(const char *folder, int image_token) {
    int end = image_token - 3; /* <|endoftext|>: Qwen2's ids put the specials right after the vocabulary */
    cJSON *vocab = cJSON_CreateObject();
    char stand_ins[256][4];
    byte_stand_ins(stand_ins);
    for (int b = 0; b < 256; b++) cJSON_AddNumberToObject(vocab, stand_ins[b], b);
    add_filler_tokens(vocab, 256, end);
    write_byte_bpe_files(folder, vocab);
    cJSON *settings = cJSON_CreateObject(), *added = cJSON_CreateObject();
    cJSON_AddBoolToObject(settings, "add_prefix_space", 0);
    cJSON *decoder = cJSON_AddObjectToObject(settings, "added_tokens_decoder");
    const char *specials[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<image>"};
    for (int i = 0; i < 4; i++) add_added_token(decoder, added, end + i, specials[i]);
    cJSON_AddStringToObject(settings, "eos_token", "<|im_end|>");
    cJSON_AddStringToObject(settings, "pad_token", "<|endoftext|>");
    cJSON_AddStringToObject(settings, "tokenizer_class", "Qwen2Tokenizer");
    write_added_tokens(folder, settings, added);
}

/* A LLaVA snapshot's other files: its tokenizer, the chat template its processor carries, generation_config.json
 * (greedy; the end tokens) and the tower's preprocessor settings (CLIP's crop, or SigLIP's square). */
void write_llava_files(const char *folder, const cJSON *config) {
    const cJSON *t = cJSON_GetObjectItem(config, "text_config"), *v = cJSON_GetObjectItem(config, "vision_config");
    const cJSON *text_kind = cJSON_GetObjectItem(t, "model_type"), *vision_kind = cJSON_GetObjectItem(v, "model_type");
    int qwen2 = cJSON_IsString(text_kind) && strcmp(text_kind->valuestring, "qwen2") == 0;
    int siglip = cJSON_IsString(vision_kind) && strcmp(vision_kind->valuestring, "siglip_vision_model") == 0;
    int image_token = get_int(config, "image_token_index", 32000), image = get_int(v, "image_size", 336);
    if (qwen2) write_qwen2_tokenizer(folder, image_token);
    else write_llama_tokenizer(folder, image_token);
    cJSON *chat = cJSON_CreateObject();
    cJSON_AddStringToObject(chat, "chat_template",
                            chat_template_text(qwen2 ? CHAT_TEMPLATE_LLAVA_INTERLEAVE : CHAT_TEMPLATE_LLAVA_1_5));
    char *text = cJSON_Print(chat);
    write_text(folder, "chat_template.json", text);
    free(text);
    cJSON_Delete(chat);
    char generation[256];
    if (qwen2)
        snprintf(generation, sizeof generation, "{\"bos_token_id\": %d, \"eos_token_id\": [%d, %d]}\n",
                 image_token - 3, image_token - 1, image_token - 3);
    else
        snprintf(generation, sizeof generation, "{\"bos_token_id\": 1, \"eos_token_id\": 2, \"pad_token_id\": %d}\n",
                 image_token + 1);
    write_text(folder, "generation_config.json", generation);
    if (!siglip) {
        write_clip_preprocessor(folder, image);
        return;
    }
    char preprocessor[1024];
    snprintf(preprocessor, sizeof preprocessor,
             "{\"do_normalize\": true, \"do_rescale\": true, \"do_resize\": true, \"image_mean\": [0.5, 0.5, 0.5], "
             "\"image_std\": [0.5, 0.5, 0.5], \"image_processor_type\": \"SiglipImageProcessor\", \"resample\": 3, "
             "\"rescale_factor\": 0.00392156862745098, \"size\": {\"height\": %d, \"width\": %d}}\n",
             image, image);
    write_text(folder, "preprocessor_config.json", preprocessor);
}

/* tokenizer.json as the hub's Florence-2 files have it (and BART's: byte-level, RoBERTa's <s> … </s>): its five
 * special tokens (<mask> taking the space before it), the vocabulary (deleted here) and its merges. */
static void write_bart_tokenizer_json(const char *folder, cJSON *vocab) {
    cJSON *json = cJSON_CreateObject(), *added = cJSON_CreateArray();
    cJSON_AddStringToObject(json, "version", "1.0");
    cJSON_AddNullToObject(json, "truncation");
    cJSON_AddNullToObject(json, "padding");
    const char *specials[] = {"<s>", "<pad>", "</s>", "<unk>", "<mask>"};
    for (int i = 0; i < 5; i++) {
        cJSON *token = cJSON_CreateObject();
        cJSON_AddNumberToObject(token, "id", i < 4 ? i : 50264);
        cJSON_AddBoolToObject(token, "special", 1);
        cJSON_AddStringToObject(token, "content", specials[i]);
        cJSON_AddBoolToObject(token, "single_word", 0);
        cJSON_AddBoolToObject(token, "lstrip", i == 4);
        cJSON_AddBoolToObject(token, "rstrip", 0);
        cJSON_AddBoolToObject(token, "normalized", 1);
        cJSON_AddItemToArray(added, token);
    }
    cJSON_AddItemToObject(json, "added_tokens", added);
    cJSON_AddNullToObject(json, "normalizer");
    cJSON_AddItemToObject(json, "pre_tokenizer", cJSON_Parse("{\"type\": \"ByteLevel\", \"add_prefix_space\": false, "
                                                             "\"trim_offsets\": true}"));
    cJSON_AddItemToObject(json, "post_processor",
                          cJSON_Parse("{\"type\": \"RobertaProcessing\", \"sep\": [\"</s>\", 2], \"cls\": [\"<s>\", 0], "
                                      "\"trim_offsets\": true, \"add_prefix_space\": false}"));
    cJSON_AddItemToObject(json, "decoder", cJSON_Parse("{\"type\": \"ByteLevel\", \"add_prefix_space\": true, "
                                                       "\"trim_offsets\": true}"));
    cJSON *model = cJSON_Parse("{\"type\": \"BPE\", \"dropout\": null, \"unk_token\": null, "
                               "\"continuing_subword_prefix\": \"\", \"end_of_word_suffix\": \"\", \"fuse_unk\": false}");
    cJSON_AddItemToObject(model, "vocab", vocab);
    cJSON_AddItemToObject(model, "merges", cJSON_CreateArray());
    cJSON_AddItemToObject(json, "model", model);
    char *text = cJSON_PrintUnformatted(json);
    write_text(folder, "tokenizer.json", text);
    free(text);
    cJSON_Delete(json);
}

/* Florence-2's other files as the hub has them: BART's tokenizer (vocab.json and tokenizer.json, no merges.txt)
 * with a vocabulary of our own of BART's 50,265 ids (fairseq's four, the byte stand-ins, printable fillers, <mask>
 * last; the processor adds its 1,024 task and location tokens after them itself, as glimpse does), the generation
 * settings, and CLIPImageProcessor's settings with the published 768 × 768 pictures and ImageNet's mean/std. */
void write_florence2_files(const char *folder, const cJSON *config) {
    cJSON *vocab = fairseq_byte_vocab();
    add_filler_tokens(vocab, 260, 50264);
    cJSON_AddNumberToObject(vocab, "<mask>", 50264);
    char *text = cJSON_PrintUnformatted(vocab);
    write_text(folder, "vocab.json", text);
    free(text);
    write_bart_tokenizer_json(folder, vocab);
    write_text(folder, "tokenizer_config.json", "{\n    \"model_max_length\": 1024\n}\n");
    write_text(folder, "generation_config.json", "{\n  \"num_beams\": 3,\n  \"early_stopping\": false\n}\n");
    const cJSON *v = cJSON_GetObjectItem(config, "vision_config");
    size_t image = 768, stride = 1;
    for (int s = 0; s < 4; s++) stride *= list_int(v, "patch_stride", s);
    char preprocessor[1024];
    snprintf(preprocessor, sizeof preprocessor,
             "{\"auto_map\": {\"AutoProcessor\": \"processing_florence2.Florence2Processor\"}, \"do_convert_rgb\": null, "
             "\"do_normalize\": true, \"do_rescale\": true, \"do_resize\": true, \"do_center_crop\": false, "
             "\"image_processor_type\": \"CLIPImageProcessor\", \"image_seq_length\": %zu, "
             "\"image_mean\": [0.485, 0.456, 0.406], \"image_std\": [0.229, 0.224, 0.225], "
             "\"processor_class\": \"Florence2Processor\", \"resample\": 3, "
             "\"size\": {\"height\": %zu, \"width\": %zu}, \"crop_size\": {\"height\": %zu, \"width\": %zu}}\n",
             (image / stride) * (image / stride) + 1, image, image, image, image);
    write_text(folder, "preprocessor_config.json", preprocessor);
}

/* BlipImageProcessor's settings (BLIP and BLIP-2): bicubic straight to image × image, OpenAI CLIP's mean/std. */
void write_blip_preprocessor(const char *folder, int image) {
    char preprocessor[1024];
    snprintf(preprocessor, sizeof preprocessor,
             "{\"do_convert_rgb\": true, \"do_normalize\": true, \"do_rescale\": true, \"do_resize\": true, "
             "\"image_mean\": [0.48145466, 0.4578275, 0.40821073], "
             "\"image_std\": [0.26862954, 0.26130258, 0.27577711], \"image_processor_type\": "
             "\"BlipImageProcessor\", \"resample\": 3, \"rescale_factor\": 0.00392156862745098, "
             "\"size\": {\"height\": %d, \"width\": %d}}\n",
             image, image);
    write_text(folder, "preprocessor_config.json", preprocessor);
}

/* A GPT-2-format vocabulary of our own: the 256 byte stand-ins, then
 * tokens of two or three printable ASCII characters (every id the model can
 * produce decodes), then <|endoftext|> last; no merges (text encodes byte by
 * byte). GPT-2's special tokens and flags. */
void write_gpt2_tokenizer(const char *folder, int vocab_size) {
    cJSON *vocab = cJSON_CreateObject();
    char stand_ins[256][4];
    byte_stand_ins(stand_ins);
    for (int b = 0; b < 256; b++) cJSON_AddNumberToObject(vocab, stand_ins[b], b);
    add_filler_tokens(vocab, 256, vocab_size - 1);
    cJSON_AddNumberToObject(vocab, "<|endoftext|>", vocab_size - 1);
    write_byte_bpe_files(folder, vocab);
    write_text(folder, "special_tokens_map.json",
               "{\"bos_token\": \"<|endoftext|>\", \"eos_token\": \"<|endoftext|>\", \"unk_token\": \"<|endoftext|>\"}\n");
    write_text(folder, "tokenizer_config.json",
               "{\"add_bos_token\": false, \"add_prefix_space\": false, \"errors\": \"replace\", "
               "\"model_max_length\": 1024, \"tokenizer_class\": \"GPT2Tokenizer\"}\n");
}
