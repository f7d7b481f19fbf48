/* test_siglip_tokenizer.c — SigLIP's tokenizer against transformers 4.37.2:
 * every text and tokenizer case of siglip-tiny/expected.json (read at run
 * time), its character classes against the python3 on this machine (all code
 * points), and what the reference's source says about whitespace, punctuation,
 * special tokens, truncation, invalid UTF-8 and broken files. */
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
#include "text/siglip_tokenizer.h"
#include "text/utf8.h"

#define LENGTH SIGLIP_TOKENIZER_DEFAULT_LENGTH
#define CODEPOINT_END 0x110000
/* ids of the fixture's vocabulary, read off its expected.json */
#define FIXTURE_END_ID 1
#define FIXTURE_UNKNOWN_ID 2
#define FIXTURE_A_ID 9 /* "▁a" */

typedef struct fixture {
    siglip_tokenizer *tokenizer;
    cJSON *expected;
} fixture;

/* Each test skips when the fixtures are absent (f->tokenizer stays NULL). */
static int setup(void **state) {
    fixture *f = calloc(1, sizeof *f);
    *state = f;
    if (!f) return -1;
    char *folder = fixture_path("siglip-tiny");
    if (!folder) return 0;
    glimpse_status status = siglip_tokenizer_load(folder, &f->tokenizer);
    free(folder);
    if (status) print_error("siglip-tiny: %s\n", glimpse_last_error());
    f->expected = fixture_json("siglip-tiny/expected.json");
    return status || !f->expected ? -1 : 0;
}

static int teardown(void **state) {
    fixture *f = *state;
    siglip_tokenizer_free(f->tokenizer);
    cJSON_Delete(f->expected);
    free(f);
    return 0;
}

/* Encodes text; fails the test on an error. */
static size_t encode(const siglip_tokenizer *t, const char *text, int32_t ids[LENGTH]) {
    size_t count = 0;
    if (siglip_tokenizer_encode(t, text, ids, LENGTH, &count)) fail_msg("\"%s\": %s", text, glimpse_last_error());
    assert_true(count >= 1 && count <= LENGTH);
    return count;
}

/* The ids of a JSON array, checked against the padded encoding of text: the
 * array is either all 64 ids or the unpadded ones, the rest then being 1. */
static void expect_json_ids(const siglip_tokenizer *t, const char *text, const cJSON *expected, size_t count) {
    int32_t ids[LENGTH];
    size_t unpadded = encode(t, text, ids);
    size_t listed = (size_t)cJSON_GetArraySize(expected);
    assert_true(listed <= LENGTH);
    for (size_t i = 0; i < LENGTH; i++) {
        int want = i < listed ? cJSON_GetArrayItem(expected, (int)i)->valueint : FIXTURE_END_ID;
        if (ids[i] != want) fail_msg("\"%s\": id %zu is %d, transformers %d", text, i, ids[i], want);
    }
    assert_int_equal(unpadded, count);
}

static void test_fixture_texts(void **state) {
    fixture *f = *state;
    if (!f->tokenizer) skip();
    const cJSON *texts = cJSON_GetObjectItem(f->expected, "texts");
    const cJSON *ids = cJSON_GetObjectItem(f->expected, "input_ids");
    const cJSON *counts = cJSON_GetObjectItem(f->expected, "num_tokens");
    int n = cJSON_GetArraySize(texts);
    assert_true(n > 0);
    assert_int_equal(cJSON_GetArraySize(ids), n);
    assert_int_equal(cJSON_GetArraySize(counts), n);
    assert_int_equal(cJSON_GetObjectItem(f->expected, "eos_token_id")->valueint, siglip_tokenizer_end_id(f->tokenizer));
    assert_int_equal(cJSON_GetObjectItem(f->expected, "pad_token_id")->valueint, siglip_tokenizer_end_id(f->tokenizer));
    assert_int_equal(cJSON_GetObjectItem(f->expected, "unk_token_id")->valueint,
                     siglip_tokenizer_unknown_id(f->tokenizer));
    assert_int_equal(siglip_tokenizer_length(f->tokenizer), LENGTH);
    for (int i = 0; i < n; i++) {
        const cJSON *padded = cJSON_GetArrayItem(ids, i);
        assert_int_equal(cJSON_GetArraySize(padded), LENGTH);
        expect_json_ids(f->tokenizer, cJSON_GetArrayItem(texts, i)->valuestring, padded,
                        (size_t)cJSON_GetArrayItem(counts, i)->valueint);
    }
}

