/* test_text.c — the CLIP BPE tokenizer on a vocabulary of our own (byte
 * stand-ins, "</w>" word ends and a few merges), so its rules are checked
 * without the published vocabulary: normalisation, pre-splitting, merge
 * order, special tokens, truncation and hostile input. Parity with the real
 * vocabulary is in test_clip_parity. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "text/bert_tokenizer.h"
#include "text/clip_tokenizer.h"

/* GPT-2's byte stand-ins, written independently of the tokenizer. */
static void stand_in(int byte, char out[3]) {
    int printable = (byte >= 33 && byte <= 126) || (byte >= 161 && byte <= 172) || (byte >= 174 && byte <= 255);
    int codepoint = byte;
    if (!printable) {
        int n = 0;
        for (int b = 0; b < byte; b++)
            if (!((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255))) n++;
        codepoint = 256 + n;
    }
    memset(out, 0, 3);
    if (codepoint < 0x80) {
        out[0] = (char)codepoint;
    } else {
        out[0] = (char)(0xc0 | (codepoint >> 6));
        out[1] = (char)(0x80 | (codepoint & 0x3f));
    }
}

static const char *merges[] = {"l l", "h e", "he ll", "hell o</w>", "t h", "th e</w>"};
#define MERGE_COUNT 6
/* ids: byte b -> b, byte b + "</w>" -> 256 + b, merged tokens from 512. */
static const char *merged_tokens[] = {"ll", "he", "hell", "hello</w>", "th", "the</w>"};
#define START_ID 600
#define END_ID 601

static clip_tokenizer *make_tokenizer(void) {
    size_t capacity = 1 << 16, used = 0;
    char *vocab = malloc(capacity);
    used += (size_t)snprintf(vocab + used, capacity - used, "{");
    for (int b = 0; b < 256; b++) {
        char s[3];
        stand_in(b, s);
        const char *escape = (s[0] == '"' || s[0] == '\\') && !s[1] ? "\\" : "";
        used += (size_t)snprintf(vocab + used, capacity - used, "\"%s%s\": %d, \"%s%s</w>\": %d, ", escape, s, b,
                                 escape, s, 256 + b);
    }
    for (int m = 0; m < MERGE_COUNT; m++)
        used += (size_t)snprintf(vocab + used, capacity - used, "\"%s\": %d, ", merged_tokens[m], 512 + m);
    used += (size_t)snprintf(vocab + used, capacity - used, "\"<|startoftext|>\": %d, \"<|endoftext|>\": %d}",
                             START_ID, END_ID);
    char merge_text[512] = "#version: 0.2\n";
    for (int m = 0; m < MERGE_COUNT; m++) {
        strcat(merge_text, merges[m]);
        strcat(merge_text, "\n");
    }
    clip_tokenizer *t = NULL;
    glimpse_status status = clip_tokenizer_create(vocab, used, merge_text, strlen(merge_text), &t);
    if (status) fail_msg("tokenizer: %s", glimpse_last_error());
    free(vocab);
    return t;
}

/* ids of text, compared with the expected list (terminated by -1). */
static void expect_ids(clip_tokenizer *t, const char *text, size_t max_length, ...) {
    int32_t ids[128];
    size_t count;
    assert_int_equal(clip_tokenizer_encode(t, text, max_length, ids, &count), GLIMPSE_STATUS_OK);
    va_list args;
    va_start(args, max_length);
    size_t i = 0;
    for (int expected; (expected = va_arg(args, int)) != -1; i++) {
        if (i >= count) fail_msg("\"%s\": only %zu ids", text, count);
        if (ids[i] != expected) fail_msg("\"%s\": id %zu is %d, expected %d", text, i, ids[i], expected);
    }
    va_end(args);
    if (i != count) fail_msg("\"%s\": %zu ids, expected %zu", text, count, i);
}

static void test_merges_and_word_ends(void **state) {
    (void)state;
    clip_tokenizer *t = make_tokenizer();
    expect_ids(t, "hello", 77, START_ID, 512 + 3, END_ID, -1);
    /* "hell" ends in "l</w>", which "l l" does not merge */
    expect_ids(t, "hell", 77, START_ID, 512 + 1, 'l', 256 + 'l', END_ID, -1);
    /* lowercasing and whitespace clean-up */
    expect_ids(t, "  HeLLo \t\n hello ", 77, START_ID, 512 + 3, 512 + 3, END_ID, -1);
    expect_ids(t, "The", 77, START_ID, 512 + 5, END_ID, -1);
    expect_ids(t, "", 77, START_ID, END_ID, -1);
    clip_tokenizer_free(t);
}

