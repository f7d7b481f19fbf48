/* index.c — glimpse_index: the SQLite search index of a photo collection.
 *
 * Schema: meta(key, value) holds the model's identity and folder once;
 * images(path UNIQUE, size, mtime_ns, hash, embedding BLOB of float32,
 * checksum of path and embedding, verified when rows are loaded: bytes
 * overwritten inside a vector are otherwise invisible); meta's "checksum"
 * covers the model record, its "format" records the upgrade to checksums;
 * writer holds the process updating the index, if one is (one at a time).
 * Videos (format 3): a video is one file of many rows, one per frame
 * sampled, UNIQUE(path, frame), each with its time in seconds (NULL for a
 * still picture, whose one row is frame 0); the file's bookkeeping (size,
 * time, hash, failed) is repeated on each. An older index is rebuilt in
 * place into this form by its first opening with a model (one transaction,
 * ids kept); opened read-only it is read as it is, every row a still.
 * WAL journaling: each committed batch survives a crash or kill -9, and a
 * batch in flight is rolled back whole. Embeddings are kept as float32 both
 * on disk and in memory: exact, and a 100,000 × 512 table is 200 MB, which
 * one sgemv reads in about 10 ms. */
#include <math.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ctype.h>
#include <errno.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "api/identity.h"
#include "core/error.h"
#include "core/file.h"
#include "core/kernels.h"
#include "core/pool.h"
#include "core/prefetch.h"
#include "api/prepare.h"
#include "core/quantize.h"
#include "core/strmap.h"
#include "search/bench.h"
#include "search/index.h"
#include "search/vectors.h"
#include "vision/image.h"

/* Milliseconds a write waits for another process's to finish before failing. */
#define INDEX_BUSY_TIMEOUT_MS 10000
/* config.json's bound on projection_dim: a larger recorded size means a damaged index. */
#define INDEX_MAX_EMBEDDING_DIM 65536
/* meta's "format" of an index whose rows carry checksums; older ones have none (no "format", no column). */
#define INDEX_FORMAT "3"

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
};

static glimpse_status check_row(glimpse_index *index, sqlite3_stmt *row);
static size_t count_where(glimpse_index *index, const char *condition);

static glimpse_status db_error(glimpse_index *index, const char *what) {
    return error_set(GLIMPSE_STATUS_IO, "%s: %s: %s", index->path, what, sqlite3_errmsg(index->db));
}

/* The checksum of a row: its path's bytes and its embedding's. */
static int64_t row_checksum(const void *path, size_t path_bytes, const void *embedding, size_t embedding_bytes) {
    uint64_t of_path = content_hash(path, path_bytes), of_embedding = content_hash(embedding, embedding_bytes);
    return (int64_t)(of_embedding ^ (of_path * 0x9e3779b97f4a7c15ull));
}

/* SQL glimpse_row_checksum(path, embedding): row_checksum, for the statements that write rows. */
static void sql_row_checksum(sqlite3_context *call, int argc, sqlite3_value **argv) {
    (void)argc;
    const void *path = sqlite3_value_text(argv[0]);
    size_t path_bytes = (size_t)sqlite3_value_bytes(argv[0]);
    const void *embedding = sqlite3_value_blob(argv[1]);
    size_t embedding_bytes = (size_t)sqlite3_value_bytes(argv[1]);
    static const uint8_t none = 0;
    sqlite3_result_int64(call, row_checksum(path ? path : &none, path ? path_bytes : 0,
                                            embedding ? embedding : &none, embedding ? embedding_bytes : 0));
}

/* SQL glimpse_file_exists(path): whether a file or folder is at path (pruning). */
static void sql_file_exists(sqlite3_context *call, int argc, sqlite3_value **argv) {
    (void)argc;
    const char *path = (const char *)sqlite3_value_text(argv[0]);
    struct stat info;
    sqlite3_result_int(call, path && stat(path, &info) == 0);
}

/* Whether SQLite's result code says the file is damaged (or no database at all). */
static bool damage_code(int code) {
    int primary = code & 0xff;
    return primary == SQLITE_CORRUPT || primary == SQLITE_NOTADB || primary == SQLITE_FORMAT ||
           primary == SQLITE_MISMATCH || primary == SQLITE_RANGE || primary == SQLITE_TOOBIG;
}

/* Damage found in the index file: reported as damage, never as a partial answer. */
static glimpse_status damaged(glimpse_index *index, const char *what) {
    return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s is damaged: %s; rebuild it with glimpse index", index->path, what);
}

/* The failure of a statement that ended with SQLite's result code: damage
 * (a corrupt page, a file that is no database) as damage, the rest as I/O. */
static glimpse_status step_error(glimpse_index *index, int code, const char *what) {
    return damage_code(code) ? damaged(index, sqlite3_errmsg(index->db)) : db_error(index, what);
}

static glimpse_status exec(glimpse_index *index, const char *sql) {
    char *message = NULL;
    int code = sqlite3_exec(index->db, sql, NULL, NULL, &message);
    glimpse_status status = GLIMPSE_STATUS_OK;
    const char *reason = message ? message : "SQL error";
    if (code != SQLITE_OK && damage_code(code)) status = damaged(index, reason);
    else if (code != SQLITE_OK) status = error_set(GLIMPSE_STATUS_IO, "%s: %s", index->path, reason);
    sqlite3_free(message);
    return status;
}

/* The failure to prepare one of the index's own statements: a table or
 * column it names that is not there means the schema itself is damaged. */
static glimpse_status prepare_error(glimpse_index *index, int code, const char *what) {
    if (code != SQLITE_ERROR) return step_error(index, code, what);
    char reason[160];
    snprintf(reason, sizeof reason, "its tables are not as glimpse made them (%s)", sqlite3_errmsg(index->db));
    return damaged(index, reason);
}

/* meta's value for key in *value (NULL when the key is not there); a read that fails is an error. */
static glimpse_status meta_get(glimpse_index *index, const char *key, char **value) {
    *value = NULL;
    sqlite3_stmt *statement;
    int code = sqlite3_prepare_v2(index->db, "SELECT value FROM meta WHERE key = ?", -1, &statement, NULL);
    if (code == SQLITE_ERROR && strcmp(sqlite3_errmsg(index->db), "no such table: meta") == 0)
        return GLIMPSE_STATUS_OK; /* not a glimpse index */
    if (code != SQLITE_OK) return prepare_error(index, code, "reading the index's model");
    sqlite3_bind_text(statement, 1, key, -1, SQLITE_STATIC);
    code = sqlite3_step(statement);
    if (code == SQLITE_ROW && sqlite3_column_text(statement, 0))
        *value = strdup((const char *)sqlite3_column_text(statement, 0));
    glimpse_status status = GLIMPSE_STATUS_OK;
    if (code == SQLITE_ROW && sqlite3_column_text(statement, 0) && !*value) status = ERROR_OOM();
    else if (code != SQLITE_ROW && code != SQLITE_DONE) status = step_error(index, code, "reading the index's model");
    sqlite3_finalize(statement);
    return status;
}

/* Index files up to this size are checked with PRAGMA quick_check when opened. */
#define INDEX_QUICK_CHECK_MAX_BYTES ((int64_t)64 << 20)

/* Runs PRAGMA pragma (quick_check or integrity_check): any finding is damage. */
static glimpse_status check_structure(glimpse_index *index, const char *pragma) {
    sqlite3_stmt *statement;
    int code = sqlite3_prepare_v2(index->db, pragma, -1, &statement, NULL);
    if (code != SQLITE_OK) return step_error(index, code, "checking the index");
    code = sqlite3_step(statement);
    const char *finding = code == SQLITE_ROW ? (const char *)sqlite3_column_text(statement, 0) : NULL;
    glimpse_status status = GLIMPSE_STATUS_OK;
    if (code != SQLITE_ROW) status = step_error(index, code, "checking the index");
    else if (!finding || strcmp(finding, "ok") != 0) {
        /* SQLite's finding on one line, without its "*** in database main ***" heading */
        char reason[200];
        const char *heading = "*** in database main ***\n";
        if (finding && strncmp(finding, heading, strlen(heading)) == 0) finding += strlen(heading);
        snprintf(reason, sizeof reason, "%s", finding ? finding : "?");
        for (char *c = reason; *c; c++)
            if (*c == '\n') *c = ' ';
        status = damaged(index, reason);
    }
    sqlite3_finalize(statement);
    return status;
}

/* The database's size in bytes as this connection sees it (write-ahead log included); -1 on failure. */
static int64_t database_bytes(glimpse_index *index) {
    sqlite3_stmt *statement;
    int64_t bytes = -1;
    if (sqlite3_prepare_v2(index->db, "SELECT page_count * page_size FROM pragma_page_count, pragma_page_size", -1,
                           &statement, NULL) == SQLITE_OK) {
        if (sqlite3_step(statement) == SQLITE_ROW) bytes = sqlite3_column_int64(statement, 0);
        sqlite3_finalize(statement);
    }
    return bytes;
}

static glimpse_status meta_set(glimpse_index *index, const char *key, const char *value) {
    sqlite3_stmt *statement;
    if (sqlite3_prepare_v2(index->db, "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", -1, &statement,
                           NULL) != SQLITE_OK)
        return db_error(index, "writing the model's identity");
    sqlite3_bind_text(statement, 1, key, -1, SQLITE_STATIC);
    sqlite3_bind_text(statement, 2, value, -1, SQLITE_STATIC);
    bool done = sqlite3_step(statement) == SQLITE_DONE;
    sqlite3_finalize(statement);
    return done ? GLIMPSE_STATUS_OK : db_error(index, "writing the model's identity");
}

static void drop_cache(glimpse_index *index) {
    if (index->vectors_open)
        for (size_t i = 0; i < index->vectors.count; i++) free(index->fetched[i]);
    free(index->fetched), free(index->scan), free(index->fetched_times);
    index->fetched = NULL, index->scan = NULL, index->fetched_times = NULL;
    vector_file_close(&index->vectors);
    index->vectors_open = false;
    for (size_t i = 0; i < index->count; i++) free(index->paths[i]);
    free(index->paths);
    free(index->times);
    free(index->matrix);
    free(index->scores);
    index->paths = NULL;
    index->times = NULL;
    index->matrix = index->scores = NULL;
    index->count = 0;
    index->loaded = false;
}

/* The URI that opens path read-only; immutable (no -wal, -shm or locks
 * needed, and none made) when neither the file nor its folder can be
 * written: read-only media, another user's files. Caller sqlite3_frees. */
static char *read_only_uri(const char *path) {
    char *folder = strdup(path);
    if (!folder) return NULL;
    char *slash = strrchr(folder, '/');
    if (slash == folder) slash[1] = '\0';
    else if (slash) *slash = '\0';
    else strcpy(folder, ".");
    bool writable = access(path, W_OK) == 0 && access(folder, W_OK) == 0;
    free(folder);
    /* the path percent-escaped but for the characters a URI path keeps */
    size_t length = strlen(path);
    char *escaped = malloc(3 * length + 1);
    if (!escaped) return NULL;
    char *e = escaped;
    for (const unsigned char *c = (const unsigned char *)path; *c; c++) {
        if (isalnum(*c) || strchr("/-_.~", *c))
            *e++ = (char)*c;
        else
            e += sprintf(e, "%%%02X", *c);
    }
    *e = '\0';
    char *uri = sqlite3_mprintf("file:%s?mode=ro%s", escaped, writable ? "" : "&immutable=1");
    free(escaped);
    return uri;
}

/* The columns of images (format 3); an older index lacks frame and time,
 * and has path UNIQUE instead of (path, frame). */
#define IMAGES_COLUMNS                                                                                                 \
    "id INTEGER PRIMARY KEY, path TEXT NOT NULL, frame INTEGER NOT NULL DEFAULT 0, time REAL,"                        \
    " size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL, hash INTEGER NOT NULL, embedding BLOB NOT NULL,"              \
    " checksum INTEGER, failed TEXT, UNIQUE(path, frame)"

/* Opens the database: with create, for writing (creating it and its tables
 * if needed); else read-only, for searching. */
