"""faiss_scale.py — glimpse.faiss at scale: N synthetic 512-dimensional embeddings clustered like real CLIP
image embeddings, indexed as glimpse.faiss builds (IVF-PQ, parameters from the size), then build time, index
size, query latency (p50/p99, one query at a time) and recall@10 against exact search, per nprobe.

    /usr/bin/python3 bench/faiss_scale.py --count 10000000 --work /big/disk/faiss-bench   (~21 GB of vectors)

How the vectors are made (real CLIP embeddings are not uniform on the sphere: they sit in a cone around a
common direction, in semantic clusters within clusters of very unequal sizes, with a decaying spectrum):
each vector is 0.55 × a direction shared by all + 0.5 × its topic's centre (2,000 topics, Zipf-sized,
exponent 1.1) + 0.4 × its sub-topic's centre (50 per topic, Zipf-sized) + 0.35 × noise drawn in a fixed
random basis with power-law variances (i^-0.5 for the i-th axis) + 0.15 × isotropic noise, then
L2-normalised. Mean cosine between two vectors comes out near 0.3, as between CLIP embeddings of unrelated
photos. The queries are 1,000 further vectors of the same distribution (not in the index). Seeded: the
same --count and --seed give the same vectors."""

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from glimpse import faiss as glimpse_faiss  # noqa: E402

DIM, TOPICS, SUBTOPICS = 512, 2000, 50


class Generator:
    def __init__(self, seed):
        rng = np.random.default_rng(seed)
        unit = lambda x: x / np.linalg.norm(x, axis=-1, keepdims=True)  # noqa: E731
        self.shared = unit(rng.standard_normal(DIM)).astype(np.float32)
        self.topics = unit(rng.standard_normal((TOPICS, DIM))).astype(np.float32)
        self.subtopics = unit(rng.standard_normal((TOPICS, SUBTOPICS, DIM))).astype(np.float32)
        zipf = lambda n: (lambda w: w / w.sum())(1.0 / np.arange(1, n + 1) ** 1.1)  # noqa: E731
        self.topic_weights, self.subtopic_weights = zipf(TOPICS), zipf(SUBTOPICS)
        basis, _ = np.linalg.qr(rng.standard_normal((DIM, DIM)))
        self.noise_basis = (basis * (np.arange(1, DIM + 1) ** -0.25)).T.astype(np.float32)  # variances i^-0.5
        self.noise_basis /= np.sqrt((np.arange(1, DIM + 1) ** -0.5).sum() / DIM)  # unit mean variance per axis
        self.seed = seed

    def make(self, count, stream):
        rng = np.random.default_rng([self.seed, stream])
        topic = rng.choice(TOPICS, size=count, p=self.topic_weights)
        subtopic = rng.choice(SUBTOPICS, size=count, p=self.subtopic_weights)
        shaped = rng.standard_normal((count, DIM), dtype=np.float32) @ self.noise_basis / np.sqrt(DIM)
        flat = rng.standard_normal((count, DIM), dtype=np.float32) / np.sqrt(DIM)
        x = (0.55 * self.shared + 0.5 * self.topics[topic] + 0.4 * self.subtopics[topic, subtopic]
             + 0.35 * shaped + 0.15 * flat)
        return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def exact_top(vectors, queries, k, chunk):
    """The exact top-k rows of vectors by inner product, for each query (chunked, so vectors may be mapped)."""
    best_scores = np.full((len(queries), k), -np.inf, np.float32)
    best_rows = np.zeros((len(queries), k), np.int64)
    for first in range(0, len(vectors), chunk):
        scores = queries @ np.asarray(vectors[first:first + chunk]).T
        top = np.argpartition(-scores, k - 1, axis=1)[:, :k] if scores.shape[1] > k else \
            np.tile(np.arange(scores.shape[1]), (len(queries), 1))
        merged_scores = np.concatenate([best_scores, np.take_along_axis(scores, top, 1)], axis=1)
        merged_rows = np.concatenate([best_rows, top + first], axis=1)
        keep = np.argsort(-merged_scores, axis=1, kind="stable")[:, :k]
        best_scores, best_rows = np.take_along_axis(merged_scores, keep, 1), np.take_along_axis(merged_rows, keep, 1)
    return best_rows


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=10_000_000)
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--work", required=True, help="a folder with room for count × 2 KiB of vectors and the index")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--nprobe", type=int, nargs="+", default=[16, 32, 64, 128, 256])
    parser.add_argument("--rescore-factor", type=int, nargs="+", default=[10, 50],
                        help="candidates re-scored exactly, as a multiple of k (0: no re-scoring)")
    parser.add_argument("--chunk", type=int, default=250_000)
    arguments = parser.parse_args()
    os.makedirs(arguments.work, exist_ok=True)
    generator = Generator(arguments.seed)

    started = time.perf_counter()
    path = os.path.join(arguments.work, "vectors.npy")
    vectors = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(arguments.count, DIM))
    for stream, first in enumerate(range(0, arguments.count, arguments.chunk)):
        vectors[first:first + arguments.chunk] = generator.make(min(arguments.chunk, arguments.count - first), stream)
    vectors.flush()
    generated = time.perf_counter() - started
    queries = generator.make(arguments.queries, 1_000_000)
    sample = np.asarray(vectors[:2000])
    pair_cosine = float((sample[:1000] * sample[1000:]).sum(1).mean())

    started = time.perf_counter()
    truth = exact_top(vectors, queries, 10, arguments.chunk)
    exact_seconds = time.perf_counter() - started

    started = time.perf_counter()
    paths = [f"synthetic/{i:08d}" for i in range(arguments.count)]
    parameters = glimpse_faiss.write_index(arguments.work, vectors, paths,
                                           {"path": "synthetic", "logit_scale": 1.0, "logit_bias": 0.0,
                                            "precision": "float32"}, kind="ivfpq", keep_vectors=False)
    build_seconds = time.perf_counter() - started
    index = glimpse_faiss.FaissIndex(arguments.work)
    report = {"count": arguments.count, "dim": DIM, "generate_seconds": round(generated, 1),
              "mean_pair_cosine": round(pair_cosine, 3), "exact_search_seconds_all_queries": round(exact_seconds, 1),
              "build_seconds": round(build_seconds, 1),
              "parameters": {k: v for k, v in parameters.items() if k != "model"},
              "index_bytes": os.path.getsize(os.path.join(arguments.work, "index.faiss")),
              "vector_bytes": os.path.getsize(path), "runs": []}
    for nprobe in arguments.nprobe:
        for factor in arguments.rescore_factor:
            latencies, hits = [], 0
            for q, query in enumerate(queries):
                t = time.perf_counter()
                rows, _ = index.search_vectors(query, 10, nprobe=nprobe, rescore=factor > 0, rescore_factor=factor)
                latencies.append(time.perf_counter() - t)
                hits += len(set(rows[0].tolist()) & set(truth[q].tolist()))
            latencies = np.array(latencies) * 1e3
            run = {"nprobe": nprobe, "rescore_candidates": 10 * factor,
                   "recall_at_10": round(hits / (10 * len(queries)), 4),
                   "p50_ms": round(float(np.percentile(latencies, 50)), 2),
                   "p99_ms": round(float(np.percentile(latencies, 99)), 2)}
            report["runs"].append(run)
            print(json.dumps(run), file=sys.stderr, flush=True)
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
