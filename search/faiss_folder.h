/* faiss_folder.h — searching the index folder python -m glimpse.faiss build
 * writes (index.faiss, params.json, the id -> path table paths.bin +
 * offsets.npy, and vectors.npy for exact re-scoring), from C: the optional
 * glimpse_faiss archive (with faiss_engine.cpp), linked by the glimpse
 * program when FAISS is installed; libglimpse never includes it. */
#ifndef GLIMPSE_SEARCH_FAISS_FOLDER_H
#define GLIMPSE_SEARCH_FAISS_FOLDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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
/* The same, its exact re-scoring on `threads` threads (0: every core). */
glimpse_status faiss_folder_open_with(const char *folder, int threads, faiss_folder **out);
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

/* How faiss_folder_search_rows searches. */
typedef struct faiss_folder_search_params {
    size_t nprobe;         /* lists an IVF index searches; 0: the folder's */
    bool rescore;          /* re-score the candidates with the exact vectors, where the folder has them */
    size_t rescore_factor; /* candidates re-scored: k x this; 0: the folder's */
} faiss_folder_search_params;
faiss_folder_search_params faiss_folder_default_search_params(void); /* the folder's choices, re-scoring */

/* The search of faiss_folder_search as rows (numbers into the path table) and their cosines, best first:
 * rows[0..*found) and cosines[0..*found), *found = min(k, count). params NULL: the defaults. */
glimpse_status faiss_folder_search_rows(faiss_folder *folder, const float *query, size_t k,
                                        const faiss_folder_search_params *params, int64_t *rows, float *cosines,
                                        size_t *found);
/* Row's path, an owned copy into *out (caller frees); INVALID_ARGUMENT for a row past the count, BAD_FORMAT for
 * a path table that is damaged there. */
glimpse_status faiss_folder_row_path(const faiss_folder *folder, int64_t row, char **out);

/* Readies the folder for a long-lived process's searches: index.faiss read once into the page cache, and every
 * page of vectors.npy mapped now, on huge pages where the kernel can (a file cached in small pages, as one just
 * written or copied is, is dropped from the cache and read again so that it can be); *huge_fraction (may be
 * NULL): the fraction of vectors.npy mapped by huge pages. Hints: what the kernel refuses is not an error. */
glimpse_status faiss_folder_populate(faiss_folder *folder, double *huge_fraction);

#endif
