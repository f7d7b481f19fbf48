/* florence2_post.c — florence2_post.h: the processor's parsers over the generated text. Each regular expression
 * of processing_florence2.py is followed by a scan that takes the same matches:
 *   chunks       [^<]+(?:TOKEN){4,}  or, with empty phrases allowed, (?:TOKEN){4,}   (findall, left to right)
 *   label        ^\s*(.*?)(?=<od>|</od>|<box>|</box>|<bbox>|</bbox>|<loc_[|<poly>])  then strip()
 *   boxes        <loc_(\d+)> four times, non-overlapping
 *   OCR lines    (.+?)(?:<loc_(\d+)>){8}                (. is any character but a newline)
 *   polygons     <poly>(.*?)</poly>, then ((?:<loc_\d+>)+)(?:<sep>|$)
 * Text is UTF-8 from the tokenizer's decode; '<' and '\n' are single bytes, so the scans go byte by byte. */
#include "families/florence2_post.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "text/utf8.h"

/* post_process_generation's blacklist of phrase grounding (exact, case-sensitive). */
static const char *const grounding_blacklist[] = {
    "a", "a group", "a set", "all", "an", "another", "any", "anybody", "anyone", "anything", "each", "each other",
    "everybody", "everyone", "everything", "few", "he", "her", "hers", "herself", "him", "himself", "his", "I",
    "image", "images", "it", "its", "itself", "lots", "many", "me", "mine", "myself", "nobody", "none", "one",
    "one another", "oneself", "other objects", "our", "ours", "ourselves", "several", "she", "some", "somebody",
    "someone", "something", "that", "the", "the image", "their", "theirs", "them", "themselves", "these", "they",
    "this", "those", "us", "we", "what", "which", "who", "whom", "whose", "you", "your", "yours", "yourself",
    "yourselves"};

typedef struct text_view {
    const char *s;
    size_t n;
} text_view;

static bool literal_at(text_view t, size_t at, const char *literal) {
    size_t length = strlen(literal);
    return at <= t.n && length <= t.n - at && memcmp(t.s + at, literal, length) == 0;
}

/* The first occurrence of literal in t at or after from; SIZE_MAX for none. */
static size_t find_literal(text_view t, size_t from, const char *literal) {
    for (size_t i = from; i < t.n; i++)
        if (literal_at(t, i, literal)) return i;
    return SIZE_MAX;
}

/* "<loc_DIGITS>" at `at`: its bin and where it ends. */
static bool loc_at(text_view t, size_t at, double *bin, size_t *end) {
    if (!literal_at(t, at, "<loc_")) return false;
    size_t i = at + 5;
    double value = 0;
    while (i < t.n && t.s[i] >= '0' && t.s[i] <= '9') value = value * 10 + (t.s[i++] - '0');
    if (i == at + 5 || i >= t.n || t.s[i] != '>') return false;
    if (bin) *bin = value;
    *end = i + 1;
    return true;
}

/* A token of a polygon run (<loc_N>, <sep>, <poly>, </poly>) at `at`. */
static bool polygon_token_at(text_view t, size_t at, size_t *end) {
    static const char *const literals[] = {"<sep>", "<poly>", "</poly>"};
    if (loc_at(t, at, NULL, end)) return true;
    for (int i = 0; i < 3; i++)
        if (literal_at(t, at, literals[i])) {
            *end = at + strlen(literals[i]);
            return true;
        }
    return false;
}

/* The end of the run of tokens at `at` and how many it holds. */
static size_t run_at(text_view t, size_t at, bool polygons, size_t *count) {
    size_t end = at, next;
    *count = 0;
    while (polygons ? polygon_token_at(t, end, &next) : loc_at(t, end, NULL, &next)) end = next, (*count)++;
    return end;
}

