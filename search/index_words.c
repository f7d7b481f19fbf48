/* index_words.c — the pictures' words in the index: their text and their objects' labels, read by a words
 * source (Florence-2's OCR and object detection, glimpse_task_words_new) after an update's embeddings and kept in
 * an SQLite FTS5 table, words(text, objects), whose rowid is the picture's images.id (a trigger forgets a
 * picture's words with its row, so a changed file is read again and a moved one keeps them); and
 * glimpse_index_search_filtered, the search by them alone or with a query embedding. A column is NULL until
 * read ("" when nothing was found). The labels are stored one after the other with U+E000 between them: a
 * private-use character, which the tokenizer takes for a word of its own, so that a label searched as a phrase
 * never matches across two labels ("dog" then "hot dog" holds no "dog hot"). */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "search/index_internal.h"

/* Pictures read, then committed, together. */
#define WORDS_BATCH 8

/* The table and its trigger, made by the first update that reads words. */
#define WORDS_SCHEMA                                                                                                   \
    "CREATE VIRTUAL TABLE IF NOT EXISTS words USING fts5(text, objects, tokenize = 'unicode61 remove_diacritics 2');" \
    "CREATE TRIGGER IF NOT EXISTS images_forget_words AFTER DELETE ON images"                                        \
    " BEGIN DELETE FROM words WHERE rowid = old.id; END;"

/* Whether the index has the words table. */
static glimpse_status has_words(glimpse_index *index, bool *has) {
    sqlite3_stmt *statement;
    int code = sqlite3_prepare_v2(index->db, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'words'",
                                  -1, &statement, NULL);
    if (code != SQLITE_OK) return index_prepare_error(index, code, "reading the index's tables");
    code = sqlite3_step(statement);
    sqlite3_finalize(statement);
    *has = code == SQLITE_ROW;
    return code == SQLITE_ROW || code == SQLITE_DONE ? GLIMPSE_STATUS_OK
                                                     : index_step_error(index, code, "reading the index's tables");
}

/* One picture to read: its row, path, and the words it holds already (NULL: not read). */
typedef struct unread {
    int64_t id;
    char *path, *text, *objects;
} unread;

typedef struct unread_list {
    unread *items;
    size_t count;
} unread_list;

static void unread_list_free(unread_list *list) {
    for (size_t i = 0; i < list->count; i++)
        free(list->items[i].path), free(list->items[i].text), free(list->items[i].objects);
    free(list->items);
    memset(list, 0, sizeof *list);
}

static char *column_copy(sqlite3_stmt *row, int column) {
    const unsigned char *text = sqlite3_column_text(row, column);
    return text ? strdup((const char *)text) : NULL;
}

/* The still pictures, not failed, that lack a column asked for, with what they hold. */
static glimpse_status find_unread(glimpse_index *index, bool text, bool objects, unread_list *out) {
    sqlite3_stmt *select;
    int code = sqlite3_prepare_v2(index->db,
                                  "SELECT images.id, images.path, words.text, words.objects FROM images"
                                  " LEFT JOIN words ON words.rowid = images.id"
                                  " WHERE images.failed IS NULL AND images.time IS NULL"
                                  " AND ((?1 AND words.text IS NULL) OR (?2 AND words.objects IS NULL))"
                                  " ORDER BY images.path",
                                  -1, &select, NULL);
    if (code != SQLITE_OK) return index_prepare_error(index, code, "finding the pictures to read");
    sqlite3_bind_int(select, 1, text);
    sqlite3_bind_int(select, 2, objects);
    glimpse_status status = GLIMPSE_STATUS_OK;
    size_t capacity = 0;
    while (!status && (code = sqlite3_step(select)) == SQLITE_ROW) {
        if (out->count == capacity) {
            size_t grown = capacity ? 2 * capacity : 64;
            unread *items = realloc(out->items, grown * sizeof *items);
            if (!items) {
                status = ERROR_OOM();
                break;
            }
            out->items = items, capacity = grown;
        }
        unread *u = &out->items[out->count];
        *u = (unread){sqlite3_column_int64(select, 0), column_copy(select, 1), column_copy(select, 2),
                      column_copy(select, 3)};
        out->count++;
        if (!u->path) status = sqlite3_column_type(select, 1) == SQLITE_NULL
                                   ? index_damaged(index, "a row has no path")
                                   : ERROR_OOM();
    }
    if (!status && code != SQLITE_DONE) status = index_step_error(index, code, "finding the pictures to read");
    sqlite3_finalize(select);
    if (status) unread_list_free(out);
    return status;
}

