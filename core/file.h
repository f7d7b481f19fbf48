/* file.h — reading files whole and mapping them, with sizes checked and
 * errors that name the path. Used for weights, configs, tokenizers, images. */
#ifndef GLIMPSE_CORE_FILE_H
#define GLIMPSE_CORE_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "glimpse.h"

/* Reads the whole file into a new buffer (with one NUL byte after the data,
 * so text can be parsed in place). Refuses files over max_bytes.
 * Caller frees *bytes with free(). */
glimpse_status file_read_all(const char *path, size_t max_bytes, uint8_t **bytes, size_t *size);

/* Reads an open descriptor (a pipe, standard input) to its end into a new
 * buffer with one NUL byte after the data, refusing more than max_bytes
 * (TOO_LARGE, after reading at most max_bytes + 1). Blocks as read() does:
 * the caller decides what it may wait on. label names it in errors.
 * Caller frees *bytes with free(). */
glimpse_status file_read_stream(int fd, const char *label, size_t max_bytes, uint8_t **bytes, size_t *size);

/* Maps a file read-only. Caller releases with file_unmap(*map, *size).
 * An empty file maps to (NULL, 0) successfully. */
glimpse_status file_map(const char *path, const uint8_t **map, size_t *size);
void file_unmap(const uint8_t *map, size_t size);

/* Files up to this size are read into memory by file_contents_open, larger ones mapped. */
#define FILE_READ_MAX_BYTES ((size_t)256 << 20)

/* A file's bytes as read once (a picture, a video), and how they are held. */
typedef struct file_contents {
    const uint8_t *bytes;
    size_t size;
    bool mapped;
} file_contents;

/* The bytes of the file at path, read into memory when at most FILE_READ_MAX_BYTES: a file that another process
 * truncates meanwhile is then an IO error ("file shrank while reading"), where a mapping's lost pages would end
 * the process with SIGBUS when touched (a 48 MB PNG cut during its decoding did). Larger files (long videos) are
 * mapped, with that risk. An empty file is (NULL or a buffer, 0). Release with file_contents_release. */
glimpse_status file_contents_open(const char *path, file_contents *out);
void file_contents_release(file_contents *contents);

/* Gives back the whole pages inside [start, start + length) of a file_map mapping that will not be read again
 * soon (a tensor copied at load): they leave the process's resident memory and, if read after all, come back
 * from the page cache unchanged. Only for file_map's mappings (memory of any other kind would lose its
 * contents); a hint, ignored where unsupported. */
void file_release_pages(const uint8_t *start, size_t length);

/* 1 if path names an existing directory / regular file. */
int file_is_directory(const char *path);
int file_is_regular(const char *path);

/* Joins folder and name with one '/'. Caller frees. NULL when out of memory. */
char *file_join(const char *folder, const char *name);

#endif
