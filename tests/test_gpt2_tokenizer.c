/* test_gpt2_tokenizer.c — GPT-2's byte-level BPE tokenizer (GPT-2 and OPT):
 * parity with transformers 4.27's GPT2Tokenizer on the vit-gpt2-tiny and
 * blip2-opt-tiny fixtures (prompt ids, decoded captions, special ids), and
 * beyond them: the pre-tokeniser against Python's regex module, the byte
 * alphabet, round trips, UTF-8 repair as Python decodes, merge order, special
 * tokens in the text, and hostile files and ids. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "core/file.h"
#include "tests/support.h"
#include "text/bpe.h"
#include "text/gpt2_tokenizer.h"

#define MAX_IDS 4096

/* The fixtures' tokenizers, loaded once for the group; NULL without fixtures. */
typedef struct fixture_tokenizers {
    gpt2_tokenizer *gpt2, *opt;
} fixture_tokenizers;

static int load_fixture_tokenizers(void **state) {
    fixture_tokenizers *f = calloc(1, sizeof *f);
    *state = f;
    const char *models[2] = {"vit-gpt2-tiny", "blip2-opt-tiny"};
    gpt2_tokenizer **loaded[2] = {&f->gpt2, &f->opt};
    for (int i = 0; i < 2 && fixtures_folder(); i++) {
        char *folder = fixture_path(models[i]);
        if (gpt2_tokenizer_load(folder, loaded[i])) fprintf(stderr, "%s: %s\n", models[i], glimpse_last_error());
        free(folder);
        if (!*loaded[i]) return -1;
    }
    return 0;
}

static int free_fixture_tokenizers(void **state) {
    fixture_tokenizers *f = *state;
    gpt2_tokenizer_free(f->gpt2);
    gpt2_tokenizer_free(f->opt);
    free(f);
    return 0;
}

/* The GPT-2 / OPT fixture's tokenizer; skips the test without fixtures. */
static const gpt2_tokenizer *gpt2_fixture(void **state) {
    const fixture_tokenizers *f = *state;
    if (!f->gpt2) skip();
    return f->gpt2;
}

static const gpt2_tokenizer *opt_fixture(void **state) {
    const fixture_tokenizers *f = *state;
    if (!f->opt) skip();
    return f->opt;
}

/* The id of a token in a fixture's vocab.json, read here with cJSON (the
 * last file read is kept for the next call). */
static int32_t vocab_id(const char *model, const char *token) {
    static char cached_model[64];
    static cJSON *vocab;
    if (!vocab || strcmp(cached_model, model) != 0) {
        char relative[256];
        snprintf(relative, sizeof relative, "%s/vocab.json", model);
        cJSON_Delete(vocab);
        vocab = fixture_json(relative);
        snprintf(cached_model, sizeof cached_model, "%s", model);
    }
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(vocab, token);
    if (!cJSON_IsNumber(item)) fail_msg("%s is not in %s/vocab.json", token, model);
    return (int32_t)item->valuedouble;
}

static void read_ids(const cJSON *list, int32_t *ids, size_t *count) {
    *count = 0;
    const cJSON *item;
    cJSON_ArrayForEach(item, list) {
        assert_true(*count < MAX_IDS);
        ids[(*count)++] = (int32_t)item->valuedouble;
    }
}

static void expect_encoding(const gpt2_tokenizer *t, const char *text, const int32_t *expected, size_t expected_count) {
    int32_t ids[MAX_IDS];
    size_t count;
    if (gpt2_tokenizer_encode(t, text, 1, ids, MAX_IDS, &count)) fail_msg("\"%s\": %s", text, glimpse_last_error());
    if (count != expected_count) fail_msg("\"%s\": %zu ids, expected %zu", text, count, expected_count);
    for (size_t i = 0; i < count; i++)
        if (ids[i] != expected[i]) fail_msg("\"%s\": id %zu is %d, expected %d", text, i, ids[i], expected[i]);
}

static void expect_decoding(const gpt2_tokenizer *t, const int32_t *ids, size_t count, int skip, int clean,
                            const char *expected, size_t expected_length) {
    char *text;
    size_t length;
    if (gpt2_tokenizer_decode(t, ids, count, skip, clean, &text, &length)) fail_msg("%s", glimpse_last_error());
    if (length != expected_length || memcmp(text, expected, length) != 0)
        fail_msg("decoded \"%s\" (%zu bytes), expected \"%s\" (%zu bytes)", text, length, expected, expected_length);
    assert_int_equal(text[length], '\0');
    free(text);
}

/* Each case's ids decode to its caption (skip_special_tokens=True with the
 * default clean-up), as expected.json records. */