static void test_pre_splitting(void **state) {
    (void)state;
    clip_tokenizer *t = make_tokenizer();
    /* contraction split from its word */
    expect_ids(t, "it's", 77, START_ID, 'i', 256 + 't', '\'', 256 + 's', END_ID, -1);
    /* digits one at a time, letters as a run */
    expect_ids(t, "ab12", 77, START_ID, 'a', 256 + 'b', 256 + '1', 256 + '2', END_ID, -1);
    /* a run of symbols is one pre-token */
    expect_ids(t, "!!?", 77, START_ID, '!', '!', 256 + '?', END_ID, -1);
    /* a special token written in the text */
    expect_ids(t, "a<|endoftext|>", 77, START_ID, 256 + 'a', END_ID, END_ID, -1);
    clip_tokenizer_free(t);
}

static void test_unicode(void **state) {
    (void)state;
    clip_tokenizer *t = make_tokenizer();
    /* NFC: e + combining acute is composed to é (C3 A9); É lowercases to é */
    expect_ids(t, "e\xcc\x81", 77, START_ID, 0xc3, 256 + 0xa9, END_ID, -1);
    expect_ids(t, "\xc3\x89", 77, START_ID, 0xc3, 256 + 0xa9, END_ID, -1);
    /* invalid UTF-8 becomes U+FFFD (EF BF BD), a symbol */
    expect_ids(t, "\xff", 77, START_ID, 0xef, 0xbf, 256 + 0xbd, END_ID, -1);
    /* an emoji followed by '!' is one symbol run; a CJK letter run is one word */
    expect_ids(t, "\xf0\x9f\x8e\xa8!", 77, START_ID, 0xf0, 0x9f, 0x8e, 0xa8, 256 + '!', END_ID, -1);
    expect_ids(t, "\xe6\x97\xa5\xe6\x9c\xac", 77, START_ID, 0xe6, 0x97, 0xa5, 0xe6, 0x9c, 256 + 0xac, END_ID, -1);
    /* no-break space separates words like a space */
    expect_ids(t, "hello\xc2\xa0hello", 77, START_ID, 512 + 3, 512 + 3, END_ID, -1);
    clip_tokenizer_free(t);
}

static void test_truncation_keeps_end_token(void **state) {
    (void)state;
    clip_tokenizer *t = make_tokenizer();
    expect_ids(t, "hello hello hello hello hello", 4, START_ID, 512 + 3, 512 + 3, END_ID, -1);
    /* a very long word is handled without blowing up */
    char *long_word = malloc(100001);
    memset(long_word, 'l', 100000);
    long_word[100000] = '\0';
    int32_t ids[77];
    size_t count;
    assert_int_equal(clip_tokenizer_encode(t, long_word, 77, ids, &count), GLIMPSE_STATUS_OK);
    assert_int_equal(count, 77);
    assert_int_equal(ids[76], END_ID);
    free(long_word);
    assert_int_equal(clip_tokenizer_encode(t, "x", 1, ids, &count), GLIMPSE_STATUS_INVALID_ARGUMENT);
    clip_tokenizer_free(t);
}

static void test_bad_vocabulary_files(void **state) {
    (void)state;
    clip_tokenizer *t;
    assert_int_equal(clip_tokenizer_create("[1]", 3, "", 0, &t), GLIMPSE_STATUS_BAD_FORMAT);
    assert_int_equal(clip_tokenizer_create("{\"a\": 1}", 8, "", 0, &t), GLIMPSE_STATUS_BAD_FORMAT);
    assert_non_null(strstr(glimpse_last_error(), "<|startoftext|>"));
    const char *vocab = "{\"<|startoftext|>\": 0, \"<|endoftext|>\": 1, \"a\": \"x\"}";
    assert_int_equal(clip_tokenizer_create(vocab, strlen(vocab), "", 0, &t), GLIMPSE_STATUS_BAD_FORMAT);
    const char *good = "{\"<|startoftext|>\": 0, \"<|endoftext|>\": 1}";
    assert_int_equal(clip_tokenizer_create(good, strlen(good), "#version: 0.2\nab\n", 17, &t),
                     GLIMPSE_STATUS_BAD_FORMAT);
    assert_non_null(strstr(glimpse_last_error(), "merges.txt line"));
    assert_int_equal(clip_tokenizer_load("/nonexistent-folder", &t), GLIMPSE_STATUS_NOT_FOUND);
    assert_non_null(strstr(glimpse_last_error(), "vocab.json"));
}

