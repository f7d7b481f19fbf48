// faiss_engine.cpp — faiss_engine.h over Debian's libfaiss (C++): the one
// file of glimpse that includes FAISS. Every FAISS exception is caught here
// and turned into the error text the C side reports.
#include "search/faiss_engine.h"

#include <faiss/IVFlib.h>
#include <faiss/IndexHNSW.h>
#include <faiss/IndexIVF.h>
#include <faiss/index_io.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <memory>

struct faiss_engine {
    std::unique_ptr<faiss::Index> index;
};

namespace {

void describe(const std::exception &failure, char *error, size_t capacity) {
    if (capacity) std::snprintf(error, capacity, "%s", failure.what());
}

// The HNSW quantizer's efSearch for nprobe lists: glimpse.faiss's quantizer_search_breadth.
int quantizer_search_breadth(size_t nprobe) { return static_cast<int>(std::max<size_t>(64, 2 * nprobe)); }

} // namespace

extern "C" int faiss_engine_open(const char *path, faiss_engine **out, char *error, size_t capacity) {
    *out = nullptr;
    try {
        std::unique_ptr<faiss::Index> index(faiss::read_index(path, faiss::IO_FLAG_MMAP | faiss::IO_FLAG_READ_ONLY));
        if (index->metric_type != faiss::METRIC_INNER_PRODUCT) {
            if (capacity) std::snprintf(error, capacity, "its metric is not the inner product glimpse.faiss uses");
            return -1;
        }
        *out = new faiss_engine{std::move(index)};
        return 0;
    } catch (const std::exception &failure) {
        describe(failure, error, capacity);
        return -1;
    }
}

extern "C" void faiss_engine_free(faiss_engine *engine) { delete engine; }

extern "C" size_t faiss_engine_count(const faiss_engine *engine) {
    return static_cast<size_t>(engine->index->ntotal);
}

extern "C" size_t faiss_engine_dim(const faiss_engine *engine) { return static_cast<size_t>(engine->index->d); }

extern "C" int faiss_engine_is_ivf(const faiss_engine *engine) {
    return faiss::ivflib::try_extract_index_ivf(engine->index.get()) != nullptr;
}

extern "C" int faiss_engine_search(faiss_engine *engine, const float *query, size_t k, size_t nprobe, int64_t *rows,
                                   float *scores, char *error, size_t capacity) {
    try {
        faiss::IndexIVF *ivf = faiss::ivflib::try_extract_index_ivf(engine->index.get());
        if (ivf && nprobe) {
            ivf->nprobe = std::min(nprobe, ivf->nlist);
            if (auto *hnsw = dynamic_cast<faiss::IndexHNSW *>(ivf->quantizer))
                hnsw->hnsw.efSearch = quantizer_search_breadth(ivf->nprobe);
        }
        engine->index->search(1, query, static_cast<faiss::Index::idx_t>(k), scores, rows);
        return 0;
    } catch (const std::exception &failure) {
        describe(failure, error, capacity);
        return -1;
    }
}