static glimpse_status open_database(glimpse_index *index, bool create) {
    if (!create) {
        char *uri = read_only_uri(index->path);
        if (!uri) return ERROR_OOM();
        int flags = SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX;
        int opened = sqlite3_open_v2(uri, &index->db, flags, NULL);
        sqlite3_free(uri);
        index->read_only = true;
        if (opened != SQLITE_OK) return db_error(index, "cannot open");
        sqlite3_busy_timeout(index->db, INDEX_BUSY_TIMEOUT_MS);
        return exec(index, "PRAGMA mmap_size=4294967296;");
    }
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
    if (sqlite3_open_v2(index->path, &index->db, flags | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK)
        return db_error(index, "cannot open");
    sqlite3_busy_timeout(index->db, INDEX_BUSY_TIMEOUT_MS);
    if (sqlite3_create_function(index->db, "glimpse_row_checksum", 2, SQLITE_UTF8 | SQLITE_DETERMINISTIC, NULL,
                                sql_row_checksum, NULL, NULL) != SQLITE_OK ||
        sqlite3_create_function(index->db, "glimpse_file_exists", 1, SQLITE_UTF8, NULL, sql_file_exists, NULL,
                                NULL) != SQLITE_OK)
        return db_error(index, "cannot open");
    return exec(index, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA mmap_size=4294967296;"
                       "CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);"
                       "CREATE TABLE IF NOT EXISTS images(" IMAGES_COLUMNS ");"
                       "CREATE INDEX IF NOT EXISTS images_hash ON images(hash);"
                       "CREATE TABLE IF NOT EXISTS writer(id INTEGER PRIMARY KEY CHECK (id = 1),"
                       " pid INTEGER NOT NULL, host TEXT NOT NULL, started INTEGER NOT NULL);"
                       "CREATE TABLE IF NOT EXISTS roots(path TEXT PRIMARY KEY, folder INTEGER NOT NULL,"
                       " updated INTEGER NOT NULL);");
}

/* The checksum of the model record (identity, folder, embedding size, logit
 * scale and bias as meta holds them; an absent one as "") in decimal, as
 * meta's "checksum" holds it. */
static void model_record_checksum(const char *identity, const char *folder, const char *dim, const char *scale,
                                  const char *bias, char text[24]) {
    const char *values[] = {identity, folder, dim, scale, bias};
    uint64_t sum = 0;
    for (size_t i = 0; i < sizeof values / sizeof *values; i++) {
        const char *value = values[i] ? values[i] : "";
        sum = (sum ^ content_hash((const uint8_t *)value, strlen(value))) * 0x100000001b3ull;
    }
    snprintf(text, 24, "%llu", (unsigned long long)sum);
}

/* Damage unless meta's "checksum" matches the model record read. */
static glimpse_status check_model_record(glimpse_index *index, const char *identity, const char *dim,
                                         const char *scale, const char *bias) {
    char expected[24], *recorded = NULL;
    model_record_checksum(identity, index->model_path, dim, scale, bias, expected);
    glimpse_status status = meta_get(index, "checksum", &recorded);
    if (!status && (!recorded || strcmp(recorded, expected) != 0))
        status = damaged(index, "its model record does not match its checksum");
    free(recorded);
    return status;
}

/* Whether the table images has the column (an index made before checksums, or before failed entries, lacks it). */
static glimpse_status has_column(glimpse_index *index, const char *column, bool *has) {
    sqlite3_stmt *statement;
    int code = sqlite3_prepare_v2(index->db, "SELECT 1 FROM pragma_table_info('images') WHERE name = ?", -1,
                                  &statement, NULL);
    if (code != SQLITE_OK) return prepare_error(index, code, "reading the index's columns");
    sqlite3_bind_text(statement, 1, column, -1, SQLITE_STATIC);
    code = sqlite3_step(statement);
    sqlite3_finalize(statement);
    *has = code == SQLITE_ROW;
    return code == SQLITE_ROW || code == SQLITE_DONE ? GLIMPSE_STATUS_OK
                                                     : step_error(index, code, "reading the index's columns");
}

/* Gives an index made before checksums its rows' and its model record's, in
 * one transaction recorded as meta's "format". */
static glimpse_status add_checksums(glimpse_index *index, const char *identity, const char *dim, const char *scale,
                                    const char *bias) {
    char checksum[24];
    model_record_checksum(identity, index->model_path, dim, scale, bias, checksum);
    glimpse_status status = exec(index, "BEGIN IMMEDIATE");
    if (!status) status = exec(index, "ALTER TABLE images ADD COLUMN checksum INTEGER");
    if (!status) status = exec(index, "UPDATE images SET checksum = glimpse_row_checksum(path, embedding)");
    if (!status) status = meta_set(index, "checksum", checksum);
    if (!status) status = meta_set(index, "format", INDEX_FORMAT);
    if (!status) return exec(index, "COMMIT");
    sqlite3_exec(index->db, "ROLLBACK", NULL, NULL, NULL);
    return status;
}

/* Rebuilds an index made before videos into format 3 (frame and time
 * columns, UNIQUE(path, frame)) in place: one transaction, every row and id
 * kept as frame 0 of its file, so its vector file stays valid. SQLite cannot
 * drop a UNIQUE constraint, hence a new table renamed over the old. */
static glimpse_status add_frames(glimpse_index *index) {
    glimpse_status status = exec(index, "BEGIN IMMEDIATE");
    if (!status)
        status = exec(index, "CREATE TABLE images_frames(" IMAGES_COLUMNS ");"
                             "INSERT INTO images_frames(id, path, size, mtime_ns, hash, embedding, checksum, failed)"
                             " SELECT id, path, size, mtime_ns, hash, embedding, checksum, failed FROM images;"
                             "DROP TABLE images;"
                             "ALTER TABLE images_frames RENAME TO images;"
                             "CREATE INDEX IF NOT EXISTS images_hash ON images(hash);");
    if (!status) status = meta_set(index, "format", INDEX_FORMAT);
    if (!status) return exec(index, "COMMIT");
    sqlite3_exec(index->db, "ROLLBACK", NULL, NULL, NULL);
    return status;
}

/* Records a new index's model: identity, folder, embedding size, logit scale and bias. */
static glimpse_status record_model(glimpse_index *index, const glimpse_model_info *info, const char *identity) {
    char dim[32], scale[32], bias[32], checksum[24];
    char *absolute = realpath(info->path, NULL);
    const char *folder = absolute ? absolute : info->path;
    snprintf(dim, sizeof dim, "%d", info->embedding_dim);
    snprintf(scale, sizeof scale, "%.9g", info->logit_scale);
    snprintf(bias, sizeof bias, "%.9g", info->logit_bias);
    model_record_checksum(identity, folder, dim, scale, bias, checksum);
    glimpse_status status = exec(index, "BEGIN");
    if (!status) status = meta_set(index, "model_identity", identity);
    if (!status) status = meta_set(index, "model_path", folder);
    if (!status) status = meta_set(index, "dim", dim);
    if (!status) status = meta_set(index, "logit_scale", scale);
    if (!status) status = meta_set(index, "logit_bias", bias);
    if (!status) status = meta_set(index, "checksum", checksum);
    if (!status) status = meta_set(index, "format", INDEX_FORMAT);
    if (!status) status = exec(index, "COMMIT");
    free(index->model_path);
    index->model_path = strdup(folder);
    if (!status && !index->model_path) status = ERROR_OOM();
    free(absolute);
    return status;
}

static const char *precision_name(glimpse_precision precision) {
    return precision == GLIMPSE_PRECISION_INT8 ? "int8" : "float32";
}

/* WRONG_MODEL unless the model (identity mine, info) gives the embeddings
 * the index holds (recorded: its identity, NULL for a new index): the same
 * weights, the same precision, and the checkpoint's own preprocessing when
 * images are embedded (a snapshot without preprocessor_config.json falls
 * back to defaults that may differ). */
static glimpse_status refuse_other_model(const glimpse_index *index, const char *recorded, const char *mine,
                                         const glimpse_model_info *info) {
    if (recorded && strcmp(recorded, mine) != 0)
        return error_set(GLIMPSE_STATUS_WRONG_MODEL,
                         "%s was built with another model (%s, from %s); give that model, or a new --db", index->path,
                         recorded, index->model_path ? index->model_path : "?");
    if (info->image_size && info->preprocessor_defaults)
        return error_set(GLIMPSE_STATUS_WRONG_MODEL,
                         "%s has no preprocessor_config.json: its images would be preprocessed with defaults that "
                         "may not be the checkpoint's, and an index must not mix them; add the snapshot's file",
                         info->path);
    if (recorded && info->precision != index->precision)
        return error_set(GLIMPSE_STATUS_WRONG_MODEL,
                         "%s holds %s embeddings and the model was loaded as %s; %s, or use a new --db", index->path,
                         precision_name(index->precision), precision_name(info->precision),
                         index->precision == GLIMPSE_PRECISION_INT8 ? "give --int8" : "leave out --int8");
    return GLIMPSE_STATUS_OK;
}

/* Opened with a model: an index built with another (or with the same at
 * another precision) is refused, a new one records this one; an index
 * older than the precision record takes the model's. */
static glimpse_status adopt_model(glimpse_index *index, const glimpse_model *model, const char *recorded,
                                  bool precision_recorded) {
    char mine[MODEL_IDENTITY_CAPACITY];
    glimpse_model_info info;
    glimpse_status status = model_identity(model, mine, sizeof mine);
    if (!status) status = glimpse_model_get_info(model, &info);
    if (status) return status;
    if (!precision_recorded) index->precision = info.precision;
    if ((status = refuse_other_model(index, recorded, mine, &info))) return status;
    if (!recorded && (status = record_model(index, &info, mine))) return status;
    if (!precision_recorded && (status = meta_set(index, "precision", precision_name(info.precision)))) return status;
    index->identity = strdup(mine);
    if (!index->identity) return ERROR_OOM();
    index->dim = (size_t)info.embedding_dim;
    index->logit_scale = info.logit_scale, index->logit_bias = info.logit_bias;
    return GLIMPSE_STATUS_OK;
}

/* Opened without a model: the one recorded, as the meta table gives it (an
 * index from before SigLIP records no bias: CLIP's, 0). */
static glimpse_status read_recorded_model(glimpse_index *index, const char *identity, const char *dim,
                                          const char *scale, const char *bias) {
    if (!identity || !dim || !scale)
        return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s is not a glimpse index (no model recorded)", index->path);
    index->identity = strdup(identity);
    if (!index->identity) return ERROR_OOM();
    index->dim = (size_t)strtoul(dim, NULL, 10);
    index->logit_scale = strtof(scale, NULL);
    index->logit_bias = bias ? strtof(bias, NULL) : 0.0f;
    if (index->dim == 0 || index->dim > INDEX_MAX_EMBEDDING_DIM)
        return damaged(index, "its embedding size is not a number of dimensions");
    return GLIMPSE_STATUS_OK;
}

glimpse_status glimpse_index_open(const char *db_path, const glimpse_model *model, glimpse_index **out) {
    if (!out) return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_index_open: out is NULL");
    *out = NULL;
    if (!db_path) return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_index_open: no database path");
    glimpse_model_info info;
    if (model && glimpse_model_get_info(model, &info) == GLIMPSE_STATUS_OK && !info.embedding_dim)
        return error_set(GLIMPSE_STATUS_WRONG_MODEL,
                         "a search index needs a CLIP or SigLIP model (embeddings); this is %s", info.architecture);
    if (!model && !file_is_regular(db_path))
        return error_set(GLIMPSE_STATUS_NOT_FOUND, "%s: no such index (build it with glimpse index)", db_path);
    glimpse_index *index = calloc(1, sizeof *index);
    if (!index) return ERROR_OOM();
    index->path = strdup(db_path);
    glimpse_status status = index->path ? open_database(index, model != NULL) : ERROR_OOM();
    int64_t bytes = status ? -1 : database_bytes(index);
    if (!status && bytes < 0) status = damaged(index, sqlite3_errmsg(index->db));
    if (!status && bytes <= INDEX_QUICK_CHECK_MAX_BYTES) status = check_structure(index, "PRAGMA quick_check(1)");
    char *identity = NULL, *dim = NULL, *scale = NULL, *bias = NULL, *precision = NULL;
    if (!status) status = meta_get(index, "model_identity", &identity);
    if (!status) status = meta_get(index, "dim", &dim);
    if (!status) status = meta_get(index, "logit_scale", &scale);
    if (!status) status = meta_get(index, "logit_bias", &bias);
    if (!status) status = meta_get(index, "model_path", &index->model_path);
    if (!status) status = has_column(index, "checksum", &index->checksummed);
    if (!status) status = has_column(index, "failed", &index->failed_column);
    if (!status && model && !index->failed_column) status = exec(index, "ALTER TABLE images ADD COLUMN failed TEXT");
    if (!status && model) index->failed_column = true;
    if (!status) status = has_column(index, "time", &index->frames_column);
    char *decode = NULL;
    if (!status) status = meta_get(index, "video_sampling", &index->video_sampling);
    if (!status) status = meta_get(index, "decode", &decode);
    index->fast_decode = decode && strcmp(decode, "fast") == 0;
    free(decode);
    if (!status) status = meta_get(index, "precision", &precision);
    if (!status && index->checksummed && identity) status = check_model_record(index, identity, dim, scale, bias);
    else if (!status && index->checksummed && !model) status = damaged(index, "its model record is missing");
    else if (!status && model && identity) status = add_checksums(index, identity, dim, scale, bias);
    if (!status && model) index->checksummed = true;
    if (!status) index->precision = precision && strcmp(precision, "int8") == 0 ? GLIMPSE_PRECISION_INT8
                                                                                 : GLIMPSE_PRECISION_FLOAT32;
    /* after the checksums' upgrade, which an older index may need first */
    if (!status && model && !index->frames_column) status = add_frames(index);
    if (!status && model) index->frames_column = true;
    if (!status && model) status = adopt_model(index, model, identity, precision != NULL);
    else if (!status) status = read_recorded_model(index, identity, dim, scale, bias);
    free(identity), free(dim), free(scale), free(bias), free(precision);
    if (status)
        glimpse_index_free(index);
    else
        *out = index;
    return status;
}

void glimpse_index_free(glimpse_index *index) {
    if (!index) return;
    drop_cache(index);
    pool_free(index->threads);
    /* leave the file in rollback-journal mode when no one else has it open,
     * so that readers of it need no -wal or -shm file (read-only media) */
    if (index->db && !index->read_only) {
        sqlite3_busy_timeout(index->db, 0);
        sqlite3_exec(index->db, "PRAGMA journal_mode=DELETE", NULL, NULL, NULL);
    }
    sqlite3_close(index->db);
    free(index->model_path);
    free(index->identity);
    free(index->video_sampling);
    free(index->path);
    free(index);
}

glimpse_status glimpse_index_check_model(const glimpse_index *index, const glimpse_model *model) {
    if (!index || !model) return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_index_check_model: NULL argument");
    char mine[MODEL_IDENTITY_CAPACITY];
    glimpse_model_info info;
    glimpse_status status = model_identity(model, mine, sizeof mine);
    if (!status) status = glimpse_model_get_info(model, &info);
    return status ? status : refuse_other_model(index, index->identity, mine, &info);
}

glimpse_precision glimpse_index_precision(const glimpse_index *index) {
    return index ? index->precision : GLIMPSE_PRECISION_FLOAT32;
}

const char *glimpse_index_model_path(const glimpse_index *index) { return index ? index->model_path : NULL; }

size_t glimpse_index_embedding_dim(const glimpse_index *index) { return index ? index->dim : 0; }

size_t glimpse_index_count(const glimpse_index *index) {
    if (!index) return 0;
    sqlite3_stmt *statement;
    size_t count = 0;
    if (sqlite3_prepare_v2(index->db, "SELECT COUNT(DISTINCT path) FROM images", -1, &statement, NULL) == SQLITE_OK) {
        if (sqlite3_step(statement) == SQLITE_ROW) count = (size_t)sqlite3_column_int64(statement, 0);
        sqlite3_finalize(statement);
    }
    return count;
}

/* ---------------------------------------------------------------- update */

/* Images embedded and committed together. */
#define INDEX_BATCH 8

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

/* A walked file that is new, or changed since it was stored. */
typedef struct pending {
    size_t file;       /* into the file list */
    int64_t stored_id; /* 0 = new */
} pending;

static void stored_images_free(stored_images *stored) {
    for (size_t r = 0; r < stored->count; r++) free(stored->paths[r]);
    free(stored->paths), free(stored->rows);
    strmap_free(stored->by_path);
    strmap_free(stored->by_content);
}

static glimpse_status stored_images_grow(stored_images *stored) {
    size_t capacity = stored->capacity ? stored->capacity * 2 : 1024;
    stored_row *grown = realloc(stored->rows, capacity * sizeof *grown);
    if (grown) stored->rows = grown;
    char **grown_paths = realloc(stored->paths, capacity * sizeof *grown_paths);
    if (grown_paths) stored->paths = grown_paths;
    if (!grown || !grown_paths) return ERROR_OOM();
    stored->capacity = capacity;
    return GLIMPSE_STATUS_OK;
}

/* Reads every stored image's row, mapped by path. */
static glimpse_status read_stored(glimpse_index *index, stored_images *stored) {
    glimpse_status status = strmap_create(1024, &stored->by_path);
    sqlite3_stmt *statement = NULL;
    int code = status ? SQLITE_OK
                      : sqlite3_prepare_v2(index->db, "SELECT MIN(id), path, size, mtime_ns, hash, MAX(failed IS NOT NULL) FROM images GROUP BY path", -1,
                                           &statement, NULL);
    if (code != SQLITE_OK) status = prepare_error(index, code, "reading the index");
    code = SQLITE_DONE;
    while (!status && (code = sqlite3_step(statement)) == SQLITE_ROW) {
        if (stored->count == stored->capacity && (status = stored_images_grow(stored))) break;
        const char *path = (const char *)sqlite3_column_text(statement, 1);
        if (!path) {
            status = damaged(index, "a row has no path");
            break;
        }
        size_t r = stored->count++;
        stored->rows[r] = (stored_row){.id = sqlite3_column_int64(statement, 0),
                                   .size = sqlite3_column_int64(statement, 2),
                                   .mtime_ns = sqlite3_column_int64(statement, 3),
                                   .hash = sqlite3_column_int64(statement, 4),
                                   .seen = false,
                                   .failed = sqlite3_column_int(statement, 5) != 0};
        stored->paths[r] = strdup(path);
        if (!stored->paths[r]) status = ERROR_OOM();
        else status = strmap_put(stored->by_path, stored->paths[r], strlen(stored->paths[r]), (int32_t)r);
    }
    if (!status && code != SQLITE_DONE) status = step_error(index, code, "reading the index");
    sqlite3_finalize(statement);
    return status;
}

/* Maps the stored images by content (hash and size), to find moves without a scan. */
static glimpse_status map_stored_content(stored_images *stored) {
    glimpse_status status = strmap_create(stored->count + 1, &stored->by_content);
    for (size_t r = 0; !status && r < stored->count; r++) {
        int64_t key[2] = {stored->rows[r].hash, stored->rows[r].size};
        status = strmap_put(stored->by_content, (const char *)key, sizeof key, (int32_t)r);
    }
    return status;
}

/* Counts the walked files stored with their size and time unchanged, and
 * still readable, that did not fail last time; the others go to work
 * (*work_count of them). */
static void find_changed(const file_list *files, stored_images *stored, pending *work, size_t *work_count,
                         glimpse_index_summary *summary) {
    for (size_t i = 0; i < files->count; i++) {
        const found_file *f = &files->items[i];
        int32_t r;
        if (!strmap_get(stored->by_path, f->path, strlen(f->path), &r)) {
            work[(*work_count)++] = (pending){.file = i, .stored_id = 0};
            continue;
        }
        stored->rows[r].seen = true;
        const stored_row *row = &stored->rows[r];
        if (row->size == f->size && row->mtime_ns == f->mtime_ns && !row->failed && access(f->path, R_OK) == 0)
            summary->unchanged++;
        else
            work[(*work_count)++] = (pending){.file = i, .stored_id = stored->rows[r].id};
    }
}

bool index_hash_file(const char *path, int64_t *hash) {
    uint8_t *bytes;
    size_t size;
    if (file_read_all(path, IMAGE_FILE_MAX_BYTES, &bytes, &size) != GLIMPSE_STATUS_OK) return false;
    *hash = (int64_t)content_hash(bytes, size);
    free(bytes);
    return true;
}

static bool file_exists(const char *path) {
    struct stat info;
    return stat(path, &info) == 0;
}

/* Begins a write transaction with the one statement its rows need. */
static glimpse_status transaction_begin(glimpse_index *index, const char *sql, const char *what,
                                        sqlite3_stmt **statement) {
    *statement = NULL;
    if (sqlite3_prepare_v2(index->db, sql, -1, statement, NULL) != SQLITE_OK) return db_error(index, what);
    return exec(index, "BEGIN IMMEDIATE");
}

/* Commits the transaction, or after a failure rolls all of it back; returns the failure. */
static glimpse_status transaction_end(glimpse_index *index, sqlite3_stmt *statement, glimpse_status status) {
    sqlite3_finalize(statement);
    if (!status) return exec(index, "COMMIT");
    sqlite3_exec(index->db, "ROLLBACK", NULL, NULL, NULL);
    return status;
}

/* Runs the prepared "UPDATE images SET path, mtime_ns (the checksum, failed
 * cleared) WHERE path" for the file f, stored at path (every frame of a video). */
static glimpse_status set_path_and_time(glimpse_index *index, sqlite3_stmt *update, const found_file *f,
                                        const char *path, const char *what) {
    sqlite3_bind_text(update, 1, f->path, -1, SQLITE_STATIC);
    sqlite3_bind_int64(update, 2, f->mtime_ns);
    sqlite3_bind_text(update, 3, path, -1, SQLITE_STATIC);
    glimpse_status status = sqlite3_step(update) == SQLITE_DONE ? GLIMPSE_STATUS_OK : db_error(index, what);
    sqlite3_reset(update);
    return status;
}

/* A stored file touched or rewritten with the same bytes keeps its
 * embedding: its new time is recorded and *handled set. */
static glimpse_status keep_same_bytes(glimpse_index *index, sqlite3_stmt *update, const found_file *f,
                                      const stored_images *stored, bool *handled, glimpse_index_summary *summary) {
    int32_t r;
    int64_t hash;
    if (!strmap_get(stored->by_path, f->path, strlen(f->path), &r) || !index_hash_file(f->path, &hash))
        return GLIMPSE_STATUS_OK;
    if (hash != stored->rows[r].hash || stored->rows[r].size != f->size) return GLIMPSE_STATUS_OK;
    *handled = true;
    summary->unchanged++;
    return set_path_and_time(index, update, f, stored->paths[r], "recording a new time");
}

/* Whether a stored file that does not exist is really gone: under a root
 * walked, or its folder is there without it (not on a drive unplugged). */
static bool really_gone(const walk_result *walk, const char *path) {
    if (file_exists(path)) return false;
    if (walk_judges(walk, path)) return true;
    const char *slash = strrchr(path, '/');
    if (!slash || slash == path) return false;
    char *folder = strndup(path, (size_t)(slash - path));
    bool there = folder && file_exists(folder);
    free(folder);
    return there;
}

/* A new path whose content is that of a stored file that is gone: the file
 * moved or was renamed, and its row takes the new path (*handled set). */
static glimpse_status claim_moved(glimpse_index *index, sqlite3_stmt *update, const found_file *f,
                                  stored_images *stored, const walk_result *walk, bool *handled,
                                  glimpse_index_summary *summary) {
    int64_t hash;
    if (!index_hash_file(f->path, &hash)) return GLIMPSE_STATUS_OK;
    int64_t key[2] = {hash, f->size};
    int32_t candidate;
    if (!strmap_get(stored->by_content, (const char *)key, sizeof key, &candidate)) return GLIMPSE_STATUS_OK;
    /* the map holds one row per content; duplicates fall back to a scan */
    size_t from = (size_t)candidate;
    if (stored->rows[from].seen || !really_gone(walk, stored->paths[from])) from = 0;
    for (size_t r = from; r < stored->count; r++) {
        stored_row *row = &stored->rows[r];
        if (row->seen || row->hash != hash || row->size != f->size) continue;
        if (!really_gone(walk, stored->paths[r])) continue; /* a copy, not a move */
        row->seen = true;
        *handled = true;
        summary->moved++;
        return set_path_and_time(index, update, f, stored->paths[r], "recording a move");
    }
    return GLIMPSE_STATUS_OK;
}

/* Takes out of the work the files that need no embedding: the same bytes
 * as stored, or a stored file moved. One transaction. */
static glimpse_status record_moves(glimpse_index *index, const walk_result *walk, stored_images *stored,
                                   pending *work, size_t *work_count, glimpse_index_summary *summary) {
    const file_list *files = &walk->files;
    sqlite3_stmt *update;
    glimpse_status status = transaction_begin(index, "UPDATE images SET path = ?1, mtime_ns = ?2,"
                                              " checksum = glimpse_row_checksum(?1, embedding), failed = NULL"
                                              " WHERE path = ?3",
                                              "preparing a move", &update);
    size_t kept = 0;
    for (size_t w = 0; !status && w < *work_count; w++) {
        const found_file *f = &files->items[work[w].file];
        bool handled = false;
        if (work[w].stored_id)
            status = keep_same_bytes(index, update, f, stored, &handled, summary);
        else
            status = claim_moved(index, update, f, stored, walk, &handled, summary);
        if (!handled) work[kept++] = work[w];
    }
    *work_count = kept;
    return transaction_end(index, update, status);
}

/* Forgets the stored files under the roots walked that no longer exist, or
 * that an exclude pattern now takes; entries under other roots, or under
 * folders that could not be read, are not judged by this run and stay. One
 * transaction. */
static glimpse_status forget_deleted(glimpse_index *index, const stored_images *stored, const walk_result *walk,
                                     glimpse_index_summary *summary) {
    sqlite3_stmt *remove;
    glimpse_status status =
        transaction_begin(index, "DELETE FROM images WHERE path = ?", "preparing a removal", &remove);
    for (size_t r = 0; !status && r < stored->count; r++) {
        const char *path = stored->paths[r];
        if (stored->rows[r].seen || !walk_judges(walk, path) || (file_exists(path) && !walk_excludes(walk, path)))
            continue;
        sqlite3_bind_text(remove, 1, path, -1, SQLITE_STATIC);
        if (sqlite3_step(remove) != SQLITE_DONE) status = db_error(index, "removing a deleted file");
        sqlite3_reset(remove);
        summary->removed++;
    }
    return transaction_end(index, remove, status);
}

/* A stored file that no longer reads or decodes: its old embedding is
 * stale, so its entry leaves the search results (images.failed holds the
 * reason) until a later run reads the file again. */
static glimpse_status mark_failed(glimpse_index *index, const char *path, const char *reason) {
    sqlite3_stmt *update;
    if (sqlite3_prepare_v2(index->db, "UPDATE images SET failed = ? WHERE path = ?", -1, &update, NULL) != SQLITE_OK)
        return db_error(index, "recording a failed file");
    sqlite3_bind_text(update, 1, reason, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(update, 2, path, -1, SQLITE_STATIC);
    glimpse_status status = sqlite3_step(update) == SQLITE_DONE ? GLIMPSE_STATUS_OK
                                                                 : db_error(index, "recording a failed file");
    sqlite3_finalize(update);
    return status;
}

/* Reports a file that failed (and marks its stored entry failed, if it has one). */
static glimpse_status report_failure(glimpse_index *index, const pending *p, const char *path, const char *why,
                                     const glimpse_index_params *params, glimpse_index_summary *summary) {
    summary->failed++;
    char reason[1024];
    snprintf(reason, sizeof reason, "%s%s", why,
             p->stored_id ? "; its entry is left out of search results until the file reads again" : "");
    glimpse_status status = p->stored_id ? mark_failed(index, path, why) : GLIMPSE_STATUS_OK;
    if (params && params->on_failure) params->on_failure(params->user, path, reason);
    return status;
}

/* Pictures decoded ahead of the towers: two batches, shared by the decoding threads. */
#define INDEX_AHEAD (2 * INDEX_BATCH)
/* Decoding threads at most: as many as the context's (a 12-megapixel JPEG
 * costs several times the ViT-B/32 tower's picture, so while the towers wait
 * their cores decode), within this bound. */
#define INDEX_MAX_READERS 16

/* What the decoding thread hands over, in the order of the work: a
 * picture (a still, which ends its file, or a video's frame), the end of a
 * video, or a file that failed. */
typedef struct index_item {
    size_t work;          /* into the work */
    glimpse_image *image; /* resized for the model; NULL for an end or a failure */
    double seconds;       /* a frame's time; negative for a still */
    int64_t hash;         /* the file's content hash (with its last item) */
    bool last;            /* the file's last item */
    char *failure;        /* why the file failed (new string), or NULL */
} index_item;

/* A decoding thread's state: its share of the work (files next, next +
 * stride, ...), read in order. */
typedef struct index_reader {
    glimpse_index *index;
    const glimpse_model *model;
    const file_list *files;
    const pending *work;
    size_t work_count, next, stride;
    const glimpse_index_params *params;
    uint64_t max_pixels;
    /* the video being read */
    void *video;
    const uint8_t *bytes;
    size_t size;
    bool mapped; /* bytes are a mapping (a large file), else read into memory */
    int64_t hash;
} index_reader;

/* Files up to this size are read into memory, larger ones (videos) mapped:
 * a file truncated while it is read is then an error, not a SIGBUS, for
 * every picture and most videos. */
#define INDEX_READ_MAX_BYTES ((size_t)256 << 20)

static void reader_close_file(index_reader *r) {
    const glimpse_frame_source *frames = r->params ? r->params->frames : NULL;
    if (r->video) frames->close(frames->user, r->video);
    if (r->bytes && r->mapped) file_unmap(r->bytes, r->size);
    else free((void *)r->bytes);
    r->video = NULL, r->bytes = NULL, r->size = 0;
}

/* Ends the current file of the item as failed, with the thread's last error. */
static bool reader_fail(index_reader *r, index_item *item) {
    reader_close_file(r);
    item->last = true;
    item->failure = strdup(glimpse_last_error()[0] ? glimpse_last_error() : "failed");
    r->next += r->stride;
    /* out of memory for the reason too: a failure all the same, the other side sees none */
    if (!item->failure) item->failure = strdup("out of memory");
    return true;
}

static bool index_produce(void *user, void *out, const atomic_bool *stopping) {
    index_reader *r = user;
    index_item *item = out;
    const glimpse_frame_source *frames = r->params ? r->params->frames : NULL;
    if (*stopping || r->next >= r->work_count) return false;
    const found_file *f = &r->files->items[r->work[r->next].file];
    item->work = r->next;
    item->seconds = -1;
    if (r->video) { /* the next frame of the open video */
        glimpse_image *frame = NULL;
        double seconds = 0;
        if (frames->next(frames->user, r->video, &frame, &seconds)) return reader_fail(r, item);
        if (!frame) { /* the end of it */
            reader_close_file(r);
            item->hash = r->hash, item->last = true;
            r->next += r->stride;
            return true;
        }
        if (prepare_resize(r->model, &frame)) {
            glimpse_image_free(frame);
            return reader_fail(r, item);
        }
        item->image = frame, item->seconds = seconds;
        return true;
    }
    r->mapped = (uint64_t)f->size > INDEX_READ_MAX_BYTES;
    uint8_t *read = NULL;
    glimpse_status status = r->mapped ? file_map(f->path, &r->bytes, &r->size)
                                      : file_read_all(f->path, INDEX_READ_MAX_BYTES, &read, &r->size);
    if (!r->mapped) r->bytes = read;
    if (status) {
        r->bytes = NULL;
        return reader_fail(r, item);
    }
    r->hash = (int64_t)content_hash(r->bytes, r->size);
    if (frames && frames->is_video(frames->user, r->bytes, r->size)) {
        if (frames->open(frames->user, f->path, r->bytes, r->size, &r->video)) {
            r->video = NULL;
            return reader_fail(r, item);
        }
        return index_produce(user, out, stopping); /* its first frame */
    }
    status = prepare_decode(r->model, r->bytes, r->size, f->path, r->max_pixels, 1, r->params && r->params->fast_decode,
                            &item->image);
    if (status) return reader_fail(r, item);
    reader_close_file(r);
    item->hash = r->hash, item->last = true;
    r->next += r->stride;
    return true;
}

static void index_dispose(void *user, void *out) {
    (void)user;
    index_item *item = out;
    glimpse_image_free(item->image);
    free(item->failure);
}

/* A file embedded whole, waiting to be stored: its rows' embeddings and times. */
typedef struct embedded_file {
    size_t work;
    int64_t hash;
    size_t rows, capacity;
    float *embeddings; /* [rows, dim] */
    double *times;     /* [rows], negative for a still */
} embedded_file;

static void embedded_file_free(embedded_file *e) {
    free(e->embeddings), free(e->times);
    memset(e, 0, sizeof *e);
}

/* The towers' side of an update: batches of pictures embedded, files completed and stored. */
typedef struct index_writer {
    glimpse_index *index;
    glimpse_context *ctx;
    const file_list *files;
    const pending *work;
    const glimpse_index_params *params;
    glimpse_index_summary *summary;
    index_item batch[INDEX_BATCH];
    size_t batched;
    float *embeddings;   /* [INDEX_BATCH, dim] */
    embedded_file open;  /* the file whose pictures are being embedded (open.rows 0: none) */
    bool open_started;
    embedded_file *done; /* files complete, not yet stored */
    size_t done_count, done_capacity, files_done;
} index_writer;

static glimpse_status writer_add_row(index_writer *w, size_t work, const float *embedding, double seconds) {
    embedded_file *e = &w->open;
    size_t dim = w->index->dim;
    if (!w->open_started) e->work = work, w->open_started = true;
    if (e->rows == e->capacity) {
        size_t capacity = e->capacity ? 2 * e->capacity : 1;
        float *grown = realloc(e->embeddings, capacity * dim * sizeof *grown);
        if (grown) e->embeddings = grown;
        double *grown_times = realloc(e->times, capacity * sizeof *grown_times);
        if (grown_times) e->times = grown_times;
        if (!grown || !grown_times) return ERROR_OOM();
        e->capacity = capacity;
    }
    memcpy(e->embeddings + e->rows * dim, embedding, dim * sizeof(float));
    e->times[e->rows++] = seconds;
    return GLIMPSE_STATUS_OK;
}

/* The open file is complete: it waits to be stored. */
static glimpse_status writer_complete(index_writer *w, size_t work, int64_t hash) {
    if (!w->open_started) return GLIMPSE_STATUS_OK; /* a video without a frame: never, video sources fail those */
    if (w->done_count == w->done_capacity) {
        size_t capacity = w->done_capacity ? 2 * w->done_capacity : INDEX_BATCH;
        embedded_file *grown = realloc(w->done, capacity * sizeof *grown);
        if (!grown) return ERROR_OOM();
        w->done = grown, w->done_capacity = capacity;
    }
    w->open.work = work, w->open.hash = hash;
    w->done[w->done_count++] = w->open;
    memset(&w->open, 0, sizeof w->open);
    w->open_started = false;
    return GLIMPSE_STATUS_OK;
}

/* Stores the files complete, every row of each (a video's old frames
 * replaced). One transaction: all of it or none of it survives a crash. */
static glimpse_status writer_store(index_writer *w) {
    glimpse_index *index = w->index;
    if (!w->done_count) return GLIMPSE_STATUS_OK;
    sqlite3_stmt *insert, *remove = NULL;
    glimpse_status status =
        transaction_begin(index,
                          "INSERT INTO images(path, frame, time, size, mtime_ns, hash, embedding, checksum)"
                          " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, glimpse_row_checksum(?1, ?7))",
                          "preparing an insert", &insert);
    if (!status && sqlite3_prepare_v2(index->db, "DELETE FROM images WHERE path = ?", -1, &remove, NULL) != SQLITE_OK)
        status = db_error(index, "preparing an insert");
    for (size_t d = 0; d < w->done_count && !status; d++) {
        const embedded_file *e = &w->done[d];
        const pending *p = &w->work[e->work];
        const found_file *f = &w->files->items[p->file];
        sqlite3_bind_text(remove, 1, f->path, -1, SQLITE_STATIC);
        if (sqlite3_step(remove) != SQLITE_DONE) status = db_error(index, "replacing an entry");
        sqlite3_reset(remove);
        for (size_t r = 0; r < e->rows && !status; r++) {
            sqlite3_bind_text(insert, 1, f->path, -1, SQLITE_STATIC);
            sqlite3_bind_int64(insert, 2, (int64_t)r);
            if (e->times[r] < 0) sqlite3_bind_null(insert, 3);
            else sqlite3_bind_double(insert, 3, e->times[r]);
            sqlite3_bind_int64(insert, 4, f->size);
            sqlite3_bind_int64(insert, 5, f->mtime_ns);
            sqlite3_bind_int64(insert, 6, e->hash);
            sqlite3_bind_blob(insert, 7, e->embeddings + r * index->dim, (int)(index->dim * sizeof(float)),
                              SQLITE_STATIC);
            if (sqlite3_step(insert) != SQLITE_DONE) status = db_error(index, "storing an embedding");
            sqlite3_reset(insert);
        }
        if (p->stored_id)
            w->summary->updated++;
        else
            w->summary->added++;
    }
    sqlite3_finalize(remove);
    status = transaction_end(index, insert, status);
    for (size_t d = 0; d < w->done_count; d++) embedded_file_free(&w->done[d]);
    w->done_count = 0;
    return status;
}

/* Embeds the pictures batched, each row joining its file; stills complete theirs. */
static glimpse_status writer_flush(index_writer *w) {
    if (!w->batched) return GLIMPSE_STATUS_OK;
    glimpse_image *images[INDEX_BATCH];
    for (size_t j = 0; j < w->batched; j++) images[j] = w->batch[j].image;
    glimpse_status status = glimpse_embed_images(w->ctx, images, w->batched, w->embeddings);
    for (size_t j = 0; j < w->batched; j++) {
        index_item *item = &w->batch[j];
        if (!status) status = writer_add_row(w, item->work, w->embeddings + j * w->index->dim, item->seconds);
        if (!status && item->last) status = writer_complete(w, item->work, item->hash), w->files_done++;
        glimpse_image_free(item->image);
        item->image = NULL;
    }
    w->batched = 0;
    return status;
}

/* After a batch: the files complete stored, and progress reported. */
static glimpse_status writer_commit(index_writer *w, size_t total) {
    glimpse_status status = writer_store(w);
    const glimpse_index_params *params = w->params;
    if (!status && params && params->on_progress && params->on_progress(params->user, w->files_done, total))
        status = error_set(GLIMPSE_STATUS_CANCELLED, "indexing was stopped");
    return status;
}

/* Takes one item from the decoding thread. */
static glimpse_status writer_take(index_writer *w, index_item *item, size_t total) {
    glimpse_status status = GLIMPSE_STATUS_OK;
    if (item->image) {
        w->batch[w->batched++] = *item;
        if (w->batched == INDEX_BATCH && !(status = writer_flush(w))) status = writer_commit(w, total);
        return status;
    }
    /* an end or a failure: the pictures before it first */
    if ((status = writer_flush(w))) return status;
    if (item->failure) {
        embedded_file_free(&w->open); /* a video's frames embedded so far are dropped */
        w->open_started = false;
        const pending *p = &w->work[item->work];
        status = report_failure(w->index, p, w->files->items[p->file].path, item->failure, w->params, w->summary);
        w->files_done++;
    } else {
        status = writer_complete(w, item->work, item->hash);
        w->files_done++;
    }
    return status ? status : writer_commit(w, total);
}

/* Embeds the work and stores it, a batch at a time, each committed on its
 * own, with progress: the files are read, decoded and resized ahead of the
 * towers (INDEX_AHEAD pictures at most) by as many threads as the context
 * has, reader k taking files k, k + readers, ...; the towers take each
 * file's pictures from its reader's queue in the work's order. */
static glimpse_status embed_work(glimpse_index *index, glimpse_context *ctx, const file_list *files,
                                 const pending *work, size_t work_count, const glimpse_index_params *params,
                                 glimpse_index_summary *summary) {
    glimpse_status status = GLIMPSE_STATUS_OK;
    /* the start, so that a progress display times the first batch from here */
    if (work_count && params && params->on_progress && params->on_progress(params->user, 0, work_count))
        status = error_set(GLIMPSE_STATUS_CANCELLED, "indexing was stopped");
    if (status || !work_count) return status;
    size_t readers = (size_t)context_thread_count(ctx);
    readers = readers < 1 ? 1 : readers > INDEX_MAX_READERS ? INDEX_MAX_READERS : readers;
    if (readers > work_count) readers = work_count;
    index_reader reader[INDEX_MAX_READERS];
    prefetch *ahead[INDEX_MAX_READERS] = {0};
    index_writer w = {.index = index, .ctx = ctx, .files = files, .work = work, .params = params, .summary = summary};
    w.embeddings = malloc(INDEX_BATCH * index->dim * sizeof(float));
    if (!w.embeddings) status = ERROR_OOM();
    for (size_t k = 0; k < readers; k++) {
        reader[k] = (index_reader){.index = index,
                                   .model = context_model(ctx),
                                   .files = files,
                                   .work = work,
                                   .work_count = work_count,
                                   .next = k,
                                   .stride = readers,
                                   .params = params,
                                   .max_pixels = params && params->max_pixels
                                                     ? params->max_pixels
                                                     : glimpse_image_default_params().max_pixels};
        if (!status)
            status = prefetch_start(sizeof(index_item), (INDEX_AHEAD + readers - 1) / readers, true, index_produce,
                                    index_dispose, &reader[k], &ahead[k]);
    }
    index_item item;
    /* file f's items come from reader f % readers, its last one ending the file */
    for (size_t file = 0; !status && file < work_count;) {
        if (!prefetch_next(ahead[file % readers], &item)) {
            status = error_set(GLIMPSE_STATUS_INTERNAL, "a decoding thread ended early");
            break;
        }
        if (item.last) file++;
        status = writer_take(&w, &item, work_count);
        free(item.failure);
    }
    if (!status && !(status = writer_flush(&w))) status = writer_commit(&w, work_count);
    for (size_t k = 0; k < readers; k++) {
        prefetch_stop(ahead[k]); /* after a failure: the thread stopped, what it made freed */
        reader_close_file(&reader[k]);
    }
    for (size_t j = 0; j < w.batched; j++) glimpse_image_free(w.batch[j].image);
    for (size_t d = 0; d < w.done_count; d++) embedded_file_free(&w.done[d]);
    embedded_file_free(&w.open);
    free(w.done), free(w.embeddings);
    return status;
}

/* A writer row older than this, left by a process on another machine (whose
 * life cannot be checked from here), is taken to be stale. */
#define INDEX_FOREIGN_WRITER_STALE_SECONDS (24 * 3600)

/* Whether the process pid of this machine is alive. */
static bool process_alive(int64_t pid) {
    if (pid <= 0 || pid > INT32_MAX) return false;
    return kill((pid_t)pid, 0) == 0 || errno == EPERM;
}

/* Whether the recorded writer still holds the index: a live process of this
 * machine other than this one, or a recent one of another machine. */
static bool writer_holds(sqlite3_stmt *row, const char *host) {
    int64_t pid = sqlite3_column_int64(row, 0);
    const char *writer_host = (const char *)sqlite3_column_text(row, 1);
    if (writer_host && strcmp(writer_host, host) == 0) return pid != (int64_t)getpid() && process_alive(pid);
    return (int64_t)time(NULL) - sqlite3_column_int64(row, 2) < INDEX_FOREIGN_WRITER_STALE_SECONDS;
}

/* Records this process as the index's one writer, unless another holds it
 * (GLIMPSE_STATUS_BUSY); a writer row left by a process that died is taken over. */
static glimpse_status writer_lock(glimpse_index *index) {
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    sqlite3_stmt *statement;
    glimpse_status status = transaction_begin(index, "SELECT pid, host, started FROM writer WHERE id = 1",
                                              "reading the index's writer", &statement);
    if (!status && sqlite3_step(statement) == SQLITE_ROW && writer_holds(statement, host))
        status = error_set(GLIMPSE_STATUS_BUSY,
                           "%s is being updated by another glimpse index (process %lld on %s); wait for it to finish",
                           index->path, (long long)sqlite3_column_int64(statement, 0),
                           sqlite3_column_text(statement, 1) ? (const char *)sqlite3_column_text(statement, 1) : "?");
    sqlite3_finalize(statement);
    statement = NULL;
    if (!status && sqlite3_prepare_v2(index->db, "INSERT OR REPLACE INTO writer VALUES (1, ?, ?, ?)", -1, &statement,
                                      NULL) != SQLITE_OK)
        status = db_error(index, "recording the index's writer");
    else if (!status) {
        sqlite3_bind_int64(statement, 1, (int64_t)getpid());
        sqlite3_bind_text(statement, 2, host, -1, SQLITE_STATIC);
        sqlite3_bind_int64(statement, 3, (int64_t)time(NULL));
        if (sqlite3_step(statement) != SQLITE_DONE) status = db_error(index, "recording the index's writer");
    }
    /* from now on the vector file is not the index's: rewritten when the change is done */
    if (!status) status = exec(index, "DELETE FROM meta WHERE key = 'vectors'");
    return transaction_end(index, statement, status);
}

/* Records the roots an update judged (for glimpse_index_list_roots). */
static glimpse_status record_roots(glimpse_index *index, const root_list *judged) {
    sqlite3_stmt *insert;
    glimpse_status status = transaction_begin(index, "INSERT OR REPLACE INTO roots(path, folder, updated) VALUES (?, ?, ?)",
                                              "recording the paths indexed", &insert);
    for (size_t i = 0; !status && i < judged->count; i++) {
        sqlite3_bind_text(insert, 1, judged->items[i].path, -1, SQLITE_STATIC);
        sqlite3_bind_int(insert, 2, judged->items[i].folder);
        sqlite3_bind_int64(insert, 3, (int64_t)time(NULL));
        if (sqlite3_step(insert) != SQLITE_DONE) status = db_error(index, "recording the paths indexed");
        sqlite3_reset(insert);
    }
    return transaction_end(index, insert, status);
}

/* Rows copied to the vector file at a time. */
#define VECTOR_CHUNK_ROWS 4096

/* Copies the rows that searches see (not failed), each checked, into w (a chunk at a time). */
static glimpse_status copy_rows(glimpse_index *index, vector_writer *w, size_t count) {
    const char *sql = index->failed_column
                          ? "SELECT path, embedding, checksum, id FROM images WHERE failed IS NULL ORDER BY id"
                          : "SELECT path, embedding, checksum, id FROM images ORDER BY id";
    sqlite3_stmt *statement;
    int code = sqlite3_prepare_v2(index->db, sql, -1, &statement, NULL);
    if (code != SQLITE_OK) return prepare_error(index, code, "reading the index");
    int64_t *ids = malloc(VECTOR_CHUNK_ROWS * sizeof *ids);
    float *rows = malloc(VECTOR_CHUNK_ROWS * index->dim * sizeof *rows);
    glimpse_status status = ids && rows ? GLIMPSE_STATUS_OK : ERROR_OOM();
    size_t n = 0, copied = 0;
    while (!status && (code = sqlite3_step(statement)) == SQLITE_ROW) {
        if (++copied > count) status = damaged(index, "its row count changed while it was read");
        if (!status) status = check_row(index, statement);
        if (status) break;
        ids[n] = sqlite3_column_int64(statement, 3);
        memcpy(rows + n * index->dim, sqlite3_column_blob(statement, 1), index->dim * sizeof(float));
        if (++n == VECTOR_CHUNK_ROWS) status = vector_writer_add(w, ids, rows, n), n = 0;
    }
    if (!status && code != SQLITE_DONE) status = step_error(index, code, "reading the index");
    if (!status && n) status = vector_writer_add(w, ids, rows, n);
    sqlite3_finalize(statement);
    free(ids), free(rows);
    return status;
}

/* Writes the vector file of the index as it now is, and records its stamp.
 * A file that cannot be written (a read-only folder, a full disk) leaves
 * the index without one: searches then read the rows from SQLite. Damage
 * met on the way is returned. */
static glimpse_status write_vectors(glimpse_index *index) {
    char *path = vector_file_path(index->path);
    if (!path) return ERROR_OOM();
    static uint64_t calls;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    uint64_t seed[4] = {(uint64_t)now.tv_sec, (uint64_t)now.tv_nsec, (uint64_t)getpid(), ++calls};
    uint64_t stamp = content_hash((const uint8_t *)seed, sizeof seed);
    vector_writer w;
    glimpse_status status = exec(index, "BEGIN"), written = GLIMPSE_STATUS_OK;
    size_t count = status ? 0 : count_where(index, index->failed_column ? "failed IS NULL" : "1");
    if (!status) written = vector_writer_start(&w, path, stamp, count, index->dim);
    if (!status && !written) {
        status = copy_rows(index, &w, count);
        written = status;
    }
    sqlite3_exec(index->db, "COMMIT", NULL, NULL, NULL);
    if (!status) written = vector_writer_finish(&w, written);
    char text[24];
    snprintf(text, sizeof text, "%016llx", (unsigned long long)stamp);
    if (!status && !written) status = meta_set(index, "vectors", text);
    free(path);
    return status;
}

/* Leaves the index to other writers. */
static void writer_unlock(glimpse_index *index) {
    sqlite3_stmt *statement;
    if (sqlite3_prepare_v2(index->db, "DELETE FROM writer WHERE id = 1 AND pid = ?", -1, &statement, NULL) != SQLITE_OK)
        return;
    sqlite3_bind_int64(statement, 1, (int64_t)getpid());
    sqlite3_step(statement);
    sqlite3_finalize(statement);
}

/* How videos' frames are sampled, against what the index records: the first
 * to bring videos records it, another is refused. */
static glimpse_status record_sampling(glimpse_index *index, const char *sampling) {
    glimpse_status status = GLIMPSE_STATUS_OK;
    if (!index->video_sampling) {
        status = meta_set(index, "video_sampling", sampling);
        if (!status && !(index->video_sampling = strdup(sampling))) status = ERROR_OOM();
    } else if (strcmp(index->video_sampling, sampling) != 0) {
        status = error_set(GLIMPSE_STATUS_INVALID_ARGUMENT,
                           "%s samples its videos' frames %s, not %s; give the same, or use a new --db", index->path,
                           index->video_sampling, sampling);
    }
    return status;
}

/* The decoding and video sampling the update asks for, against what the
 * index records: the first update records them (fast decoding when the
 * index is new, the sampling when videos first come), another is refused. */
static glimpse_status record_choices(glimpse_index *index, const glimpse_index_params *params) {
    bool fast = params && params->fast_decode;
    const glimpse_frame_source *frames = params ? params->frames : NULL;
    char *decode = NULL;
    glimpse_status status = meta_get(index, "decode", &decode);
    if (!status && !decode) {
        /* an index holding pictures from before the record was decoded exactly */
        status = count_where(index, "1") && fast
                     ? error_set(GLIMPSE_STATUS_INVALID_ARGUMENT,
                                 "%s was built decoding exactly; leave out --fast-decode, or use a new --db",
                                 index->path)
                     : meta_set(index, "decode", fast ? "fast" : "exact");
        if (!status) index->fast_decode = fast;
    } else if (!status && (strcmp(decode, "fast") == 0) != fast) {
        status = error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "%s was built %s; %s, or use a new --db", index->path,
                           index->fast_decode ? "with --fast-decode" : "decoding exactly",
                           index->fast_decode ? "give --fast-decode" : "leave out --fast-decode");
    }
    free(decode);
    if (status || !frames) return status;
    return record_sampling(index, frames->sampling ? frames->sampling : "");
}

glimpse_status glimpse_index_update(glimpse_index *index, glimpse_context *ctx, const char *const *paths,
                                    size_t count, const glimpse_index_params *params,
                                    glimpse_index_summary *summary) {
    if (!index || !ctx || (count && !paths) || !summary)
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_index_update: NULL argument");
    memset(summary, 0, sizeof *summary);
    if (index->read_only)
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT,
                         "%s was opened for searching (read-only); open it with a model to update it", index->path);
    char identity[MODEL_IDENTITY_CAPACITY];
    glimpse_status status = model_identity(context_model(ctx), identity, sizeof identity);
    if (status) return status;
    if (strcmp(identity, index->identity) != 0)
        return error_set(GLIMPSE_STATUS_WRONG_MODEL, "%s was built with another model (%s)", index->path,
                         index->identity);
    drop_cache(index);
    if ((status = writer_lock(index))) return status;
    if ((status = record_choices(index, params))) {
        writer_unlock(index);
        return status;
    }
    walk_result walk;
    if ((status = walk_paths(paths, count, params ? params->exclude : NULL, params ? params->exclude_count : 0,
                             params && params->frames, &walk))) {
        writer_unlock(index);
        return status;
    }
    for (size_t i = 0; i < walk.skipped.count; i++) {
        const walked_root *root = &walk.skipped.items[i];
        summary->roots_failed++;
        if (params && params->on_root_failure)
            params->on_root_failure(params->user, root->path, root->status, root->reason);
    }
    const file_list *files = &walk.files;
    stored_images stored = {0};
    size_t work_count = 0;
    pending *work = calloc(files->count + 1, sizeof *work);
    if (!work && !status) status = ERROR_OOM();
    if (!status) status = record_roots(index, &walk.judged);
    if (!status) status = read_stored(index, &stored);
    if (!status) find_changed(files, &stored, work, &work_count, summary);
    if (!status) status = map_stored_content(&stored);
    if (!status && work_count) status = record_moves(index, &walk, &stored, work, &work_count, summary);
    if (!status) status = forget_deleted(index, &stored, &walk, summary);
    if (!status) status = embed_work(index, ctx, files, work, work_count, params, summary);
    if (!status) status = write_vectors(index);
    /* fold the write-ahead log into the database: later reads come straight from it */
    writer_unlock(index);
    if (!status) sqlite3_exec(index->db, "PRAGMA wal_checkpoint(TRUNCATE)", NULL, NULL, NULL);
    stored_images_free(&stored);
    free(work);
    walk_result_free(&walk);
    return status;
}

