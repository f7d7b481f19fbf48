/* test_index_damage.c — a damaged search index gives either the correct full
 * results or a damage report: 2000 bytes of garbage written at 24 offsets
 * across a small index file (44 KiB: every byte damaged at least once), and 7
 * bytes at 150, then `glimpse search` run on each copy; never a crash, a hang,
 * or exit 0 with different results (issue 15, defect 3);
 * the same for the vector file beside the index (FILE.vectors, 4 KiB: 2000
 * bytes at 8 offsets, 7 at 50), and for the index damaged with its vector file there;
 * one byte of one stored vector changed, caught by the rows' checksums; an
 * index older than the checksums, searched as it is and upgraded when written. */
#include <setjmp.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "core/file.h"
#include "glimpse.h"
#include "support.h"

static char workspace[] = "/tmp/glimpse-damage-XXXXXX";
static char db[600], reference[600];


/* A small CLIP of random weights, 24 pictures, their index and the search's answer on it. */
static int setup(void **state) {
    (void)state;
    if (!mkdtemp(workspace)) return -1;
    char config[700], command[4096];
    snprintf(config, sizeof config, "%s/config.json", workspace);
    FILE *f = fopen(config, "w");
    if (!f) return -1;
    fputs(TINY_CLIP_CONFIG, f);
    fclose(f);
    snprintf(db, sizeof db, "%s/index.db", workspace);
    snprintf(reference, sizeof reference, "%s/reference.json", workspace);
    snprintf(command, sizeof command,
             "%s %s %s/model --seed 1 > /dev/null && %s --out %s/pictures --seed 3 --count 24 && "
             "%s index -m %s/model --db %s --quiet %s/pictures > /dev/null && "
             "%s search --db %s -k 100 --json 'a red circle' > %s",
             GLIMPSE_MAKE_MODEL, config, workspace, GLIMPSE_MAKE_PICTURES, workspace, GLIMPSE_BINARY, workspace, db,
             workspace, GLIMPSE_BINARY, db, reference);
    return system(command) == 0 ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    char command[700];
    snprintf(command, sizeof command, "rm -rf %s", workspace);
    return system(command) == 0 ? 0 : -1;
}

static char *read_text(const char *path) {
    uint8_t *bytes;
    size_t size;
    assert_int_equal(file_read_all(path, 1 << 20, &bytes, &size), GLIMPSE_STATUS_OK);
    char *text = malloc(size + 1);
    assert_non_null(text);
    memcpy(text, bytes, size);
    text[size] = '\0';
    free(bytes);
    return text;
}

/* How a search of a damaged copy ended. */
typedef enum { OUTCOME_SAME, OUTCOME_DAMAGE_REPORTED, OUTCOME_WRONG } outcome;

/* Runs `glimpse search` on copy (killed after 30 s) and judges its answer against the undamaged one's. */
static outcome search_damaged(const char *copy, char *why, size_t why_size) {
    char command[4096], output[700], errors[700];
    snprintf(output, sizeof output, "%s/damaged.json", workspace);
    snprintf(errors, sizeof errors, "%s/damaged.err", workspace);
    snprintf(command, sizeof command, "timeout -s KILL 30 %s search --db %s -k 100 --json 'a red circle' > %s 2> %s",
             GLIMPSE_BINARY, copy, output, errors);
    int wait_status = system(command);
    char *expected = read_text(reference), *got = read_text(output), *message = read_text(errors);
    int code = WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : -1;
    outcome result = OUTCOME_WRONG;
    if (code == 0 && strcmp(expected, got) == 0)
        result = OUTCOME_SAME;
    else if (code > 0 && code < 124 && strstr(message, " is damaged: ") && strstr(message, "rebuild it"))
        result = OUTCOME_DAMAGE_REPORTED;
    snprintf(why, why_size, "exit %d, %zu of %zu bytes of results, stderr: %.300s", code, strlen(got),
             strlen(expected), message);
    free(expected), free(got), free(message);
    return result;
}

