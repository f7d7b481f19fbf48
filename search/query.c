/* query.c — combined search queries: "beach + sunset - people",
 * "2:sunset + beach", "@photos/dog.jpg + snow" (a part starting with @ names
 * an image file, embedded as an image; "@@" starts a text with @). The
 * query's embedding is the weighted sum of its parts' normalised
 * embeddings, normalised again. */
#include <ctype.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "api/identity.h"
#include "core/error.h"
#include "core/file.h"
#include "core/kernels.h"
#include "search/walk.h"

typedef struct query_part {
    char *text;    /* trimmed, without the @ of an image part */
    float weight;  /* signed */
    bool is_image; /* written @PATH */
} query_part;

static char *trim(char *text) {
    while (isspace((unsigned char)*text)) text++;
    char *end = text + strlen(text);
    while (end > text && isspace((unsigned char)end[-1])) *--end = '\0';
    return text;
}

/* Splits query into parts; returns how many (at most capacity), or -1 if a part is empty. */
static int parse(char *query, query_part *parts, int capacity) {
    int count = 0;
    float sign = 1.0f;
    char *start = query;
    for (char *p = query;; p++) {
        bool end = *p == '\0';
        bool plus = !end && p[0] == ' ' && p[1] == '+' && p[2] == ' ';
        bool minus = !end && p[0] == ' ' && p[1] == '-' && p[2] == ' ';
        if (!end && !plus && !minus) continue;
        *p = '\0';
        char *text = trim(start);
        if (!*text || count == capacity) return -1;
        float weight = 1.0f;
        char *colon = strchr(text, ':');
        if (colon && colon > text) { /* "2:sunset": a leading number and a colon */
            char *number_end;
            float value = strtof(text, &number_end);
            if (number_end == colon && value == value) {
                weight = value;
                text = trim(colon + 1);
                if (!*text) return -1;
            }
        }
        bool is_image = text[0] == '@' && text[1] != '@';
        if (text[0] == '@') text++; /* "@path" names an image, "@@word" is the text "@word" */
        if (!*text) return -1;
        parts[count++] = (query_part){.text = text, .weight = sign * weight, .is_image = is_image};
        if (end) break;
        sign = plus ? 1.0f : -1.0f;
        p += 2;
        start = p + 1;
    }
    return count;
}

#define QUERY_MAX_PARTS 32

bool glimpse_query_needs_images(const char *query) {
    if (!query) return false;
    char *copy = strdup(query);
    if (!copy) return false;
    query_part parts[QUERY_MAX_PARTS];
    int count = parse(copy, parts, QUERY_MAX_PARTS);
    bool images = false;
    for (int i = 0; i < count; i++) images |= parts[i].is_image;
    free(copy);
    return images;
}

/* The image part's path with a leading ~ expanded to $HOME; caller frees. */
static char *expand_home(const char *path) {
    const char *home = getenv("HOME");
    if (path[0] != '~' || (path[1] != '/' && path[1] != '\0') || !home) return strdup(path);
    char *expanded = malloc(strlen(home) + strlen(path));
    if (expanded) strcpy(expanded, home), strcat(expanded, path + 1);
    return expanded;
}

/* Embeds one part into part: an image file (which must exist) or a text
 * (which must not look like a file name: that is most likely an image part
 * written without its @). */
static glimpse_status embed_part(glimpse_context *ctx, const char *query, const query_part *p, float *part) {
    if (!p->is_image) {
        if (!strpbrk(p->text, " \t") && path_has_image_extension(p->text))
            return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT,
                             "query \"%s\": the part \"%s\" looks like a file name; write @%s to search by that "
                             "image (or add a word to search by the text)",
                             query, p->text, p->text);
        const char *text = p->text;
        return glimpse_embed_texts(ctx, &text, 1, part);
    }
    char *path = expand_home(p->text);
    if (!path) return ERROR_OOM();
    glimpse_status status = GLIMPSE_STATUS_OK;
    glimpse_image *image = NULL;
    if (!file_is_regular(path))
        status = error_set(GLIMPSE_STATUS_NOT_FOUND, "query \"%s\": no image file %s", query, path);
    if (!status) status = glimpse_image_load_file(path, NULL, &image);
    if (!status) status = glimpse_embed_images(ctx, &image, 1, part);
    glimpse_image_free(image);
    free(path);
    return status;
}

glimpse_status glimpse_embed_query(glimpse_context *ctx, const char *query, float *out) {
    if (!ctx || !query || !out) return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_embed_query: NULL argument");
    size_t dim = glimpse_model_embedding_dim(context_model(ctx));
    if (!dim) return error_set(GLIMPSE_STATUS_WRONG_MODEL, "queries need a CLIP or SigLIP model");
    char *copy = strdup(query);
    float *part = malloc(dim * sizeof(float));
    if (!copy || !part) {
        free(copy), free(part);
        return ERROR_OOM();
    }
    query_part parts[QUERY_MAX_PARTS];
    int count = parse(copy, parts, QUERY_MAX_PARTS);
    glimpse_status status = GLIMPSE_STATUS_OK;
    if (count <= 0)
        status = error_set(GLIMPSE_STATUS_INVALID_ARGUMENT,
                           "query \"%s\": empty part or more than %d parts (parts are joined by \" + \" and \" - \")",
                           query, QUERY_MAX_PARTS);
    memset(out, 0, dim * sizeof(float));
    for (int i = 0; i < count && !status; i++) {
        status = embed_part(ctx, query, &parts[i], part);
        for (size_t d = 0; d < dim && !status; d++) out[d] += parts[i].weight * part[d];
    }
    if (!status) {
        double norm = 0;
        for (size_t d = 0; d < dim; d++) norm += (double)out[d] * out[d];
        if (norm < 1e-12)
            status = error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "query \"%s\" cancels itself out", query);
        else
            kernel_l2_normalize(out, dim);
    }
    free(copy), free(part);
    return status;
}