/* ---------------------------------------------------------------- import */

glimpse_status index_import_begin(glimpse_index *index, const char *label, const char *identity,
                                  const char *precision, size_t dim, const char *sampling) {
    if (index->read_only)
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT,
                         "%s was opened for searching (read-only); open it with a model to import into it", index->path);
    if (strcmp(identity, index->identity) != 0)
        return error_set(GLIMPSE_STATUS_WRONG_MODEL, "%s holds embeddings of another model (%s) than %s (%s)", label,
                         identity, index->path, index->identity);
    if (strcmp(precision, precision_name(index->precision)) != 0)
        return error_set(GLIMPSE_STATUS_WRONG_MODEL, "%s holds %s embeddings and %s holds %s ones", label, precision,
                         index->path, precision_name(index->precision));
    if (dim != index->dim)
        return error_set(GLIMPSE_STATUS_WRONG_MODEL, "%s holds embeddings of %zu numbers and %s of %zu", label, dim,
                         index->path, index->dim);
    drop_cache(index);
    glimpse_status status = writer_lock(index);
    if (!status && sampling && (status = record_sampling(index, sampling))) writer_unlock(index);
    return status;
}

/* The rows pictures[first..] of one path (a still, or a video's frames): how many. */
static size_t same_path_run(const imported_picture *pictures, size_t first, size_t count) {
    size_t end = first + 1;
    while (end < count && strcmp(pictures[end].path, pictures[first].path) == 0) end++;
    return end - first;
}