/* Copies the file source to copy with `length` bytes of pseudo-random garbage at offset. */
static void damage_file(const char *source, const char *copy, size_t offset, size_t length, uint32_t seed) {
    uint8_t *bytes;
    size_t size;
    assert_int_equal(file_read_all(source, 1 << 26, &bytes, &size), GLIMPSE_STATUS_OK);
    for (size_t i = offset; i < offset + length && i < size; i++) {
        seed = seed * 1664525u + 1013904223u;
        bytes[i] = (uint8_t)(seed >> 24);
    }
    FILE *f = fopen(copy, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(bytes, 1, size, f), size);
    fclose(f);
    free(bytes);
}

/* Copies the index to copy (without a vector file) with `length` bytes of pseudo-random garbage at offset. */
static void damage_copy(const char *copy, size_t offset, size_t length, uint32_t seed) {
    char vectors[800];
    snprintf(vectors, sizeof vectors, "%s.vectors", copy);
    unlink(vectors);
    damage_file(db, copy, offset, length, seed);
}

/* What damage_at_offsets damages. */
typedef enum { DAMAGE_INDEX_ALONE, DAMAGE_INDEX_BESIDE_VECTORS, DAMAGE_VECTORS } damage_target;

/* Writes `length` bytes of garbage at each of `offsets` offsets spread evenly over the whole file (the
 * index, alone or with its vector file, or the vector file), and expects each search to give the correct
 * full results or a damage report. */
static void damage_at_offsets(int offsets, size_t length, damage_target target) {
    char copy[700], why[600], vectors[700], copy_vectors[800];
    snprintf(copy, sizeof copy, "%s/damaged.db", workspace);
    snprintf(vectors, sizeof vectors, "%s.vectors", db);
    snprintf(copy_vectors, sizeof copy_vectors, "%s.vectors", copy);
    uint8_t *bytes;
    size_t size;
    assert_int_equal(file_read_all(target == DAMAGE_VECTORS ? vectors : db, 1 << 26, &bytes, &size), GLIMPSE_STATUS_OK);
    free(bytes);
    if (length >= 1000 && (size - 1) / (size_t)(offsets - 1) > length)
        fail_msg("%d offsets of %zu bytes leave parts of the %zu-byte file undamaged: raise the count", offsets,
                 length, size);
    int counts[3] = {0, 0, 0};
    for (int i = 0; i < offsets; i++) {
        size_t offset = (size - 1) * (size_t)i / (size_t)(offsets - 1);
        damage_copy(copy, target == DAMAGE_VECTORS ? 0 : offset, target == DAMAGE_VECTORS ? 0 : length,
                    12345u + (uint32_t)i);
        if (target != DAMAGE_INDEX_ALONE)
            damage_file(vectors, copy_vectors, offset, target == DAMAGE_VECTORS ? length : 0, 777u + (uint32_t)i);
        outcome result = search_damaged(copy, why, sizeof why);
        counts[result]++;
        if (result == OUTCOME_WRONG) print_message("offset %zu of %zu: %s\n", offset, size, why);
    }
    print_message("%zu bytes at %d offsets over %zu: %d same full results, %d damage reported, %d wrong\n", length,
                  offsets, size, counts[OUTCOME_SAME], counts[OUTCOME_DAMAGE_REPORTED], counts[OUTCOME_WRONG]);
    assert_int_equal(counts[OUTCOME_WRONG], 0);
}

/* 2000 bytes, as a bad sector or a stray write leaves them, at 24 offsets: less than 2000 bytes apart over
 * the 44 KiB file, so that every byte is damaged at least once. */
static void test_damage_at_many_offsets(void **state) {
    (void)state;
    damage_at_offsets(24, 2000, DAMAGE_INDEX_ALONE);
    damage_at_offsets(24, 2000, DAMAGE_INDEX_BESIDE_VECTORS);
}

/* The vector file (4 KiB) damaged, the index intact: 2000 bytes at 8 offsets, 7 at 50 (one in each
 * 90 bytes). */
static void test_vector_file_damage(void **state) {
    (void)state;
    damage_at_offsets(8, 2000, DAMAGE_VECTORS);
    damage_at_offsets(50, 7, DAMAGE_VECTORS);
}

/* 7 bytes at 150 offsets: small enough to change one value (the logit scale,
 * a column's name in the schema) and leave every page well formed. Under
 * AddressSanitizer, 50 of them: the pass looks for memory errors in the same
 * reading code, and its 150 searches were the longest test of its run (97 of
 * the sanitizer pass's 253 test seconds, in a suite at the edge of its 15
 * minutes); the plain pass still checks all 150 outcomes. */