/* The source that read the index's words must be this one: the first to read records itself. */
static glimpse_status record_reader(glimpse_index *index, const glimpse_words_source *words) {
    const char *identity = words->identity ? words->identity : "";
    char *recorded = NULL;
    glimpse_status status = index_meta_get(index, "words_reader", &recorded);
    if (!status && !recorded) status = index_meta_set(index, "words_reader", identity);
    else if (!status && strcmp(recorded, identity) != 0)
        status = error_set(GLIMPSE_STATUS_WRONG_MODEL,
                           "%s holds words read by another model (%s); read with that one, or use a new --db",
                           index->path, recorded);
    free(recorded);
    return status;
}

/* The labels, one a line, as the objects column holds them: U+E000 between two labels. NULL: out of memory. */
#define LABEL_BREAK " \xee\x80\x80 "
static char *stored_labels(const char *labels) {
    size_t lines = 1;
    for (const char *p = labels; *p; p++) lines += *p == '\n';
    char *out = malloc(strlen(labels) + lines * (sizeof LABEL_BREAK - 1) + 1);
    if (!out) return NULL;
    char *o = out;
    for (const char *p = labels; *p; p++) {
        if (*p != '\n') *o++ = *p;
        else memcpy(o, LABEL_BREAK, sizeof LABEL_BREAK - 1), o += sizeof LABEL_BREAK - 1;
    }
    *o = '\0';
    return out;
}

/* Reads picture u's missing words (those asked) with the source; a picture that cannot be decoded is reported
 * and left unread (*skipped), the source's own failure ends the update. */
static glimpse_status read_one(glimpse_index *index, const glimpse_index_params *params, unread *u, bool *skipped) {
    *skipped = false;
    glimpse_image_params image_params = glimpse_image_default_params();
    if (params->max_pixels) image_params.max_pixels = params->max_pixels;
    glimpse_image *image = NULL;
    if (glimpse_image_load_file(u->path, &image_params, &image)) {
        if (params->on_failure) params->on_failure(params->user, u->path, glimpse_last_error());
        *skipped = true;
        return GLIMPSE_STATUS_OK;
    }
    char *text = NULL, *labels = NULL;
    bool want_text = params->read_text && !u->text, want_objects = params->read_objects && !u->objects;
    glimpse_status status = params->words->read(params->words->user, image, want_text ? &text : NULL,
                                                want_objects ? &labels : NULL);
    glimpse_image_free(image);
    if (!status && ((want_text && !text) || (want_objects && !labels)))
        status = error_set(GLIMPSE_STATUS_INTERNAL, "the words source gave no %s for %s", want_text && !text ? "text"
                           : "labels", u->path);
    if (status) {
        free(text), free(labels);
        return error_set(status, "%s: reading its words: %s", u->path, glimpse_last_error());
    }
    if (want_text) free(u->text), u->text = text;
    if (want_objects) {
        free(u->objects);
        u->objects = stored_labels(labels);
        free(labels);
        if (!u->objects) return ERROR_OOM();
    }
    return GLIMPSE_STATUS_OK;
}

/* Stores items[0..count)'s words in one transaction. */
static glimpse_status store_words(glimpse_index *index, const unread *items, const bool *read, size_t count) {
    sqlite3_stmt *insert, *remove = NULL;
    glimpse_status status = index_transaction_begin(index, "INSERT INTO words(rowid, text, objects) VALUES (?, ?, ?)",
                                                    "storing words", &insert);
    if (!status && sqlite3_prepare_v2(index->db, "DELETE FROM words WHERE rowid = ?", -1, &remove, NULL) != SQLITE_OK)
        status = index_db_error(index, "storing words");
    for (size_t i = 0; i < count && !status; i++) {
        if (!read[i]) continue;
        sqlite3_bind_int64(remove, 1, items[i].id);
        if (sqlite3_step(remove) != SQLITE_DONE) status = index_db_error(index, "storing words");
        sqlite3_reset(remove);
        sqlite3_bind_int64(insert, 1, items[i].id);
        if (items[i].text) sqlite3_bind_text(insert, 2, items[i].text, -1, SQLITE_STATIC);
        else sqlite3_bind_null(insert, 2);
        if (items[i].objects) sqlite3_bind_text(insert, 3, items[i].objects, -1, SQLITE_STATIC);
        else sqlite3_bind_null(insert, 3);
        if (!status && sqlite3_step(insert) != SQLITE_DONE) status = index_db_error(index, "storing words");
        sqlite3_reset(insert);
    }
    sqlite3_finalize(remove);
    return index_transaction_end(index, insert, status);
}