glimpse_status index_import_store(glimpse_index *index, const imported_picture *pictures, size_t count,
                                  glimpse_index_summary *summary) {
    sqlite3_stmt *insert, *find = NULL, *remove = NULL;
    /* a picture is one row, frame 0, time NULL; a video one row per frame (rows that were at the path, or a
     * failure, are replaced) */
    glimpse_status status = transaction_begin(index,
                                              "INSERT INTO images(path, frame, time, size, mtime_ns, hash, embedding,"
                                              " checksum) VALUES (?1, ?6, ?7, ?2, ?3, ?4, ?5,"
                                              " glimpse_row_checksum(?1, ?5))",
                                              "preparing an insert", &insert);
    if (!status &&
        sqlite3_prepare_v2(index->db, "SELECT size, mtime_ns, hash, failed IS NOT NULL, time IS NULL,"
                                      " (SELECT COUNT(*) FROM images AS f WHERE f.path = images.path)"
                                      " FROM images WHERE path = ? AND frame = 0", -1, &find, NULL) != SQLITE_OK)
        status = db_error(index, "reading the index");
    if (!status && sqlite3_prepare_v2(index->db, "DELETE FROM images WHERE path = ?", -1, &remove, NULL) != SQLITE_OK)
        status = db_error(index, "preparing an insert");
    for (size_t i = 0; i < count && !status;) {
        const imported_picture *p = &pictures[i];
        size_t rows = same_path_run(pictures, i, count);
        bool still = rows == 1 && p->time < 0;
        sqlite3_bind_text(find, 1, p->path, -1, SQLITE_STATIC);
        int code = sqlite3_step(find);
        bool stored = code == SQLITE_ROW;
        bool same = stored && sqlite3_column_int64(find, 0) == p->size && sqlite3_column_int64(find, 1) == p->mtime_ns &&
                    sqlite3_column_int64(find, 2) == p->hash && sqlite3_column_int(find, 3) == 0 &&
                    (sqlite3_column_int(find, 4) != 0) == still && (size_t)sqlite3_column_int64(find, 5) == rows;
        sqlite3_reset(find);
        if (code != SQLITE_ROW && code != SQLITE_DONE) {
            status = step_error(index, code, "reading the index");
            break;
        }
        if (same) {
            summary->unchanged++;
            i += rows;
            continue;
        }
        sqlite3_bind_text(remove, 1, p->path, -1, SQLITE_STATIC);
        if (sqlite3_step(remove) != SQLITE_DONE) status = db_error(index, "replacing an entry");
        sqlite3_reset(remove);
        for (size_t r = i; r < i + rows && !status; r++) {
            const imported_picture *row = &pictures[r];
            sqlite3_bind_text(insert, 1, row->path, -1, SQLITE_STATIC);
            sqlite3_bind_int64(insert, 2, row->size);
            sqlite3_bind_int64(insert, 3, row->mtime_ns);
            sqlite3_bind_int64(insert, 4, row->hash);
            sqlite3_bind_blob(insert, 5, row->embedding, (int)(index->dim * sizeof(float)), SQLITE_STATIC);
            sqlite3_bind_int64(insert, 6, row->frame);
            if (row->time < 0)
                sqlite3_bind_null(insert, 7);
            else
                sqlite3_bind_double(insert, 7, row->time);
            if (sqlite3_step(insert) != SQLITE_DONE) status = db_error(index, "storing an embedding");
            sqlite3_reset(insert);
        }
        if (stored)
            summary->updated++;
        else
            summary->added++;
        i += rows;
    }
    sqlite3_finalize(find);
    sqlite3_finalize(remove);
    return transaction_end(index, insert, status);
}

