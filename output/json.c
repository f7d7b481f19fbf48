/* json.c — JSON text written to a FILE, the same for the CLI's --json lines and glimpse serve's replies:
 * strings escaped (bytes that are not UTF-8 become U+FFFD), file names with their raw bytes beside them,
 * floats that round-trip, and base64. Writes only; parsing JSON is cJSON's. */
#include "output/json.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The length of the valid UTF-8 sequence at s (its first byte 0x80 or above), or 0 where it is not one
 * (a stray continuation byte, an overlong form, a surrogate, past U+10FFFF, or cut short). */
static int utf8_sequence(const unsigned char *s) {
    unsigned char c = *s;
    int length = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xc2 && c <= 0xdf ? 2 : 0;
    for (int i = 1; i < length; i++)
        if ((s[i] & 0xc0) != 0x80) return 0;
    if (length == 3 && ((c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] >= 0xa0))) return 0;
    if (length == 4 && ((c == 0xf0 && s[1] < 0x90) || (c == 0xf4 && s[1] >= 0x90))) return 0;
    return length;
}

bool json_utf8_valid(const char *text) {
    for (const unsigned char *s = (const unsigned char *)text; *s;) {
        int length = *s < 0x80 ? 1 : utf8_sequence(s);
        if (!length) return false;
        s += length;
    }
    return true;
}

char *json_utf8_repaired(const char *text) {
    size_t size = strlen(text);
    char *out = malloc(3 * size + 1); /* each byte at most U+FFFD's three */
    if (!out) return NULL;
    char *end = out;
    for (const unsigned char *s = (const unsigned char *)text; *s;) {
        int length = *s < 0x80 ? 1 : utf8_sequence(s);
        if (length) {
            memcpy(end, s, (size_t)length), end += length, s += length;
        } else {
            memcpy(end, "\xef\xbf\xbd", 3), end += 3, s++;
        }
    }
    *end = 0;
    return out;
}

bool json_string(FILE *out, const char *text) {
    const unsigned char *s = (const unsigned char *)text;
    bool all_valid = true;
    fputc('"', out);
    while (*s) {
        unsigned char c = *s;
        if (c == '"' || c == '\\') {
            fputc('\\', out);
            fputc(c, out);
            s++;
        } else if (c < 0x20) {
            switch (c) {
            case '\n': fputs("\\n", out); break;
            case '\r': fputs("\\r", out); break;
            case '\t': fputs("\\t", out); break;
            default: fprintf(out, "\\u%04x", c);
            }
            s++;
        } else if (c < 0x80) {
            fputc(c, out);
            s++;
        } else {
            /* copy a valid UTF-8 sequence, else write U+FFFD for the byte */
            int length = utf8_sequence(s);
            if (length) {
                fwrite(s, 1, (size_t)length, out);
                s += length;
            } else {
                fputs("\\ufffd", out);
                s++;
                all_valid = false;
            }
        }
    }
    fputc('"', out);
    return all_valid;
}

void json_path(FILE *out, const char *path) {
    if (json_string(out, path)) return;
    fputs(", \"path_bytes\": [", out);
    for (const unsigned char *c = (const unsigned char *)path; *c; c++) fprintf(out, c[1] ? "%u, " : "%u", *c);
    fputc(']', out);
}

void json_float(FILE *out, float value) {
    if (isfinite(value))
        fprintf(out, "%.9g", value);
    else
        fputs("null", out);
}

void json_floats(FILE *out, const float *values, size_t count) {
    fputc('[', out);
    for (size_t i = 0; i < count; i++) {
        if (i) fputs(", ", out);
        json_float(out, values[i]);
    }
    fputc(']', out);
}

void json_base64(FILE *out, const uint8_t *bytes, size_t size) {
    static const char digits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (size_t i = 0; i < size; i += 3) {
        uint32_t group = (uint32_t)bytes[i] << 16 | (i + 1 < size ? (uint32_t)bytes[i + 1] << 8 : 0) |
                         (i + 2 < size ? bytes[i + 2] : 0);
        fputc(digits[group >> 18 & 63], out);
        fputc(digits[group >> 12 & 63], out);
        fputc(i + 1 < size ? digits[group >> 6 & 63] : '=', out);
        fputc(i + 2 < size ? digits[group & 63] : '=', out);
    }
}

char *json_text_trimmed(char *text) {
    size_t start = strspn(text, " \t\n\r"), length = strlen(text + start);
    while (length && strchr(" \t\n\r", text[start + length - 1])) length--;
    memmove(text, text + start, length);
    text[length] = '\0';
    return text;
}

bool json_has_nul_escape(const char *text, size_t size) {
    for (size_t i = 0; i + 1 < size; i++) {
        if (text[i] != '\\') continue;
        if (text[i + 1] == 'u' && i + 5 < size && memcmp(text + i + 2, "0000", 4) == 0) return true;
        i++; /* the escaped character: an escaped backslash escapes nothing after it */
    }
    return false;
}
