/* index_open.c — opening a glimpse_index: the SQLite file created or opened
 * (read-only ones immutable), its model record checked against the model
 * given, an older index upgraded in place (checksums, video frames), and the
 * handle's accessors. Also the SQLite helpers every index file uses
 * (index_internal.h). Reads and writes no rows of pictures. */
#include <ctype.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/identity.h"
#include "core/error.h"
#include "core/file.h"
#include "search/walk.h"
#include "search/index_internal.h"

/* Milliseconds a write waits for another process's to finish before failing. */
#define INDEX_BUSY_TIMEOUT_MS 10000
/* config.json's bound on projection_dim: a larger recorded size means a damaged index. */
#define INDEX_MAX_EMBEDDING_DIM 65536
/* meta's "format" of an index whose rows carry checksums; older ones have none (no "format", no column). */
#define INDEX_FORMAT "3"

glimpse_status index_db_error(glimpse_index *index, const char *what) {
    return error_set(GLIMPSE_STATUS_IO, "%s: %s: %s", index->path, what, sqlite3_errmsg(index->db));
}

/* The checksum of a row: its path's bytes and its embedding's. */
int64_t index_row_checksum(const void *path, size_t path_bytes, const void *embedding, size_t embedding_bytes) {
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
    sqlite3_result_int64(call, index_row_checksum(path ? path : &none, path ? path_bytes : 0,
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
glimpse_status index_damaged(glimpse_index *index, const char *what) {
    return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s is damaged: %s; rebuild it with glimpse index", index->path, what);
}

/* The failure of a statement that ended with SQLite's result code: damage
 * (a corrupt page, a file that is no database) as damage, the rest as I/O. */
glimpse_status index_step_error(glimpse_index *index, int code, const char *what) {
    return damage_code(code) ? index_damaged(index, sqlite3_errmsg(index->db)) : index_db_error(index, what);
}

glimpse_status index_exec(glimpse_index *index, const char *sql) {
    char *message = NULL;
    int code = sqlite3_exec(index->db, sql, NULL, NULL, &message);
    glimpse_status status = GLIMPSE_STATUS_OK;
    const char *reason = message ? message : "SQL error";
    if (code != SQLITE_OK && damage_code(code)) status = index_damaged(index, reason);
    else if (code != SQLITE_OK) status = error_set(GLIMPSE_STATUS_IO, "%s: %s", index->path, reason);
    sqlite3_free(message);
    return status;
}

/* The failure to prepare one of the index's own statements: a table or
 * column it names that is not there means the schema itself is damaged. */
glimpse_status index_prepare_error(glimpse_index *index, int code, const char *what) {
    if (code != SQLITE_ERROR) return index_step_error(index, code, what);
    char reason[160];
    snprintf(reason, sizeof reason, "its tables are not as glimpse made them (%s)", sqlite3_errmsg(index->db));
    return index_damaged(index, reason);
}

/* meta's value for key in *value (NULL when the key is not there); a read that fails is an error. */
glimpse_status index_meta_get(glimpse_index *index, const char *key, char **value) {
    *value = NULL;
    sqlite3_stmt *statement;
    int code = sqlite3_prepare_v2(index->db, "SELECT value FROM meta WHERE key = ?", -1, &statement, NULL);
    if (code == SQLITE_ERROR && strcmp(sqlite3_errmsg(index->db), "no such table: meta") == 0)
        return GLIMPSE_STATUS_OK; /* not a glimpse index */
    if (code != SQLITE_OK) return index_prepare_error(index, code, "reading the index's model");
    sqlite3_bind_text(statement, 1, key, -1, SQLITE_STATIC);
    code = sqlite3_step(statement);
    if (code == SQLITE_ROW && sqlite3_column_text(statement, 0))
        *value = strdup((const char *)sqlite3_column_text(statement, 0));
    glimpse_status status = GLIMPSE_STATUS_OK;
    if (code == SQLITE_ROW && sqlite3_column_text(statement, 0) && !*value) status = ERROR_OOM();
    else if (code != SQLITE_ROW && code != SQLITE_DONE) status = index_step_error(index, code, "reading the index's model");
    sqlite3_finalize(statement);
    return status;
}

/* Index files up to this size are checked with PRAGMA quick_check when opened. */
#define INDEX_QUICK_CHECK_MAX_BYTES ((int64_t)64 << 20)

/* Runs PRAGMA pragma (quick_check or integrity_check): any finding is damage. */
glimpse_status index_check_structure(glimpse_index *index, const char *pragma) {
    sqlite3_stmt *statement;
    int code = sqlite3_prepare_v2(index->db, pragma, -1, &statement, NULL);
    if (code != SQLITE_OK) return index_step_error(index, code, "checking the index");
    code = sqlite3_step(statement);
    const char *finding = code == SQLITE_ROW ? (const char *)sqlite3_column_text(statement, 0) : NULL;
    glimpse_status status = GLIMPSE_STATUS_OK;
    if (code != SQLITE_ROW) status = index_step_error(index, code, "checking the index");
    else if (!finding || strcmp(finding, "ok") != 0) {
        /* SQLite's finding on one line, without its "*** in database main ***" heading */
        char reason[200];
        const char *heading = "*** in database main ***\n";
        if (finding && strncmp(finding, heading, strlen(heading)) == 0) finding += strlen(heading);
        snprintf(reason, sizeof reason, "%s", finding ? finding : "?");
        for (char *c = reason; *c; c++)
            if (*c == '\n') *c = ' ';
        status = index_damaged(index, reason);
    }
    sqlite3_finalize(statement);
    return status;
}

/* The database's size in bytes as this connection sees it (write-ahead log included); -1 on failure. */
int64_t index_database_bytes(glimpse_index *index) {
    sqlite3_stmt *statement;
    int64_t bytes = -1;
    if (sqlite3_prepare_v2(index->db, "SELECT page_count * page_size FROM pragma_page_count, pragma_page_size", -1,
                           &statement, NULL) == SQLITE_OK) {
        if (sqlite3_step(statement) == SQLITE_ROW) bytes = sqlite3_column_int64(statement, 0);
        sqlite3_finalize(statement);
    }
    return bytes;
}

glimpse_status index_meta_set(glimpse_index *index, const char *key, const char *value) {
    sqlite3_stmt *statement;
    if (sqlite3_prepare_v2(index->db, "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", -1, &statement,
                           NULL) != SQLITE_OK)
        return index_db_error(index, "writing the model's identity");
    sqlite3_bind_text(statement, 1, key, -1, SQLITE_STATIC);
    sqlite3_bind_text(statement, 2, value, -1, SQLITE_STATIC);
    bool done = sqlite3_step(statement) == SQLITE_DONE;
    sqlite3_finalize(statement);
    return done ? GLIMPSE_STATUS_OK : index_db_error(index, "writing the model's identity");
}

glimpse_status index_read_begin(glimpse_index *index, bool *began) {
    *began = sqlite3_get_autocommit(index->db) != 0;
    return *began ? index_exec(index, "BEGIN") : GLIMPSE_STATUS_OK;
}

void index_read_end(glimpse_index *index, bool began) {
    if (began) sqlite3_exec(index->db, "COMMIT", NULL, NULL, NULL);
}

void index_drop_cache(glimpse_index *index) {
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
    for (size_t i = 0; i < index->filtered_count; i++) free(index->filtered_paths[i]);
    free(index->filtered_paths);
    index->filtered_paths = NULL;
    index->filtered_count = 0;
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
        if (opened != SQLITE_OK) return index_db_error(index, "cannot open");
        sqlite3_busy_timeout(index->db, INDEX_BUSY_TIMEOUT_MS);
        return index_exec(index, "PRAGMA mmap_size=4294967296;");
    }
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
    if (sqlite3_open_v2(index->path, &index->db, flags | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK)
        return index_db_error(index, "cannot open");
    sqlite3_busy_timeout(index->db, INDEX_BUSY_TIMEOUT_MS);
    if (sqlite3_create_function(index->db, "glimpse_row_checksum", 2, SQLITE_UTF8 | SQLITE_DETERMINISTIC, NULL,
                                sql_row_checksum, NULL, NULL) != SQLITE_OK ||
        sqlite3_create_function(index->db, "glimpse_file_exists", 1, SQLITE_UTF8, NULL, sql_file_exists, NULL,
                                NULL) != SQLITE_OK)
        return index_db_error(index, "cannot open");
    return index_exec(index, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA mmap_size=4294967296;"
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
    glimpse_status status = index_meta_get(index, "checksum", &recorded);
    if (!status && (!recorded || strcmp(recorded, expected) != 0))
        status = index_damaged(index, "its model record does not match its checksum");
    free(recorded);
    return status;
}

/* Whether the table images has the column (an index made before checksums, or before failed entries, lacks it). */
static glimpse_status has_column(glimpse_index *index, const char *column, bool *has) {
    sqlite3_stmt *statement;
    int code = sqlite3_prepare_v2(index->db, "SELECT 1 FROM pragma_table_info('images') WHERE name = ?", -1,
                                  &statement, NULL);
    if (code != SQLITE_OK) return index_prepare_error(index, code, "reading the index's columns");
    sqlite3_bind_text(statement, 1, column, -1, SQLITE_STATIC);
    code = sqlite3_step(statement);
    sqlite3_finalize(statement);
    *has = code == SQLITE_ROW;
    return code == SQLITE_ROW || code == SQLITE_DONE ? GLIMPSE_STATUS_OK
                                                     : index_step_error(index, code, "reading the index's columns");
}

/* Gives an index made before checksums its rows' and its model record's, in
 * one transaction recorded as meta's "format". */
static glimpse_status add_checksums(glimpse_index *index, const char *identity, const char *dim, const char *scale,
                                    const char *bias) {
    char checksum[24];
    model_record_checksum(identity, index->model_path, dim, scale, bias, checksum);
    glimpse_status status = index_exec(index, "BEGIN IMMEDIATE");
    if (!status) status = index_exec(index, "ALTER TABLE images ADD COLUMN checksum INTEGER");
    if (!status) status = index_exec(index, "UPDATE images SET checksum = glimpse_row_checksum(path, embedding)");
    if (!status) status = index_meta_set(index, "checksum", checksum);
    if (!status) status = index_meta_set(index, "format", INDEX_FORMAT);
    if (!status) return index_exec(index, "COMMIT");
    sqlite3_exec(index->db, "ROLLBACK", NULL, NULL, NULL);
    return status;
}

/* Rebuilds an index made before videos into format 3 (frame and time
 * columns, UNIQUE(path, frame)) in place: one transaction, every row and id
 * kept as frame 0 of its file, so its vector file stays valid. SQLite cannot
 * drop a UNIQUE constraint, hence a new table renamed over the old. */
static glimpse_status add_frames(glimpse_index *index) {
    glimpse_status status = index_exec(index, "BEGIN IMMEDIATE");
    if (!status)
        status = index_exec(index, "CREATE TABLE images_frames(" IMAGES_COLUMNS ");"
                             "INSERT INTO images_frames(id, path, size, mtime_ns, hash, embedding, checksum, failed)"
                             " SELECT id, path, size, mtime_ns, hash, embedding, checksum, failed FROM images;"
                             "DROP TABLE images;"
                             "ALTER TABLE images_frames RENAME TO images;"
                             "CREATE INDEX IF NOT EXISTS images_hash ON images(hash);");
    if (!status) status = index_meta_set(index, "format", INDEX_FORMAT);
    if (!status) return index_exec(index, "COMMIT");
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
    glimpse_status status = index_exec(index, "BEGIN");
    if (!status) status = index_meta_set(index, "model_identity", identity);
    if (!status) status = index_meta_set(index, "model_path", folder);
    if (!status) status = index_meta_set(index, "dim", dim);
    if (!status) status = index_meta_set(index, "logit_scale", scale);
    if (!status) status = index_meta_set(index, "logit_bias", bias);
    if (!status) status = index_meta_set(index, "checksum", checksum);
    if (!status) status = index_meta_set(index, "format", INDEX_FORMAT);
    if (!status) status = index_exec(index, "COMMIT");
    free(index->model_path);
    index->model_path = strdup(folder);
    if (!status && !index->model_path) status = ERROR_OOM();
    free(absolute);
    return status;
}

const char *index_precision_name(glimpse_precision precision) {
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
                         index_precision_name(index->precision), index_precision_name(info->precision),
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
    if (!precision_recorded && (status = index_meta_set(index, "precision", index_precision_name(info.precision)))) return status;
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
        return index_damaged(index, "its embedding size is not a number of dimensions");
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
    int64_t bytes = status ? -1 : index_database_bytes(index);
    if (!status && bytes < 0) status = index_damaged(index, sqlite3_errmsg(index->db));
    if (!status && bytes <= INDEX_QUICK_CHECK_MAX_BYTES) status = index_check_structure(index, "PRAGMA quick_check(1)");
    char *identity = NULL, *dim = NULL, *scale = NULL, *bias = NULL, *precision = NULL;
    if (!status) status = index_meta_get(index, "model_identity", &identity);
    if (!status) status = index_meta_get(index, "dim", &dim);
    if (!status) status = index_meta_get(index, "logit_scale", &scale);
    if (!status) status = index_meta_get(index, "logit_bias", &bias);
    if (!status) status = index_meta_get(index, "model_path", &index->model_path);
    if (!status) status = has_column(index, "checksum", &index->checksummed);
    if (!status) status = has_column(index, "failed", &index->failed_column);
    if (!status && model && !index->failed_column) status = index_exec(index, "ALTER TABLE images ADD COLUMN failed TEXT");
    if (!status && model) index->failed_column = true;
    if (!status) status = has_column(index, "time", &index->frames_column);
    char *decode = NULL;
    if (!status) status = index_meta_get(index, "video_sampling", &index->video_sampling);
    if (!status) status = index_meta_get(index, "decode", &decode);
    index->fast_decode = decode && strcmp(decode, "fast") == 0;
    free(decode);
    if (!status) status = index_meta_get(index, "precision", &precision);
    if (!status && index->checksummed && identity) status = check_model_record(index, identity, dim, scale, bias);
    else if (!status && index->checksummed && !model) status = index_damaged(index, "its model record is missing");
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
    index_drop_cache(index);
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