static void expect_cases(fixture *f, const char *name) {
    const cJSON *cases = cJSON_GetObjectItem(f->expected, name), *item;
    assert_true(cJSON_GetArraySize(cases) > 0);
    cJSON_ArrayForEach(item, cases) {
        const cJSON *ids = cJSON_GetObjectItem(item, "input_ids");
        expect_json_ids(f->tokenizer, cJSON_GetObjectItem(item, "text")->valuestring, ids,
                        (size_t)cJSON_GetArraySize(ids));
    }
}

static void test_fixture_tokenizer_cases(void **state) {
    fixture *f = *state;
    if (!f->tokenizer) skip();
    expect_cases(f, "tokenizer_cases");
}

static void test_fixture_special_cases(void **state) {
    fixture *f = *state;
    if (!f->tokenizer) skip();
    expect_cases(f, "tokenizer_cases_special");
}

/* The special cases of Python's lower-casing. Expected values from
 * python3 -c 'print([hex(ord(x)) for x in chr(C).lower()])'. Σ gives σ, not
 * the final ς: transformers' do_lower_case runs
 * re.sub("(</s>|<unk>)|(.+?)", ...) and the lazy "(.+?)" hands str.lower one
 * character at a time, so the final-sigma rule never sees a word
 * (re.sub(...) on "ΟΔΟΣ" gives "οδοσ", where "ΟΔΟΣ".lower() is "οδος"). */
