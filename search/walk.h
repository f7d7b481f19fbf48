/* walk.h — internal helpers of the search library: walking folders for
 * image files and hashing file contents (walk.c). The index itself is the
 * public glimpse_index (include/glimpse.h), implemented in search/index_*.c
 * on SQLite. */
#ifndef GLIMPSE_SEARCH_WALK_H
#define GLIMPSE_SEARCH_WALK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "glimpse.h"

typedef struct found_file {
    char *path; /* absolute */
    int64_t size, mtime_ns;
} found_file;

typedef struct file_list {
    found_file *items;
    size_t count, capacity;
} file_list;

/* A path given to walk_paths, or a folder under one. */
typedef struct walked_root {
    char *path;   /* absolute (as given when it has no absolute form: it does not exist) */
    char *reason; /* why it could not be walked; NULL for a walked one */
    glimpse_status status;
    bool folder;
} walked_root;

typedef struct root_list {
    walked_root *items;
    size_t count, capacity;
} root_list;

/* What a walk found: the image files, the roots it judged (a stored entry
 * under one of them whose file is gone is really gone) and the paths it
 * could not read (their stored entries must be kept). */
typedef struct walk_result {
    file_list files;
    root_list judged;
    root_list skipped; /* missing roots, unreadable roots and unreadable folders below roots, and pictures' names
                          below roots that are no readable file (FIFOs, devices, dangling links, link loops) */
    const char *const *exclude; /* --exclude patterns (borrowed), see walk_excludes */
    size_t exclude_count;
    bool videos; /* video files are found under folders too (path_has_video_extension) */
} walk_result;

/* Adds the image files under each path (a file is taken as it is, a folder
 * is walked recursively without following links to folders), absolute and
 * sorted, without duplicates, leaving out the files and folders the exclude
 * patterns (fnmatch globs, borrowed for out's life) take. A path that does
 * not exist, a folder that cannot be read, or a picture's or video's name that is no readable file (a FIFO,
 * a link to nothing) goes to out->skipped and the walk goes on; only running out of memory fails. */
glimpse_status walk_paths(const char *const *paths, size_t count, const char *const *exclude, size_t exclude_count,
                          bool videos, walk_result *out);
/* Whether an exclude pattern takes the path, or a folder it lies in: a
 * pattern without a slash matches a file or folder name, one with a slash
 * the whole path. */
bool walk_excludes(const walk_result *walk, const char *path);
void walk_result_free(walk_result *result);
/* Whether the stored path lies under a judged root and under no skipped folder. */
bool walk_judges(const walk_result *walk, const char *path);
/* Whether the name ends in an extension of an image we decode (case-insensitive). */
bool path_has_image_extension(const char *name);
/* Whether it ends in an extension of a video container (case-insensitive). */
bool path_has_video_extension(const char *name);

/* The image files under one folder as walk_paths finds them (same names,
 * same rules), sorted, but named from the folder as given (a relative folder
 * gives relative paths): for commands that take folders as well as files.
 * Folders that cannot be read go to out->skipped; only running out of
 * memory fails. */
glimpse_status walk_folder_files(const char *folder, walk_result *out);

/* A 64-bit hash of bytes (content identity for moved files). */
uint64_t content_hash(const uint8_t *bytes, size_t size);

/* The content hash of the file at path, as the index stores it; false if it cannot be read. */
bool index_hash_file(const char *path, int64_t *hash);

#endif