/* findall of the chunk pattern: each match [start, end) to found(); with_text: [^<]+ before the run. */
typedef glimpse_status (*chunk_fn)(void *user, text_view chunk);
static glimpse_status each_chunk(text_view t, bool with_text, bool polygons, chunk_fn found, void *user) {
    size_t p = 0;
    while (p < t.n) {
        size_t q = p, count;
        if (with_text) {
            if (t.s[p] == '<') {
                p++;
                continue;
            }
            while (q < t.n && t.s[q] != '<') q++;
        }
        size_t end = run_at(t, q, polygons, &count);
        if (count >= 4) {
            glimpse_status status = found(user, (text_view){t.s + p, end - p});
            if (status) return status;
            p = end;
        } else {
            p = with_text ? q + 1 : p + 1; /* every start before q meets the same run */
        }
    }
    return GLIMPSE_STATUS_OK;
}

/* Python's str.strip() of text[0..n) (Unicode whitespace), into [*start, *end). */
static void python_strip(text_view t, size_t *start, size_t *end) {
    size_t a = 0, b = t.n;
    while (a < b) {
        size_t at = a;
        int32_t c = (int32_t)utf8_next_bytewise(t.s, t.n, &at);
        if (!utf8_is_python_space(c)) break;
        a = at;
    }
    while (b > a) {
        size_t start = b - 1;
        while (start > a && ((unsigned char)t.s[start] & 0xc0) == 0x80) start--;
        size_t at = start;
        int32_t c = (int32_t)utf8_next_bytewise(t.s, b, &at);
        if (!utf8_is_python_space(c)) break;
        b = start;
    }
    *start = a, *end = b;
}

/* The label pattern on a chunk: false where it finds none (a newline before the first marker). */
static bool label_of(text_view chunk, bool poly_marker, text_view *label) {
    static const char *const markers[] = {"<od>", "</od>", "<box>", "</box>", "<bbox>", "</bbox>", "<loc_", "<poly>"};
    size_t w = 0, markers_used = poly_marker ? 8 : 7;
    while (w < chunk.n) { /* \s* */
        size_t at = w;
        int32_t c = (int32_t)utf8_next_bytewise(chunk.s, chunk.n, &at);
        if (!utf8_is_python_space(c)) break;
        w = at;
    }
    for (size_t k = w; k <= chunk.n; k++) {
        for (size_t m = 0; m < markers_used; m++)
            if (literal_at(chunk, k, markers[m])) {
                size_t a, b;
                python_strip((text_view){chunk.s, k}, &a, &b);
                *label = (text_view){chunk.s + a, b - a};
                return true;
            }
        if (k < chunk.n && chunk.s[k] == '\n') return false;
    }
    return false;
}

/* ---------------------------------------------------------------- results */

static float coordinate(double bin, int size) {
    return ((float)bin + 0.5f) * (float)(size / 1000.0);
}

/* A new region with a copy of label (ASCII only when ascii) and count coordinates from bins. */
static glimpse_status add_region(florence2_parsed *p, text_view label, bool ascii, glimpse_region_shape shape,
                                 size_t instance, const double *bins, size_t count, int width, int height) {
    if (p->region_count == p->region_capacity) {
        size_t capacity = p->region_capacity ? 2 * p->region_capacity : 16;
        glimpse_region *grown = realloc(p->regions, capacity * sizeof *grown);
        if (!grown) return ERROR_OOM();
        p->regions = grown, p->region_capacity = capacity;
    }
    char *copy = malloc(label.n + 1);
    float *coords = malloc((count ? count : 1) * sizeof *coords);
    if (!copy || !coords) {
        free(copy), free(coords);
        return ERROR_OOM();
    }
    size_t used = 0;
    for (size_t i = 0; i < label.n; i++)
        if (!ascii || (unsigned char)label.s[i] < 0x80) copy[used++] = label.s[i];
    copy[used] = '\0';
    for (size_t i = 0; i < count; i++) coords[i] = coordinate(bins[i], i % 2 ? height : width);
    p->regions[p->region_count++] = (glimpse_region){copy, shape, instance, coords, count, NAN};
    return GLIMPSE_STATUS_OK;
}