static void expect_captions(const gpt2_tokenizer *t, const cJSON *expected) {
    const cJSON *item;
    size_t cases = 0;
    cJSON_ArrayForEach(item, cJSON_GetObjectItemCaseSensitive(expected, "cases")) {
        int32_t ids[MAX_IDS];
        size_t count;
        read_ids(cJSON_GetObjectItemCaseSensitive(item, "ids"), ids, &count);
        const char *caption = cJSON_GetObjectItemCaseSensitive(item, "caption")->valuestring;
        expect_decoding(t, ids, count, 1, 1, caption, strlen(caption));
        cases++;
    }
    assert_true(cases > 0);
}

static int expected_int(const cJSON *expected, const char *key) {
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(expected, key);
    if (!cJSON_IsNumber(item)) fail_msg("expected.json has no %s", key);
    return (int)item->valuedouble;
}

static void test_gpt2_fixture(void **state) {
    const gpt2_tokenizer *t = gpt2_fixture(state);
    cJSON *expected = fixture_json("vit-gpt2-tiny/expected.json");
    assert_non_null(expected);
    /* <|endoftext|> starts, ends and pads; no start token is added */
    assert_int_equal(gpt2_tokenizer_bos_id(t), expected_int(expected, "decoder_start_token_id"));
    assert_int_equal(gpt2_tokenizer_eos_id(t), expected_int(expected, "eos_token_id"));
    assert_int_equal(gpt2_tokenizer_pad_id(t), expected_int(expected, "pad_token_id"));
    assert_int_equal(gpt2_tokenizer_unk_id(t), vocab_id("vit-gpt2-tiny", "<|endoftext|>"));
    assert_false(gpt2_tokenizer_adds_bos(t));
    cJSON *vocab = fixture_json("vit-gpt2-tiny/vocab.json");
    assert_int_equal(gpt2_tokenizer_vocab_size(t), (size_t)cJSON_GetArraySize(vocab));
    cJSON_Delete(vocab);
    const cJSON *prompt;
    size_t prompts = 0;
    cJSON_ArrayForEach(prompt, cJSON_GetObjectItemCaseSensitive(expected, "prompts")) {
        int32_t ids[MAX_IDS];
        size_t count;
        read_ids(prompt, ids, &count);
        expect_encoding(t, prompt->string, ids, count);
        prompts++;
    }
    assert_true(prompts > 0);
    expect_captions(t, expected);
    cJSON_Delete(expected);
}

static void test_opt_fixture(void **state) {
    const gpt2_tokenizer *t = opt_fixture(state);
    cJSON *expected = fixture_json("blip2-opt-tiny/expected.json");
    assert_non_null(expected);
    /* </s> is bos, eos and unk, <pad> pads; encoding prepends </s> */
    assert_int_equal(gpt2_tokenizer_bos_id(t), expected_int(expected, "bos_token_id"));
    assert_int_equal(gpt2_tokenizer_eos_id(t), vocab_id("blip2-opt-tiny", "</s>"));
    assert_int_equal(gpt2_tokenizer_unk_id(t), vocab_id("blip2-opt-tiny", "</s>"));
    assert_int_equal(gpt2_tokenizer_pad_id(t), expected_int(expected, "pad_token_id"));
    assert_true(gpt2_tokenizer_adds_bos(t));
    int32_t ids[MAX_IDS];
    size_t count;
    read_ids(cJSON_GetObjectItemCaseSensitive(expected, "prompt_input_ids"), ids, &count);
    expect_encoding(t, cJSON_GetObjectItemCaseSensitive(expected, "prompt")->valuestring, ids, count);
    /* without special tokens, the same without the leading </s> */
    int32_t bare[MAX_IDS];
    size_t bare_count;
    assert_int_equal(gpt2_tokenizer_encode(t, cJSON_GetObjectItemCaseSensitive(expected, "prompt")->valuestring, 0,
                                           bare, MAX_IDS, &bare_count), GLIMPSE_STATUS_OK);
    assert_int_equal(bare_count, count - 1);
    assert_memory_equal(bare, ids + 1, bare_count * sizeof *bare);
    expect_captions(t, expected);
    /* only the named special tokens are skipped: <s> and <unk> are not among them */
    int32_t not_special[] = {vocab_id("blip2-opt-tiny", "<s>"), vocab_id("blip2-opt-tiny", "<unk>")};
    expect_decoding(t, not_special, 2, 1, 1, "<s><unk>", 8);
    /* ids past vocab.json (the model's embedding table has more rows) are refused */
    cJSON *vocab = fixture_json("blip2-opt-tiny/vocab.json");
    int32_t beyond = (int32_t)cJSON_GetArraySize(vocab);
    assert_int_equal(gpt2_tokenizer_vocab_size(t), (size_t)beyond);
    cJSON_Delete(vocab);
    char *text = NULL;
    assert_int_equal(gpt2_tokenizer_decode(t, &beyond, 1, 1, 1, &text, NULL), GLIMPSE_STATUS_INVALID_ARGUMENT);
    assert_null(text);
    cJSON_Delete(expected);
}

