/* walk.c — finding the image files under the paths given to
 * glimpse_index_update, and hashing their contents. */
#define _GNU_SOURCE /* realpath, strcasecmp */
#include <dirent.h>
#include <errno.h>
#include <fnmatch.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "core/error.h"
#include "core/file.h"
#include "search/walk.h"
#include "vision/image.h"

/* Folders deeper than this below a path given are not walked: deeper than
 * any photo library, it guards against odd mounts. */
#define WALK_MAX_DEPTH 64

/* Whether name's extension (from its last dot) is one of extensions, in any case. */
static bool ends_in_one_of(const char *name, const char *const *extensions, size_t count) {
    const char *dot = strrchr(name, '.');
    if (!dot) return false;
    for (size_t i = 0; i < count; i++)
        if (strcasecmp(dot, extensions[i]) == 0) return true;
    return false;
}

bool path_has_image_extension(const char *name) {
    /* the decoders go by the bytes, not the name: every name JPEG, HEIF and
     * the rest are saved under (.jfif from browsers, .hif from cameras) */
    static const char *extensions[] = {".jpg", ".jpeg", ".jpe",  ".jfif", ".jif", ".jfi",  ".pjpeg", ".pjp",
                                       ".png", ".webp", ".tif",  ".tiff", ".heic", ".heif", ".hif",   ".avif",
                                       ".bmp", ".gif",  ".tga",  ".ppm",  ".pgm",  ".pnm"};
    return ends_in_one_of(name, extensions, sizeof extensions / sizeof extensions[0]);
}

bool path_has_video_extension(const char *name) {
    /* the containers video_probe takes (vision/video_reader.c), under the names phones, cameras and the web give them */
    static const char *extensions[] = {".mp4", ".m4v", ".mov", ".qt",  ".3gp", ".3g2", ".mkv", ".webm", ".avi",
                                       ".mts", ".m2ts", ".ts", ".mpg", ".mpeg", ".vob", ".flv", ".wmv", ".asf",
                                       ".ogv", ".ogg"};
    return ends_in_one_of(name, extensions, sizeof extensions / sizeof extensions[0]);
}

/* Room for one more item of item_size bytes in *items (count of *capacity used). */
static glimpse_status make_room(void **items, size_t count, size_t *capacity, size_t item_size) {
    if (count < *capacity) return GLIMPSE_STATUS_OK;
    size_t grown_capacity = *capacity ? *capacity * 2 : 64;
    void *grown = realloc(*items, grown_capacity * item_size);
    if (!grown) return ERROR_OOM();
    *items = grown;
    *capacity = grown_capacity;
    return GLIMPSE_STATUS_OK;
}

static glimpse_status add(file_list *list, const char *path, const struct stat *info) {
    if (make_room((void **)&list->items, list->count, &list->capacity, sizeof *list->items)) return ERROR_OOM();
    char *copy = strdup(path);
    if (!copy) return ERROR_OOM();
    list->items[list->count++] = (found_file){copy, (int64_t)info->st_size,
                                              (int64_t)info->st_mtim.tv_sec * 1000000000 + info->st_mtim.tv_nsec};
    return GLIMPSE_STATUS_OK;
}

/* Adds a root (reason NULL: judged) or a path that could not be walked. */
static glimpse_status add_root(root_list *list, const char *path, bool folder, glimpse_status status,
                               const char *reason) {
    if (make_room((void **)&list->items, list->count, &list->capacity, sizeof *list->items)) return ERROR_OOM();
    walked_root root = {.path = strdup(path), .reason = reason ? strdup(reason) : NULL, .status = status,
                        .folder = folder};
    if (!root.path || (reason && !root.reason)) {
        free(root.path), free(root.reason);
        return ERROR_OOM();
    }
    list->items[list->count++] = root;
    return GLIMPSE_STATUS_OK;
}

/* Whether an --exclude pattern takes the file or folder named name at path:
 * a pattern without a slash matches names ("*.gif", ".thumbnails"), one
 * with a slash the whole absolute path (/photos/tmp/ and a star: the star crosses slashes). */
static bool excluded_name(const walk_result *walk, const char *name, const char *path) {
    for (size_t i = 0; i < walk->exclude_count; i++) {
        const char *pattern = walk->exclude[i];
        if (fnmatch(pattern, strchr(pattern, '/') ? path : name, 0) == 0) return true;
    }
    return false;
}

bool walk_excludes(const walk_result *walk, const char *path) {
    if (!walk->exclude_count) return false;
    char *prefix = strdup(path);
    if (!prefix) return false; /* out of memory: kept */
    bool excluded = false;
    for (char *slash = strrchr(prefix, '/'); slash && !excluded; slash = strrchr(prefix, '/')) {
        excluded = excluded_name(walk, slash + 1, prefix);
        *slash = '\0';
    }
    free(prefix);
    return excluded;
}

