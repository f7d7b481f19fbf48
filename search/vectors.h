/* vectors.h — the vector file beside an index (FILE.vectors): every search
 * row's embedding in float32 and its int8 twin, memory-mapped, so that a new
 * process searches without reading the rows out of SQLite. Not a source of
 * truth: SQLite is. The file carries the stamp that the index's meta records
 * when the file was written whole; a file whose stamp is not the index's is
 * stale and not used. Knows nothing of SQLite. */
#ifndef GLIMPSE_SEARCH_VECTORS_H
#define GLIMPSE_SEARCH_VECTORS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/kernel_types.h"
#include "glimpse.h"

typedef struct vector_file {
    const uint8_t *map;
    size_t map_bytes;
    uint64_t stamp;
    size_t count, dim;
    const int64_t *ids; /* [count]: each row's images.id */
    const float *rows;  /* [count, dim] */
    kernel_q8 q8;       /* [count, depth] int8 twin of rows, pointing into the map */
} vector_file;

/* Writes the rows being added one chunk at a time into path.tmp, then
 * (vector_writer_finish) syncs it and renames it over path: a crash leaves
 * the old file or the new one whole. */
typedef struct vector_writer {
    char *path, *temporary;
    int fd;
    uint64_t stamp;
    size_t count, dim, written;
    uint64_t sections_hash; /* of ids, scales and sums, as written */
} vector_writer;

glimpse_status vector_writer_start(vector_writer *w, const char *path, uint64_t stamp, size_t count, size_t dim);
/* Appends rows[n, dim] with their ids. */
glimpse_status vector_writer_add(vector_writer *w, const int64_t *ids, const float *rows, size_t n);
/* Completes the file (all count rows added) and puts it in place; on failure removes the temporary. */
glimpse_status vector_writer_finish(vector_writer *w, glimpse_status status);

/* Maps path if it is a whole vector file of stamp and dim; *usable false
 * (and GLIMPSE_STATUS_OK) when it is missing or of another stamp. A file
 * of the right stamp whose header or tables do not add up is damage
 * (GLIMPSE_STATUS_BAD_FORMAT naming it). */
glimpse_status vector_file_open(vector_file *file, const char *path, uint64_t stamp, size_t dim, bool *usable);
void vector_file_close(vector_file *file);

/* The path of the vector file of the index at db_path; caller frees. */
char *vector_file_path(const char *db_path);

#endif