/* Special tokens written in the text: cut out first, each stretch between
 * them pre-tokenised on its own (so a space before one stands alone), as
 * 4.27's tokenize() does; AddedTokens from the files strip nothing. */
static void test_special_tokens_in_text(void **state) {
    const gpt2_tokenizer *gpt2 = gpt2_fixture(state);
    const char *m = "vit-gpt2-tiny";
    int32_t end = vocab_id(m, "<|endoftext|>");
    int32_t joined[] = {vocab_id(m, "a"), end, vocab_id(m, "b")};
    expect_encoding(gpt2, "a<|endoftext|>b", joined, 3);
    int32_t spaced[] = {vocab_id(m, "a"), vocab_id(m, "\xc4\xa0"), end, vocab_id(m, "\xc4\xa0" "b")};
    expect_encoding(gpt2, "a <|endoftext|> b", spaced, 4);
    int32_t twice[] = {end, end};
    expect_encoding(gpt2, "<|endoftext|><|endoftext|>", twice, 2);
    expect_encoding(gpt2, "", NULL, 0);

    const gpt2_tokenizer *opt = opt_fixture(state);
    const char *o = "blip2-opt-tiny";
    int32_t start = vocab_id(o, "</s>"), pad = vocab_id(o, "<pad>");
    int32_t mixed[] = {start, vocab_id(o, "x"), start, pad, vocab_id(o, "\xc4\xa0" "y")};
    expect_encoding(opt, "x</s><pad> y", mixed, 5);
    int32_t empty[] = {start};
    expect_encoding(opt, "", empty, 1);
    /* "<s>" is not special for OPT: it goes through the pattern and BPE */
    int32_t ids[16];
    size_t count;
    assert_int_equal(gpt2_tokenizer_encode(opt, "<s>", 0, ids, 16, &count), GLIMPSE_STATUS_OK);
    for (size_t i = 0; i < count; i++) assert_int_not_equal(ids[i], vocab_id(o, "<s>"));
    expect_decoding(opt, ids, count, 1, 1, "<s>", 3);
}

/* Strings that must come back unchanged: decode(encode(x)) without skipping
 * or clean-up is x for every valid UTF-8 x. */
static const char *const round_trips[] = {
    "Hello world", "  two  spaces  and trailing  ", "\ttabs\t\tand\nnew\n\nlines\r\n", " \n \t ",
    "it's I'm you're we've he'll she'd don't IT'S 'sfoo ''s", "rock 'n' roll, ' quoted '",
    "caf\xc3\xa9 cafe\xcc\x81 na\xc3\xafve \xe1\xba\x9b\xcc\xa3", "\xe4\xb8\xad\xe6\x96\x87\xe5\xad\x97 "
    "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e\xe3\x81\xa7\xe3\x81\x99\xe3\x80\x82",
    "emoji \xf0\x9f\x99\x82 \xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd \xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x91\xa9\xe2\x80\x8d"
    "\xf0\x9f\x91\xa7",
    "\xd9\x85\xd9\x8e\xd8\xb1\xd9\x92\xd8\xad\xd9\x8e\xd8\xa8\xd9\x8b\xd8\xa7 \xd0\x9c\xd0\xbe\xd1\x81"
    "\xd0\xba\xd0\xb2\xd0\xb0", "numbers 123 4.56 7,890 \xd9\xa3\xd9\xa4 \xe2\x85\xa6 \xc2\xbd",
    "a\xc2\xa0" "b\xe3\x80\x80" "c\xe2\x80\x83" "d\xe2\x80\x8b" "e\xef\xbb\xbf", "ctl\x01\x1c\x1f\x7f end",
    "<|endoftext|> in the <|endoftext|>middle", "<|endoftext", "!!! ?! ... --- *** $100 #tag @user 50%",
    "\xf4\x8f\xbf\xbf \xef\xbf\xbd \xf3\xa0\x80\x81",
};