static void test_small_damage_at_many_offsets(void **state) {
    (void)state;
#ifdef __SANITIZE_ADDRESS__
    damage_at_offsets(50, 7, DAMAGE_INDEX_ALONE);
#else
    damage_at_offsets(150, 7, DAMAGE_INDEX_ALONE);
#endif
}

/* The text of the first column of sql's first row on the index file at path; caller frees. */
static char *query_text(const char *path, const char *sql) {
    sqlite3 *connection;
    sqlite3_stmt *statement;
    assert_int_equal(sqlite3_open(path, &connection), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(connection, sql, -1, &statement, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(statement), SQLITE_ROW);
    assert_non_null(sqlite3_column_text(statement, 0));
    char *text = strdup((const char *)sqlite3_column_text(statement, 0));
    assert_non_null(text);
    sqlite3_finalize(statement);
    sqlite3_close(connection);
    return text;
}

/* The images table's first page damaged: `glimpse index` reports damage too, with exit status 1. */
static void test_index_reports_damage(void **state) {
    (void)state;
    char *root = query_text(db, "SELECT (rootpage - 1) * (SELECT page_size FROM pragma_page_size)"
                                " FROM sqlite_schema WHERE name = 'images'");
    size_t offset = strtoul(root, NULL, 10);
    free(root);
    char copy[700], command[4096], errors[700];
    snprintf(copy, sizeof copy, "%s/root.db", workspace);
    snprintf(errors, sizeof errors, "%s/root.err", workspace);
    damage_copy(copy, offset, 2000, 7);
    snprintf(command, sizeof command, "%s index -m %s/model --db %s --quiet %s/pictures > /dev/null 2> %s",
             GLIMPSE_BINARY, workspace, copy, workspace, errors);
    int status = system(command);
    char *message = read_text(errors);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 1 || !strstr(message, " is damaged: "))
        fail_msg("glimpse index of a damaged index: status %d, said: %s", status, message);
    free(message);
}

/* Runs sql on the index file at path through SQLite. */
static void change(const char *path, const char *sql) {
    sqlite3 *connection;
    assert_int_equal(sqlite3_open(path, &connection), SQLITE_OK);
    char *message = NULL;
    if (sqlite3_exec(connection, sql, NULL, NULL, &message) != SQLITE_OK) fail_msg("%s: %s", sql, message);
    sqlite3_close(connection);
}

/* Copies the index to copy and runs sql on the copy. */
static void copy_and_change(const char *copy, const char *sql) {
    damage_copy(copy, 0, 0, 0);
    change(copy, sql);
}

/* Whether `glimpse index --check` of path exits with code and prints expected (on stdout or stderr). */
static void check_says(const char *path, int code, const char *expected) {
    char command[4096], output[700];
    snprintf(output, sizeof output, "%s/check.txt", workspace);
    snprintf(command, sizeof command, "%s index --check --db %s > %s 2>&1", GLIMPSE_BINARY, path, output);
    int status = system(command);
    char *said = read_text(output);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != code || !strstr(said, expected))
        fail_msg("index --check of %s: status %d, said: %s", path, status, said);
    free(said);
}

/* A byte inside one stored vector, changed with a valid page around it: only the checksum sees it. */
static void test_changed_vector_is_caught(void **state) {
    (void)state;
    char copy[700], why[600];
    snprintf(copy, sizeof copy, "%s/vector.db", workspace);
    copy_and_change(copy, "UPDATE images SET embedding = CAST(substr(embedding, 1, 9) || x'5a' || substr(embedding, 11)"
                          " AS BLOB)"
                          " WHERE id = (SELECT MIN(id) + 3 FROM images)");
    assert_int_equal(search_damaged(copy, why, sizeof why), OUTCOME_DAMAGE_REPORTED);
    check_says(copy, 1, "is damaged: a row's path or embedding does not match its checksum");
    check_says(db, 0, "every row's checksum are intact");
    /* and a path changed the same way */
    copy_and_change(copy, "UPDATE images SET path = path || 'x' WHERE id = (SELECT MIN(id) + 5 FROM images)");
    assert_int_equal(search_damaged(copy, why, sizeof why), OUTCOME_DAMAGE_REPORTED);
}

