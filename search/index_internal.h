/* index_internal.h — what the files of the SQLite index (index_open.c,
 * index_update.c, index_write.c, index_import.c, index_manage.c,
 * index_query.c, index_duplicates.c, index_bench.c) share: the handle's
 * fields and the helpers more than one of them calls. Not for callers
 * outside search/: they use the public glimpse_index (include/glimpse.h).
 *
 * Schema (docs/formats.md gives it field by field): meta(key, value) holds
 * the model's identity and folder once; images(path, frame, size, mtime_ns,
 * hash, embedding BLOB of float32, checksum of path and embedding, verified
 * when rows are loaded: bytes overwritten inside a vector are otherwise
 * invisible; time, failed); meta's "checksum" covers the model record, its
 * "format" records the upgrade to checksums and videos; writer holds the
 * process updating the index, if one is (one at a time). A video is one file
 * of many rows, one per frame sampled, UNIQUE(path, frame), each with its
 * time in seconds (NULL for a still picture, whose one row is frame 0); the
 * file's bookkeeping (size, time, hash, failed) is repeated on each. An older
 * index is rebuilt in place into this form by its first opening with a model
 * (one transaction, ids kept); opened read-only it is read as it is, every
 * row a still. WAL journaling: each committed batch survives a crash or
 * kill -9, and a batch in flight is rolled back whole. Embeddings are kept as
 * float32 both on disk and in memory: exact, and a 100,000 × 512 table is
 * 200 MB, which one pass reads in about 10 ms. */
#ifndef GLIMPSE_SEARCH_INDEX_INTERNAL_H
#define GLIMPSE_SEARCH_INDEX_INTERNAL_H

#include <sqlite3.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/pool.h"
#include "core/strmap.h"
#include "glimpse.h"
#include "search/vectors.h"

struct glimpse_index {
    sqlite3 *db;
    char *path;
    char *identity;   /* model_identity of the model the index was built with */
    char *model_path; /* that model's folder */
    size_t dim;
    float logit_scale, logit_bias; /* a search's score: logit_scale × cosine + logit_bias (SigLIP's; CLIP 0) */
    bool read_only; /* opened for searching: writes nothing */
    bool checksummed; /* rows carry checksums (images.checksum), verified when loaded */
    bool failed_column; /* images.failed exists (an index made before it has none) */
    bool frames_column; /* images.frame and images.time exist (format 3: videos) */
    char *video_sampling; /* meta's "video_sampling": how its videos' frames were chosen (NULL: none yet) */
    bool fast_decode;     /* meta's "decode" is "fast" */
    glimpse_precision precision; /* of the embeddings stored (meta's "precision"; float32 if not recorded) */
    /* search cache: every stored embedding, loaded on first search */
    bool loaded;
    size_t count;
    char **paths;
    double *times;  /* [count]: a frame's time, negative for a still */
    float *matrix; /* [count, dim] */
    float *scores; /* [count] */
    /* or the vector file (FILE.vectors), mapped, when it is the index's current one */
    bool vectors_open;
    vector_file vectors;
    char **fetched;       /* [vectors.count]: the paths of rows returned so far, read from SQLite when first needed */
    double *fetched_times; /* [vectors.count]: their times, with them */
    int32_t *scan;        /* [2, vectors.count]: the int8 scan's dot products and code sums */
    pool *threads;        /* the scan's, created with the first search */
    char **filtered_paths; /* [filtered_count]: the paths glimpse_index_search_filtered returned last */
    size_t filtered_count;
    int64_t data_version; /* PRAGMA data_version when the cache was last checked (another connection's commit
                           * changes it) */
};

/* ------------------------------------------------ SQLite (index_open.c) */

/* The failure of a call on the database, with SQLite's message. */
glimpse_status index_db_error(glimpse_index *index, const char *what);
/* Damage found in the index file: reported as damage, never as a partial answer. */
glimpse_status index_damaged(glimpse_index *index, const char *what);
/* The failure of a statement that ended with SQLite's result code: damage
 * when the code says the file is damaged. */