static void test_round_trips(void **state) {
    const gpt2_tokenizer *t = gpt2_fixture(state);
    for (size_t i = 0; i < sizeof round_trips / sizeof round_trips[0]; i++) {
        int32_t ids[MAX_IDS];
        size_t count;
        assert_int_equal(gpt2_tokenizer_encode(t, round_trips[i], 1, ids, MAX_IDS, &count), GLIMPSE_STATUS_OK);
        expect_decoding(t, ids, count, 0, 0, round_trips[i], strlen(round_trips[i]));
    }
    /* every byte that valid UTF-8 uses (01-7F, C2-F4 as leads, 80-BF as
     * continuations), through the byte alphabet and back */
    char all[2048];
    size_t used = 0;
    for (int byte = 1; byte < 0x80; byte++) all[used++] = (char)byte;
    for (int c = 0x80; c <= 0xbf; c++) used += (size_t)sprintf(all + used, "\xc2%c", c);
    for (int lead = 0xc3; lead <= 0xdf; lead++) used += (size_t)sprintf(all + used, "%c\x80", lead);
    for (int lead = 0xe0; lead <= 0xef; lead++)
        used += (size_t)sprintf(all + used, "%c%c\x80", lead, lead == 0xe0 ? 0xa0 : 0x80);
    for (int lead = 0xf0; lead <= 0xf4; lead++)
        used += (size_t)sprintf(all + used, "%c%c\x80\x80", lead, lead == 0xf0 ? 0x90 : 0x80);
    all[used] = '\0';
    int32_t ids[MAX_IDS];
    size_t count;
    assert_int_equal(gpt2_tokenizer_encode(t, all, 1, ids, MAX_IDS, &count), GLIMPSE_STATUS_OK);
    expect_decoding(t, ids, count, 0, 0, all, used);
}

/* A word of 200,000 letters: merging is O(n log n) in its symbols, so this
 * takes milliseconds (a pass over all pairs per merge would take minutes). */
static void test_long_word(void **state) {
    const gpt2_tokenizer *t = gpt2_fixture(state);
    size_t length = 200000;
    char *word = malloc(length + 1);
    for (size_t i = 0; i < length; i++) word[i] = "abracadabra"[i % 11];
    word[length] = '\0';
    size_t count;
    assert_int_equal(gpt2_tokenizer_encode(t, word, 1, NULL, 0, &count), GLIMPSE_STATUS_TOO_LARGE);
    int32_t *ids = malloc(count * sizeof *ids);
    size_t again;
    assert_int_equal(gpt2_tokenizer_encode(t, word, 1, ids, count, &again), GLIMPSE_STATUS_OK);
    assert_int_equal(again, count);
    assert_true(count < length / 2);
    expect_decoding(t, ids, count, 0, 0, word, length);
    free(ids);
    free(word);
}

/* ------------------------------------------------- pre-tokenisation */

/* The pieces re.findall gives with GPT-2's pattern for 346 strings, as
 * tests/data/gpt2_pretokenizer_splits.json records them: PRODUCED BY Python's
 * regex module (the generator is beside it), not by glimpse. */
static void test_pretokenizer_matches_regex(void **state) {
    (void)state;
    uint8_t *json_text;
    size_t size;
    assert_int_equal(file_read_all(GLIMPSE_SOURCE_DIR "/tests/data/gpt2_pretokenizer_splits.json", 1u << 22,
                                   &json_text, &size), GLIMPSE_STATUS_OK);
    cJSON *splits = cJSON_ParseWithLength((const char *)json_text, size);
    free(json_text);
    const cJSON *item;
    size_t cases = 0;
    cJSON_ArrayForEach(item, cJSON_GetObjectItemCaseSensitive(splits, "cases")) {
        const char *text = cJSON_GetObjectItemCaseSensitive(item, "text")->valuestring;
        const cJSON *expected = cJSON_GetObjectItemCaseSensitive(item, "pieces")->child;
        size_t length = strlen(text), at = 0;
        while (at < length) {
            size_t end = gpt2_pretokenize_next(text, length, at);
            const char *piece = expected ? expected->valuestring : NULL;
            if (!piece || strlen(piece) != end - at || memcmp(text + at, piece, end - at) != 0)
                fail_msg("\"%s\": a piece is \"%.*s\", expected \"%s\"", text, (int)(end - at), text + at,
                         expected ? expected->valuestring : "(none)");
            expected = expected->next;
            at = end;
        }
        if (expected) fail_msg("\"%s\": \"%s\" and more expected", text, expected->valuestring);
        cases++;
    }
    assert_true(cases > 300);
    cJSON_Delete(splits);
}

/* ------------------------------------------------------ byte alphabet */

