/* search_index.c — keep a folder searchable: update its index, then query.
 *     search_index CLIP_MODEL INDEX.db FOLDER "a query" */
#include <glimpse.h>
#include <stdio.h>

static void report(void *user, const char *path, const char *reason) {
    (void)user, (void)path;
    fprintf(stderr, "skipped: %s\n", reason);
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: %s CLIP_MODEL INDEX.db FOLDER QUERY\n", argv[0]);
        return 2;
    }
    glimpse_model *model = NULL;
    glimpse_context *ctx = NULL;
    glimpse_index *index = NULL;
    if (glimpse_model_load(argv[1], NULL, &model) || glimpse_context_create(model, NULL, &ctx) ||
        glimpse_index_open(argv[2], model, &index)) {
        fprintf(stderr, "error: %s\n", glimpse_last_error());
        return 1;
    }
    const char *folder = argv[3];
    glimpse_index_params params = {.on_progress = NULL, .on_failure = report, .user = NULL, .max_pixels = 0};
    glimpse_index_summary summary;
    float query[1024];
    glimpse_search_result results[3];
    size_t found = 0;
    if (glimpse_model_embedding_dim(model) > 1024 ||
        glimpse_index_update(index, ctx, &folder, 1, &params, &summary) ||
        glimpse_embed_query(ctx, argv[4], query) || glimpse_index_search(index, query, 3, results, &found)) {
        fprintf(stderr, "error: %s\n", glimpse_last_error());
        return 1;
    }
    printf("indexed: %zu added, %zu unchanged; %zu in the index\n", summary.added, summary.unchanged,
           glimpse_index_count(index));
    for (size_t r = 0; r < found; r++) printf("%8.4f  %s\n", results[r].score, results[r].path);
    glimpse_index_free(index);
    glimpse_context_free(ctx);
    glimpse_model_free(model);
    return 0;
}