/* ------------------------------------------------------------ WordPiece */

static const char *bert_vocab[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "##s", "cafe",
                                   "un", "##believ", "##able", "!", ",", ".", "'", "t", "don", "\xe6\x97\xa5",
                                   "\xe6\x9c\xac", "a", "##a", "[unused0]", "m", "s"};
#define BERT_VOCAB_COUNT (sizeof bert_vocab / sizeof bert_vocab[0])

static bert_tokenizer *make_bert(void) {
    char text[1024] = "";
    for (size_t i = 0; i < BERT_VOCAB_COUNT; i++) {
        strcat(text, bert_vocab[i]);
        strcat(text, "\n");
    }
    bert_tokenizer *t = NULL;
    if (bert_tokenizer_create(text, strlen(text), "{\"[DEC]\": 25, \"[ENC]\": 26}", 1, &t))
        fail_msg("wordpiece: %s", glimpse_last_error());
    return t;
}

static int32_t bert_id(const char *token) {
    for (size_t i = 0; i < BERT_VOCAB_COUNT; i++)
        if (strcmp(bert_vocab[i], token) == 0) return (int32_t)i;
    if (strcmp(token, "[DEC]") == 0) return 25;
    fail_msg("no token %s", token);
    return -1;
}

/* expected tokens as strings, NULL-terminated */
static void expect_pieces(bert_tokenizer *t, const char *text, ...) {
    int32_t ids[256];
    size_t count;
    assert_int_equal(bert_tokenizer_encode(t, text, ids, 256, &count), GLIMPSE_STATUS_OK);
    va_list args;
    va_start(args, text);
    size_t i = 0;
    for (const char *token; (token = va_arg(args, const char *)); i++) {
        if (i >= count) fail_msg("\"%s\": only %zu ids", text, count);
        if (ids[i] != bert_id(token))
            fail_msg("\"%s\": piece %zu is %s, expected %s", text, i, bert_tokenizer_token(t, ids[i]), token);
    }
    va_end(args);
    if (i != count) fail_msg("\"%s\": %zu pieces, expected %zu", text, count, i);
}

static void test_wordpiece_encoding(void **state) {
    (void)state;
    bert_tokenizer *t = make_bert();
    expect_pieces(t, "The cats!", "the", "cat", "##s", "!", NULL);
    expect_pieces(t, "unbelievable", "un", "##believ", "##able", NULL);
    /* lowercasing strips accents: É -> e, and the combining form too */
    expect_pieces(t, "CAF\xc3\x89, caf\x65\xcc\x81.", "cafe", ",", "cafe", ".", NULL);
    /* CJK characters are words of their own; one unknown makes its word [UNK] */
    expect_pieces(t, "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e", "\xe6\x97\xa5", "\xe6\x9c\xac", "[UNK]", NULL);
    expect_pieces(t, "xyz cat", "[UNK]", "cat", NULL);
    /* control characters vanish, tabs and newlines separate */
    expect_pieces(t, "c\x01" "at\tthe\ncat", "cat", "the", "cat", NULL);
    /* special tokens in the text are kept whole; lowercase look-alikes are split */
    expect_pieces(t, "the[SEP]cat [sep]", "the", "[SEP]", "cat", "[UNK]", "[UNK]", "[UNK]", NULL);
    expect_pieces(t, "", NULL);
    /* a word of combining accents only folds to nothing (found by fuzzing) */
    expect_pieces(t, "cat \xcc\x81\xcc\x82 cat", "cat", "cat", NULL);
    /* a word over 100 characters is [UNK] even if it could be split */
    char long_word[102];
    memset(long_word, 'a', 101);
    long_word[101] = '\0';
    expect_pieces(t, long_word, "[UNK]", NULL);
    long_word[100] = '\0';
    int32_t ids[128];
    size_t count;
    assert_int_equal(bert_tokenizer_encode(t, long_word, ids, 128, &count), GLIMPSE_STATUS_OK);
    assert_int_equal(count, 100); /* a ##a ##a ... */
    /* capacity smaller than the text: the count still says how many */
    assert_int_equal(bert_tokenizer_encode(t, "the cat the cat", ids, 2, &count), GLIMPSE_STATUS_OK);
    assert_int_equal(count, 4);
    /* invalid UTF-8 is dropped like U+FFFD */
    expect_pieces(t, "cat\xff\xfe", "cat", NULL);
    bert_tokenizer_free(t);
}

