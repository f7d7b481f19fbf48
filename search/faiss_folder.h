/* faiss_folder.h — searching the index folder python -m glimpse.faiss build
 * writes (index.faiss, params.json, the id -> path table paths.bin +
 * offsets.npy, and vectors.npy for exact re-scoring), from C: the optional
 * glimpse_faiss archive (with faiss_engine.cpp), linked by the glimpse
 * program when FAISS is installed; libglimpse never includes it. */
#ifndef GLIMPSE_SEARCH_FAISS_FOLDER_H
#define GLIMPSE_SEARCH_FAISS_FOLDER_H

#include <stdbool.h>
#include <stddef.h>

#include "glimpse.h"

typedef struct faiss_folder faiss_folder;

/* What params.json records (strings owned by the folder). */
typedef struct faiss_folder_info {
    const char *kind;       /* "flat" or "ivfpq" */
    size_t count, dim;
    size_t nprobe;          /* the lists searched by default (IVF) */
    size_t rescore_factor;  /* k x this many candidates re-scored exactly */
    bool rescore;           /* vectors.npy is there: candidates are re-scored with the exact vectors */
    const char *model_path, *precision;
    const char *identity;   /* glimpse_model_identity of the model; NULL if the shards did not record it */
    float logit_scale, logit_bias;
} faiss_folder_info;

/* Opens the index folder: params.json, index.faiss memory-mapped, the path
 * table and vectors.npy mapped and checked against each other (every
 * length bounds-checked). NOT_FOUND for a missing folder or file,
 * BAD_FORMAT naming the file for one that is damaged or disagrees. Caller
 * frees with faiss_folder_free. */
glimpse_status faiss_folder_open(const char *folder, faiss_folder **out);
void faiss_folder_free(faiss_folder *folder);
const faiss_folder_info *faiss_folder_get_info(const faiss_folder *folder);

/* The k stored pictures closest to query (L2-normalised, [dim]), best
 * first, scored as glimpse_index_search scores (logit_scale x cosine +
 * logit_bias): FAISS's candidates (k x rescore_factor of them when
 * re-scoring), re-scored with the exact float32 vectors when the folder
 * has them. nprobe 0 = the folder's. results[i].path is owned by the folder,
 * valid until the next search. *found = min(k, count). */
glimpse_status faiss_folder_search(faiss_folder *folder, const float *query, size_t k, size_t nprobe,
                                   glimpse_search_result *results, size_t *found);

#endif