glimpse_status index_import_end(glimpse_index *index, glimpse_status status) {
    if (!status) status = write_vectors(index);
    writer_unlock(index);
    if (!status) sqlite3_exec(index->db, "PRAGMA wal_checkpoint(TRUNCATE)", NULL, NULL, NULL);
    return status;
}

/* ------------------------------------------------------------ management */

/* SQL: whether the row's path (column path) is ?1 or lies below the folder ?2 (?1 with a slash), byte for byte. */
#define PATH_IS_OR_UNDER "(path = ?1 OR substr(CAST(path AS BLOB), 1, length(CAST(?2 AS BLOB))) = CAST(?2 AS BLOB))"

/* Runs a statement of the form "... WHERE PATH_IS_OR_UNDER" for path (and
 * path/), stepping it once; SQLite's result code in *code. */
static glimpse_status step_under(glimpse_index *index, sqlite3_stmt *statement, const char *path, int *code) {
    size_t length = strlen(path);
    char *folder = malloc(length + 2);
    if (!folder) return ERROR_OOM();
    memcpy(folder, path, length);
    strcpy(folder + length, length && path[length - 1] == '/' ? "" : "/");
    sqlite3_bind_text(statement, 1, path, -1, SQLITE_STATIC);
    sqlite3_bind_text(statement, 2, folder, -1, SQLITE_TRANSIENT);
    free(folder);
    *code = sqlite3_step(statement);
    return *code == SQLITE_ROW || *code == SQLITE_DONE ? GLIMPSE_STATUS_OK : step_error(index, *code, "reading the index");
}

