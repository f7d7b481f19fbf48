/* index.h — internal helpers of the search library: walking folders for
 * image files and hashing file contents. The index itself is the public
 * glimpse_index (include/glimpse.h), implemented in index.c on SQLite. */
#ifndef GLIMPSE_SEARCH_INDEX_H
#define GLIMPSE_SEARCH_INDEX_H

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

/* Adds the image files under each path (a file is taken as it is, a folder
 * is walked recursively without following links to folders), absolute and
 * sorted, without duplicates. A path that does not exist is an error. */
glimpse_status walk_paths(const char *const *paths, size_t count, file_list *out);
void file_list_free(file_list *list);

/* A 64-bit hash of bytes (content identity for moved files). */
uint64_t content_hash(const uint8_t *bytes, size_t size);

#endif
