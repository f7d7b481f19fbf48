/* strmap.c — FNV-1a hashed, linearly probed, power-of-two table. */
#include "core/strmap.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"

typedef struct slot {
    const char *key; /* NULL = empty */
    uint32_t length;
    uint32_t hash;
    int32_t value;
} slot;

typedef struct chunk {
    struct chunk *next;
    size_t used, capacity;
    char bytes[];
} chunk;

struct strmap {
    slot *slots;
    size_t capacity, count;
    chunk *keys;
};

static uint32_t hash_bytes(const char *key, size_t length) {
    uint32_t hash = 2166136261u;
    for (size_t i = 0; i < length; i++) hash = (hash ^ (uint8_t)key[i]) * 16777619u;
    return hash;
}

glimpse_status strmap_create(size_t expected, strmap **out) {
    *out = NULL;
    strmap *map = calloc(1, sizeof *map);
    if (!map) return ERROR_OOM();
    size_t capacity = 16;
    while (capacity < expected * 2) capacity *= 2;
    map->slots = calloc(capacity, sizeof *map->slots);
    if (!map->slots) {
        free(map);
        return ERROR_OOM();
    }
    map->capacity = capacity;
    *out = map;
    return GLIMPSE_STATUS_OK;
}

void strmap_free(strmap *map) {
    if (!map) return;
    for (chunk *c = map->keys; c;) {
        chunk *next = c->next;
        free(c);
        c = next;
    }
    free(map->slots);
    free(map);
}

static slot *find_slot(slot *slots, size_t capacity, const char *key, size_t length, uint32_t hash) {
    size_t i = hash & (capacity - 1);
    for (;;) {
        slot *s = &slots[i];
        if (!s->key || (s->hash == hash && s->length == length && memcmp(s->key, key, length) == 0)) return s;
        i = (i + 1) & (capacity - 1);
    }
}

static glimpse_status grow(strmap *map) {
    size_t capacity = map->capacity * 2;
    slot *slots = calloc(capacity, sizeof *slots);
    if (!slots) return ERROR_OOM();
    for (size_t i = 0; i < map->capacity; i++)
        if (map->slots[i].key) *find_slot(slots, capacity, map->slots[i].key, map->slots[i].length, map->slots[i].hash) = map->slots[i];
    free(map->slots);
    map->slots = slots;
    map->capacity = capacity;
    return GLIMPSE_STATUS_OK;
}

static const char *store_key(strmap *map, const char *key, size_t length) {
    if (!map->keys || map->keys->capacity - map->keys->used < length + 1) {
        size_t capacity = length + 1 > 65536 ? length + 1 : 65536;
        chunk *c = malloc(sizeof *c + capacity);
        if (!c) return NULL;
        c->next = map->keys;
        c->used = 0;
        c->capacity = capacity;
        map->keys = c;
    }
    char *copy = map->keys->bytes + map->keys->used;
    memcpy(copy, key, length);
    copy[length] = '\0';
    map->keys->used += length + 1;
    return copy;
}

glimpse_status strmap_put(strmap *map, const char *key, size_t length, int32_t value) {
    if (length > UINT32_MAX) return error_set(GLIMPSE_STATUS_TOO_LARGE, "key too long");
    if ((map->count + 1) * 2 > map->capacity) {
        glimpse_status status = grow(map);
        if (status) return status;
    }
    uint32_t hash = hash_bytes(key, length);
    slot *s = find_slot(map->slots, map->capacity, key, length, hash);
    if (!s->key) {
        const char *copy = store_key(map, key, length);
        if (!copy) return ERROR_OOM();
        s->key = copy;
        s->length = (uint32_t)length;
        s->hash = hash;
        map->count++;
    }
    s->value = value;
    return GLIMPSE_STATUS_OK;
}

int strmap_get(const strmap *map, const char *key, size_t length, int32_t *value) {
    slot *s = find_slot(map->slots, map->capacity, key, length, hash_bytes(key, length));
    if (!s->key) return 0;
    *value = s->value;
    return 1;
}

size_t strmap_count(const strmap *map) { return map->count; }