static void test_lowercase_special_cases(void **state) {
    (void)state;
    static const int32_t cases[][3] = {
        {0x130, 0x69, 0x307}, /* İ -> i + combining dot above: two code points */
        {0x3a3, 0x3c3, -1},   /* Σ -> σ (alone: no final sigma) */
        {0x1e9e, 0xdf, -1},   /* ẞ -> ß */
        {0x212a, 'k', -1},    /* KELVIN SIGN -> k */
        {0x212b, 0xe5, -1},   /* ANGSTROM SIGN -> å */
        {0x1c5, 0x1c6, -1},   /* ǅ (title case) -> ǆ */
        {0x1c4, 0x1c6, -1},   /* Ǆ -> ǆ */
        {0xdf, 0xdf, -1},     /* ß stays (its upper case is two letters, its lower case itself) */
        {0x10400, 0x10428, -1}, /* DESERET CAPITAL LONG I */
        {'I', 'i', -1},       /* no Turkish dotless ı */
        {0x1f88, 0x1f80, -1}, /* ᾈ -> ᾀ */
        {'A', 'a', -1},
        {'1', '1', -1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int32_t lower[2] = {-1, -1};
        int count = siglip_lowercase(cases[i][0], lower);
        assert_int_equal(count, cases[i][2] < 0 ? 1 : 2);
        assert_int_equal(lower[0], cases[i][1]);
        if (count == 2) assert_int_equal(lower[1], cases[i][2]);
    }
}

/* Python's view of every code point, printed by the python3 here: the
 * do_lower_case regex on "ΟΔΟΣ" (it keeps σ); the count and list of the code
 * points str.isspace() accepts, then how many re's \s judges otherwise (0);
 * then each code point (surrogates aside) that chr(c).lower() changes, with
 * the count and code points of its lower case. For one character the regex
 * is chr(c).lower() ("\n", which "." skips, has no case). Python 3.11 has
 * Unicode 14, utf8proc 2.8 Unicode 15: no case mapping differs between them. */
static const char python_characters[] =
    "import re\n"
    "pattern = re.compile(r\"(</s>|<unk>)|(.+?)\")\n"
    "word = pattern.sub(lambda m: m.groups()[0] or m.groups()[1].lower(), \"\\u039f\\u0394\\u039f\\u03a3\")\n"
    "print(*[ord(x) for x in word])\n"
    "spaces = [c for c in range(0x110000) if chr(c).isspace()]\n"
    "print(len(spaces), *spaces)\n"
    "space = re.compile(r\"\\s\").match\n"
    "print(sum(chr(c).isspace() != bool(space(chr(c))) for c in range(0x110000)))\n"
    "for c in range(0x110000):\n"
    "    low = chr(c).lower()\n"
    "    if low != chr(c) and not 0xd800 <= c < 0xe000: print(c, len(low), *[ord(x) for x in low])\n";

static void expect_sigma_word(FILE *out) {
    int python_lower[4];
    for (int i = 0; i < 4; i++) assert_int_equal(fscanf(out, "%d", &python_lower[i]), 1);
    assert_int_equal(python_lower[3], 0x3c3); /* σ, not ς */
    const int32_t word[] = {0x39f, 0x394, 0x39f, 0x3a3};
    for (int i = 0; i < 4; i++) {
        int32_t lower[2];
        assert_int_equal(siglip_lowercase(word[i], lower), 1);
        assert_int_equal(lower[0], python_lower[i]);
    }
}

static void expect_spaces(FILE *out) {
    static char is_space[CODEPOINT_END];
    memset(is_space, 0, sizeof is_space);
    int count = 0, c, disagreements = -1;
    assert_int_equal(fscanf(out, "%d", &count), 1);
    assert_int_equal(count, 29);
    for (int i = 0; i < count; i++) {
        assert_true(fscanf(out, "%d", &c) == 1 && c >= 0 && c < CODEPOINT_END);
        is_space[c] = 1;
    }
    assert_int_equal(fscanf(out, "%d", &disagreements), 1);
    assert_int_equal(disagreements, 0);
    for (c = 0; c < CODEPOINT_END; c++)
        if (utf8_is_python_space(c) != is_space[c]) fail_msg("U+%04X: isspace %d", c, is_space[c]);
}

static void expect_lowercase(FILE *out) {
    int32_t changed = -1, want[2] = {0, 0};
    int want_count = 0, listed = 0, differences = 0;
    int have = fscanf(out, "%d %d", &changed, &want_count) == 2;
    for (int32_t c = 0; c < CODEPOINT_END; c++) {
        if (c >= 0xd800 && c < 0xe000) continue;
        int32_t expected[2] = {c, 0};
        int expected_count = 1;
        if (have && c == changed) {
            assert_true(want_count == 1 || want_count == 2);
            for (int i = 0; i < want_count; i++) assert_int_equal(fscanf(out, "%d", &want[i]), 1);
            memcpy(expected, want, sizeof want);
            expected_count = want_count;
            listed++;
            have = fscanf(out, "%d %d", &changed, &want_count) == 2;
        }
        int32_t lower[2] = {0, 0};
        int count = siglip_lowercase(c, lower);
        if (count != expected_count || lower[0] != expected[0] || (count == 2 && lower[1] != expected[1])) {
            if (differences++ < 10) print_error("U+%04X: ours U+%04X (%d), Python U+%04X (%d)\n", c, lower[0], count,
                                                expected[0], expected_count);
        }
    }
    assert_false(have);         /* Python listed nothing we skipped */
    assert_true(listed > 1000); /* and did list them */
    assert_int_equal(differences, 0);
}

static void test_characters_match_python(void **state) {
    (void)state;
    if (system("command -v python3 >/dev/null 2>&1") != 0) skip();
    char command[sizeof python_characters + 32];
    snprintf(command, sizeof command, "python3 -c '%s'", python_characters);
    FILE *out = popen(command, "r");
    assert_non_null(out);
    expect_sigma_word(out);
    expect_spaces(out);
    expect_lowercase(out);
    assert_int_equal(pclose(out), 0);
}

/* Whitespace and punctuation: each text must give the ids of its canonical
 * form, which Python computed (python3 -c with
 * re.sub(r"\s+", " ", t.replace("\u2581", " ").lower()
 *     .translate(str.maketrans("", "", string.punctuation))).strip(),
 * SiglipTokenizer's steps without the special-token split). */
static void test_whitespace_and_punctuation(void **state) {
    fixture *f = *state;
    if (!f->tokenizer) skip();
    static const char *cases[][2] = {
        {"A!b\"c#d$e%f&g'h(i)j*k+l,m-n.o/p:q;r<s=t>u?v@w[x\\y]z^a_b`c{d|e}f~g", "abcdefghijklmnopqrstuvwxyzabcdefg"},
        {"\u00a0 Photo\u3000of\u2028a\xc2\x85" "cat\x1c\x1d\x1e\x1fnow\v\f\r\n", "photo of a cat now"},
        {"zero\u200bwidth\ufeffbom \u2581mark", "zero\u200bwidth\ufeffbom mark"},
        {"\u2014 \u00ab \u00bf \uff01 \u2026 \u00a1 keep these",
         "\u2014 \u00ab \u00bf \uff01 \u2026 \u00a1 keep these"},
        {"  \t a  -  b \t ", "a b"},
        {"\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2029\u202f\u205f\u1680" "end", "end"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int32_t raw[LENGTH], canonical[LENGTH];
        size_t raw_count = encode(f->tokenizer, cases[i][0], raw);
        assert_int_equal(raw_count, encode(f->tokenizer, cases[i][1], canonical));
        assert_memory_equal(raw, canonical, sizeof raw);
    }
    /* U+001C is Python whitespace, which the model's normaliser would delete:
     * the text is two words, not one */
    int32_t separated[LENGTH], joined[LENGTH];
    encode(f->tokenizer, "cat\x1c" "now", separated);
    encode(f->tokenizer, "catnow", joined);
    assert_memory_not_equal(separated, joined, sizeof joined);
}

/* What transformers' source says (not run here, read): lower-casing comes
 * before the special-token split, so "</S>" is "</s>"; the special tokens
 * strip Python whitespace beside them (lstrip / rstrip), U+3000 included. */
static void test_special_tokens(void **state) {
    fixture *f = *state;
    if (!f->tokenizer) skip();
    static const char *same[][2] = {
        {"STOP</S>HERE", "stop</s>here"},
        {"a <UNK> in the middle", "a <unk> in the middle"},
        {"a \u3000</s>\t b", "a</s>b"},
        {"x<unk>  <unk>y", "x<unk><unk>y"},
    };
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++) {
        int32_t left[LENGTH], right[LENGTH];
        assert_int_equal(encode(f->tokenizer, same[i][0], left), encode(f->tokenizer, same[i][1], right));
        assert_memory_equal(left, right, sizeof left);
    }
    int32_t ids[LENGTH];
    assert_int_equal(encode(f->tokenizer, "</s></s>", ids), 2); /* the last one is the end: no third */
    assert_int_equal(ids[0], FIXTURE_END_ID);
    assert_int_equal(encode(f->tokenizer, "<unk>", ids), 2);
    assert_int_equal(ids[0], FIXTURE_UNKNOWN_ID);
    assert_int_equal(ids[1], FIXTURE_END_ID);
}

/* Builds "a a ... a" (words times) followed by tail. */
static char *repeated_a(size_t words, const char *tail) {
    char *text = malloc(2 * words + strlen(tail) + 1);
    for (size_t i = 0; i < words; i++) memcpy(text + 2 * i, "a ", 2);
    strcpy(text + 2 * words, tail);
    return text;
}

/* prepare_for_model (read, not run): one place is kept for </s>; ids that
 * already end with a literal </s> get none added. "▁a" is one piece. */
static void test_truncation(void **state) {
    fixture *f = *state;
    if (!f->tokenizer) skip();
    static const struct {
        size_t words;
        const char *tail;
        size_t count; /* unpadded */
        size_t a_ids; /* leading "▁a" ids */
    } cases[] = {
        {63, "", 64, 63},         /* 63 + </s>: exactly full */
        {64, "", 64, 63},         /* one over: cut to 63, </s> added */
        {63, "</s>", 64, 63},     /* 64 with the literal end: cut to 63, </s> added */
        {62, "</s> b c", 63, 62}, /* the 63 kept end with the literal </s>: none added */
        {10, "</s>", 11, 10},     /* ends with the literal: none added */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *text = repeated_a(cases[i].words, cases[i].tail);
        int32_t ids[LENGTH];
        assert_int_equal(encode(f->tokenizer, text, ids), cases[i].count);
        for (size_t j = 0; j < LENGTH; j++)
            assert_int_equal(ids[j], j < cases[i].a_ids ? FIXTURE_A_ID : FIXTURE_END_ID);
        free(text);
    }
    int32_t small[LENGTH - 1];
    size_t count;
    assert_int_equal(siglip_tokenizer_encode(f->tokenizer, "a", small, LENGTH - 1, &count),
                     GLIMPSE_STATUS_INVALID_ARGUMENT);
}

/* Invalid UTF-8 cannot reach the reference (its text is a str); here each
 * byte that starts no valid sequence is U+FFFD. Random bytes never fail. */
static void test_invalid_utf8(void **state) {
    fixture *f = *state;
    if (!f->tokenizer) skip();
    static const char *same[][2] = {
        {"\xff" "cat", "\xef\xbf\xbd" "cat"},
        {"a \xe2\x96 b", "a \xef\xbf\xbd\xef\xbf\xbd b"},       /* a cut "▁" */
        {"\xc0\xaf" "x", "\xef\xbf\xbd\xef\xbf\xbd" "x"},         /* an overlong "/" */
        {"\xed\xa0\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"}, /* a surrogate */
    };
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++) {
        int32_t left[LENGTH], right[LENGTH];
        assert_int_equal(encode(f->tokenizer, same[i][0], left), encode(f->tokenizer, same[i][1], right));
        assert_memory_equal(left, right, sizeof left);
    }
    unsigned state_bits = 12345;
    char text[301];
    for (int round = 0; round < 300; round++) {
        size_t length = (size_t)round;
        for (size_t i = 0; i < length; i++) {
            state_bits = state_bits * 1103515245u + 12345u;
            text[i] = (char)(1 + (state_bits >> 16) % 255);
        }
        text[length] = '\0';
        int32_t ids[LENGTH];
        encode(f->tokenizer, text, ids);
        for (size_t i = 0; i < LENGTH; i++) assert_true(ids[i] >= 0 && ids[i] < 1000);
    }
}