/* An index made before checksums: searched as it is, without a word; given them by the next writing open. */
static void test_old_index_is_upgraded(void **state) {
    (void)state;
    char copy[700], why[600], command[4096];
    snprintf(copy, sizeof copy, "%s/old.db", workspace);
    copy_and_change(copy, "ALTER TABLE images DROP COLUMN checksum;"
                          " DELETE FROM meta WHERE key IN ('format', 'checksum')");
    assert_int_equal(search_damaged(copy, why, sizeof why), OUTCOME_SAME);
    check_says(copy, 0, "made before row checksums");
    snprintf(command, sizeof command, "%s index -m %s/model --db %s --quiet %s/pictures > /dev/null", GLIMPSE_BINARY,
             workspace, copy, workspace);
    assert_int_equal(system(command), 0);
    assert_int_equal(search_damaged(copy, why, sizeof why), OUTCOME_SAME);
    char *upgrade = query_text(copy, "SELECT (SELECT value FROM meta WHERE key = 'format') || ', ' ||"
                                     " (SELECT COUNT(*) FROM images WHERE checksum IS NULL)");
    assert_string_equal(upgrade, "3, 0"); /* format 3 (videos' frames), no row without its checksum */
    free(upgrade);
    /* upgraded, it is verified: a changed vector is caught */
    change(copy, "UPDATE images SET embedding = CAST(x'00' || substr(embedding, 2) AS BLOB)"
                 " WHERE id = (SELECT MIN(id) FROM images)");
    assert_int_equal(search_damaged(copy, why, sizeof why), OUTCOME_DAMAGE_REPORTED);
}

/* An index made before videos (format 2: path UNIQUE, no frame or time):
 * searched as it is read-only, and rebuilt in place into format 3 by the
 * next writing open, every row and id kept and every search the same. */
static void test_index_before_videos_migrates(void **state) {
    (void)state;
    char copy[700], why[600], command[4096];
    snprintf(copy, sizeof copy, "%s/format2.db", workspace);
    copy_and_change(copy, "CREATE TABLE old_images(id INTEGER PRIMARY KEY, path TEXT NOT NULL UNIQUE,"
                          " size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL, hash INTEGER NOT NULL,"
                          " embedding BLOB NOT NULL, checksum INTEGER, failed TEXT);"
                          " INSERT INTO old_images SELECT id, path, size, mtime_ns, hash, embedding, checksum, failed"
                          " FROM images; DROP TABLE images; ALTER TABLE old_images RENAME TO images;"
                          " CREATE INDEX images_hash ON images(hash);"
                          " UPDATE meta SET value = '2' WHERE key = 'format'");
    char *before = query_text(copy, "SELECT COUNT(*) || ', ' || SUM(id) FROM images");
    assert_int_equal(search_damaged(copy, why, sizeof why), OUTCOME_SAME);
    snprintf(command, sizeof command, "%s index -m %s/model --db %s --quiet %s/pictures > /dev/null", GLIMPSE_BINARY,
             workspace, copy, workspace);
    assert_int_equal(system(command), 0);
    assert_int_equal(search_damaged(copy, why, sizeof why), OUTCOME_SAME);
    char *after = query_text(copy, "SELECT COUNT(*) || ', ' || SUM(id) FROM images");
    assert_string_equal(after, before); /* the same rows, the same ids */
    char *form = query_text(copy, "SELECT (SELECT value FROM meta WHERE key = 'format') || ', ' ||"
                                  " (SELECT COUNT(*) FROM images WHERE frame = 0 AND time IS NULL)");
    char expected[64];
    snprintf(expected, sizeof expected, "3, %s", before);
    *strchr(expected + 3, ',') = '\0'; /* "3, COUNT" */
    assert_string_equal(form, expected);
    free(before), free(after), free(form);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_damage_at_many_offsets),
        cmocka_unit_test(test_small_damage_at_many_offsets),
        cmocka_unit_test(test_vector_file_damage),
        cmocka_unit_test(test_changed_vector_is_caught),
        cmocka_unit_test(test_index_reports_damage),
        cmocka_unit_test(test_old_index_is_upgraded),
        cmocka_unit_test(test_index_before_videos_migrates),
    };
    return cmocka_run_group_tests_name("index_damage", tests, setup, teardown);
}