/* The number "SELECT what FROM images WHERE condition" gives (0 when a column is missing). */
static size_t count_select(glimpse_index *index, const char *what, const char *condition) {
    char sql[200];
    snprintf(sql, sizeof sql, "SELECT %s FROM images WHERE %s", what, condition);
    sqlite3_stmt *statement;
    size_t count = 0;
    if (sqlite3_prepare_v2(index->db, sql, -1, &statement, NULL) == SQLITE_OK) {
        if (sqlite3_step(statement) == SQLITE_ROW) count = (size_t)sqlite3_column_int64(statement, 0);
        sqlite3_finalize(statement);
    }
    return count;
}

/* The rows where condition holds. */
static size_t count_where(glimpse_index *index, const char *condition) {
    return count_select(index, "COUNT(*)", condition);
}

/* The files (distinct paths, a video once) with a row where condition holds. */
static size_t count_files(glimpse_index *index, const char *condition) {
    return count_select(index, "COUNT(DISTINCT path)", condition);
}

glimpse_status glimpse_index_get_stats(glimpse_index *index, glimpse_index_stats *out) {
    if (!index || !out) return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_index_get_stats: NULL argument");
    memset(out, 0, sizeof *out);
    int64_t bytes = database_bytes(index);
    if (bytes < 0) return db_error(index, "reading its size");
    out->images = count_files(index, "1");
    out->failed = index->failed_column ? count_files(index, "failed IS NOT NULL") : 0;
    out->videos = index->frames_column ? count_files(index, "time IS NOT NULL") : 0;
    out->frames = index->frames_column ? count_where(index, "time IS NOT NULL") : 0;
    out->video_sampling = index->video_sampling;
    out->fast_decode = index->fast_decode;
    out->dim = index->dim;
    out->precision = index->precision;
    out->model_path = index->model_path;
    out->model_identity = index->identity;
    out->file_bytes = (uint64_t)bytes;
    return GLIMPSE_STATUS_OK;
}

glimpse_status glimpse_index_list_roots(glimpse_index *index, glimpse_index_root_callback on_root, void *user) {
    if (!index || !on_root) return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_index_list_roots: NULL argument");
    sqlite3_stmt *roots, *count;
    int code = sqlite3_prepare_v2(index->db, "SELECT path FROM roots ORDER BY path", -1, &roots, NULL);
    if (code == SQLITE_ERROR && strcmp(sqlite3_errmsg(index->db), "no such table: roots") == 0)
        return GLIMPSE_STATUS_OK; /* an index from before roots were recorded */
    if (code != SQLITE_OK) return prepare_error(index, code, "reading the paths indexed");
    code = sqlite3_prepare_v2(index->db, "SELECT COUNT(DISTINCT path) FROM images WHERE " PATH_IS_OR_UNDER, -1, &count,
                              NULL);
    glimpse_status status = code == SQLITE_OK ? GLIMPSE_STATUS_OK : prepare_error(index, code, "counting images");
    while (!status && (code = sqlite3_step(roots)) == SQLITE_ROW) {
        const char *path = (const char *)sqlite3_column_text(roots, 0);
        if (!path) continue;
        int counted;
        status = step_under(index, count, path, &counted);
        if (!status) on_root(user, path, (size_t)sqlite3_column_int64(count, 0), file_exists(path));
        sqlite3_reset(count);
    }
    if (!status && code != SQLITE_DONE) status = step_error(index, code, "reading the paths indexed");
    sqlite3_finalize(count);
    sqlite3_finalize(roots);
    return status;
}

glimpse_status glimpse_index_list(glimpse_index *index, glimpse_index_entry_callback on_entry, void *user) {
    if (!index || !on_entry) return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_index_list: NULL argument");
    sqlite3_stmt *statement;
    /* a video once, failed if its frames are */
    const char *sql = index->failed_column ? "SELECT path, MAX(failed) FROM images GROUP BY path ORDER BY path"
                                           : "SELECT path, NULL FROM images GROUP BY path ORDER BY path";
    int code = sqlite3_prepare_v2(index->db, sql, -1, &statement, NULL);
    if (code != SQLITE_OK) return prepare_error(index, code, "reading the index");
    while ((code = sqlite3_step(statement)) == SQLITE_ROW)
        if (sqlite3_column_text(statement, 0))
            on_entry(user, (const char *)sqlite3_column_text(statement, 0),
                     (const char *)sqlite3_column_text(statement, 1));
    glimpse_status status = code == SQLITE_DONE ? GLIMPSE_STATUS_OK : step_error(index, code, "reading the index");
    sqlite3_finalize(statement);
    return status;
}

/* A writing operation on a handle that may be read-only: refused, else the writer's lock taken. */
static glimpse_status begin_change(glimpse_index *index, const char *what) {
    if (index->read_only)
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "%s: %s needs the index opened with its model", index->path,
                         what);
    drop_cache(index);
    return writer_lock(index);
}

/* Deletes the rows of table whose path is path or lies below it; *removed counts them. */
static glimpse_status delete_under(glimpse_index *index, const char *table, const char *path, size_t *removed) {
    char sql[160];
    snprintf(sql, sizeof sql, "DELETE FROM %s WHERE " PATH_IS_OR_UNDER, table);
    sqlite3_stmt *remove;
    int code;
    glimpse_status status = transaction_begin(index, sql, "removing entries", &remove);
    sqlite3_stmt *files = NULL;
    if (!status && removed && sqlite3_prepare_v2(index->db, "SELECT COUNT(DISTINCT path) FROM images WHERE " PATH_IS_OR_UNDER,
                                                 -1, &files, NULL) != SQLITE_OK)
        status = db_error(index, "removing entries");
    if (!status && files && !(status = step_under(index, files, path, &code)))
        *removed = (size_t)sqlite3_column_int64(files, 0); /* files: a video's frames count once */
    sqlite3_finalize(files);
    if (!status) status = step_under(index, remove, path, &code);
    return transaction_end(index, remove, status);
}

/* A path given by a caller in the form the index stores: absolute, links
 * resolved when it exists, no trailing slash. NULL when out of memory; caller frees. */
static char *stored_form(const char *path) {
    char *absolute = realpath(path, NULL);
    if (!absolute && path[0] != '/') {
        char *here = getcwd(NULL, 0);
        absolute = here ? file_join(here, path) : NULL;
        free(here);
    } else if (!absolute) {
        absolute = strdup(path);
    }
    size_t length = absolute ? strlen(absolute) : 0;
    while (length > 1 && absolute[length - 1] == '/') absolute[--length] = '\0';
    return absolute;
}

glimpse_status glimpse_index_remove(glimpse_index *index, const char *path, size_t *removed) {
    if (!index || !path || !removed) return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_index_remove: NULL argument");
    *removed = 0;
    char *absolute = stored_form(path);
    if (!absolute) return ERROR_OOM();
    glimpse_status status = begin_change(index, "removing entries");
    if (status) {
        free(absolute);
        return status;
    }
    status = delete_under(index, "images", absolute, removed);
    if (!status) status = delete_under(index, "roots", absolute, NULL);
    if (!status) status = write_vectors(index);
    writer_unlock(index);
    free(absolute);
    return status;
}

