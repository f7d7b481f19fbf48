/* faiss_engine.h — the few FAISS calls glimpse makes, behind a C interface:
 * open an index file memory-mapped, search it. Implemented in C++ over
 * Debian's libfaiss (faiss_engine.cpp) inside the optional glimpse_faiss
 * archive: libglimpse itself never links FAISS. Errors come back as text. */
#ifndef GLIMPSE_SEARCH_FAISS_ENGINE_H
#define GLIMPSE_SEARCH_FAISS_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct faiss_engine faiss_engine;

/* Reads the FAISS index file at path, its inverted lists memory-mapped
 * (IO_FLAG_MMAP: pages come from the file as searches touch them), read
 * only. 0 on success; else -1 with FAISS's reason in error[0..capacity). */
int faiss_engine_open(const char *path, faiss_engine **out, char *error, size_t capacity);
void faiss_engine_free(faiss_engine *engine);
size_t faiss_engine_count(const faiss_engine *engine);
size_t faiss_engine_dim(const faiss_engine *engine);
/* Whether the index is an inverted-file one (nprobe applies). */
int faiss_engine_is_ivf(const faiss_engine *engine);

/* The k best rows for query ([dim]) by inner product: rows[k] (-1 past the
 * last found) and scores[k]. nprobe > 0 sets the lists an IVF index
 * searches (and its HNSW quantizer's breadth, as glimpse.faiss sets it).
 * 0 on success; -1 with the reason in error. */
int faiss_engine_search(faiss_engine *engine, const float *query, size_t k, size_t nprobe, int64_t *rows,
                        float *scores, char *error, size_t capacity);

#ifdef __cplusplus
}
#endif

#endif