static void test_byte_alphabet(void **state) {
    (void)state;
    bpe_alphabet alphabet;
    bpe_alphabet_init(&alphabet);
    /* the stand-ins everyone knows: Ġ for a space, Ċ for a newline, Ā for 0 */
    assert_string_equal(alphabet.stand_in[' '], "\xc4\xa0");
    assert_string_equal(alphabet.stand_in['\n'], "\xc4\x8a");
    assert_string_equal(alphabet.stand_in[0], "\xc4\x80");
    assert_string_equal(alphabet.stand_in['a'], "a");
    assert_string_equal(alphabet.stand_in[0xe9], "\xc3\xa9");
    /* a bijection between the 256 bytes and 256 printable code points below U+0144 */
    int seen[BPE_STAND_IN_LIMIT] = {0};
    for (int byte = 0; byte < 256; byte++) {
        const unsigned char *s = (const unsigned char *)alphabet.stand_in[byte];
        int codepoint = alphabet.stand_in_length[byte] == 1 ? s[0] : ((s[0] & 0x1f) << 6) | (s[1] & 0x3f);
        assert_true(codepoint > 0x20 && codepoint < BPE_STAND_IN_LIMIT && codepoint != 0x7f && codepoint != 0xa0);
        assert_false(seen[codepoint]++);
        assert_int_equal(bpe_alphabet_byte(&alphabet, codepoint), byte);
    }
    assert_int_equal(bpe_alphabet_byte(&alphabet, ' '), -1);
    assert_int_equal(bpe_alphabet_byte(&alphabet, BPE_STAND_IN_LIMIT), -1);

    /* GPT-2's vocab.json numbers its first 256 tokens in bytes_to_unicode's
     * order: the printable bytes ascending, then the others ascending; each
     * decodes to its one byte */
    const gpt2_tokenizer *t = gpt2_fixture(state);
    int32_t id = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int byte = 0; byte < 256; byte++) {
            int printable = (byte >= 0x21 && byte <= 0x7e) || (byte >= 0xa1 && byte <= 0xac) || byte >= 0xae;
            if (printable != (pass == 0)) continue;
            assert_int_equal(vocab_id("vit-gpt2-tiny", alphabet.stand_in[byte]), id);
            size_t length;
            const uint8_t *bytes = gpt2_tokenizer_token_bytes(t, id, &length);
            assert_non_null(bytes);
            assert_int_equal(length, 1);
            assert_int_equal(bytes[0], byte);
            id++;
        }
}

/* ------------------------------------------------------------ decoding */

/* Bytes given one token each, decoded with errors="replace": what Python's
 * bytes.decode("utf-8", "replace") gives (PRODUCED BY python3 3.11, not by
 * glimpse): characters split over tokens come out whole, and each maximal
 * invalid subpart is one U+FFFD. */
static const char *const split_bytes[][2] = {
    {"\141\303\251\142", "\141\303\251\142"}, /* 'a\xe9b' */
    {"\141\303\142", "\141\357\277\275\142"}, /* 'a\ufffdb' */
    {"\342\202\254", "\342\202\254"}, /* '\u20ac' */
    {"\342\202\170", "\357\277\275\170"}, /* '\ufffdx' */
    {"\360\237\230\200\041", "\360\237\230\200\041"}, /* '\U0001f600!' */
    {"\360\237\230\041", "\357\277\275\041"}, /* '\ufffd!' */
    {"\355\240\200", "\357\277\275\357\277\275\357\277\275"}, /* '\ufffd\ufffd\ufffd' */
    {"\300\257", "\357\277\275\357\277\275"}, /* '\ufffd\ufffd' */
    {"\340\200\257", "\357\277\275\357\277\275\357\277\275"}, /* '\ufffd\ufffd\ufffd' */
    {"\364\220\200\200", "\357\277\275\357\277\275\357\277\275\357\277\275"}, /* '\ufffd\ufffd\ufffd\ufffd' */
    {"\365\141", "\357\277\275\141"}, /* '\ufffda' */
    {"\200\277", "\357\277\275\357\277\275"}, /* '\ufffd\ufffd' */
    {"\376\377", "\357\277\275\357\277\275"}, /* '\ufffd\ufffd' */
    {"\342\050\241", "\357\277\275\050\357\277\275"}, /* '\ufffd(\ufffd' */
    {"\360\237", "\357\277\275"}, /* '\ufffd' */
    {"\303", "\357\277\275"}, /* '\ufffd' */
};

