"""faiss.py — a FAISS index over the embedding shards of glimpse.dask, for collections too large for the SQLite
index's exact scan: built once (parameters chosen from the collection's size), memory-mapped at query
time, with an id -> path table, and its candidates re-scored with the exact float32 vectors.

    python -m glimpse.faiss build DIR --out INDEX     (INDEX is a folder; its params.json says what was chosen)
    python -m glimpse.faiss search INDEX [-k N] [--json] QUERY..."""

import argparse
import ctypes
import json
import math
import os
import sys
import threading
import time

import numpy as np

import glimpse

from . import _library as _c
from . import shards

FLAT_BELOW = 100_000  # fewer vectors than this: an exact flat index (a scan of n x dim floats is fast enough)


HNSW_QUANTIZER_FROM = 4096  # from this many lists, an HNSW graph over the centroids finds a vector's lists


def ivfpq_parameters(count, dim, nlist=None):
    """IVF-PQ parameters for count vectors of dim: nlist ~ 4 sqrt(n) lists (a power of two, at most n/39 so
    that k-means has 39 training points a list; or as given), PQ of dim/8 sub-vectors (8 dimensions each,
    dividing dim) of 8 bits (fewer for tiny collections: 2^bits <= n/39), nprobe = nlist/128 lists searched
    (16 to 48) and k x rescore_factor candidates re-scored exactly, rescore_factor = 100 (n / 10^6)^0.7 rounded
    to tens (50 to 1,000): measured (docs/scale-out.md) at 1M vectors, 4,096 lists, nprobe 32 and 1,000 re-scored give
    recall@10 0.954 at 2.4 ms; at 10M, 16,384 lists, nprobe 48 and 5,000 give 0.951 at 7.4-8.9 ms.
    From HNSW_QUANTIZER_FROM lists (about a million vectors) a query finds its lists through an HNSW graph
    (32 links) over the centroids, built after the adds (which assign by batched matrix products), and
    k-means trains on 32 points a list instead of 64. k-means runs 10 iterations; the PQ codebooks train
    on 64 points a centroid in 10 iterations."""
    if not nlist:
        nlist = 2 ** round(math.log2(max(4 * math.sqrt(count), 1)))
        nlist = int(max(1, min(nlist, count // 39, 65536)))
    sub_vectors = max(1, dim // 8)
    while dim % sub_vectors:
        sub_vectors -= 1
    bits = int(max(1, min(8, math.floor(math.log2(max(count // 39, 2))))))
    nprobe = int(min(nlist, max(16, min(48, nlist // 128))))
    rescore_factor = int(min(1000, max(50, 10 * round(10 * (count / 1e6) ** 0.7))))
    if nlist >= HNSW_QUANTIZER_FROM:
        quantizer, train = "hnsw32", int(min(count, 32 * nlist))
    else:
        quantizer, train = "flat", int(min(count, max(64 * nlist, 2 ** bits * 64)))
    return {"nlist": int(nlist), "pq_sub_vectors": sub_vectors, "pq_bits": bits, "nprobe": nprobe,
            "train_size": train, "quantizer": quantizer, "kmeans_iterations": 10, "pq_iterations": 10,
            "pq_points_per_centroid": 64, "rescore_factor": rescore_factor}


def quantizer_search_breadth(nprobe):
    """The HNSW quantizer's efSearch for nprobe lists: for FAISS's own search of an index (building, or an
    index whose quantizer cannot give its centroids); FaissIndex and glimpse search --faiss rank the
    centroids exactly instead."""
    return max(64, 2 * int(nprobe))


def set_nprobe(index, nprobe):
    """Sets the lists searched (and an HNSW quantizer's search breadth) on an IVF index; nothing on others."""
    import faiss
    try:
        ivf = faiss.extract_index_ivf(index)
    except RuntimeError:
        return
    ivf.nprobe = int(nprobe)
    quantizer = faiss.downcast_index(ivf.quantizer)
    if isinstance(quantizer, faiss.IndexHNSW):
        quantizer.hnsw.efSearch = quantizer_search_breadth(nprobe)


def read_rows(vectors, rows):
    """vectors[rows] for sorted row numbers, also from a reader that only takes slices (a chunked file)."""
    if isinstance(vectors, np.ndarray):
        return np.ascontiguousarray(vectors[rows], dtype=np.float32)
    out = np.empty((len(rows), vectors.shape[1]), np.float32)
    for first in range(0, len(rows), 4096):
        group = rows[first:first + 4096]
        block = vectors[int(group[0]):int(group[-1]) + 1]
        out[first:first + len(group)] = block[group - group[0]]
    return out


def make_index(vectors, kind="auto", nlist=None, pq_sub_vectors=None, nprobe=None, seed=1234):
    """A trained FAISS index holding vectors (float32 [n, dim], L2-normalised; inner product; an array,
    a memory map, or any object with .shape whose slices give arrays) and the parameters it was made
    with. kind: "flat" (exact), "ivfpq", or "auto" (flat below FLAT_BELOW)."""
    import faiss
    count, dim = vectors.shape
    if kind == "auto":
        kind = "flat" if count < FLAT_BELOW else "ivfpq"
    if kind == "flat":
        index = faiss.IndexFlatIP(dim)
        parameters = {"kind": "flat"}
    elif kind == "ivfpq":
        parameters = ivfpq_parameters(count, dim, nlist)
        for name, value in (("pq_sub_vectors", pq_sub_vectors), ("nprobe", nprobe)):
            if value:
                parameters[name] = int(value)
        if dim % parameters["pq_sub_vectors"]:
            raise ValueError(f"{parameters['pq_sub_vectors']} PQ sub-vectors do not divide dimension {dim}")
        parameters["kind"] = "ivfpq"
        # k-means and the adds assign vectors to lists by a flat scan of the centroids, in batches that are
        # matrix products (OpenBLAS): Debian's FAISS computes an HNSW graph's distances with its plain
        # scalar loop (fvec_inner_product_ref, seen in gdb), 6x slower here than the batched scan
        quantizer = faiss.IndexFlatIP(dim)
        index = faiss.IndexIVFPQ(quantizer, dim, parameters["nlist"], parameters["pq_sub_vectors"],
                                 parameters["pq_bits"], faiss.METRIC_INNER_PRODUCT)
        index.cp.niter = parameters["kmeans_iterations"]
        # the PQ codebooks (256 centroids in each 8-dimensional sub-space) learn from 64 points a centroid
        # in 10 iterations: FAISS's default 256 points and 25 iterations spent 7 CPU-minutes of a
        # 200,000-vector build here in those 64 small k-means, for codebooks the re-scoring corrects anyway
        index.pq.cp.niter = parameters["pq_iterations"]
        index.pq.cp.max_points_per_centroid = parameters["pq_points_per_centroid"]
        sample = np.random.default_rng(seed).choice(count, size=parameters["train_size"], replace=False)
        index.train(read_rows(vectors, np.sort(sample)))
    else:
        raise ValueError(f"index kind is auto, flat or ivfpq, not {kind!r}")
    for first in range(0, count, 262144):
        index.add(np.ascontiguousarray(vectors[first:first + 262144], dtype=np.float32))
    if kind == "ivfpq" and parameters["quantizer"] == "hnsw32":
        # a query finds its lists through an HNSW graph over the centroids: one query's flat scan of
        # 16,384 centroids of 512 is 8 million scalar multiply-adds (milliseconds), the graph's a few %
        graph = faiss.IndexHNSWFlat(dim, 32, faiss.METRIC_INNER_PRODUCT)
        graph.hnsw.efConstruction = 40
        graph.add(quantizer.reconstruct_n(0, parameters["nlist"]))
        index.quantizer = graph
        index.referenced_objects.append(graph)  # kept alive with the index (the SWIG field does not own it)
    if kind == "ivfpq":
        set_nprobe(index, parameters["nprobe"])
    return index, parameters


def write_paths(folder, paths):
    """The id -> path table: paths.bin (the UTF-8 paths back to back) and offsets.npy (uint64 [n + 1]),
    both memory-mapped by readers, so a lookup costs two reads whatever the collection's size. paths is
    any sequence with a length; it is streamed, never held encoded as a whole."""
    offsets = np.zeros(len(paths) + 1, dtype=np.uint64)

    def write_bytes(file):
        position, written = 0, 0
        batch = []
        for row, path in enumerate(paths):
            encoded = path.encode(errors="surrogateescape")
            position += len(encoded)
            offsets[row + 1] = position
            batch.append(encoded)
            if len(batch) == 65536:
                file.write(b"".join(batch))
                batch = []
            written = row + 1
        file.write(b"".join(batch))
        if written != len(paths):
            raise ValueError(f"{written} paths for a table of {len(paths)}")
    shards.write_atomically(os.path.join(folder, "paths.bin"), write_bytes)
    shards.write_atomically(os.path.join(folder, "offsets.npy"), lambda file: np.save(file, offsets))


def build(embeddings, out, kind="auto", nlist=None, pq_sub_vectors=None, nprobe=None, keep_vectors=True):
    """Builds the index folder out from the complete embedding folder embeddings (see write_index), the
    vectors copied shard by shard into out/vectors.npy (mapped, so the collection may exceed memory; removed
    after the build when not keep_vectors). Returns the parameters."""
    started = time.perf_counter()
    os.makedirs(out, exist_ok=True)
    # the vectors go straight to a mapped file (vectors.npy itself when kept), not into memory
    vectors_path = os.path.join(out, "vectors.npy" if keep_vectors else "vectors.building.npy")
    try:
        vectors, pictures, manifest = shards.load_embeddings(embeddings, vectors_path)
        times = None
        if any("time" in picture for picture in pictures):
            times = np.array([picture.get("time", -1.0) for picture in pictures], dtype=np.float64)
        return write_index(out, vectors, [picture["path"] for picture in pictures], manifest["model"], kind,
                           nlist, pq_sub_vectors, nprobe, False, started, times)
    finally:
        if not keep_vectors and os.path.exists(vectors_path):
            os.unlink(vectors_path)


def write_index(out, vectors, paths, model, kind="auto", nlist=None, pq_sub_vectors=None, nprobe=None,
                keep_vectors=True, started=None, times=None):
    """Writes the index folder out: index.faiss, the id -> path table, times.npy (float64 [n]: a video
    frame's time in seconds, -1 for a still; only when times are given), vectors.npy (the exact float32
    vectors for re-scoring: written when keep_vectors, kept if already there) and params.json (what was
    chosen, model: the manifest's model record, and the build's time)."""
    import faiss
    started = time.perf_counter() if started is None else started
    os.makedirs(out, exist_ok=True)
    index, parameters = make_index(vectors, kind, nlist, pq_sub_vectors, nprobe)
    temporary = os.path.join(out, "index.faiss.tmp")
    faiss.write_index(index, temporary)
    os.replace(temporary, os.path.join(out, "index.faiss"))
    write_paths(out, paths)
    times_path = os.path.join(out, "times.npy")
    if times is not None:
        times = np.asarray(times, dtype=np.float64)
        if times.shape != (len(vectors),):
            raise ValueError(f"{len(times)} times for {len(vectors)} vectors")
        shards.write_atomically(times_path, lambda file: np.save(file, times))
    elif os.path.exists(times_path):  # (an earlier build's, of other rows)
        os.unlink(times_path)
    if keep_vectors:
        shards.write_atomically(os.path.join(out, "vectors.npy"), lambda file: np.save(file, vectors))
    parameters.update(count=len(vectors), dim=int(vectors.shape[1]), metric="inner product",
                      rescore=os.path.exists(os.path.join(out, "vectors.npy")),
                      rescore_factor=parameters.get("rescore_factor", 50), model=model,
                      build_seconds=round(time.perf_counter() - started, 3))
    shards.write_json(os.path.join(out, "params.json"), parameters)
    return parameters


class FaissIndex:
    """An index folder made by build(), memory-mapped: search() takes texts or combined queries (embedded
    with the model the shards were made with, loaded on first use) or embeddings, and gives [(path, score)]
    best first, score = logit_scale × cosine + logit_bias as glimpse search gives it. The search is
    libglimpse-faiss's (include/glimpse_faiss.h), the one glimpse search --faiss runs: an IVF index's lists
    from ranking every centroid exactly, its candidates re-scored with the exact vectors."""

    def __init__(self, folder, model=None, populate=False, threads=0):
        """populate: at open, read index.faiss into the page cache and map every page of vectors.npy on huge
        pages, as a long-lived process (a service) would: its searches then read memory, not the disk or page
        faults (10M vectors, 20.5 GB: 10.7 s from disk, 0.3 s once cached in huge pages); huge_mapped says what
        fraction of vectors.npy got huge pages (0 where the kernel offers none). threads: the exact
        re-scoring's (0: every core); FAISS's own are OpenMP's (OMP_NUM_THREADS)."""
        self.threads = int(threads)
        self.folder = os.fspath(folder)
        self._lib = _c.faiss_library()
        self._lock = threading.Lock()  # one search at a time on the handle (ctypes lets go of the GIL)
        handle = ctypes.c_void_p()
        self._check(self._lib.glimpse_faiss_open(self.folder.encode(errors="surrogateescape"), self.threads,
                                                 ctypes.byref(handle)))
        self._handle = handle
        self.parameters = shards.read_json(os.path.join(self.folder, "params.json"))
        self.huge_mapped = None
        if populate:
            fraction = ctypes.c_double()
            self._check(self._lib.glimpse_faiss_populate(self._handle, ctypes.byref(fraction)))
            self.huge_mapped = fraction.value
        vectors = os.path.join(self.folder, "vectors.npy")
        self.vectors = np.load(vectors, mmap_mode="r") if os.path.exists(vectors) else None
        self.offsets = np.load(os.path.join(self.folder, "offsets.npy"), mmap_mode="r")
        size = os.path.getsize(os.path.join(self.folder, "paths.bin"))
        self.paths = np.memmap(os.path.join(self.folder, "paths.bin"), dtype=np.uint8, mode="r") if size else b""
        times = os.path.join(self.folder, "times.npy")
        self.times = np.load(times, mmap_mode="r") if os.path.exists(times) else None
        self.dim = int(self._lib.glimpse_faiss_dim(self._handle))
        self.model = model
        self.scale = self.parameters["model"]["logit_scale"]
        self.bias = self.parameters["model"]["logit_bias"]

    def _check(self, status):
        if status:
            detail = self._lib.glimpse_faiss_last_error().decode(errors="replace")
            name = _c.STATUS_NAMES[status] if 0 <= status < len(_c.STATUS_NAMES) else ""
            raise glimpse._ERROR_CLASSES.get(name, glimpse.GlimpseError)(status, detail)

    def __len__(self):
        return int(self._lib.glimpse_faiss_count(self._handle)) if self._handle else 0

    def close(self):
        """Lets go of the index, the mappings and the model (as glimpse.Index.close does); also at `with`'s end."""
        with self._lock:
            if self._handle:
                self._lib.glimpse_faiss_close(self._handle)
            self._handle = None
        self.vectors = self.offsets = self.paths = self.times = None
        self.model = None

    @property
    def closed(self):
        return not self._handle

    def __del__(self):
        if getattr(self, "_handle", None):
            self._lib.glimpse_faiss_close(self._handle)
            self._handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def path(self, row):
        return bytes(self.paths[int(self.offsets[row]):int(self.offsets[row + 1])]).decode(errors="surrogateescape")

    def time(self, row):
        """A video frame's time in seconds, or None for a still picture."""
        if self.times is None or not self.times[row] >= 0:
            return None
        return float(self.times[row])

    def embed(self, query):
        if self.model is None:
            model = self.parameters["model"]
            self.model = glimpse.Model(model["path"], precision=model["precision"])
        return self.model.embed_query(query)

    def search_vectors(self, queries, k=10, nprobe=None, rescore=True, rescore_factor=None):
        """(rows int64 [q, k], cosines float32 [q, k]) of the k nearest vectors to each query (float32 [q,
        dim]), best first; -1 and -inf where fewer exist. With rescore and vectors.npy, an IVF index's k ×
        rescore_factor candidates (None: the folder's) are re-scored with the exact vectors."""
        queries = np.ascontiguousarray(np.atleast_2d(queries), dtype=np.float32)
        if queries.ndim != 2 or queries.shape[1] != self.dim:
            raise ValueError(f"queries of dimension {queries.shape[-1]} for an index of dimension {self.dim}")
        k = max(int(k), 0)
        rows = np.full((len(queries), k), -1, np.int64)
        cosines = np.full((len(queries), k), -np.inf, np.float32)
        params = _c.FaissSearchParams(int(nprobe or 0), bool(rescore), int(rescore_factor or 0))
        found = ctypes.c_size_t()
        with self._lock:
            if not self._handle:
                raise ValueError(f"{self.folder}: the index is closed")
            for q in range(len(queries) if k else 0):
                self._check(self._lib.glimpse_faiss_search_rows(
                    self._handle, queries[q].ctypes.data, k, ctypes.byref(params), rows[q].ctypes.data,
                    cosines[q].ctypes.data, ctypes.byref(found)))
        return rows, cosines

    def search(self, query, k=10, nprobe=None, rescore=True, with_times=False):
        """The k stored pictures closest to query (a text or combined query, or an embedding) as
        [(path, score)], best first; with_times, [(path, score, time)], time a video frame's seconds or
        None for a still."""
        if self.closed:
            raise ValueError(f"{self.folder}: the index is closed")
        if k <= 0:
            return []
        vector = self.embed(query) if isinstance(query, str) else query
        rows, cosines = self.search_vectors(vector, k, nprobe, rescore)
        return [(self.path(row), float(self.scale * cosine + self.bias)) + ((self.time(row),) if with_times else ())
                for row, cosine in zip(rows[0], cosines[0]) if row >= 0]


def format_time(seconds):
    """A frame's time as glimpse search prints it: M:SS.s, or H:MM:SS.s from an hour."""
    minutes = int(seconds // 60)
    rest = seconds - 60.0 * minutes
    if rest >= 59.95:  # 59.97 s shows as 1:00.0, not 0:60.0
        minutes, rest = minutes + 1, 0.0
    return f"{minutes // 60}:{minutes % 60:02d}:{rest:04.1f}" if minutes >= 60 else f"{minutes}:{rest:04.1f}"


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m glimpse.faiss",
                                     description="FAISS indexes of glimpse.dask shards.")
    commands = parser.add_subparsers(dest="command", required=True)
    command = commands.add_parser("build", help="build an index folder from an embedding folder")
    command.add_argument("embeddings", metavar="DIR", help="the output folder of glimpse.dask embed")
    command.add_argument("--out", required=True, metavar="INDEX", help="the index folder to write")
    command.add_argument("--kind", default="auto", choices=["auto", "flat", "ivfpq"],
                         help=f"auto: flat (exact) below {FLAT_BELOW} vectors, IVF-PQ above")
    command.add_argument("--nlist", type=int, help="IVF lists (default ~4 sqrt(n), a power of two)")
    command.add_argument("--pq-sub-vectors", type=int, help="PQ sub-vectors, bytes per vector (default dim/8)")
    command.add_argument("--nprobe", type=int, help="lists searched per query (default nlist/128, 16 to 48)")
    command.add_argument("--no-vectors", action="store_true", help="leave out vectors.npy (no exact re-scoring)")
    command = commands.add_parser("search", help="search an index folder")
    command.add_argument("index", metavar="INDEX")
    command.add_argument("-k", type=int, default=10)
    command.add_argument("--nprobe", type=int)
    command.add_argument("--json", action="store_true", help="JSON lines as glimpse search --json")
    command.add_argument("queries", nargs="+", metavar="QUERY")
    arguments = parser.parse_args(argv)
    try:
        if arguments.command == "build":
            parameters = build(arguments.embeddings, arguments.out, arguments.kind, arguments.nlist,
                               arguments.pq_sub_vectors, arguments.nprobe, not arguments.no_vectors)
            chosen = {key: value for key, value in parameters.items() if key not in ("model", "source")}
            print(f"glimpse.faiss: {json.dumps(chosen)}", file=sys.stderr)
            return 0
        index = FaissIndex(arguments.index)
        for query in arguments.queries:
            results = index.search(query, arguments.k, arguments.nprobe, with_times=True)
            if arguments.json:
                print(json.dumps({"text": query, "results": [
                    dict({"image": p, "score": s}, **({"time": t} if t is not None else {})) for p, s, t in results]}))
            else:
                print(query)
                for path, score, seconds in results:
                    at = f" @ {format_time(seconds)}" if seconds is not None else ""
                    print(f"  {score:8.4f}  {path}{at}")
    except (OSError, ValueError, RuntimeError, glimpse.GlimpseError, ImportError) as error:
        print(f"glimpse.faiss: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