/* ---------------------------------------------------------------- boxes */

typedef struct box_parse {
    florence2_parsed *out;
    int width, height;
    bool allow_empty, grounding;
} box_parse;

static bool blacklisted(text_view label) {
    for (size_t i = 0; i < sizeof grounding_blacklist / sizeof grounding_blacklist[0]; i++)
        if (strlen(grounding_blacklist[i]) == label.n && !memcmp(grounding_blacklist[i], label.s, label.n)) return true;
    return false;
}

/* One chunk: its label, then a box per four location tokens (left to right, non-overlapping). */
static glimpse_status box_chunk(void *user, text_view chunk) {
    box_parse *b = user;
    text_view label;
    if ((!chunk.n && !b->allow_empty) || !label_of(chunk, false, &label)) return GLIMPSE_STATUS_OK;
    if (b->grounding && blacklisted(label)) return GLIMPSE_STATUS_OK;
    size_t instance = b->out->region_count;
    for (size_t at = 0; at < chunk.n;) {
        double bins[4];
        size_t end = at, k = 0;
        while (k < 4 && loc_at(chunk, end, &bins[k], &end)) k++;
        if (k < 4) {
            at++;
            continue;
        }
        glimpse_status status = add_region(b->out, label, true, GLIMPSE_REGION_BOX, instance++, bins, 4, b->width,
                                           b->height);
        if (status) return status;
        at = end;
    }
    return GLIMPSE_STATUS_OK;
}

/* ---------------------------------------------------------------- polygons */

/* The polygons of one instance's text: each maximal run of location tokens followed by <sep> or the end. */
static glimpse_status instance_polygons(florence2_parsed *out, text_view label, text_view t, size_t instance,
                                        int width, int height, bool *any) {
    double *bins = malloc((t.n / 7 + 1) * sizeof *bins); /* a location token takes at least 7 bytes */
    if (!bins) return ERROR_OOM();
    glimpse_status status = GLIMPSE_STATUS_OK;
    for (size_t at = 0; at < t.n && !status;) {
        size_t end = at, count = 0, next;
        while (loc_at(t, end, &bins[count], &next)) end = next, count++;
        if (!count || !(end == t.n || (end == t.n - 1 && t.s[end] == '\n') || literal_at(t, end, "<sep>"))) {
            at++;
            continue;
        }
        status = add_region(out, label, false, GLIMPSE_REGION_POLYGON, instance, bins, count - count % 2, width,
                            height);
        *any = true;
        at = end;
    }
    free(bins);
    return status;
}

typedef struct polygon_parse {
    florence2_parsed *out;
    int width, height;
    bool allow_empty;
    size_t instances;
} polygon_parse;

static glimpse_status polygon_chunk(void *user, text_view chunk) {
    polygon_parse *g = user;
    text_view stripped = chunk, label;
    if (chunk.n >= 5 && !memcmp(chunk.s, "loc_", 4)) { /* re.sub(r"^loc_\d+>", "", ...) */
        size_t i = 4;
        while (i < chunk.n && chunk.s[i] >= '0' && chunk.s[i] <= '9') i++;
        if (i > 4 && i < chunk.n && chunk.s[i] == '>') stripped = (text_view){chunk.s + i + 1, chunk.n - i - 1};
    }
    if ((!stripped.n && !g->allow_empty) || !label_of(stripped, true, &label)) return GLIMPSE_STATUS_OK;
    bool paired = find_literal(chunk, 0, "<poly>") != SIZE_MAX && find_literal(chunk, 0, "</poly>") != SIZE_MAX;
    glimpse_status status = GLIMPSE_STATUS_OK;
    for (size_t at = 0; at <= chunk.n && !status;) {
        text_view inside = chunk;
        if (paired) { /* <poly>(.*?)</poly>, left to right */
            size_t open = find_literal(chunk, at, "<poly>");
            if (open == SIZE_MAX) break;
            size_t close = find_literal(chunk, open + 6, "</poly>");
            size_t newline = find_literal(chunk, open + 6, "\n");
            if (close == SIZE_MAX || newline < close) {
                at = open + 1;
                continue;
            }
            inside = (text_view){chunk.s + open + 6, close - open - 6};
            at = close + 7;
        }
        bool any = false;
        status = instance_polygons(g->out, label, inside, g->instances, g->width, g->height, &any);
        if (any) g->instances++;
        if (!paired) break;
    }
    return status;
}

