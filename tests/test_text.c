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

#include "clip_tokenizer.h"

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
    assert_int_equal(clip_tokenizer_encode(t, text, max_length, ids, &count), GLIMPSE_OK);
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
    assert_int_equal(clip_tokenizer_encode(t, long_word, 77, ids, &count), GLIMPSE_OK);
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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_merges_and_word_ends),       cmocka_unit_test(test_pre_splitting),
        cmocka_unit_test(test_unicode),                    cmocka_unit_test(test_truncation_keeps_end_token),
        cmocka_unit_test(test_bad_vocabulary_files),
    };
    return cmocka_run_group_tests_name("text", tests, NULL, NULL);
}
