/* glimpse_faiss.h — libglimpse-faiss: searching a FAISS index folder (written by `python -m glimpse.faiss build`,
 * specified in docs/formats.md) from C. A library of its own beside libglimpse, so that only programs that search
 * such folders load FAISS (C++, OpenMP, BLAS): `glimpse search --faiss` and Python's glimpse.faiss.FaissIndex both
 * search through this code. Link with -lglimpse-faiss; the types are glimpse.h's.
 *
 * An IVF index's lists are chosen by ranking every centroid exactly (one matrix-vector product, ties by list
 * number), not through the index's own quantizer; its candidates (k x the rescore factor) are re-scored with the
 * exact float32 vectors of vectors.npy where the folder has them. Scores are glimpse_index_search's: the model's
 * logit_scale x cosine + logit_bias. Calls on one glimpse_faiss are not to be made from two threads at once;
 * failures leave their reason in glimpse_faiss_last_error() (this library's, per thread). */
#ifndef GLIMPSE_FAISS_H
#define GLIMPSE_FAISS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "glimpse.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct glimpse_faiss glimpse_faiss;

/* How glimpse_faiss_search_rows searches. */
typedef struct glimpse_faiss_search_params {
    size_t nprobe;         /* lists an IVF index searches; 0: the folder's (params.json) */
    bool rescore;          /* re-score the candidates with the exact vectors, where the folder has them */
    size_t rescore_factor; /* k x this many candidates re-scored; 0: the folder's (params.json, else 50) */
} glimpse_faiss_search_params;

/* The folder's own choices, re-scoring. */
glimpse_faiss_search_params glimpse_faiss_default_search_params(void);

/* Opens the index folder: params.json, index.faiss memory-mapped, the path table and vectors.npy mapped and
 * checked against each other. threads: the exact re-scoring's (0: every core). NOT_FOUND for a missing folder
 * or file, BAD_FORMAT naming the file for one that is damaged or disagrees. Close with glimpse_faiss_close. */
glimpse_status glimpse_faiss_open(const char *folder, int threads, glimpse_faiss **out);
void glimpse_faiss_close(glimpse_faiss *index);
size_t glimpse_faiss_count(const glimpse_faiss *index); /* vectors */
size_t glimpse_faiss_dim(const glimpse_faiss *index);

/* What params.json records of the model the vectors came from (strings owned by the index, valid until
 * glimpse_faiss_close; any of the three out pointers may be NULL): its path as given to the build, its precision
 * ("float32" or "int8"), and its glimpse_model_identity string, NULL where the shards did not record one. Queries
 * are to be embedded by that model: glimpse search --faiss loads it from *model_path unless given another. */
void glimpse_faiss_model(const glimpse_faiss *index, const char **model_path, const char **precision,
                         const char **identity);

/* For a long-lived process: index.faiss read once into the page cache, every page of vectors.npy mapped now,
 * on huge pages where the kernel can; *huge_fraction (may be NULL): the fraction of vectors.npy so mapped. */
glimpse_status glimpse_faiss_populate(glimpse_faiss *index, double *huge_fraction);

/* The k nearest stored vectors to query (L2-normalised, [dim]) as rows of the folder (numbers into its path
 * table, paths.bin + offsets.npy) and their cosines, best first: rows[0..*found), cosines[0..*found), *found =
 * min(k, count). params NULL: the defaults. */
glimpse_status glimpse_faiss_search_rows(glimpse_faiss *index, const float *query, size_t k,
                                         const glimpse_faiss_search_params *params, int64_t *rows, float *cosines,
                                         size_t *found);

/* The same as paths and scores (results[i].path valid until the next search; .time a video frame's seconds, else
 * -1), nprobe 0 the folder's. */
glimpse_status glimpse_faiss_search(glimpse_faiss *index, const float *query, size_t k, size_t nprobe,
                                    glimpse_search_result *results, size_t *found);

/* Why this thread's last failed call of this library failed ("" if none). */
const char *glimpse_faiss_last_error(void);

#ifdef __cplusplus
}
#endif

#endif