glimpse_status index_step_error(glimpse_index *index, int code, const char *what);
/* The failure to prepare one of the index's own statements (a missing table or column is damage). */
glimpse_status index_prepare_error(glimpse_index *index, int code, const char *what);
/* Runs statements without results. */
glimpse_status index_exec(glimpse_index *index, const char *sql);
/* meta's value for key in *value (NULL when the key is not there; caller frees). */
glimpse_status index_meta_get(glimpse_index *index, const char *key, char **value);
glimpse_status index_meta_set(glimpse_index *index, const char *key, const char *value);
/* Runs PRAGMA pragma (quick_check or integrity_check): any finding is damage. */
glimpse_status index_check_structure(glimpse_index *index, const char *pragma);
/* The database's size in bytes as this connection sees it (write-ahead log included); -1 on failure. */
int64_t index_database_bytes(glimpse_index *index);
/* The checksum of a row: its path's bytes and its embedding's. */
int64_t index_row_checksum(const void *path, size_t path_bytes, const void *embedding, size_t embedding_bytes);
/* Forgets the search cache and the vector file (after a change, the next search reloads). */
void index_drop_cache(glimpse_index *index);
/* Begins a read transaction unless one is open already (*began: whether this call began it), so that what
 * a reader reads together comes from one committed state; index_read_end ends what index_read_begin began. */
glimpse_status index_read_begin(glimpse_index *index, bool *began);
void index_read_end(glimpse_index *index, bool began);
/* "float32" or "int8", as meta records the precision. */
const char *index_precision_name(glimpse_precision precision);

/* ------------------------------------------------ writing (index_write.c) */

/* Begins a write transaction with the one statement its rows need. */
glimpse_status index_transaction_begin(glimpse_index *index, const char *sql, const char *what,
                                       sqlite3_stmt **statement);
/* Commits the transaction, or after a failure rolls all of it back; returns the failure. */
glimpse_status index_transaction_end(glimpse_index *index, sqlite3_stmt *statement, glimpse_status status);
/* Records this process as the index's one writer, unless another holds it (BUSY). */
glimpse_status index_writer_lock(glimpse_index *index);
/* Leaves the index to other writers. */
void index_writer_unlock(glimpse_index *index);
/* Writes the vector file of the index as it now is, and records its stamp. */
glimpse_status index_write_vectors(glimpse_index *index);
/* Records how videos' frames are sampled (the first to bring videos), or refuses another sampling. */
glimpse_status index_record_sampling(glimpse_index *index, const char *sampling);

/* ------------------------------------------------ stored files (index_update.c) */

/* One file the index holds (a video's frames together). */
typedef struct stored_row {
    int64_t id, size, mtime_ns, hash;
    bool seen;   /* among the files walked, or claimed by one of them as moved */
    bool failed; /* its file failed to read or decode when last tried: tried again */
} stored_row;

/* What the index holds when an update starts. */
typedef struct stored_images {
    stored_row *rows;
    char **paths; /* paths[r] is rows[r]'s */
    size_t count, capacity;
    strmap *by_path;    /* path -> r */
    strmap *by_content; /* (hash, size) -> the last r with that content */
} stored_images;

/* Reads every stored image's row, mapped by path. */
glimpse_status index_read_stored(glimpse_index *index, stored_images *stored);
void index_stored_images_free(stored_images *stored);
/* Whether a file or folder is at path. */
bool index_file_exists(const char *path);

/* ------------------------------------------------ words (index_words.c) */

/* After an update's embeddings: reads and stores the words params asks for (glimpse_index_params.words) of
 * every still picture stored without them. */
glimpse_status index_read_words(glimpse_index *index, const glimpse_index_params *params,
                                glimpse_index_summary *summary);

/* ------------------------------------------------ management (index_manage.c) */

/* The rows where condition (SQL over images) holds (0 when a column is missing). */
size_t index_count_where(glimpse_index *index, const char *condition);
/* A path given by a caller in the form the index stores: absolute, links
 * resolved where it exists; caller frees (NULL: out of memory). */
char *index_stored_form(const char *path);

/* ------------------------------------------------ reading rows (index_query.c) */

/* The statement reading rows as index_check_row takes them: path,
 * embedding, checksum (NULL in an index without), time (NULL in an index
 * before videos), WHERE condition. Written into sql (ROW_SELECT_CAPACITY). */
#define ROW_SELECT_CAPACITY 256
const char *index_row_select(const glimpse_index *index, const char *condition, char *sql);
/* Damage unless the row (path, embedding, checksum if the index has them) is whole and of the index's size. */
glimpse_status index_check_row(glimpse_index *index, sqlite3_stmt *row);
/* Within a read transaction: forgets the cache if another connection committed since it was made (a long-lived
 * reader then reads the state now committed, never a mix). */
glimpse_status index_forget_if_changed(glimpse_index *index);
/* Loads every row into the search cache (once). */
glimpse_status index_load_cache(glimpse_index *index);
/* The exact search over the rows loaded from SQLite. */
glimpse_status index_search_loaded(glimpse_index *index, const float *query, size_t k, glimpse_search_result *results,
                                   size_t *found);

#endif