static void test_decode_bytes(void **state) {
    const gpt2_tokenizer *t = gpt2_fixture(state);
    bpe_alphabet alphabet;
    bpe_alphabet_init(&alphabet);
    for (size_t c = 0; c < sizeof split_bytes / sizeof split_bytes[0]; c++) {
        int32_t ids[16];
        size_t count = 0;
        for (const char *b = split_bytes[c][0]; *b; b++)
            ids[count++] = vocab_id("vit-gpt2-tiny", alphabet.stand_in[(uint8_t)*b]);
        expect_decoding(t, ids, count, 1, 1, split_bytes[c][1], strlen(split_bytes[c][1]));
    }
    /* a NUL byte decodes too: counted in the length */
    int32_t nul[] = {vocab_id("vit-gpt2-tiny", alphabet.stand_in[0]), vocab_id("vit-gpt2-tiny", "a")};
    expect_decoding(t, nul, 2, 1, 1, "\0a", 2);
    /* invalid UTF-8 in the input reads as U+FFFD, maximal subparts as above */
    int32_t ids[16];
    size_t count;
    assert_int_equal(gpt2_tokenizer_encode(t, "a\xff\xe2\x82z", 1, ids, 16, &count), GLIMPSE_STATUS_OK);
    expect_decoding(t, ids, count, 1, 1, "a\xef\xbf\xbd\xef\xbf\xbdz", 8);
}

/* The clean-up of spaces: the text with transformers' ten replacements
 * applied in order (computed with Python's str.replace chain of
 * tokenization_utils_base.clean_up_tokenization). */
static void test_clean_up(void **state) {
    const gpt2_tokenizer *t = gpt2_fixture(state);
    const char *text =
        "Hello , world . Is n't it ? Yes ! I 'm ok , he 's here , we 've been , they 're ' quoted ' x . . ,";
    const char *cleaned = "Hello, world. Isn't it? Yes! I'm ok, he's here, we've been, they're'quoted'x..,";
    int32_t ids[MAX_IDS];
    size_t count;
    assert_int_equal(gpt2_tokenizer_encode(t, text, 1, ids, MAX_IDS, &count), GLIMPSE_STATUS_OK);
    expect_decoding(t, ids, count, 1, 0, text, strlen(text));
    expect_decoding(t, ids, count, 1, 1, cleaned, strlen(cleaned));
    /* skip_special_tokens drops <|endoftext|> wherever it is; without it, it is text */
    int32_t end = gpt2_tokenizer_eos_id(t), a = vocab_id("vit-gpt2-tiny", "a");
    int32_t with_specials[] = {end, a, end, a, end};
    expect_decoding(t, with_specials, 5, 1, 1, "aa", 2);
    expect_decoding(t, with_specials, 5, 0, 1, "<|endoftext|>a<|endoftext|>a<|endoftext|>", 41);
    expect_decoding(t, NULL, 0, 1, 1, "", 0);
}

/* ------------------------------------------- a vocabulary of our own */

/* Stand-ins: "Ġ" is a space. Ids: a 0, b 1, ab 2, aba 3, Ġ 4, <x> 5, <eos> 6, c 7. */
static const char small_vocab[] =
    "{\"a\": 0, \"b\": 1, \"ab\": 2, \"aba\": 3, \"\\u0120\": 4, \"<x>\": 5, \"<eos>\": 6, \"c\": 7}";

static gpt2_tokenizer *small_tokenizer(const char *merges, const gpt2_tokenizer_options *options) {
    gpt2_tokenizer *t = NULL;
    if (gpt2_tokenizer_create(small_vocab, strlen(small_vocab), merges, strlen(merges), options, &t))
        fail_msg("%s", glimpse_last_error());
    return t;
}

static gpt2_tokenizer_options small_options(void) {
    gpt2_tokenizer_options options = gpt2_tokenizer_default_options();
    options.bos.content = options.eos.content = options.unk.content = "<eos>";
    return options;
}

/* Merging by rounds, as GPT2Tokenizer.bpe: every occurrence of the best pair
 * is merged before the pairs that made are ranked, even a better-ranked one. */
static void test_merge_rounds(void **state) {
    (void)state;
    gpt2_tokenizer_options options = small_options();
    /* "ab a" outranks "a b", but "ab a" only exists once "a b" has merged
     * everywhere: "abab" -> ab ab (a pair-at-a-time merge would give aba b) */
    gpt2_tokenizer *t = small_tokenizer("#version: 0.2\nab a\na b\n", &options);
    int32_t abab[] = {2, 2};
    expect_encoding(t, "abab", abab, 2);
    /* the next round does merge it */
    int32_t aba[] = {3};
    expect_encoding(t, "aba", aba, 1);
    /* unknown pieces become the unk token; c has no merges */
    int32_t unknown[] = {6, 7, 6};
    expect_encoding(t, "dcd", unknown, 3);
    gpt2_tokenizer_free(t);
    /* overlapping occurrences merge left to right: "aaa" with "a a" -> aa a
     * (aa is not in the vocabulary: unk) */
    t = small_tokenizer("a a", &options);
    int32_t aaa[] = {6, 0};
    expect_encoding(t, "aaa", aaa, 2);
    gpt2_tokenizer_free(t);
}