/* ---------------------------------------------------------------- OCR lines */

/* Eight location tokens at `at`: their bins and end. */
static bool eight_at(text_view t, size_t at, double *bins, size_t *end) {
    size_t e = at;
    for (int k = 0; k < 8; k++)
        if (!loc_at(t, e, &bins[k], &e)) return false;
    *end = e;
    return true;
}

/* findall((.+?)<loc_>{8}): from each start, the nearest place (a character on, no newline between) where eight
 * location tokens begin. */
static glimpse_status ocr_lines(florence2_parsed *out, text_view t, int width, int height) {
    size_t *next_eight = malloc((t.n + 1) * sizeof *next_eight), *next_newline = malloc((t.n + 1) * sizeof(size_t));
    glimpse_status status = next_eight && next_newline ? GLIMPSE_STATUS_OK : ERROR_OOM();
    double bins[8];
    size_t end = 0;
    if (!status) next_eight[t.n] = next_newline[t.n] = SIZE_MAX;
    for (size_t i = t.n; !status && i-- > 0;) {
        next_eight[i] = eight_at(t, i, bins, &end) ? i : next_eight[i + 1];
        next_newline[i] = t.s[i] == '\n' ? i : next_newline[i + 1];
    }
    for (size_t p = 0; !status && p < t.n;) {
        size_t first = p;
        utf8_next_bytewise(t.s, t.n, &first); /* .+? takes at least one character */
        size_t j = next_eight[first];
        if (j == SIZE_MAX || next_newline[p] < j) {
            p = first;
            continue;
        }
        eight_at(t, j, bins, &end);
        status = add_region(out, (text_view){t.s + p, j - p}, false, GLIMPSE_REGION_QUAD, out->region_count, bins, 8,
                            width, height);
        p = end;
    }
    free(next_eight), free(next_newline);
    return status;
}

/* ---------------------------------------------------------------- the processor's JSON */

static cJSON *coords_json(const glimpse_region *r) {
    cJSON *list = cJSON_CreateArray();
    for (size_t i = 0; list && i < r->coord_count; i++) cJSON_AddItemToArray(list, cJSON_CreateNumber(r->coords[i]));
    return list;
}

/* {"bboxes" | "quad_boxes": [...], "labels": [...]} of the regions from `first` on. */
static cJSON *boxes_json(const florence2_parsed *p, size_t first, const char *boxes_key, const char *labels_key,
                         cJSON *object) {
    cJSON *boxes = cJSON_AddArrayToObject(object, boxes_key), *labels = cJSON_AddArrayToObject(object, labels_key);
    for (size_t i = first; boxes && labels && i < p->region_count; i++) {
        cJSON_AddItemToArray(boxes, coords_json(&p->regions[i]));
        cJSON_AddItemToArray(labels, cJSON_CreateString(p->regions[i].label));
    }
    return object;
}

/* {"polygons": [[polygon, ...] per instance], "labels": [one per instance]} */
static cJSON *polygons_json(const florence2_parsed *p, const char *polygons_key, const char *labels_key,
                            cJSON *object) {
    cJSON *polygons = cJSON_AddArrayToObject(object, polygons_key), *labels = cJSON_AddArrayToObject(object, labels_key);
    cJSON *instance = NULL;
    for (size_t i = 0; polygons && labels && i < p->region_count; i++) {
        if (!i || p->regions[i].instance != p->regions[i - 1].instance) {
            instance = cJSON_CreateArray();
            cJSON_AddItemToArray(polygons, instance);
            cJSON_AddItemToArray(labels, cJSON_CreateString(p->regions[i].label));
        }
        cJSON_AddItemToArray(instance, coords_json(&p->regions[i]));
    }
    return object;
}

