/* clean_up.h — transformers' clean_up_tokenization, which decode applies by
 * default (clean_up_tokenization_spaces=True): a space before . ? ! , and
 * before n't 'm 's 've 're is dropped, and " ' " becomes "'". Shared by the
 * tokenizers whose decode does it; nothing else here. */
#ifndef GLIMPSE_TEXT_CLEAN_UP_H
#define GLIMPSE_TEXT_CLEAN_UP_H

#include <stddef.h>

/* Rewrites text[0..length) in place (it only shrinks), replacement after
 * replacement in transformers' order, each over the whole text left to right
 * as Python's str.replace; NUL-terminates it and returns its new length. */
size_t clean_up_tokenization(char *text, size_t length);

#endif