/* ------------------------------------------------------------ files */

/* A folder under /tmp for the files a test writes. */
typedef struct scratch {
    char folder[64], path[128];
} scratch;

static const char *scratch_path(scratch *s, const char *name) {
    snprintf(s->path, sizeof s->path, "%s/%s", s->folder, name);
    return s->path;
}

static void scratch_put(scratch *s, const char *name, const void *bytes, size_t size) {
    FILE *file = fopen(scratch_path(s, name), "wb");
    assert_true(file && fwrite(bytes, 1, size, file) == size);
    assert_int_equal(fclose(file), 0);
}

static uint8_t *fixture_model(size_t *size) {
    char *path = fixture_path("siglip-tiny/spiece.model");
    uint8_t *bytes = NULL;
    assert_int_equal(file_read_all(path, 1u << 26, &bytes, size), GLIMPSE_STATUS_OK);
    free(path);
    return bytes;
}

/* Bytes written to stderr while run(argument) ran. */
static long stderr_bytes(void (*run)(void *), void *argument) {
    fflush(stderr);
    int saved = dup(2);
    FILE *capture = tmpfile();
    assert_true(saved >= 0 && capture);
    dup2(fileno(capture), 2);
    run(argument);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    fseek(capture, 0, SEEK_END);
    long written = ftell(capture);
    fclose(capture);
    return written;
}

