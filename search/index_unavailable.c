/* index_unavailable.c — the public index calls (glimpse_index_*) and the
 * benchmarks' index hooks (search/index_bench.h) in a build without SQLite
 * (GLIMPSE_WITH_INDEX=OFF): no index can be opened, and every call says the
 * build has no index. Compiled only into such a build, in place of the index's own files. */
#include <stddef.h>

#include "core/features.h"
#include "search/index_bench.h"

#define NO_INDEX() feature_unavailable(GLIMPSE_FEATURE_INDEX, NULL, NULL)

glimpse_status glimpse_index_open(const char *db_path, const glimpse_model *model, glimpse_index **out) {
    if (out) *out = NULL;
    return feature_unavailable(GLIMPSE_FEATURE_INDEX, db_path, NULL);
}

void glimpse_index_free(glimpse_index *index) { (void)index; }

glimpse_status glimpse_index_check_model(const glimpse_index *index, const glimpse_model *model) { return NO_INDEX(); }
const char *glimpse_index_model_path(const glimpse_index *index) { return NULL; }
size_t glimpse_index_count(const glimpse_index *index) { return 0; }
size_t glimpse_index_embedding_dim(const glimpse_index *index) { return 0; }
glimpse_status glimpse_index_verify(glimpse_index *index, bool *checksummed) { return NO_INDEX(); }
glimpse_precision glimpse_index_precision(const glimpse_index *index) { return GLIMPSE_PRECISION_FLOAT32; }

glimpse_status glimpse_index_update(glimpse_index *index, glimpse_context *ctx, const char *const *paths,
                                    size_t count, const glimpse_index_params *params,
                                    glimpse_index_summary *summary) {
    return NO_INDEX();
}

glimpse_status glimpse_index_import(glimpse_index *index, const char *folder, const glimpse_index_params *params,
                                    glimpse_index_summary *summary) {
    return NO_INDEX();
}

glimpse_status glimpse_index_get_stats(glimpse_index *index, glimpse_index_stats *out) { return NO_INDEX(); }

glimpse_status glimpse_index_list_roots(glimpse_index *index, glimpse_index_root_callback on_root, void *user) {
    return NO_INDEX();
}

glimpse_status glimpse_index_list(glimpse_index *index, glimpse_index_entry_callback on_entry, void *user) {
    return NO_INDEX();
}

glimpse_status glimpse_index_remove(glimpse_index *index, const char *path, size_t *removed) { return NO_INDEX(); }
glimpse_status glimpse_index_prune(glimpse_index *index, size_t *removed) { return NO_INDEX(); }

glimpse_status glimpse_index_search(glimpse_index *index, const float *query, size_t k,
                                    glimpse_search_result *results, size_t *found) {
    if (found) *found = 0;
    return NO_INDEX();
}

glimpse_status glimpse_index_search_filtered(glimpse_index *index, const float *query, size_t k,
                                             const glimpse_search_filter *filter, glimpse_search_result *results,
                                             size_t *found) {
    if (found) *found = 0;
    return NO_INDEX();
}

glimpse_status glimpse_index_embedding(glimpse_index *index, const char *path, float *out) { return NO_INDEX(); }

glimpse_status glimpse_index_duplicates(glimpse_index *index, float min_cosine, glimpse_index_group_callback on_group,
                                        void *user, size_t *groups) {
    if (groups) *groups = 0;
    return NO_INDEX();
}

/* index_bench.c's rows go in through these (index_bench_store.c in a build with the index) */
glimpse_status index_bench_insert(glimpse_index *index, const char *const *paths, const float *rows, size_t count) {
    return NO_INDEX();
}

glimpse_status index_bench_write_vectors(glimpse_index *index) { return NO_INDEX(); }

glimpse_status index_bench_search_exact(glimpse_index *index, const float *query, size_t k,
                                        glimpse_search_result *results, size_t *found) {
    if (found) *found = 0;
    return NO_INDEX();
}