glimpse_status glimpse_index_prune(glimpse_index *index, size_t *removed) {
    if (!index || !removed) return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_index_prune: NULL argument");
    *removed = 0;
    glimpse_status status = begin_change(index, "pruning");
    if (status) return status;
    stored_images stored = {0};
    status = read_stored(index, &stored);
    sqlite3_stmt *remove = NULL;
    if (!status) status = transaction_begin(index, "DELETE FROM images WHERE path = ?", "pruning", &remove);
    for (size_t r = 0; !status && r < stored.count; r++) {
        if (file_exists(stored.paths[r])) continue;
        sqlite3_bind_text(remove, 1, stored.paths[r], -1, SQLITE_STATIC);
        if (sqlite3_step(remove) != SQLITE_DONE) status = db_error(index, "pruning");
        sqlite3_reset(remove);
        (*removed)++;
    }
    if (remove) status = transaction_end(index, remove, status);
    if (status) *removed = 0; /* rolled back */
    /* the roots that are gone go too */
    if (!status) status = exec(index, "DELETE FROM roots WHERE NOT glimpse_file_exists(path)");
    if (!status) status = write_vectors(index);
    writer_unlock(index);
    stored_images_free(&stored);
    return status;
}

/* ---------------------------------------------------------------- search */

/* Room for the rows: MAX(rowid) is read from the b-tree's edge without a
 * scan and bounds the count from above (rowids are positive and distinct),
 * as does the database's size (each row holds its embedding); a damaged file
 * can record any rowid, so the smaller bound sizes the allocation. */
static glimpse_status row_capacity(glimpse_index *index, size_t *capacity) {
    sqlite3_stmt *statement;
    int code = sqlite3_prepare_v2(index->db, "SELECT MAX(rowid) FROM images", -1, &statement, NULL);
    if (code != SQLITE_OK) return prepare_error(index, code, "reading the index");
    code = sqlite3_step(statement);
    int64_t max_rowid = code == SQLITE_ROW ? sqlite3_column_int64(statement, 0) : 0;
    sqlite3_finalize(statement);
    if (code != SQLITE_ROW) return step_error(index, code, "reading the index");
    int64_t bytes = database_bytes(index);
    if (max_rowid < 0 || bytes < 0) return damaged(index, "its row numbers or size are impossible");
    uint64_t fit = (uint64_t)bytes / (index->dim * sizeof(float));
    uint64_t rows = (uint64_t)max_rowid < fit ? (uint64_t)max_rowid : fit;
    if (rows >= SIZE_MAX / (index->dim * sizeof(float)) - 1) return damaged(index, "its row count is impossible");
    *capacity = (size_t)rows + 1;
    return GLIMPSE_STATUS_OK;
}

/* The statement reading rows as check_row and row_time take them: path,
 * embedding, checksum (NULL in an index without), time (NULL in an index
 * before videos), WHERE condition. Written into sql (ROW_SELECT_CAPACITY). */
#define ROW_SELECT_CAPACITY 256
static const char *row_select(const glimpse_index *index, const char *condition, char *sql) {
    snprintf(sql, ROW_SELECT_CAPACITY, "SELECT path, embedding, %s, %s FROM images WHERE %s",
             index->checksummed ? "checksum" : "NULL", index->frames_column ? "time" : "NULL", condition);
    return sql;
}

/* A row's time (column 3 of row_select): negative for a still; damage unless
 * NULL or a number of seconds a video can have. */
static glimpse_status row_time(glimpse_index *index, sqlite3_stmt *row, double *time) {
    *time = -1;
    int type = sqlite3_column_type(row, 3);
    if (type == SQLITE_NULL) return GLIMPSE_STATUS_OK;
    double seconds = sqlite3_column_double(row, 3);
    if ((type != SQLITE_FLOAT && type != SQLITE_INTEGER) || !(seconds >= 0 && seconds < 1e9))
        return damaged(index, "a row's time is not a time in a video");
    *time = seconds;
    return GLIMPSE_STATUS_OK;
}

/* Damage unless the row (path, embedding, checksum if the index has them)
 * has the index's shape and matches its checksum. */
static glimpse_status check_row(glimpse_index *index, sqlite3_stmt *row) {
    const void *blob = sqlite3_column_blob(row, 1);
    size_t row_bytes = (size_t)sqlite3_column_bytes(row, 1);
    const char *path = (const char *)sqlite3_column_text(row, 0);
    if (sqlite3_column_type(row, 1) != SQLITE_BLOB || !blob || row_bytes != index->dim * sizeof(float) || !path) {
        char what[96];
        snprintf(what, sizeof what, "a row's embedding has %zu bytes, not %zu", row_bytes, index->dim * sizeof(float));
        if (sqlite3_column_type(row, 1) != SQLITE_BLOB) snprintf(what, sizeof what, "a row's embedding is not binary");
        return damaged(index, path ? what : "a row has no path");
    }
    if (index->checksummed && (sqlite3_column_type(row, 2) != SQLITE_INTEGER ||
                               sqlite3_column_int64(row, 2) !=
                                   row_checksum(path, (size_t)sqlite3_column_bytes(row, 0), blob, row_bytes)))
        return damaged(index, "a row's path or embedding does not match its checksum");
    return GLIMPSE_STATUS_OK;
}

/* Copies one row (path, embedding) into the cache as its index->count-th; a row of the wrong shape is damage. */
static glimpse_status load_row(glimpse_index *index, sqlite3_stmt *row, size_t capacity) {
    if (index->count == capacity) return damaged(index, "it holds more rows than its row numbers allow");
    glimpse_status status = check_row(index, row);
    if (status) return status;
    const char *path = (const char *)sqlite3_column_text(row, 0);
    const void *blob = sqlite3_column_blob(row, 1);
    size_t row_bytes = (size_t)sqlite3_column_bytes(row, 1);
    index->paths[index->count] = strdup(path);
    if (!index->paths[index->count]) return ERROR_OOM();
    if ((status = row_time(index, row, &index->times[index->count]))) return status;
    memcpy(index->matrix + index->count * index->dim, blob, row_bytes);
    index->count++;
    return GLIMPSE_STATUS_OK;
}

/* Reads every row into the cache within one read transaction: the bounds
 * and the rows come from the same state of the file. */
static glimpse_status read_rows(glimpse_index *index) {
    size_t capacity = 0;
    glimpse_status status = row_capacity(index, &capacity);
    if (status) return status;
    /* one allocation, in huge pages: faulting in 200 MB by 4 KiB pages, and
     * growing by copies, cost more than reading the rows */
    const size_t huge = (size_t)2 << 20;
    size_t bytes = capacity * index->dim * sizeof(float);
    size_t rounded = (bytes + huge - 1) / huge * huge;
    index->matrix = aligned_alloc(huge, rounded);
    index->paths = calloc(capacity, sizeof *index->paths);
    index->times = malloc(capacity * sizeof *index->times);
    index->scores = malloc(capacity * sizeof(float));
    if (!index->matrix || !index->paths || !index->times || !index->scores) return ERROR_OOM();
    madvise(index->matrix, rounded, MADV_HUGEPAGE);
    sqlite3_stmt *statement;
    /* failed entries (stale embeddings of files that no longer read) are left out */
    char sql[ROW_SELECT_CAPACITY];
    int code = sqlite3_prepare_v2(index->db,
                                  row_select(index, index->failed_column ? "failed IS NULL ORDER BY id" : "1 ORDER BY id",
                                             sql),
                                  -1, &statement, NULL);
    if (code != SQLITE_OK) return prepare_error(index, code, "reading the index");
    while (!status && (code = sqlite3_step(statement)) == SQLITE_ROW) status = load_row(index, statement, capacity);
    if (!status && code != SQLITE_DONE) status = step_error(index, code, "reading the index");
    sqlite3_finalize(statement);
    return status;
}

static glimpse_status load_cache(glimpse_index *index) {
    if (index->loaded) return GLIMPSE_STATUS_OK;
    glimpse_status status = exec(index, "BEGIN");
    if (status) return status;
    status = read_rows(index);
    sqlite3_exec(index->db, "COMMIT", NULL, NULL, NULL);
    if (status) {
        drop_cache(index);
        return status;
    }
    index->loaded = true;
    return GLIMPSE_STATUS_OK;
}

/* Maps the vector file if it is the index's current one (its stamp is the
 * one meta records), within a read transaction so that both come from the
 * same state; *usable false when there is none. */
static glimpse_status open_vectors(glimpse_index *index, bool *usable) {
    *usable = false;
    char *path = vector_file_path(index->path), *stamp = NULL;
    if (!path) return ERROR_OOM();
    glimpse_status status = exec(index, "BEGIN");
    if (!status) status = meta_get(index, "vectors", &stamp);
    if (!status && stamp) status = vector_file_open(&index->vectors, path, strtoull(stamp, NULL, 16), index->dim, usable);
    sqlite3_exec(index->db, "COMMIT", NULL, NULL, NULL);
    size_t count = index->vectors.count;
    if (!status && *usable) {
        index->fetched = calloc(count + 1, sizeof *index->fetched);
        index->fetched_times = malloc((count + 1) * sizeof *index->fetched_times);
        index->scan = malloc((2 * count + 1) * sizeof *index->scan);
        if (!index->fetched || !index->fetched_times || !index->scan) status = ERROR_OOM();
        index->vectors_open = true;
    }
    if (!status && !index->threads) status = pool_create(0, &index->threads);
    free(path), free(stamp);
    return status;
}

/* Row r of the vector file checked against its SQLite row (path, embedding
 * and checksum, the same floats); its path kept in index->fetched[r]. */
static glimpse_status check_vector_row(glimpse_index *index, sqlite3_stmt *lookup, size_t r) {
    const vector_file *v = &index->vectors;
    sqlite3_bind_int64(lookup, 1, v->ids[r]);
    int code = sqlite3_step(lookup);
    glimpse_status status = GLIMPSE_STATUS_OK;
    if (code == SQLITE_ROW) status = check_row(index, lookup);
    else if (code == SQLITE_DONE) status = damaged(index, "its vector file names a row it does not hold");
    else status = step_error(index, code, "reading the index");
    if (!status && memcmp(sqlite3_column_blob(lookup, 1), v->rows + r * v->dim, v->dim * sizeof(float)) != 0)
        status = damaged(index, "its vector file's embeddings are not its rows'");
    if (!status && !index->fetched[r] && !(index->fetched[r] = strdup((const char *)sqlite3_column_text(lookup, 0))))
        status = ERROR_OOM();
    if (!status) status = row_time(index, lookup, &index->fetched_times[r]);
    sqlite3_reset(lookup);
    return status;
}

/* Inserts (score, row) into the best-first list results[0..*n) of at most k. */
static void keep_best(glimpse_search_result *results, size_t *rows, size_t *n, size_t k, float score, size_t row,
                      const char *path, double time) {
    if (*n == k && !(score > results[*n - 1].score)) return;
    size_t at = *n < k ? (*n)++ : k - 1;
    while (at > 0 && score > results[at - 1].score) {
        results[at] = results[at - 1];
        if (rows) rows[at] = rows[at - 1];
        at--;
    }
    results[at] = (glimpse_search_result){path, score, time};
    if (rows) rows[at] = row;
}

/* Candidates taken from a scan for exact scoring: for the int8 scan, enough
 * for the top k to be the exact search's (see the README's measurement). */
static size_t candidate_count(size_t k) { return k * 8 < 256 ? 256 : k * 8; }

/* A candidate's score as both searches give it: its cosine summed in double
 * (the same number whichever scan found it), then the model's scale and bias. */
static float exact_score(const glimpse_index *index, double cosine) {
    return (float)cosine * index->logit_scale + index->logit_bias;
}

/* query · row in double, and (row_l1 not NULL) Σ|row|. */
static double row_dot(const float *query, const float *row, size_t dim, double *row_l1) {
    double dot = 0, l1 = 0;
    for (size_t d = 0; d < dim; d++) dot += (double)query[d] * row[d], l1 += fabs((double)row[d]);
    if (row_l1) *row_l1 = l1;
    return dot;
}

/* Whether an int8 score is as far from the float32 cosine as quantization
 * allows at most: q·w − q̂·ŵ = e_q·w + q̂·e_w, each error at most half its
 * row's step; beyond it, the file's float32 row is not its int8 twin's. */
static bool within_quantization(double cosine, float int8_score, double query_l1, double row_l1, float query_step,
                                float row_step, size_t dim) {
    double bound = query_step / 2.0 * row_l1 + row_step / 2.0 * (query_l1 + dim * query_step / 2.0);
    return fabs(cosine - int8_score) <= bound * 1.001 + 1e-5;
}

/* Rows of the vector file per task of the scan. */
#define SCAN_BLOCK_ROWS 8192

typedef struct scan_job {
    const glimpse_index *index;
    const int8_t *query; /* [depth] signed codes */
} scan_job;

static void scan_task(void *argument, size_t task, float *scratch) {
    (void)scratch;
    const scan_job *job = argument;
    const vector_file *v = &job->index->vectors;
    size_t first = task * SCAN_BLOCK_ROWS, count = v->count - first < SCAN_BLOCK_ROWS ? v->count - first : SCAN_BLOCK_ROWS;
    vector_scan(job->index->scan, job->index->scan + v->count, job->query, v, first, count);
}

/* The int8 scan of the whole vector file for the query's codes (index->scan),
 * and the codes' sums checked: damage if a row's are not the stored sum. */