static void load_folder_with_config(scratch *s, const char *config, glimpse_status expected, size_t expected_length) {
    scratch_put(s, "tokenizer_config.json", config, strlen(config));
    siglip_tokenizer *t = NULL;
    assert_int_equal(siglip_tokenizer_load(s->folder, &t), expected);
    if (expected) {
        assert_null(t);
        assert_non_null(strstr(glimpse_last_error(), "tokenizer_config.json"));
        return;
    }
    assert_int_equal(siglip_tokenizer_length(t), expected_length);
    siglip_tokenizer_free(t);
}

static void test_files(void **state) {
    fixture *f = *state;
    if (!f->tokenizer) skip();
    scratch s = {.folder = "/tmp/glimpse-siglip-XXXXXX"};
    assert_non_null(mkdtemp(s.folder));
    siglip_tokenizer *t = NULL;
    assert_int_not_equal(siglip_tokenizer_load(s.folder, &t), GLIMPSE_STATUS_OK); /* no spiece.model */
    assert_non_null(strstr(glimpse_last_error(), "spiece.model"));
    scratch_put(&s, "spiece.model", "not a model", 11);
    assert_int_equal(siglip_tokenizer_load(s.folder, &t), GLIMPSE_STATUS_BAD_FORMAT);
    assert_null(t);
    assert_non_null(strstr(glimpse_last_error(), "spiece.model"));

    size_t size;
    uint8_t *model = fixture_model(&size);
    scratch_put(&s, "spiece.model", model, size);
    free(model);
    load_folder_with_config(&s, "{\"model_max_length\": 1000000000000000019884624838656}", GLIMPSE_STATUS_OK, LENGTH);
    load_folder_with_config(&s, "{\"do_lower_case\": true}", GLIMPSE_STATUS_OK, LENGTH);
    load_folder_with_config(&s, "{\"model_max_length\": \"64\"}", GLIMPSE_STATUS_BAD_FORMAT, 0);
    load_folder_with_config(&s, "{\"model_max_length\": 1}", GLIMPSE_STATUS_BAD_FORMAT, 0);
    load_folder_with_config(&s, "{\"model_max_length\": 100000}", GLIMPSE_STATUS_TOO_LARGE, 0);
    load_folder_with_config(&s, "[64]", GLIMPSE_STATUS_BAD_FORMAT, 0);

    /* a shorter encoding: the same ids up to 15, then </s> */
    load_folder_with_config(&s, "{\"model_max_length\": 16}", GLIMPSE_STATUS_OK, 16);
    assert_int_equal(siglip_tokenizer_load(s.folder, &t), GLIMPSE_STATUS_OK);
    char *text = repeated_a(40, "");
    int32_t ids[LENGTH];
    size_t count;
    assert_int_equal(siglip_tokenizer_encode(t, text, ids, 16, &count), GLIMPSE_STATUS_OK);
    assert_int_equal(count, 16);
    for (size_t i = 0; i < 16; i++) assert_int_equal(ids[i], i < 15 ? FIXTURE_A_ID : FIXTURE_END_ID);
    free(text);
    siglip_tokenizer_free(t);

    assert_int_equal(unlink(scratch_path(&s, "spiece.model")), 0);
    assert_int_equal(unlink(scratch_path(&s, "tokenizer_config.json")), 0);
    assert_int_equal(rmdir(s.folder), 0);
}