/* text with every occurrence of each token removed, one token after the other (as str.replace in turn). */
static char *without(const char *text, const char *const *tokens, size_t count) {
    char *out = strdup(text);
    for (size_t k = 0; out && k < count; k++) {
        size_t length = strlen(tokens[k]), used = 0;
        for (size_t i = 0; out[i];)
            if (!strncmp(out + i, tokens[k], length)) i += length;
            else out[used++] = out[i++];
        out[used] = '\0';
    }
    return out;
}

static glimpse_status parse_regions(florence2_parsed *out, const florence2_task *task, const char *text, int width,
                                    int height, cJSON *answer) {
    static const char *const ends[] = {"<s>", "</s>", "<pad>"};
    bool ocr = task->parse == FLORENCE2_OCR;
    char *clean = without(text, ends, ocr ? 1 : 3);
    if (!clean) return ERROR_OOM();
    text_view t = {clean, strlen(clean)};
    glimpse_status status;
    bool polygons = task->parse == FLORENCE2_POLYGONS ||
                    (task->parse == FLORENCE2_BOXES_OR_POLYGONS && strstr(text, "<poly>"));
    if (ocr) {
        status = ocr_lines(out, t, width, height);
    } else if (polygons) {
        polygon_parse g = {out, width, height, task->parse == FLORENCE2_POLYGONS, 0};
        status = each_chunk(t, !g.allow_empty, true, polygon_chunk, &g);
    } else {
        box_parse b = {out, width, height, task->parse == FLORENCE2_BOXES, task->parse == FLORENCE2_PHRASE_GROUNDING};
        status = each_chunk(t, !b.allow_empty, false, box_chunk, &b);
    }
    free(clean);
    if (status) return status;
    if (task->parse == FLORENCE2_BOXES_OR_POLYGONS) {
        florence2_parsed empty = {0}; /* the kind not found: empty lists */
        if (polygons) boxes_json(&empty, 0, "bboxes", "bboxes_labels", answer);
        else boxes_json(out, 0, "bboxes", "bboxes_labels", answer);
        polygons_json(polygons ? out : &empty, "polygons", "polygons_labels", answer);
    } else if (polygons) {
        polygons_json(out, "polygons", "labels", answer);
    } else {
        boxes_json(out, 0, ocr ? "quad_boxes" : "bboxes", "labels", answer);
    }
    return GLIMPSE_STATUS_OK;
}

glimpse_status florence2_post_process(const char *text, const florence2_task *task, int width, int height,
                                      florence2_parsed *out) {
    memset(out, 0, sizeof *out);
    if (!text || !task || width < 1 || height < 1)
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "florence2_post_process: no text or task, or no size");
    out->json = cJSON_CreateObject();
    if (!out->json) return ERROR_OOM();
    glimpse_status status = GLIMPSE_STATUS_OK;
    if (task->parse == FLORENCE2_PURE_TEXT) {
        static const char *const ends[] = {"<s>", "</s>"};
        out->answer = without(text, ends, 2);
        if (!out->answer || !cJSON_AddStringToObject(out->json, task->name, out->answer)) status = ERROR_OOM();
    } else {
        cJSON *answer = cJSON_AddObjectToObject(out->json, task->name);
        status = answer ? parse_regions(out, task, text, width, height, answer) : ERROR_OOM();
    }
    if (status) florence2_parsed_free(out);
    return status;
}

void florence2_parsed_free(florence2_parsed *p) {
    for (size_t i = 0; i < p->region_count; i++) {
        free((void *)p->regions[i].label);
        free((void *)p->regions[i].coords);
    }
    free(p->regions), free(p->answer);
    cJSON_Delete(p->json);
    memset(p, 0, sizeof *p);
}