glimpse_status index_read_words(glimpse_index *index, const glimpse_index_params *params,
                                glimpse_index_summary *summary) {
    if (!params || !params->words || !(params->read_text || params->read_objects)) return GLIMPSE_STATUS_OK;
    if (!params->words->read)
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_index_params.words has no read function");
    glimpse_status status = index_exec(index, WORDS_SCHEMA);
    if (!status) status = record_reader(index, params->words);
    unread_list list = {0};
    if (!status) status = find_unread(index, params->read_text, params->read_objects, &list);
    if (!status && list.count && params->on_progress && params->on_progress(params->user, 0, list.count))
        status = error_set(GLIMPSE_STATUS_CANCELLED, "indexing was stopped");
    bool read[WORDS_BATCH];
    for (size_t first = 0; !status && first < list.count; first += WORDS_BATCH) {
        size_t batch = list.count - first < WORDS_BATCH ? list.count - first : WORDS_BATCH;
        for (size_t i = 0; i < batch && !status; i++) {
            bool skipped;
            status = read_one(index, params, &list.items[first + i], &skipped);
            read[i] = !status && !skipped;
            summary->read += read[i];
        }
        if (!status) status = store_words(index, list.items + first, read, batch);
        if (!status && params->on_progress && params->on_progress(params->user, first + batch, list.count))
            status = error_set(GLIMPSE_STATUS_CANCELLED, "indexing was stopped");
    }
    unread_list_free(&list);
    return status;
}

/* ------------------------------------------------------------ searching by words */

/* Appends the FTS5 string "word" (quotes doubled) to out. */
static bool append(char **out, size_t *length, size_t *capacity, const char *text, size_t n) {
    if (*length + n + 1 > *capacity) {
        size_t grown = (*length + n + 1) * 2;
        char *bigger = realloc(*out, grown);
        if (!bigger) return false;
        *out = bigger, *capacity = grown;
    }
    memcpy(*out + *length, text, n);
    *length += n;
    (*out)[*length] = '\0';
    return true;
}

static bool append_quoted(char **out, size_t *length, size_t *capacity, const char *text, size_t n) {
    bool ok = append(out, length, capacity, "\"", 1);
    for (size_t i = 0; ok && i < n; i++)
        ok = append(out, length, capacity, text[i] == '"' ? "\"\"" : text + i, text[i] == '"' ? 2 : 1);
    return ok && append(out, length, capacity, "\"", 1);
}

/* Whether a byte ends a word: ASCII that is neither a letter nor a digit (UTF-8 letters stay in the word, and
 * the table's tokenizer splits them as it splits the stored text). */
static bool separator(unsigned char c) {
    return c < 0x80 && !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'));
}

/* The FTS5 query of a filter: text : "w1" AND text : "w2" ... AND objects : "the label". Empty when neither
 * filter has a word; NULL when out of memory. */
static char *match_expression(const glimpse_search_filter *filter) {
    char *out = NULL;
    size_t length = 0, capacity = 0;
    bool ok = append(&out, &length, &capacity, "", 0);
    const char *text = filter->text_in ? filter->text_in : "";
    for (const char *p = text; ok && *p;) {
        while (*p && separator((unsigned char)*p)) p++;
        size_t n = 0;
        while (p[n] && !separator((unsigned char)p[n])) n++;
        if (!n) break;
        ok = (!length || append(&out, &length, &capacity, " AND ", 5)) &&
             append(&out, &length, &capacity, "text : ", 7) && append_quoted(&out, &length, &capacity, p, n);
        p += n;
    }
    const char *object = filter->object ? filter->object : "";
    bool has_word = false;
    for (const char *p = object; *p; p++) has_word |= !separator((unsigned char)*p);
    if (ok && has_word)
        ok = (!length || append(&out, &length, &capacity, " AND ", 5)) &&
             append(&out, &length, &capacity, "objects : ", 10) &&
             append_quoted(&out, &length, &capacity, object, strlen(object));
    if (!ok) free(out);
    return ok ? out : NULL;
}

/* One match: its row's path, time and score. */
typedef struct match {
    char *path;
    double time;
    float score;
} match;

static int better_first(const void *a, const void *b) {
    float x = ((const match *)a)->score, y = ((const match *)b)->score;
    return x > y ? -1 : x < y;
}