/* Whitespace around a special token is kept, unless the token strips it
 * (lstrip / rstrip, or a plain string in special_tokens_map.json). */
static void test_special_token_stripping(void **state) {
    (void)state;
    gpt2_tokenizer_options options = small_options();
    options.additional[options.additional_count++] = (gpt2_special_token){"<x>", 0, 0};
    gpt2_tokenizer *t = small_tokenizer("", &options);
    int32_t kept[] = {0, 4, 4, 5, 4, 4, 1};
    expect_encoding(t, "a  <x>  b", kept, 7);
    gpt2_tokenizer_free(t);
    options.additional[0] = (gpt2_special_token){"<x>", 1, 1};
    options.add_bos_token = 1;
    t = small_tokenizer("", &options);
    int32_t stripped[] = {6, 0, 5, 1};
    expect_encoding(t, "a \t<x>\n\xe3\x80\x80" "b", stripped, 4);
    assert_true(gpt2_tokenizer_is_special(t, 5));
    assert_false(gpt2_tokenizer_is_special(t, 0));
    gpt2_tokenizer_free(t);
    /* add_prefix_space: a space in front before anything else */
    options = small_options();
    options.add_prefix_space = 1;
    t = small_tokenizer("", &options);
    int32_t prefixed[] = {4, 6};
    expect_encoding(t, "<eos>", prefixed, 2);
    gpt2_tokenizer_free(t);
}

/* The files of a snapshot folder: tokenizer_config.json's flags, then
 * special_tokens_map.json's tokens over them (a plain string there strips). */
static void write_file(const char *folder, const char *name, const char *text) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", folder, name);
    FILE *file = fopen(path, "w");
    assert_non_null(file);
    fputs(text, file);
    fclose(file);
}

static void test_load_folder(void **state) {
    (void)state;
    char folder[] = "/tmp/glimpse-gpt2-XXXXXX";
    assert_non_null(mkdtemp(folder));
    write_file(folder, "vocab.json", small_vocab);
    write_file(folder, "merges.txt", "#version: 0.2\na b\n");
    gpt2_tokenizer *t = NULL;
    /* without the config files: GPT2Tokenizer's defaults, and <|endoftext|> is not in this vocabulary */
    assert_int_equal(gpt2_tokenizer_load(folder, &t), GLIMPSE_STATUS_UNSUPPORTED);
    assert_null(t);
    assert_non_null(strstr(glimpse_last_error(), "<|endoftext|>"));
    write_file(folder, "tokenizer_config.json",
               "{\"add_bos_token\": true, \"bos_token\": {\"__type\": \"AddedToken\", \"content\": \"<eos>\"},"
               " \"eos_token\": \"<eos>\", \"unk_token\": \"<eos>\", \"pad_token\": null}");
    write_file(folder, "special_tokens_map.json", "{\"pad_token\": \"<x>\", \"additional_special_tokens\": [\"c\"]}");
    assert_int_equal(gpt2_tokenizer_load(folder, &t), GLIMPSE_STATUS_OK);
    assert_int_equal(gpt2_tokenizer_bos_id(t), 6);
    assert_int_equal(gpt2_tokenizer_pad_id(t), 5);
    assert_true(gpt2_tokenizer_is_special(t, 7));
    int32_t ids[] = {6, 2, 5, 2, 7};
    expect_encoding(t, "ab <x> ab c", ids, 5);
    gpt2_tokenizer_free(t);
    write_file(folder, "tokenizer_config.json", "{\"bos_token\": 7}");
    assert_int_equal(gpt2_tokenizer_load(folder, &t), GLIMPSE_STATUS_BAD_FORMAT);
    assert_non_null(strstr(glimpse_last_error(), "bos_token"));
    const char *names[] = {"vocab.json", "merges.txt", "tokenizer_config.json", "special_tokens_map.json"};
    for (size_t i = 0; i < 4; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s", folder, names[i]);
        unlink(path);
    }
    rmdir(folder);
}

/* ---------------------------------------------- hostile files and ids */

static glimpse_status create_status(const char *vocab, const char *merges, const gpt2_tokenizer_options *options) {
    gpt2_tokenizer *t = NULL;
    glimpse_status status = gpt2_tokenizer_create(vocab, strlen(vocab), merges, strlen(merges), options, &t);
    if (status) assert_null(t);
    gpt2_tokenizer_free(t);
    return status;
}