static glimpse_status scan_codes(glimpse_index *index, const int8_t *query_codes) {
    const vector_file *v = &index->vectors;
    scan_job job = {.index = index, .query = query_codes};
    pool_for(index->threads, (v->count + SCAN_BLOCK_ROWS - 1) / SCAN_BLOCK_ROWS, scan_task, &job);
    const int32_t *sums = index->scan + v->count;
    for (size_t r = 0; r < v->count; r++)
        if (sums[r] != v->q8.sum[r]) return damaged(index, "its vector file's int8 rows do not match their sums");
    return GLIMPSE_STATUS_OK;
}

/* The search on the vector file: one int8 scan of every row (each code
 * read once, over the pool's threads), whose code sums must be the stored
 * ones (damaged codes show there), then the best candidates scored exactly
 * in float32, each as near its int8 score as quantization allows, and the
 * results checked against their SQLite rows. */
static glimpse_status search_vectors(glimpse_index *index, const float *query, size_t k, glimpse_search_result *results,
                                     size_t *found) {
    const vector_file *v = &index->vectors;
    const size_t n = v->count, dim = v->dim;
    char sql[ROW_SELECT_CAPACITY];
    uint8_t *query_u8 = malloc(v->q8.depth);
    int8_t *query_codes = malloc(v->q8.depth);
    size_t wanted = candidate_count(k) < n ? candidate_count(k) : n;
    glimpse_search_result *candidates = malloc((wanted + 1) * sizeof *candidates);
    size_t *rows = malloc((wanted + k + 1) * sizeof *rows);
    glimpse_status status = query_u8 && query_codes && candidates && rows ? GLIMPSE_STATUS_OK : ERROR_OOM();
    if (!status) {
        float query_step = q8_quantize_row(query_u8, query, dim, v->q8.depth);
        for (size_t d = 0; d < v->q8.depth; d++) query_codes[d] = (int8_t)(query_u8[d] - 128);
        status = scan_codes(index, query_codes);
        const int32_t *dots = index->scan;
        size_t taken = 0;
        for (size_t r = 0; !status && r < n; r++)
            keep_best(candidates, rows, &taken, wanted, (float)dots[r] * (query_step * v->q8.scale[r]), r, NULL, -1);
        /* the candidates scored exactly; each float32 row as near its int8 twin's score as quantization allows */
        double query_l1 = 0;
        for (size_t d = 0; d < dim; d++) query_l1 += fabs((double)query[d]);
        size_t kept = 0, *best = rows + wanted; /* the k best rows, after the candidates' */
        for (size_t c = 0; !status && c < taken; c++) {
            double row_l1, cosine = row_dot(query, v->rows + rows[c] * dim, dim, &row_l1);
            if (!within_quantization(cosine, candidates[c].score, query_l1, row_l1, query_step, v->q8.scale[rows[c]],
                                     dim))
                status = damaged(index, "its vector file's embeddings are not their int8 twins");
            else
                keep_best(results, best, &kept, k, exact_score(index, cosine), rows[c], NULL, -1);
        }
        /* the results checked against their SQLite rows, which give their paths */
        sqlite3_stmt *lookup = NULL;
        int code = status ? SQLITE_OK
                          : sqlite3_prepare_v2(index->db, row_select(index, "id = ?", sql), -1, &lookup, NULL);
        if (code != SQLITE_OK) status = prepare_error(index, code, "reading the index");
        for (size_t r = 0; !status && r < kept; r++) {
            status = check_vector_row(index, lookup, best[r]);
            results[r].path = index->fetched[best[r]];
            results[r].time = index->fetched_times[best[r]];
        }
        sqlite3_finalize(lookup);
        *found = status ? 0 : kept;
    }
    free(query_u8), free(query_codes), free(candidates), free(rows);
    return status;
}

/* The exact search over the rows loaded from SQLite: every score in one
 * float32 matrix-vector product, the best candidates scored as exact_score. */
static glimpse_status search_loaded(glimpse_index *index, const float *query, size_t k, glimpse_search_result *results,
                                    size_t *found) {
    glimpse_status status = load_cache(index);
    if (status || !k) return status;
    const kernel_weight matrix = kernel_weight_f32(index->matrix);
    kernel_linear(index->scores, index->count, query, index->dim, &matrix, NULL, 1, index->dim, index->count, false,
                  NULL);
    size_t wanted = candidate_count(k), taken = 0, n = 0;
    glimpse_search_result *candidates = malloc(wanted * sizeof *candidates);
    size_t *rows = malloc(wanted * sizeof *rows);
    if (!candidates || !rows) status = ERROR_OOM();
    for (size_t i = 0; !status && i < index->count; i++)
        keep_best(candidates, rows, &taken, wanted, index->scores[i], i, NULL, -1);
    for (size_t c = 0; !status && c < taken; c++)
        keep_best(results, NULL, &n, k, exact_score(index, row_dot(query, index->matrix + rows[c] * index->dim,
                                                                    index->dim, NULL)),
                  rows[c], index->paths[rows[c]], index->times[rows[c]]);
    free(candidates), free(rows);
    *found = n;
    return status;
}

glimpse_status glimpse_index_search(glimpse_index *index, const float *query, size_t k,
                                    glimpse_search_result *results, size_t *found) {
    if (!index || !query || !found || (k && !results))
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_index_search: NULL argument");
    *found = 0;
    bool usable = index->vectors_open;
    if (!index->loaded && !usable) {
        glimpse_status status = open_vectors(index, &usable);
        if (status) return status;
    }
    if (usable && !k) return GLIMPSE_STATUS_OK;
    return usable ? search_vectors(index, query, k, results, found) : search_loaded(index, query, k, results, found);
}

glimpse_status glimpse_index_verify(glimpse_index *index, bool *checksummed) {
    if (!index || !checksummed)
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_index_verify: NULL argument");
    *checksummed = index->checksummed;
    glimpse_status status = check_structure(index, "PRAGMA integrity_check(1)");
    if (status) return status;
    drop_cache(index);
    status = load_cache(index);
    /* the vector file, if it is the index's current one: the same rows, and every code's sum */
    bool usable = false;
    if (!status) status = open_vectors(index, &usable);
    if (!status && usable) {
        const vector_file *v = &index->vectors;
        int8_t *zeros = calloc(v->q8.depth + 1, 1);
        if (!zeros) status = ERROR_OOM();
        else if (v->count != index->count || memcmp(v->rows, index->matrix, v->count * v->dim * sizeof(float)) != 0)
            status = damaged(index, "its vector file's embeddings are not its rows'");
        else
            status = scan_codes(index, zeros);
        free(zeros);
    }
    return status;
}

/* ------------------------------------------------------ benchmark hooks */

glimpse_status index_bench_search_exact(glimpse_index *index, const float *query, size_t k,
                                        glimpse_search_result *results, size_t *found) {
    *found = 0;
    return search_loaded(index, query, k, results, found);
}

glimpse_status index_bench_insert(glimpse_index *index, const char *const *paths, const float *rows, size_t count) {
    sqlite3_stmt *insert;
    glimpse_status status = transaction_begin(index,
                                              "INSERT INTO images(path, size, mtime_ns, hash, embedding, checksum)"
                                              " VALUES (?1, 1, 1, ?2, ?3, glimpse_row_checksum(?1, ?3))",
                                              "storing rows", &insert);
    for (size_t r = 0; !status && r < count; r++) {
        sqlite3_bind_text(insert, 1, paths[r], -1, SQLITE_STATIC);
        sqlite3_bind_int64(insert, 2, (int64_t)r);
        sqlite3_bind_blob(insert, 3, rows + r * index->dim, (int)(index->dim * sizeof(float)), SQLITE_STATIC);
        if (sqlite3_step(insert) != SQLITE_DONE) status = db_error(index, "storing rows");
        sqlite3_reset(insert);
    }
    drop_cache(index);
    return transaction_end(index, insert, status);
}

glimpse_status index_bench_write_vectors(glimpse_index *index) {
    glimpse_status status = write_vectors(index);
    if (!status) sqlite3_exec(index->db, "PRAGMA wal_checkpoint(TRUNCATE)", NULL, NULL, NULL);
    return status;
}

/* ------------------------------------------------- similar pictures */

glimpse_status glimpse_index_embedding(glimpse_index *index, const char *path, float *out) {
    if (!index || !path || !out) return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_index_embedding: NULL argument");
    char *stored = stored_form(path);
    if (!stored) return ERROR_OOM();
    char sql[ROW_SELECT_CAPACITY]; /* a video's first frame */
    row_select(index, index->failed_column ? "path = ? AND failed IS NULL ORDER BY id LIMIT 1" : "path = ? ORDER BY id LIMIT 1",
               sql);
    sqlite3_stmt *statement;
    int code = sqlite3_prepare_v2(index->db, sql, -1, &statement, NULL);
    glimpse_status status = code == SQLITE_OK ? GLIMPSE_STATUS_OK : prepare_error(index, code, "reading the index");
    if (!status) {
        sqlite3_bind_text(statement, 1, stored, -1, SQLITE_STATIC);
        code = sqlite3_step(statement);
        if (code == SQLITE_ROW && !(status = check_row(index, statement)))
            memcpy(out, sqlite3_column_blob(statement, 1), index->dim * sizeof(float));
        else if (code == SQLITE_DONE)
            status = error_set(GLIMPSE_STATUS_NOT_FOUND, "%s is not in %s", stored, index->path);
        else if (code != SQLITE_ROW)
            status = step_error(index, code, "reading the index");
    }
    sqlite3_finalize(statement);
    free(stored);
    return status;
}

/* Union-find over the cached rows: the root of row r, paths halved on the way. */
static size_t group_root(size_t *parent, size_t r) {
    while (parent[r] != r) r = parent[r] = parent[parent[r]];
    return r;
}

/* Joins every pair of cached rows whose cosine is at least min_cosine
 * (parent: one group per row to start with). The pairs are scored a block
 * of rows at a time against the rows after the block's first, one product each. */
static glimpse_status join_similar(glimpse_index *index, float min_cosine, size_t *parent) {
    const size_t n = index->count, dim = index->dim;
    size_t block = n ? ((size_t)16 << 20) / n : 1; /* about 64 MB of scores at a time */
    block = block < 1 ? 1 : block > 256 ? 256 : block;
    float *scores = malloc(block * (n ? n : 1) * sizeof(float));
    if (!scores) return ERROR_OOM();
    for (size_t first = 0; first < n; first += block) {
        size_t rows = n - first < block ? n - first : block, columns = n - first;
        const kernel_weight after = kernel_weight_f32(index->matrix + first * dim);
        kernel_linear(scores, columns, index->matrix + first * dim, dim, &after, NULL, rows, dim, columns, false,
                      NULL);
        for (size_t i = 0; i < rows; i++)
            for (size_t j = i + 1; j < columns; j++)
                if (scores[i * columns + j] >= min_cosine &&
                    !(index->times[first + i] >= 0 && strcmp(index->paths[first + i], index->paths[first + j]) == 0))
                    parent[group_root(parent, first + i)] = group_root(parent, first + j);
    }
    free(scores);
    return GLIMPSE_STATUS_OK;
}

glimpse_status glimpse_index_duplicates(glimpse_index *index, float min_cosine, glimpse_index_group_callback on_group,
                                        void *user, size_t *groups) {
    if (!index || !on_group || !groups)
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_index_duplicates: NULL argument");
    *groups = 0;
    glimpse_status status = load_cache(index);
    if (status) return status;
    const size_t n = index->count, dim = index->dim;
    size_t *parent = malloc((n + 1) * sizeof *parent), *members = malloc((n + 1) * sizeof *members);
    const char **paths = malloc((n + 1) * sizeof *paths);
    float *similarity = malloc((n + 1) * sizeof *similarity);
    if (!parent || !members || !paths || !similarity) status = ERROR_OOM();
    for (size_t r = 0; !status && r < n; r++) parent[r] = r;
    if (!status) status = join_similar(index, min_cosine, parent);
    /* each group's rows in order, gathered by a counting sort on their roots */
    size_t *start = status ? NULL : calloc(n + 1, sizeof *start);
    if (!status && !start) status = ERROR_OOM();
    for (size_t r = 0; !status && r < n; r++) start[group_root(parent, r) + 1]++;
    for (size_t r = 0; !status && r < n; r++) start[r + 1] += start[r];
    for (size_t r = 0; !status && r < n; r++) members[start[group_root(parent, r)]++] = r;
    for (size_t root = 0, from = 0; !status && root < n; root++) {
        size_t to = start[root], count = to - from; /* start[root] moved to the group's end */
        /* a video once, by its frame nearest the group's first */
        const float *first = index->matrix + members[from] * dim;
        size_t files = 0;
        for (size_t m = 0; count >= 2 && m < count; m++) {
            const float *row = index->matrix + members[from + m] * dim;
            double dot = 0;
            for (size_t d = 0; d < dim; d++) dot += (double)first[d] * row[d];
            const char *path = index->paths[members[from + m]];
            size_t seen = 0;
            while (seen < files && strcmp(paths[seen], path) != 0) seen++;
            if (seen == files) paths[files] = path, similarity[files++] = (float)dot;
            else if ((float)dot > similarity[seen] && seen > 0) similarity[seen] = (float)dot;
        }
        if (files >= 2) {
            on_group(user, paths, similarity, files);
            (*groups)++;
        }
        from = to;
    }
    free(start), free(parent), free(members), free(paths), free(similarity);
    return status;
}
