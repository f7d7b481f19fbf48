/* explain_json.c — writes an explanation as JSON for `glimpse explain --json` and glimpse serve's
 * POST /v1/explain, so the command and the endpoint print the same grids in the same shape. */
#include "output/explain_json.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "output/json.h"

static void json_grid(FILE *out, const glimpse_explanation *e, const float *grid) {
    fputc('[', out);
    for (int row = 0; row < e->grid_height; row++) {
        fputs(row ? ", " : "", out);
        json_floats(out, grid + (size_t)row * (size_t)e->grid_width, (size_t)e->grid_width);
    }
    fputc(']', out);
}

static const char *kind_name(const glimpse_explain_map *map) {
    switch (map->kind) {
    case GLIMPSE_EXPLAIN_MAP_ROLLOUT: return "rollout";
    case GLIMPSE_EXPLAIN_MAP_OCCLUSION: return "occlusion";
    case GLIMPSE_EXPLAIN_MAP_ATTENTION_POOL: return "attention_pool";
    case GLIMPSE_EXPLAIN_MAP_QUERIES: return "queries";
    default: return "text";
    }
}

static void json_ids(FILE *out, const int32_t *ids, size_t count) {
    fputc('[', out);
    for (size_t j = 0; j < count; j++) fprintf(out, j ? ", %d" : "%d", ids[j]);
    fputc(']', out);
}

/* text without the whitespace around it (json_text_trimmed), as a JSON string. */
static void json_trimmed(FILE *out, const char *text) {
    char *copy = strdup(text);
    json_string(out, copy ? json_text_trimmed(copy) : "");
    free(copy);
}

void explain_json_fields(FILE *out, glimpse_model_kind kind, const char *question, const glimpse_explanation *e) {
    if (glimpse_model_kind_can(kind, GLIMPSE_CAPABILITY_CAPTION)) {
        if (question) {
            fputs(", \"question\": ", out);
            json_string(out, question);
            fputs(", \"answer\": ", out);
            json_trimmed(out, e->text ? e->text : "");
        } else {
            fputs(", \"caption\": ", out);
            json_trimmed(out, e->text ? e->text : "");
        }
        fputs(", \"ids\": ", out);
        json_ids(out, e->ids, e->id_count);
    } else if (e->text) {
        fputs(", \"text\": ", out);
        json_string(out, e->text);
        fputs(glimpse_model_kind_can(kind, GLIMPSE_CAPABILITY_MATCH) ? ", \"probability\": " : ", \"score\": ", out);
        json_float(out, e->score);
    }
    fprintf(out, ", \"grid_size\": [%d, %d], \"words\": [", e->grid_height, e->grid_width);
    bool first = true;
    for (size_t m = 0; m < e->map_count; m++) {
        const glimpse_explain_map *map = &e->maps[m];
        if (!map->token_count || map->kind != GLIMPSE_EXPLAIN_MAP_CROSS_ATTENTION || !strcmp(map->label, "[text]"))
            continue;
        fputs(first ? "{\"word\": " : ", {\"word\": ", out);
        first = false;
        json_string(out, map->label);
        fputs(", \"tokens\": ", out);
        json_ids(out, e->ids + map->first_token, map->token_count);
        fputs(", \"grid\": ", out);
        json_grid(out, e, map->grid);
        if (map->queries) {
            fputs(", \"queries\": ", out);
            json_floats(out, map->queries, map->query_count);
        }
        fputc('}', out);
    }
    fputs("], \"maps\": [", out);
    first = true;
    for (size_t m = 0; m < e->map_count; m++) {
        const glimpse_explain_map *map = &e->maps[m];
        bool whole_text = map->kind == GLIMPSE_EXPLAIN_MAP_CROSS_ATTENTION && !strcmp(map->label, "[text]");
        if (map->kind == GLIMPSE_EXPLAIN_MAP_CROSS_ATTENTION && !whole_text) continue;
        fprintf(out, first ? "{\"kind\": \"%s\", \"grid\": " : ", {\"kind\": \"%s\", \"grid\": ", kind_name(map));
        first = false;
        json_grid(out, e, map->grid);
        fputc('}', out);
    }
    fputc(']', out);
}
