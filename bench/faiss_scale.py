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
same --count and --seed give the same vectors.

Memory: the vectors never sit in memory as a whole. They are written to WORK/vectors.npy a chunk at a time,
and every later pass (the exact ground truth, the training sample, the index's adds) reads them back a
chunk at a time with plain reads (no memory map, so the peak RSS printed is the working set, not the page
cache); only the queries' search maps the file, as glimpse search does. Each stage's result is kept in
WORK (vectors.npy + vectors.json, truth.npy, the index folder's params.json), so a run that is stopped
resumes at the stage it reached."""

import argparse
import json
import os
import resource
import sys
import time

# Debian 12's OpenBLAS 0.3.21 takes its oldest x86-64 kernels on CPUs it does not know, such as the AMX Xeons
# (Sapphire / Emerald Rapids), where FAISS's k-means and adds run 4x slower (docs/scale-out.md). Read when numpy and FAISS
# load OpenBLAS, so set before either is imported; a value already in the environment wins.
try:
    with open("/proc/cpuinfo") as cpuinfo:
        if " amx_int8" in cpuinfo.read():
            os.environ.setdefault("OPENBLAS_CORETYPE", "SapphireRapids")
except OSError:
    pass

import numpy as np  # noqa: E402

# FAISS's OpenMP threads otherwise spin while they wait: on a shared machine (this benchmark runs under
# nice beside other work) that spinning took 10x the time of a 3,000-vector IVF-PQ build. Read by libgomp
# when FAISS is first imported.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from glimpse import faiss as glimpse_faiss  # noqa: E402
from glimpse import shards  # noqa: E402

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


class ChunkedVectors:
    """The rows of a float32 [n, DIM] .npy file read on demand: vectors[a:b] is a fresh array read from
    the file (never a memory map), so a pass over 20 GB holds one chunk at a time."""

    def __init__(self, path):
        with open(path, "rb") as file:
            version = np.lib.format.read_magic(file)
            shape, fortran, dtype = np.lib.format._read_array_header(file, version)
            self.header = file.tell()
        if len(shape) != 2 or shape[1] != DIM or fortran or dtype != np.float32:
            raise ValueError(f"{path}: not a float32 [n, {DIM}] array")
        self.path, self.shape = path, shape

    def __len__(self):
        return self.shape[0]

    def __getitem__(self, rows):
        first, stop, _ = rows.indices(self.shape[0])
        count = max(0, stop - first)
        with open(self.path, "rb") as file:
            file.seek(self.header + first * DIM * 4)
            return np.fromfile(file, np.float32, count * DIM).reshape(count, DIM)


def write_vectors(path, generator, count, chunk):
    """Generates the count vectors chunk by chunk straight into the .npy file at path."""
    temporary = path + ".tmp"
    with open(temporary, "wb") as file:
        np.lib.format.write_array_header_1_0(file, {"descr": "<f4", "fortran_order": False, "shape": (count, DIM)})
        for stream, first in enumerate(range(0, count, chunk)):
            generator.make(min(chunk, count - first), stream).tofile(file)
    os.replace(temporary, path)


def exact_top(vectors, queries, k, chunk):
    """The exact top-k rows of vectors by inner product, for each query, streaming the vectors by chunk."""
    best_scores = np.full((len(queries), k), -np.inf, np.float32)
    best_rows = np.zeros((len(queries), k), np.int64)
    for first in range(0, len(vectors), chunk):
        scores = queries @ vectors[first:first + chunk].T
        top = np.argpartition(-scores, k - 1, axis=1)[:, :k] if scores.shape[1] > k else \
            np.tile(np.arange(scores.shape[1]), (len(queries), 1))
        merged_scores = np.concatenate([best_scores, np.take_along_axis(scores, top, 1)], axis=1)
        merged_rows = np.concatenate([best_rows, top + first], axis=1)
        keep = np.argsort(-merged_scores, axis=1, kind="stable")[:, :k]
        best_scores, best_rows = np.take_along_axis(merged_scores, keep, 1), np.take_along_axis(merged_rows, keep, 1)
    return best_rows


class SyntheticPaths:
    """synthetic/00000000 ... as a sequence, made on demand (10 million Python strings would be 700 MB)."""

    def __init__(self, count):
        self.count = count

    def __len__(self):
        return self.count

    def __iter__(self):
        return (f"synthetic/{i:08d}" for i in range(self.count))


def peak_rss_mib():
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=10_000_000)
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--work", required=True, help="a folder with room for count × 2 KiB of vectors and the index")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--nprobe", type=int, nargs="+", default=[16, 32, 64, 128, 256])
    parser.add_argument("--rescore-factor", type=int, nargs="+", default=[0, 10, 50],
                        help="candidates re-scored exactly, as a multiple of k (0: no re-scoring)")
    parser.add_argument("--chunk", type=int, default=100_000)
    parser.add_argument("--nlist", type=int, help="IVF lists (default: glimpse.faiss's choice for the count)")
    parser.add_argument("--populate", action="store_true",
                        help="open the index with populate=True, as a long-lived process (a service) would: every "
                             "page of the vectors mapped at open, so the re-scoring reads memory, not page faults")
    arguments = parser.parse_args()
    os.makedirs(arguments.work, exist_ok=True)
    generator = Generator(arguments.seed)
    log = lambda **fields: print(json.dumps(fields), file=sys.stderr, flush=True)  # noqa: E731
    stamp = {"count": arguments.count, "seed": arguments.seed, "dim": DIM}

    path = os.path.join(arguments.work, "vectors.npy")
    done = os.path.join(arguments.work, "vectors.json")
    if not (os.path.exists(done) and shards.read_json(done).get("stamp") == stamp):
        started = time.perf_counter()
        write_vectors(path, generator, arguments.count, arguments.chunk)
        shards.write_json(done, {"stamp": stamp, "generate_seconds": round(time.perf_counter() - started, 1)})
    generated = shards.read_json(done)["generate_seconds"]
    vectors = ChunkedVectors(path)
    log(stage="vectors", seconds=generated, peak_rss_mib=peak_rss_mib())
    queries = generator.make(arguments.queries, 1_000_000)
    sample = vectors[:2000]
    pair_cosine = float((sample[:1000] * sample[1000:]).sum(1).mean())

    truth_path = os.path.join(arguments.work, f"truth-{arguments.queries}.npy")
    truth_done = truth_path + ".json"
    if not (os.path.exists(truth_done) and shards.read_json(truth_done).get("stamp") == stamp):
        started = time.perf_counter()
        truth = exact_top(vectors, queries, 10, arguments.chunk)
        shards.write_atomically(truth_path, lambda file: np.save(file, truth))
        shards.write_json(truth_done, {"stamp": stamp, "seconds": round(time.perf_counter() - started, 1)})
    truth = np.load(truth_path)
    exact_seconds = shards.read_json(truth_done)["seconds"]
    log(stage="exact ground truth", seconds=exact_seconds, peak_rss_mib=peak_rss_mib())

    folder = os.path.join(arguments.work, "index")
    params = os.path.join(folder, "params.json")
    if not (os.path.exists(params) and shards.read_json(params).get("count") == arguments.count):
        os.makedirs(folder, exist_ok=True)
        # the index folder's vectors.npy (for the exact re-scoring) is the generated file itself
        if not os.path.exists(os.path.join(folder, "vectors.npy")):
            os.link(path, os.path.join(folder, "vectors.npy"))
        glimpse_faiss.write_index(folder, vectors, SyntheticPaths(arguments.count),
                                  {"path": "synthetic", "logit_scale": 1.0, "logit_bias": 0.0,
                                   "precision": "float32"}, kind="ivfpq", nlist=arguments.nlist,
                                  keep_vectors=False)
    build_peak = peak_rss_mib()
    parameters = shards.read_json(params)
    log(stage="index build", seconds=parameters["build_seconds"], peak_rss_mib=build_peak)

    started = time.perf_counter()
    index = glimpse_faiss.FaissIndex(folder, populate=arguments.populate)
    open_seconds = round(time.perf_counter() - started, 2)
    log(stage="open", populate=arguments.populate, seconds=open_seconds, huge_mapped=index.huge_mapped)
    report = {"count": arguments.count, "dim": DIM, "generate_seconds": generated,
              "mean_pair_cosine": round(pair_cosine, 3), "exact_search_seconds_all_queries": exact_seconds,
              "build_seconds": parameters["build_seconds"],
              "parameters": {k: v for k, v in parameters.items() if k != "model"},
              "index_bytes": os.path.getsize(os.path.join(folder, "index.faiss")),
              "path_table_bytes": os.path.getsize(os.path.join(folder, "paths.bin")) +
              os.path.getsize(os.path.join(folder, "offsets.npy")),
              "vector_bytes": os.path.getsize(path), "peak_rss_mib_until_built": build_peak,
              "populate": arguments.populate, "open_seconds": open_seconds, "huge_mapped": index.huge_mapped,
              "runs": []}
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
            log(**run)
    report["peak_rss_mib_with_queries"] = peak_rss_mib()
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