typedef struct damage_run {
    const uint8_t *model;
    size_t size;
    int loaded, refused;
} damage_run;

/* Copies of the model with one to four bits flipped: each is refused as
 * BAD_FORMAT (UNSUPPORTED) or loads and encodes (libsentencepiece trusts the normaliser's
 * charsmap, so a damaged one must be refused before it is searched). */
static void load_damaged_models(void *argument) {
    damage_run *run = argument;
    uint8_t *copy = malloc(run->size);
    unsigned bits = 2024;
    for (int round = 0; round < 300; round++) {
        memcpy(copy, run->model, run->size);
        bits = bits * 1103515245u + 12345u;
        int flips = 1 + (int)((bits >> 16) % 4);
        for (int i = 0; i < flips; i++) {
            bits = bits * 1103515245u + 12345u;
            size_t at = ((size_t)bits >> 4) % run->size;
            copy[at] ^= (uint8_t)(1u << (bits & 7));
        }
        siglip_tokenizer *t = NULL;
        glimpse_status status = siglip_tokenizer_create(copy, run->size, LENGTH, &t);
        if (status) { /* UNSUPPORTED: a flip in "</s>" */
            assert_true(status == GLIMPSE_STATUS_BAD_FORMAT || status == GLIMPSE_STATUS_UNSUPPORTED);
            run->refused++;
            continue;
        }
        int32_t ids[LENGTH];
        size_t count;
        const char *text = "A photo of \u0130stanbul, \uff21\uff22\uff23 </s> \u00bd \u3000 x";
        assert_int_equal(siglip_tokenizer_encode(t, text, ids, LENGTH, &count), GLIMPSE_STATUS_OK);
        siglip_tokenizer_free(t);
        run->loaded++;
    }
    free(copy);
}

