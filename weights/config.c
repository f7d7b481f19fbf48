/* config.c — the files of a snapshot read whole, and typed access to JSON
 * configuration with clear errors. */
#include "weights/config.h"

#include <math.h>
#include <stdlib.h>

#include "core/error.h"
#include "core/file.h"

#define CONFIG_MAX_BYTES (64u * 1024u * 1024u)

glimpse_status config_read_file(const char *folder, const char *name, size_t max_bytes, int optional,
                                uint8_t **bytes, size_t *size) {
    *bytes = NULL;
    *size = 0;
    char *path = file_join(folder, name);
    if (!path) return ERROR_OOM();
    glimpse_status status = GLIMPSE_STATUS_OK;
    if (!optional || file_is_regular(path)) status = file_read_all(path, max_bytes, bytes, size);
    free(path);
    return status;
}

glimpse_status config_read_json(const char *folder, const char *name, cJSON **out) {
    *out = NULL;
    char *path = file_join(folder, name);
    if (!path) return ERROR_OOM();
    uint8_t *text;
    size_t size;
    glimpse_status status = file_read_all(path, CONFIG_MAX_BYTES, &text, &size);
    if (status) {
        free(path);
        return status;
    }
    const char *end = NULL;
    cJSON *json = cJSON_ParseWithLengthOpts((const char *)text, size, &end, 0);
    if (!json) {
        size_t at = end && end >= (const char *)text ? (size_t)(end - (const char *)text) : 0;
        status = error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: not valid JSON (near byte %zu)", path, at);
    } else if (!cJSON_IsObject(json)) {
        status = error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: not a JSON object", path);
        cJSON_Delete(json);
        json = NULL;
    }
    free(text);
    free(path);
    *out = json;
    return status;
}

static const cJSON *field(const cJSON *object, const char *key) {
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(object, key);
    return cJSON_IsNull(item) ? NULL : item;
}

static glimpse_status read_int(const cJSON *item, const char *where, const char *key, long minimum, long maximum,
                               int *out) {
    if (!cJSON_IsNumber(item) || item->valuedouble != floor(item->valuedouble))
        return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: \"%s\" is not a whole number", where, key);
    if (item->valuedouble < (double)minimum || item->valuedouble > (double)maximum)
        return error_set(GLIMPSE_STATUS_UNSUPPORTED, "%s: \"%s\" = %.0f is outside the supported range %ld..%ld",
                         where, key, item->valuedouble, minimum, maximum);
    *out = (int)item->valuedouble;
    return GLIMPSE_STATUS_OK;
}

glimpse_status config_int(const cJSON *object, const char *where, const char *key, long minimum, long maximum,
                          int *out) {
    const cJSON *item = field(object, key);
    if (!item) return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: missing field \"%s\"", where, key);
    return read_int(item, where, key, minimum, maximum, out);
}

glimpse_status config_int_or(const cJSON *object, const char *where, const char *key, long minimum, long maximum,
                             int fallback, int *out) {
    const cJSON *item = field(object, key);
    if (!item) {
        *out = fallback;
        return GLIMPSE_STATUS_OK;
    }
    return read_int(item, where, key, minimum, maximum, out);
}

glimpse_status config_double_or(const cJSON *object, const char *where, const char *key, double fallback,
                                double *out) {
    const cJSON *item = field(object, key);
    if (!item) {
        *out = fallback;
        return GLIMPSE_STATUS_OK;
    }
    if (!cJSON_IsNumber(item) || !isfinite(item->valuedouble))
        return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: \"%s\" is not a number", where, key);
    *out = item->valuedouble;
    return GLIMPSE_STATUS_OK;
}

glimpse_status config_string_or(const cJSON *object, const char *where, const char *key, const char *fallback,
                                const char **out) {
    const cJSON *item = field(object, key);
    if (!item) {
        *out = fallback;
        return GLIMPSE_STATUS_OK;
    }
    if (!cJSON_IsString(item)) return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: \"%s\" is not a string", where, key);
    *out = item->valuestring;
    return GLIMPSE_STATUS_OK;
}

glimpse_status config_bool_or(const cJSON *object, const char *where, const char *key, int fallback, int *out) {
    const cJSON *item = field(object, key);
    *out = fallback;
    if (!item) return GLIMPSE_STATUS_OK;
    if (!cJSON_IsBool(item))
        return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: \"%s\" must be true or false", where, key);
    *out = cJSON_IsTrue(item);
    return GLIMPSE_STATUS_OK;
}

glimpse_status config_doubles(const cJSON *object, const char *where, const char *key, int count, double *out) {
    const cJSON *item = field(object, key);
    if (!cJSON_IsArray(item) || cJSON_GetArraySize(item) != count)
        return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: \"%s\" must be a list of %d numbers", where, key, count);
    for (int i = 0; i < count; i++) {
        const cJSON *value = cJSON_GetArrayItem(item, i);
        if (!cJSON_IsNumber(value) || !isfinite(value->valuedouble))
            return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: \"%s\" must be a list of %d numbers", where, key, count);
        out[i] = value->valuedouble;
    }
    return GLIMPSE_STATUS_OK;
}

glimpse_status config_read_json_optional(const char *folder, const char *name, cJSON **out) {
    *out = NULL;
    char *path = file_join(folder, name);
    if (!path) return ERROR_OOM();
    int present = file_is_regular(path);
    free(path);
    return present ? config_read_json(folder, name, out) : GLIMPSE_STATUS_OK;
}
