"""shards.py — the embedding folder written by glimpse.dask and read by glimpse.faiss: manifest.json,
pictures.txt (the plan: shard i is lines i*shard_size to (i+1)*shard_size) and per shard part-NNNNN.npy
+ part-NNNNN.json, written atomically. Only numpy and the standard library; no cluster needed to read.

    DIR/manifest.json     {"format": "glimpse-embeddings-1", "model": {...}, "shard_size": S, "shards": N,
                           "video_sampling": "every 2 s" (null: no videos), "complete": bool,
                           "pictures": n (rows), "frames": f, "videos": v, "broken": b, ...}
    DIR/pictures.txt      one path per line, in shard order; an empty line is padding (no picture)
    DIR/part-NNNNN.npy    float32 [n, dim]: row r is the embedding of pictures[r] of the shard's .json
    DIR/part-NNNNN.json   {"format": "glimpse-shard-1", "shard": i, "dim": d, "pictures": [{"path", "size",
                           "mtime_ns", "sha256"} (a video's frame adds "frame": its number from 0 and
                           "time": seconds; a video's frames are consecutive)], "broken": [{"path", "reason"}]}

A shard is complete when its .json exists (written last, after its .npy) and names as many pictures as
its .npy has rows; anything else is absent and is embedded again."""

import json
import os
import tempfile

import numpy as np

MANIFEST_FORMAT = "glimpse-embeddings-1"
SHARD_FORMAT = "glimpse-shard-1"


def shard_name(folder, shard, suffix):
    return os.path.join(folder, f"part-{shard:05d}.{suffix}")


def write_atomically(path, write):
    """write(file) fills a temporary file beside path, which is synced and renamed over path: a reader
    sees the whole file or none (a kill leaves at most a .tmp file, overwritten next time)."""
    folder = os.path.dirname(path) or "."
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=os.path.basename(path) + ".", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as file:
            write(file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


def write_json(path, value):
    write_atomically(path, lambda file: file.write((json.dumps(value, indent=1) + "\n").encode()))


def read_json(path):
    with open(path, encoding="utf-8") as file:
        return json.load(file)


def write_shard(folder, shard, vectors, pictures, broken):
    """Writes shard's vectors (float32 [n, dim]) and its metadata, the .json last (the commit point)."""
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    if len(vectors) != len(pictures):
        raise ValueError(f"shard {shard}: {len(vectors)} embeddings for {len(pictures)} pictures")
    write_atomically(shard_name(folder, shard, "npy"), lambda file: np.save(file, vectors))
    write_json(shard_name(folder, shard, "json"), {"format": SHARD_FORMAT, "shard": shard,
                                                   "dim": int(vectors.shape[1]), "pictures": pictures,
                                                   "broken": broken})


def read_shard(folder, shard, mmap=True):
    """(vectors, metadata) of a complete shard, or None if it is absent or incomplete."""
    try:
        metadata = read_json(shard_name(folder, shard, "json"))
        vectors = np.load(shard_name(folder, shard, "npy"), mmap_mode="r" if mmap else None)
    except (OSError, ValueError):
        return None
    if metadata.get("format") != SHARD_FORMAT or vectors.ndim != 2 or len(vectors) != len(metadata["pictures"]):
        return None
    return vectors, metadata


def shard_is_complete(folder, shard):
    return read_shard(folder, shard) is not None


def read_plan(folder):
    """The paths of pictures.txt ('' for padding)."""
    with open(os.path.join(folder, "pictures.txt"), encoding="utf-8", errors="surrogateescape") as file:
        return file.read().split("\n")[:-1]


def write_plan(folder, paths):
    write_atomically(os.path.join(folder, "pictures.txt"),
                     lambda file: file.write("".join(path + "\n" for path in paths).encode(errors="surrogateescape")))


def read_manifest(folder):
    manifest = read_json(os.path.join(folder, "manifest.json"))
    if manifest.get("format") != MANIFEST_FORMAT:
        raise ValueError(f"{folder}/manifest.json is not a glimpse embedding manifest")
    return manifest


def load_embeddings(folder, vectors_path=None):
    """Every complete shard of folder in order: (vectors float32 [n, dim], pictures [metadata dicts],
    manifest). With vectors_path, the vectors are copied shard by shard into that .npy file and returned
    memory-mapped from it (a collection larger than memory); else they are concatenated in memory.
    Refuses a folder whose run is not complete: the missing shards would be missing pictures."""
    manifest = read_manifest(folder)
    if not manifest.get("complete"):
        raise ValueError(f"{folder}: the embedding run is not complete (run glimpse.dask embed again to finish it)")
    parts, pictures = [], []
    for shard in range(manifest["shards"]):
        found = read_shard(folder, shard)
        if found is None:
            raise ValueError(f"{folder}: shard {shard} is missing or incomplete")
        parts.append(found[0])
        pictures.extend(found[1]["pictures"])
    dim = manifest["model"]["embedding_dim"]
    if vectors_path is None:
        return (np.concatenate(parts) if parts else np.empty((0, dim), np.float32)), pictures, manifest
    vectors = np.lib.format.open_memmap(vectors_path, mode="w+", dtype=np.float32, shape=(len(pictures), dim))
    first = 0
    for part in parts:
        vectors[first:first + len(part)] = part
        first += len(part)
    vectors.flush()
    return vectors, pictures, manifest
