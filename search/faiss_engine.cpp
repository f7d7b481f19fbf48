// faiss_engine.cpp — faiss_engine.h over Debian's libfaiss (C++): the one
// file of glimpse that includes FAISS. Every FAISS exception is caught here
// and turned into the error text the C side reports.
#include "search/faiss_engine.h"
#include "core/openblas.h"

#include <faiss/IVFlib.h>
#include <faiss/IndexHNSW.h>
#include <faiss/IndexIVF.h>
#include <faiss/index_io.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <memory>
#include <numeric>
#include <vector>

struct faiss_engine {
    std::unique_ptr<faiss::Index> index;
    // An IVF index's centroids [nlist, d], copied at open: a query's lists are found by ranking them all
    // exactly (one matrix-vector product) rather than through the index's own quantizer, whose HNSW graph
    // missed lists that held true neighbours (10M vectors: 0.61 recall at 16 lists against 0.93 exact).
    std::vector<float> centroids;
    std::vector<float> coarse;         // one query's centroid scores
    std::vector<faiss::Index::idx_t> lists;
    std::vector<float> list_scores;
};

namespace {

void describe(const std::exception &failure, char *error, size_t capacity) {
    if (capacity) std::snprintf(error, capacity, "%s", failure.what());
}


} // namespace

extern "C" int faiss_engine_open(const char *path, faiss_engine **out, char *error, size_t capacity) {
    *out = nullptr;
    try {
        std::unique_ptr<faiss::Index> index(faiss::read_index(path, faiss::IO_FLAG_MMAP | faiss::IO_FLAG_READ_ONLY));
        if (index->metric_type != faiss::METRIC_INNER_PRODUCT) {
            if (capacity) std::snprintf(error, capacity, "its metric is not the inner product glimpse.faiss uses");
            return -1;
        }
        auto engine = std::make_unique<faiss_engine>();
        if (faiss::IndexIVF *ivf = faiss::ivflib::try_extract_index_ivf(index.get())) {
            try {
                engine->centroids.resize(ivf->nlist * static_cast<size_t>(ivf->d));
                ivf->quantizer->reconstruct_n(0, static_cast<faiss::Index::idx_t>(ivf->nlist),
                                              engine->centroids.data());
                engine->coarse.resize(ivf->nlist);
                ivf->parallel_mode = 1; // one query at a time: its lists scanned by FAISS's threads together
            } catch (const std::exception &) { // a quantizer that cannot give its centroids: FAISS finds the lists
                engine->centroids.clear();
            }
        }
        engine->index = std::move(index);
        *out = engine.release();
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
        if (ivf && nprobe) ivf->nprobe = std::min(nprobe, ivf->nlist);
        if (!ivf || engine->centroids.empty()) {
            engine->index->search(1, query, static_cast<faiss::Index::idx_t>(k), scores, rows);
            return 0;
        }
        size_t nlist = ivf->nlist, probe = ivf->nprobe;
        // every centroid's inner product with the query, the best `probe` lists first (ties by list number)
        blas_matrix_vector(engine->coarse.data(), engine->centroids.data(), nlist, static_cast<size_t>(ivf->d), query);
        std::vector<faiss::Index::idx_t> &lists = engine->lists;
        lists.resize(nlist);
        std::iota(lists.begin(), lists.end(), 0);
        const std::vector<float> &coarse = engine->coarse;
        auto better = [&coarse](faiss::Index::idx_t a, faiss::Index::idx_t b) {
            return coarse[a] != coarse[b] ? coarse[a] > coarse[b] : a < b;
        };
        std::partial_sort(lists.begin(), lists.begin() + static_cast<std::ptrdiff_t>(probe), lists.end(), better);
        lists.resize(probe);
        engine->list_scores.resize(probe);
        for (size_t i = 0; i < probe; i++) engine->list_scores[i] = coarse[lists[i]];
        ivf->search_preassigned(1, query, static_cast<faiss::Index::idx_t>(k), lists.data(), engine->list_scores.data(),
                                scores, rows, false);
        return 0;
    } catch (const std::exception &failure) {
        describe(failure, error, capacity);
        return -1;
    }
}
