/* walk.c — finding the image files under the paths given to
 * glimpse_index_update, and hashing their contents. */
#define _GNU_SOURCE /* realpath, strcasecmp */
#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "core/error.h"
#include "core/file.h"
#include "search/index.h"

/* Folders deeper than this below a path given are not walked: deeper than
 * any photo library, it guards against odd mounts. */
#define WALK_MAX_DEPTH 64

/* Whether the name ends in an extension of an image we decode (case-insensitive). */
static bool is_image_name(const char *name) {
    static const char *extensions[] = {".jpg", ".jpeg", ".jpe", ".png", ".webp", ".tif", ".tiff", ".heic", ".heif",
                                       ".avif", ".bmp", ".gif", ".tga", ".ppm", ".pgm", ".pnm"};
    const char *dot = strrchr(name, '.');
    if (!dot) return false;
    for (size_t i = 0; i < sizeof extensions / sizeof extensions[0]; i++)
        if (strcasecmp(dot, extensions[i]) == 0) return true;
    return false;
}

static glimpse_status add(file_list *list, const char *path, const struct stat *info) {
    if (list->count == list->capacity) {
        size_t capacity = list->capacity ? list->capacity * 2 : 256;
        found_file *grown = realloc(list->items, capacity * sizeof *grown);
        if (!grown) return ERROR_OOM();
        list->items = grown;
        list->capacity = capacity;
    }
    char *copy = strdup(path);
    if (!copy) return ERROR_OOM();
    list->items[list->count++] = (found_file){copy, (int64_t)info->st_size,
                                              (int64_t)info->st_mtim.tv_sec * 1000000000 + info->st_mtim.tv_nsec};
    return GLIMPSE_STATUS_OK;
}

static glimpse_status walk_folder(const char *folder, file_list *list, int depth) {
    if (depth > WALK_MAX_DEPTH) return GLIMPSE_STATUS_OK;
    DIR *dir = opendir(folder);
    if (!dir) return GLIMPSE_STATUS_OK; /* unreadable folders are skipped like unreadable files */
    glimpse_status status = GLIMPSE_STATUS_OK;
    struct dirent *entry;
    while (!status && (entry = readdir(dir))) {
        if (strcmp(entry->d_name, ".") == 0 || strcmp(entry->d_name, "..") == 0) continue;
        char *path = file_join(folder, entry->d_name);
        if (!path) {
            status = ERROR_OOM();
            break;
        }
        struct stat info;
        if (lstat(path, &info) == 0) {
            if (S_ISDIR(info.st_mode)) {
                status = walk_folder(path, list, depth + 1);
            } else if (is_image_name(entry->d_name)) {
                /* a link to a file counts as that file; links to folders are not followed */
                if (S_ISLNK(info.st_mode) && stat(path, &info) != 0) info.st_mode = 0;
                if (S_ISREG(info.st_mode)) status = add(list, path, &info);
            }
        }
        free(path);
    }
    closedir(dir);
    return status;
}

static int compare_paths(const void *a, const void *b) {
    return strcmp(((const found_file *)a)->path, ((const found_file *)b)->path);
}

glimpse_status walk_paths(const char *const *paths, size_t count, file_list *out) {
    memset(out, 0, sizeof *out);
    glimpse_status status = GLIMPSE_STATUS_OK;
    for (size_t i = 0; i < count && !status; i++) {
        char *absolute = realpath(paths[i], NULL);
        if (!absolute) {
            status = error_set(GLIMPSE_STATUS_NOT_FOUND, "%s: %s", paths[i], strerror(errno));
            break;
        }
        struct stat info;
        if (stat(absolute, &info) != 0)
            status = error_set(GLIMPSE_STATUS_IO, "%s: %s", paths[i], strerror(errno));
        else if (S_ISDIR(info.st_mode))
            status = walk_folder(absolute, out, 0);
        else
            status = add(out, absolute, &info); /* named explicitly: taken whatever its extension */
        free(absolute);
    }
    if (!status && out->count) {
        qsort(out->items, out->count, sizeof *out->items, compare_paths);
        size_t kept = 1;
        for (size_t i = 1; i < out->count; i++) {
            if (strcmp(out->items[i].path, out->items[kept - 1].path) == 0)
                free(out->items[i].path);
            else
                out->items[kept++] = out->items[i];
        }
        out->count = kept;
    }
    if (status) file_list_free(out);
    return status;
}

void file_list_free(file_list *list) {
    for (size_t i = 0; i < list->count; i++) free(list->items[i].path);
    free(list->items);
    memset(list, 0, sizeof *list);
}

uint64_t content_hash(const uint8_t *bytes, size_t size) {
    /* 8 bytes at a time, multiply-xorshift mixing; the length is folded in */
    uint64_t hash = 0x9e3779b97f4a7c15ull ^ (uint64_t)size;
    size_t i = 0;
    for (; i + 8 <= size; i += 8) {
        uint64_t word;
        memcpy(&word, bytes + i, 8);
        word *= 0xbf58476d1ce4e5b9ull;
        word ^= word >> 31;
        hash = (hash ^ word) * 0x94d049bb133111ebull;
        hash ^= hash >> 29;
    }
    uint64_t tail = 0;
    for (; i < size; i++) tail = (tail << 8) | bytes[i];
    hash = (hash ^ (tail * 0xbf58476d1ce4e5b9ull)) * 0x94d049bb133111ebull;
    return hash ^ (hash >> 32);
}
