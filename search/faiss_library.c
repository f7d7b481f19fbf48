/* faiss_library.c — include/glimpse_faiss.h, the public face of libglimpse-faiss, over faiss_folder.h. */
#include "glimpse_faiss.h"

#include <stdlib.h>

#include "core/error.h"
#include "search/faiss_folder.h"

struct glimpse_faiss {
    faiss_folder *folder;
};

glimpse_faiss_search_params glimpse_faiss_default_search_params(void) {
    faiss_folder_search_params d = faiss_folder_default_search_params();
    return (glimpse_faiss_search_params){.nprobe = d.nprobe, .rescore = d.rescore, .rescore_factor = d.rescore_factor};
}

glimpse_status glimpse_faiss_open(const char *folder, int threads, glimpse_faiss **out) {
    if (!out) return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_faiss_open: out is NULL");
    *out = NULL;
    glimpse_faiss *index = calloc(1, sizeof *index);
    if (!index) return ERROR_OOM();
    glimpse_status status = faiss_folder_open_with(folder, threads, &index->folder);
    if (status) {
        free(index);
        return status;
    }
    *out = index;
    return GLIMPSE_STATUS_OK;
}

void glimpse_faiss_close(glimpse_faiss *index) {
    if (!index) return;
    faiss_folder_free(index->folder);
    free(index);
}

size_t glimpse_faiss_count(const glimpse_faiss *index) { return index ? faiss_folder_get_info(index->folder)->count : 0; }

size_t glimpse_faiss_dim(const glimpse_faiss *index) { return index ? faiss_folder_get_info(index->folder)->dim : 0; }

void glimpse_faiss_model(const glimpse_faiss *index, const char **model_path, const char **precision,
                         const char **identity) {
    const faiss_folder_info *info = index ? faiss_folder_get_info(index->folder) : NULL;
    if (model_path) *model_path = info ? info->model_path : NULL;
    if (precision) *precision = info ? info->precision : NULL;
    if (identity) *identity = info ? info->identity : NULL;
}

glimpse_status glimpse_faiss_populate(glimpse_faiss *index, double *huge_fraction) {
    if (!index) return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_faiss_populate: index is NULL");
    return faiss_folder_populate(index->folder, huge_fraction);
}

glimpse_status glimpse_faiss_search_rows(glimpse_faiss *index, const float *query, size_t k,
                                         const glimpse_faiss_search_params *params, int64_t *rows, float *cosines,
                                         size_t *found) {
    if (!index) return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_faiss_search_rows: index is NULL");
    faiss_folder_search_params chosen = faiss_folder_default_search_params();
    if (params)
        chosen = (faiss_folder_search_params){.nprobe = params->nprobe, .rescore = params->rescore,
                                              .rescore_factor = params->rescore_factor};
    return faiss_folder_search_rows(index->folder, query, k, &chosen, rows, cosines, found);
}

glimpse_status glimpse_faiss_search(glimpse_faiss *index, const float *query, size_t k, size_t nprobe,
                                    glimpse_search_result *results, size_t *found) {
    if (!index) return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "glimpse_faiss_search: index is NULL");
    return faiss_folder_search(index->folder, query, k, nprobe, results, found);
}

const char *glimpse_faiss_last_error(void) { return glimpse_last_error(); }