static void expect_decoded(bert_tokenizer *t, const char *expected, ...) {
    int32_t ids[64];
    size_t n = 0;
    va_list args;
    va_start(args, expected);
    for (const char *token; (token = va_arg(args, const char *));) ids[n++] = bert_id(token);
    va_end(args);
    char *text;
    assert_int_equal(bert_tokenizer_decode(t, ids, n, &text), GLIMPSE_STATUS_OK);
    assert_string_equal(text, expected);
    free(text);
}

static void test_wordpiece_decoding(void **state) {
    (void)state;
    bert_tokenizer *t = make_bert();
    expect_decoded(t, "the cats!", "[CLS]", "the", "cat", "##s", "!", "[SEP]", NULL);
    expect_decoded(t, "the cat.", "[DEC]", "the", "cat", ".", NULL);
    /* clean-up of contractions and punctuation, as transformers does it */
    expect_decoded(t, "don't", "don", "'", "t", NULL);
    expect_decoded(t, "cat's, cat", "cat", "'", "s", ",", "cat", NULL);
    expect_decoded(t, "cat'm", "cat", "'", "m", NULL);
    /* a leading continuation keeps its ##; [UNK] is special and skipped; [unusedN] is not */
    expect_decoded(t, "##s the", "##s", "the", NULL);
    expect_decoded(t, "the cat", "the", "[UNK]", "cat", NULL);
    expect_decoded(t, "[unused0] a", "[unused0]", "a", NULL);
    expect_decoded(t, "", "[PAD]", "[SEP]", NULL);
    int32_t bad = 999;
    char *text;
    assert_int_equal(bert_tokenizer_decode(t, &bad, 1, &text), GLIMPSE_STATUS_INVALID_ARGUMENT);
    assert_int_equal(bert_tokenizer_id(t, "[ENC]"), 26);
    assert_true(bert_tokenizer_is_special(t, 26));
    assert_false(bert_tokenizer_is_special(t, bert_id("[unused0]")));
    bert_tokenizer_free(t);
}

static void test_wordpiece_bad_files(void **state) {
    (void)state;
    bert_tokenizer *t;
    assert_int_equal(bert_tokenizer_create("a\nb\n", 4, NULL, 1, &t), GLIMPSE_STATUS_BAD_FORMAT);
    assert_non_null(strstr(glimpse_last_error(), "[UNK]"));
    assert_int_equal(bert_tokenizer_create("[UNK]\n", 6, "[1, 2]", 1, &t), GLIMPSE_STATUS_BAD_FORMAT);
    assert_int_equal(bert_tokenizer_create("[UNK]\n", 6, "{\"x\": \"y\"}", 1, &t), GLIMPSE_STATUS_BAD_FORMAT);
    assert_int_equal(bert_tokenizer_load("/nonexistent-folder", &t), GLIMPSE_STATUS_NOT_FOUND);
    assert_non_null(strstr(glimpse_last_error(), "vocab.txt"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wordpiece_encoding),         cmocka_unit_test(test_wordpiece_decoding),
        cmocka_unit_test(test_wordpiece_bad_files),
        cmocka_unit_test(test_merges_and_word_ends),       cmocka_unit_test(test_pre_splitting),
        cmocka_unit_test(test_unicode),                    cmocka_unit_test(test_truncation_keeps_end_token),
        cmocka_unit_test(test_bad_vocabulary_files),
    };
    return cmocka_run_group_tests_name("text", tests, NULL, NULL);
}