static void test_errors(void **state) {
    (void)state;
    gpt2_tokenizer_options options = small_options();
    assert_int_equal(create_status("[1, 2]", "", &options), GLIMPSE_STATUS_BAD_FORMAT);
    assert_int_equal(create_status("{\"a\": ", "", &options), GLIMPSE_STATUS_BAD_FORMAT);
    assert_int_equal(create_status("{}", "", &options), GLIMPSE_STATUS_BAD_FORMAT);
    assert_int_equal(create_status("{\"<eos>\": -1}", "", &options), GLIMPSE_STATUS_BAD_FORMAT);
    assert_int_equal(create_status("{\"<eos>\": 1.5}", "", &options), GLIMPSE_STATUS_BAD_FORMAT);
    assert_int_equal(create_status("{\"<eos>\": \"1\"}", "", &options), GLIMPSE_STATUS_BAD_FORMAT);
    assert_int_equal(create_status("{\"<eos>\": 1e12}", "", &options), GLIMPSE_STATUS_BAD_FORMAT);
    assert_non_null(strstr(glimpse_last_error(), "vocab.json"));
    assert_int_equal(create_status(small_vocab, "a b c\n", &options), GLIMPSE_STATUS_BAD_FORMAT);
    assert_non_null(strstr(glimpse_last_error(), "merges.txt line 1"));
    assert_int_equal(create_status(small_vocab, "#version: 0.2\na b\nab\n", &options), GLIMPSE_STATUS_BAD_FORMAT);
    assert_non_null(strstr(glimpse_last_error(), "line 3"));
    /* blank lines, CRLF, tabs and a last line without newline are fine */
    assert_int_equal(create_status(small_vocab, "#version: 0.2\r\n\r\na\tb\r\n\nab  a", &options), GLIMPSE_STATUS_OK);
    /* a special token outside the vocabulary would be an added token */
    assert_int_equal(create_status(small_vocab, "", NULL), GLIMPSE_STATUS_UNSUPPORTED);
    gpt2_tokenizer_options no_bos = small_options();
    no_bos.bos.content = NULL;
    no_bos.add_bos_token = 1;
    assert_int_equal(create_status(small_vocab, "", &no_bos), GLIMPSE_STATUS_BAD_FORMAT);

    /* ids: negative, past the end, in a gap, or a token outside the byte alphabet */
    const char *gappy = "{\"<eos>\": 0, \"a\": 2, \"two words\": 3}";
    gpt2_tokenizer *t = NULL;
    assert_int_equal(gpt2_tokenizer_create(gappy, strlen(gappy), "", 0, &options, &t), GLIMPSE_STATUS_OK);
    char *text = NULL;
    int32_t bad[][1] = {{-1}, {4}, {1}, {INT32_MAX}};
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(gpt2_tokenizer_decode(t, bad[i], 1, 1, 1, &text, NULL), GLIMPSE_STATUS_INVALID_ARGUMENT);
        assert_null(text);
    }
    int32_t spaced[] = {3};
    assert_int_equal(gpt2_tokenizer_decode(t, spaced, 1, 1, 1, &text, NULL), GLIMPSE_STATUS_BAD_FORMAT);
    size_t length;
    assert_null(gpt2_tokenizer_token_bytes(t, 3, &length));
    assert_null(gpt2_tokenizer_token_bytes(t, 1, &length));
    assert_null(gpt2_tokenizer_token_bytes(t, -5, &length));
    /* too little room: the ids that fit, and the count needed */
    int32_t ids[2] = {-7, -7};
    size_t count;
    assert_int_equal(gpt2_tokenizer_encode(t, "aaa", 1, ids, 1, &count), GLIMPSE_STATUS_TOO_LARGE);
    assert_int_equal(count, 3);
    assert_int_equal(ids[0], 2);
    assert_int_equal(ids[1], -7);
    assert_int_equal(gpt2_tokenizer_encode(t, NULL, 1, ids, 2, &count), GLIMPSE_STATUS_OK);
    assert_int_equal(count, 0);
    gpt2_tokenizer_free(t);
    gpt2_tokenizer_free(NULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpt2_fixture),
        cmocka_unit_test(test_opt_fixture),
        cmocka_unit_test(test_special_tokens_in_text),
        cmocka_unit_test(test_round_trips),
        cmocka_unit_test(test_long_word),
        cmocka_unit_test(test_pretokenizer_matches_regex),
        cmocka_unit_test(test_byte_alphabet),
        cmocka_unit_test(test_decode_bytes),
        cmocka_unit_test(test_clean_up),
        cmocka_unit_test(test_merge_rounds),
        cmocka_unit_test(test_special_token_stripping),
        cmocka_unit_test(test_load_folder),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests_name("gpt2 tokenizer", tests, load_fixture_tokenizers, free_fixture_tokenizers);
}