/* A model whose self-test samples fail (they do once the dummy prefix is off):
 * SentencePiece would print them and refuse; they are not run. */
static void load_with_failing_self_test(void *argument) {
    damage_run *run = argument;
    static const uint8_t self_test[] = {0x22, 0x0c, 0x0a, 0x0a, 0x0a, 0x03, 'a', 'b', 'c', 0x12, 0x03, 'z', 'z', 'z'};
    uint8_t *copy = malloc(run->size + sizeof self_test);
    memcpy(copy, run->model, run->size);
    memcpy(copy + run->size, self_test, sizeof self_test);
    siglip_tokenizer *t = NULL;
    assert_int_equal(siglip_tokenizer_create(copy, run->size + sizeof self_test, LENGTH, &t), GLIMPSE_STATUS_OK);
    siglip_tokenizer_free(t);
    assert_int_equal(siglip_tokenizer_create((const uint8_t *)"garbage", 7, LENGTH, &t), GLIMPSE_STATUS_BAD_FORMAT);
    assert_int_equal(siglip_tokenizer_create(copy, 0, LENGTH, &t), GLIMPSE_STATUS_BAD_FORMAT);
    free(copy);
}

static void test_broken_models_are_refused_silently(void **state) {
    fixture *f = *state;
    if (!f->tokenizer) skip();
    damage_run run = {0};
    uint8_t *model = fixture_model(&run.size);
    run.model = model;
    assert_int_equal(stderr_bytes(load_damaged_models, &run), 0);
    assert_true(run.loaded > 0 && run.refused > 0);
    assert_int_equal(stderr_bytes(load_with_failing_self_test, &run), 0);
    free(model);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_texts),
        cmocka_unit_test(test_fixture_tokenizer_cases),
        cmocka_unit_test(test_fixture_special_cases),
        cmocka_unit_test(test_lowercase_special_cases),
        cmocka_unit_test(test_characters_match_python),
        cmocka_unit_test(test_whitespace_and_punctuation),
        cmocka_unit_test(test_special_tokens),
        cmocka_unit_test(test_truncation),
        cmocka_unit_test(test_invalid_utf8),
        cmocka_unit_test(test_files),
        cmocka_unit_test(test_broken_models_are_refused_silently),
    };
    return cmocka_run_group_tests_name("siglip tokenizer", tests, setup, teardown);
}
