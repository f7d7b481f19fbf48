/* clean_up.c — the ten replacements of tokenization_utils_base.py's
 * clean_up_tokenization, on bytes (all are ASCII, so UTF-8 is safe). */
#include "text/clean_up.h"

#include <string.h>

/* Python's text.replace(from, to) for a `to` no longer than `from`. */
static size_t replace_all(char *text, size_t length, const char *from, const char *to) {
    size_t from_length = strlen(from), to_length = strlen(to), read = 0, write = 0;
    while (read < length) {
        if (length - read >= from_length && memcmp(text + read, from, from_length) == 0) {
            memcpy(text + write, to, to_length);
            write += to_length;
            read += from_length;
        } else {
            text[write++] = text[read++];
        }
    }
    return write;
}

size_t clean_up_tokenization(char *text, size_t length) {
    static const char *const replacements[][2] = {
        {" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"},
        {" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"},
    };
    for (size_t i = 0; i < sizeof replacements / sizeof replacements[0]; i++)
        length = replace_all(text, length, replacements[i][0], replacements[i][1]);
    text[length] = '\0';
    return length;
}
