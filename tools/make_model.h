/* make_model.h — what the two files of glimpse-make-model share: make_model.c (each family's tensors as its
 * checkpoint names and shapes them, the weights written, the command line) and make_model_files.c (the tokenizer
 * and preprocessor files written beside them, of our own making but in the hub's formats). */
#ifndef GLIMPSE_TOOLS_MAKE_MODEL_H
#define GLIMPSE_TOOLS_MAKE_MODEL_H

#include <cjson/cJSON.h>
#include <stddef.h>

/* Prints the message and exits 1 (a tool, not the library). */
void die(const char *format, ...) __attribute__((noreturn, format(printf, 1, 2)));
/* config[key] as an int, else fallback. */
int get_int(const cJSON *json, const char *key, int fallback);
/* config[key][i] of a list of numbers (dies if absent). */
size_t list_int(const cJSON *json, const char *key, int i);
/* folder/name holding text (dies if it cannot be written). */
void write_text(const char *folder, const char *name, const char *text);
void write_opt_tokenizer(const char *folder);
void write_clip_tokenizer(const char *folder, int vocab_size);
void write_bert_tokenizer(const char *folder, int vocab_size);
void write_siglip_tokenizer(const char *folder);
void write_clip_preprocessor(const char *folder, int image);
void write_llava_files(const char *folder, const cJSON *config);
void write_florence2_files(const char *folder, const cJSON *config);
void write_blip_preprocessor(const char *folder, int image);
void write_gpt2_tokenizer(const char *folder, int vocab_size);

#endif
