/* strmap.h — an open-addressing hash map from byte strings to int32 values,
 * used for vocabularies and merge ranks. Keys are copied into one arena. */
#ifndef GLIMPSE_CORE_STRMAP_H
#define GLIMPSE_CORE_STRMAP_H

#include <stddef.h>
#include <stdint.h>

#include "glimpse.h"

typedef struct strmap strmap;

glimpse_status strmap_create(size_t expected, strmap **out);
void strmap_free(strmap *map);

/* Inserts or overwrites key[0..length). */
glimpse_status strmap_put(strmap *map, const char *key, size_t length, int32_t value);
/* 1 and *value if present, else 0. */
int strmap_get(const strmap *map, const char *key, size_t length, int32_t *value);
size_t strmap_count(const strmap *map);

#endif