static glimpse_status walk_folder(const char *folder, walk_result *out, int depth) {
    if (depth > WALK_MAX_DEPTH)
        return add_root(&out->skipped, folder, true, GLIMPSE_STATUS_TOO_LARGE, "more than 64 folders deep");
    DIR *dir = opendir(folder);
    if (!dir) return add_root(&out->skipped, folder, true, GLIMPSE_STATUS_IO, strerror(errno));
    file_list *list = &out->files;
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
        if (!walk_excludes(out, path) && lstat(path, &info) == 0) {
            if (S_ISDIR(info.st_mode)) {
                status = walk_folder(path, out, depth + 1);
            } else if (path_has_image_extension(entry->d_name) ||
                       (out->videos && path_has_video_extension(entry->d_name))) {
                /* a link to a file counts as that file; links to folders are not followed. A picture's name
                 * that is not a readable file (a FIFO, a device, a link to nothing or a loop of links) is
                 * reported, not read (a FIFO would block) and not silently passed over */
                bool link = S_ISLNK(info.st_mode);
                if (link && stat(path, &info) != 0)
                    status = add_root(&out->skipped, path, false, GLIMPSE_STATUS_IO,
                                      errno == ENOENT ? "a link to nothing" : strerror(errno));
                else if (S_ISREG(info.st_mode))
                    status = add(list, path, &info);
                else if (!S_ISDIR(info.st_mode))
                    status = add_root(&out->skipped, path, false, GLIMPSE_STATUS_IO,
                                      "not a regular file (a FIFO, socket or device)");
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

/* Walks one path given: a folder recursively, a file as it is. */
static glimpse_status walk_root(const char *given, walk_result *out) {
    char *absolute = realpath(given, NULL);
    struct stat info;
    if (!absolute || stat(absolute, &info) != 0) {
        glimpse_status missing = errno == ENOENT || errno == ENOTDIR ? GLIMPSE_STATUS_NOT_FOUND : GLIMPSE_STATUS_IO;
        glimpse_status status = add_root(&out->skipped, absolute ? absolute : given, false, missing, strerror(errno));
        free(absolute);
        return status;
    }
    glimpse_status status;
    if (S_ISDIR(info.st_mode)) {
        size_t skipped = out->skipped.count;
        status = walk_folder(absolute, out, 0);
        /* a root folder that could not be opened is not judged */
        bool opened = out->skipped.count == skipped || strcmp(out->skipped.items[skipped].path, absolute) != 0;
        if (!status && opened) status = add_root(&out->judged, absolute, true, GLIMPSE_STATUS_OK, NULL);
    } else {
        status = add(&out->files, absolute, &info); /* named explicitly: taken whatever its extension */
        if (!status) status = add_root(&out->judged, absolute, false, GLIMPSE_STATUS_OK, NULL);
    }
    free(absolute);
    return status;
}

glimpse_status walk_paths(const char *const *paths, size_t count, const char *const *exclude, size_t exclude_count,
                          bool videos, walk_result *out) {
    memset(out, 0, sizeof *out);
    out->exclude = exclude, out->exclude_count = exclude_count;
    out->videos = videos;
    glimpse_status status = GLIMPSE_STATUS_OK;
    for (size_t i = 0; i < count && !status; i++) status = walk_root(paths[i], out);
    file_list *files = &out->files;
    if (!status && files->count) {
        qsort(files->items, files->count, sizeof *files->items, compare_paths);
        size_t kept = 1;
        for (size_t i = 1; i < files->count; i++) {
            if (strcmp(files->items[i].path, files->items[kept - 1].path) == 0)
                free(files->items[i].path);
            else
                files->items[kept++] = files->items[i];
        }
        files->count = kept;
    }
    if (status) walk_result_free(out);
    return status;
}

static void root_list_free(root_list *list) {
    for (size_t i = 0; i < list->count; i++) free(list->items[i].path), free(list->items[i].reason);
    free(list->items);
}

void walk_result_free(walk_result *result) {
    for (size_t i = 0; i < result->files.count; i++) free(result->files.items[i].path);
    free(result->files.items);
    root_list_free(&result->judged);
    root_list_free(&result->skipped);
    memset(result, 0, sizeof *result);
}

/* Whether path is root itself or, root being a folder, lies below it. */
static bool is_under(const char *path, const char *root, bool folder) {
    size_t length = strlen(root);
    if (strncmp(path, root, length) != 0) return false;
    if (path[length] == '\0') return true;
    return folder && (path[length] == '/' || (length && root[length - 1] == '/'));
}

bool walk_judges(const walk_result *walk, const char *path) {
    bool judged = false;
    for (size_t i = 0; i < walk->judged.count && !judged; i++)
        judged = is_under(path, walk->judged.items[i].path, walk->judged.items[i].folder);
    for (size_t i = 0; i < walk->skipped.count && judged; i++)
        judged = !is_under(path, walk->skipped.items[i].path, true);
    return judged;
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

glimpse_status walk_folder_files(const char *folder, walk_result *out) {
    memset(out, 0, sizeof *out);
    glimpse_status status = walk_folder(folder, out, 0);
    if (status) {
        walk_result_free(out);
        return status;
    }
    if (out->files.count) qsort(out->files.items, out->files.count, sizeof *out->files.items, compare_paths);
    return GLIMPSE_STATUS_OK;
}

bool index_hash_file(const char *path, int64_t *hash) {
    uint8_t *bytes;
    size_t size;
    if (file_read_all(path, IMAGE_FILE_MAX_BYTES, &bytes, &size) != GLIMPSE_STATUS_OK) return false;
    *hash = (int64_t)content_hash(bytes, size);
    free(bytes);
    return true;
}