/* Every picture whose words match `expression`, scored by the query (or the match's relevance). */
static glimpse_status collect_matches(glimpse_index *index, const float *query, const char *expression,
                                      match **out, size_t *count) {
    /* the rows as index_check_row reads them, and the relevance of their words: FTS5's bm25 (lower is better) */
    char ranked[ROW_SELECT_CAPACITY + 400];
    snprintf(ranked, sizeof ranked,
             "SELECT path, embedding, %s, %s, words.rank FROM images JOIN words ON words.rowid = images.id"
             " WHERE images.failed IS NULL AND words MATCH ?1",
             index->checksummed ? "checksum" : "NULL", index->frames_column ? "time" : "NULL");
    sqlite3_stmt *select;
    int code = sqlite3_prepare_v2(index->db, ranked, -1, &select, NULL);
    if (code != SQLITE_OK) return index_prepare_error(index, code, "searching the pictures' words");
    sqlite3_bind_text(select, 1, expression, -1, SQLITE_STATIC);
    glimpse_status status = GLIMPSE_STATUS_OK;
    size_t capacity = 0;
    *out = NULL, *count = 0;
    while (!status && (code = sqlite3_step(select)) == SQLITE_ROW) {
        if ((status = index_check_row(index, select))) break;
        if (*count == capacity) {
            size_t grown = capacity ? 2 * capacity : 64;
            match *bigger = realloc(*out, grown * sizeof *bigger);
            if (!bigger) {
                status = ERROR_OOM();
                break;
            }
            *out = bigger, capacity = grown;
        }
        match *m = &(*out)[*count];
        const float *embedding = sqlite3_column_blob(select, 1);
        float score = -(float)sqlite3_column_double(select, 4);
        if (query) {
            double dot = 0;
            for (size_t d = 0; d < index->dim; d++) dot += (double)embedding[d] * query[d];
            score = index->logit_scale * (float)dot + index->logit_bias;
        }
        double time = sqlite3_column_type(select, 3) == SQLITE_NULL ? -1 : sqlite3_column_double(select, 3);
        *m = (match){strdup((const char *)sqlite3_column_text(select, 0)), time, score};
        if (!m->path) status = ERROR_OOM();
        else (*count)++;
    }
    if (!status && code != SQLITE_DONE)
        status = code == SQLITE_ERROR ? error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "searching the words: %s",
                                                  sqlite3_errmsg(index->db))
                                      : index_step_error(index, code, "searching the pictures' words");
    sqlite3_finalize(select);
    return status;
}

glimpse_status glimpse_index_search_filtered(glimpse_index *index, const float *query, size_t k,
                                             const glimpse_search_filter *filter, glimpse_search_result *results,
                                             size_t *found) {
    if (!index || !filter || !found || (k && !results))
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_index_search_filtered: NULL argument");
    *found = 0;
    char *expression = match_expression(filter);
    if (!expression) return ERROR_OOM();
    if (!expression[0]) {
        free(expression);
        if (!query)
            return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT,
                             "a search needs a query, or words to find (the filter has none)");
        return glimpse_index_search(index, query, k, results, found);
    }
    bool began, has = false;
    glimpse_status status = index_read_begin(index, &began);
    if (!status) status = has_words(index, &has);
    if (!status && !has)
        status = error_set(GLIMPSE_STATUS_INVALID_ARGUMENT,
                           "%s holds no words of its pictures: build it with glimpse index --ocr or --objects "
                           "(and --task-model FLORENCE2)", index->path);
    match *matches = NULL;
    size_t count = 0;
    if (!status) status = collect_matches(index, query, expression, &matches, &count);
    index_read_end(index, began);
    free(expression);
    if (!status) {
        if (count) qsort(matches, count, sizeof *matches, better_first); /* no matches: matches may be NULL */
        size_t n = count < k ? count : k;
        /* the paths stay the index's until its next search, update or close */
        for (size_t i = 0; i < index->filtered_count; i++) free(index->filtered_paths[i]);
        free(index->filtered_paths);
        index->filtered_paths = malloc((n ? n : 1) * sizeof *index->filtered_paths);
        index->filtered_count = 0;
        if (!index->filtered_paths) status = ERROR_OOM();
        for (size_t i = 0; !status && i < n; i++) {
            index->filtered_paths[i] = matches[i].path, matches[i].path = NULL;
            index->filtered_count++;
            results[i] = (glimpse_search_result){index->filtered_paths[i], matches[i].score, matches[i].time};
        }
        if (!status) *found = n;
    }
    for (size_t i = 0; i < count; i++) free(matches[i].path);
    free(matches);
    return status;
}
