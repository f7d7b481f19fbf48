/* config.h — reading the JSON files of a snapshot (config.json,
 * preprocessor_config.json, tokenizer files) with cJSON, and typed field
 * access whose errors name the file and the field. */
#ifndef GLIMPSE_WEIGHTS_CONFIG_H
#define GLIMPSE_WEIGHTS_CONFIG_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "glimpse.h"

/* Bounds of the sizes a config may give: far above any published
 * checkpoint, low enough that the buffers they size stay addressable. */
#define CONFIG_MAX_WIDTH 8192               /* hidden_size, encoder_hidden_size */
#define CONFIG_MAX_LAYERS 1024              /* num_hidden_layers */
#define CONFIG_MAX_HEADS 1024               /* num_attention_heads */
#define CONFIG_MAX_INTERMEDIATE (1 << 20)   /* intermediate_size */
#define CONFIG_MAX_POSITIONS (1 << 16)      /* max_position_embeddings */
#define CONFIG_MAX_VOCABULARY (1 << 24)     /* vocab_size, and so token ids */
#define CONFIG_MAX_IMAGE_SIZE (1 << 14)     /* image_size, patch_size */
#define CONFIG_MAX_PROJECTION (1 << 16)     /* projection_dim, image_text_hidden_size */

/* Reads folder/name whole into a new buffer (NUL after the data, so text
 * parses in place), refusing a file over max_bytes. With `optional`, a file
 * that is not there leaves *bytes NULL and succeeds. Caller frees *bytes. */
glimpse_status config_read_file(const char *folder, const char *name, size_t max_bytes, int optional,
                                uint8_t **bytes, size_t *size);

/* Parses folder/name. Caller frees with cJSON_Delete. */
glimpse_status config_read_json(const char *folder, const char *name, cJSON **out);
/* The same for a file a snapshot may lack: *out NULL (and success) when it is not there. */
glimpse_status config_read_json_optional(const char *folder, const char *name, cJSON **out);

/* A required whole number in [minimum, maximum]. `where` names the file and
 * section for messages, e.g. "config.json: vision_config". */
glimpse_status config_int(const cJSON *object, const char *where, const char *key, long minimum, long maximum,
                          int *out);
/* The same, but a missing or null field gives fallback. */
glimpse_status config_int_or(const cJSON *object, const char *where, const char *key, long minimum, long maximum,
                             int fallback, int *out);
glimpse_status config_double_or(const cJSON *object, const char *where, const char *key, double fallback,
                                double *out);
/* A string field, or fallback when missing/null; the result is borrowed from
 * object (or is fallback). */
glimpse_status config_string_or(const cJSON *object, const char *where, const char *key, const char *fallback,
                                const char **out);
/* A boolean field (1 or 0), or fallback when missing/null. */
glimpse_status config_bool_or(const cJSON *object, const char *where, const char *key, int fallback, int *out);
/* An array of exactly `count` numbers. */
glimpse_status config_doubles(const cJSON *object, const char *where, const char *key, int count, double *out);

#endif
