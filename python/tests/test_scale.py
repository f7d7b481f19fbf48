"""test_scale.py — the way from glimpse.dask's shards back into the C tools: `glimpse index --import` merges
shards (written here by glimpse.shards, as glimpse.dask writes them, no cluster needed) into an SQLite index
that must then search as one built by `glimpse index` over the same pictures; damaged, partial and foreign
shard folders are refused or skipped whole; and `glimpse search --faiss` over glimpse.faiss's index gives
exact search's results when recall is 1 by construction (nprobe = nlist), with clear errors for a missing,
damaged or mismatched index."""

import json
import os
import shutil
import subprocess

import numpy as np
import pytest

from conftest import BUILD, DEMO_CLIP

# FAISS's OpenMP threads (here and in the glimpse program) wait without spinning: on a busy CI machine the
# spinning made a 3,000-vector build take a minute instead of seconds
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from glimpse import dask as glimpse_dask  # noqa: E402
from glimpse import shards  # noqa: E402

PICTURES = 40
SHARD_SIZE = 16
QUERIES = ["a red circle above a blue square", "green stripes", "a yellow triangle on black"]


def glimpse(*arguments, check=True):
    done = subprocess.run([str(BUILD / "glimpse"), *map(str, arguments)], capture_output=True, text=True)
    if check:
        assert done.returncode == 0, done.stderr
    return done


def search(*arguments, k=8):
    """Each query's [(path, score)] from glimpse search --json."""
    lines = glimpse("search", *arguments, "-k", k, "--json", *QUERIES).stdout.splitlines()
    return [[(r["image"], r["score"]) for r in json.loads(line)["results"]] for line in lines]


def summary_of(done):
    """The summary object glimpse index --json prints last (after one object per failure)."""
    return json.loads(done.stdout.splitlines()[-1])


def assert_same_results(found, expected):
    for mine, theirs in zip(found, expected, strict=True):
        assert [path for path, _ in mine] == [path for path, _ in theirs]
        np.testing.assert_allclose([s for _, s in mine], [s for _, s in theirs], rtol=0, atol=1e-4)


@pytest.fixture(scope="module")
def model():
    import glimpse as binding
    with binding.Model(DEMO_CLIP, threads=1) as loaded:
        yield loaded


@pytest.fixture(scope="module")
def collection(tmp_path_factory):
    folder = tmp_path_factory.mktemp("collection")
    subprocess.run([str(BUILD / "glimpse-make-pictures"), "--out", str(folder), "--count", str(PICTURES), "--seed",
                    "11"], check=True, capture_output=True)
    (folder / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n not really")
    return folder


def write_embeddings(out, model, paths, video=None, sampling=None):
    """The folder glimpse.dask embed writes for paths, made here shard by shard with the same code (video: a
    dict of glimpse.Video's every/scenes, sampling its words; None: no videos)."""
    os.makedirs(out, exist_ok=True)
    count = (len(paths) + SHARD_SIZE - 1) // SHARD_SIZE
    shards.write_plan(str(out), paths)
    manifest = {"format": shards.MANIFEST_FORMAT, "model": glimpse_dask.model_identity(model),
                "shard_size": SHARD_SIZE, "batch_size": 8, "shards": count, "roots": [], "complete": False,
                "video_sampling": sampling}
    for shard in range(count):
        vectors, pictures, broken = glimpse_dask.embed_pictures(model, paths[shard * SHARD_SIZE:][:SHARD_SIZE],
                                                                video=video)
        shards.write_shard(str(out), shard, vectors, pictures, broken)
    return glimpse_dask.finish(str(out), manifest)


@pytest.fixture(scope="module")
def embeddings(tmp_path_factory, model, collection):
    out = tmp_path_factory.mktemp("embeddings")
    write_embeddings(out, model, glimpse_dask.list_pictures([str(collection)]))
    return out


@pytest.fixture(scope="module")
def built(tmp_path_factory, collection):
    """An index built by glimpse index over the same pictures (the broken one reported)."""
    db = tmp_path_factory.mktemp("built") / "built.db"
    done = glimpse("index", "-m", DEMO_CLIP, "--db", db, collection, check=False)
    assert done.returncode == 1 and "broken.png" in done.stderr
    return db


def test_imported_shards_search_as_an_indexed_collection(tmp_path, embeddings, built, collection):
    db = tmp_path / "imported.db"
    done = glimpse("index", "--db", db, "--import", embeddings, "--json", check=False)
    assert done.returncode == 1 and "broken.png" in done.stderr  # the run's broken file, reported
    summary = summary_of(done)
    assert (summary["added"], summary["unchanged"], summary["failed"], summary["shards_skipped"]) == \
        (PICTURES, 0, 1, 0)
    assert_same_results(search("--db", db), search("--db", built))
    # importing again adds nothing; the index is unchanged
    summary = summary_of(glimpse("index", "--db", db, "--import", embeddings, "--json", check=False))
    assert (summary["added"], summary["updated"], summary["unchanged"], summary["indexed"]) == \
        (0, 0, PICTURES, PICTURES)
    # and glimpse index over the pictures finds every imported one unchanged
    refreshed = summary_of(glimpse("index", "-m", DEMO_CLIP, "--db", db, "--json", collection, check=False))
    assert (refreshed["added"], refreshed["updated"], refreshed["unchanged"]) == (0, 0, PICTURES)
    # the binding's Index.import_embeddings is the same call
    import glimpse as binding
    with binding.Model(DEMO_CLIP) as loaded, binding.Index(tmp_path / "binding.db", loaded) as index:
        summary = index.import_embeddings(embeddings)
        assert (summary.added, summary.failed, len(summary.failures)) == (PICTURES, 1, 1)
        assert index.import_embeddings(embeddings).unchanged == PICTURES
    # into the index glimpse index built: the same pictures are recognised, nothing doubled
    copy = tmp_path / "copy.db"
    shutil.copy(built, copy)
    summary = summary_of(glimpse("index", "--db", copy, "--import", embeddings, "--json", check=False))
    assert summary["indexed"] == PICTURES and summary["added"] == 0


def damage(folder, embeddings, how):
    shutil.copytree(embeddings, folder)
    npy, record = folder / "part-00001.npy", folder / "part-00001.json"
    data = npy.read_bytes()
    if how == "truncated":
        npy.write_bytes(data[:len(data) - 100])
    elif how == "header past the end":
        npy.write_bytes(data[:8] + b"\xff\xff" + data[10:60])
    elif how == "shape lies":
        npy.write_bytes(data.replace(b"(16, ", b"(15, ", 1))
    elif how == "not normalised":
        vectors = np.load(npy)
        vectors[3] *= 2
        np.save(npy, vectors)
    elif how == "fewer pictures":
        value = json.loads(record.read_text())
        value["pictures"].pop()
        record.write_text(json.dumps(value))
    elif how == "partial":
        os.unlink(record)
    elif how == "not json":
        record.write_text('{"format": "glimpse-shard-1", "shard": 1, "pictures": [')
    elif how == "not npy":
        npy.write_bytes(b"PK\x03\x04" + data[4:])


@pytest.mark.parametrize("how", ["truncated", "header past the end", "shape lies", "not normalised", "fewer pictures",
                                 "partial", "not json", "not npy"])
def test_a_damaged_shard_is_skipped_whole(tmp_path, embeddings, how):
    folder = tmp_path / "embeddings"
    damage(folder, embeddings, how)
    done = glimpse("index", "--db", tmp_path / "index.db", "--import", folder, "--json", check=False)
    assert done.returncode == 1
    assert "part-00001." in done.stderr and "the shard is skipped" in done.stderr, done.stderr
    summary = summary_of(done)
    assert summary["shards_skipped"] == 1 and summary["added"] == PICTURES - SHARD_SIZE


def test_foreign_or_changed_embeddings_are_refused(tmp_path, embeddings, collection, built):
    folder = tmp_path / "embeddings"
    shutil.copytree(embeddings, folder)
    manifest = json.loads((folder / "manifest.json").read_text())
    # another model's identity, another precision, no identity at all: nothing imported
    for model, message in ((dict(manifest["model"], identity="CLIPModel/512/0123456789abcdef"), "another model"),
                           (dict(manifest["model"], precision="int8"), "int8"),
                           ({k: v for k, v in manifest["model"].items() if k != "identity"}, "no glimpse model")):
        (folder / "manifest.json").write_text(json.dumps(dict(manifest, model=model)))
        done = glimpse("index", "-m", DEMO_CLIP, "--db", built, "--import", folder, check=False)
        assert done.returncode == 1 and message in done.stderr, done.stderr
    # a picture changed since it was embedded is left out, not imported with its old vector
    (folder / "manifest.json").write_text(json.dumps(manifest))
    pictures = tmp_path / "pictures"
    shutil.copytree(collection, pictures)
    write_embeddings(folder, __import__("glimpse").Model(DEMO_CLIP),
                     glimpse_dask.list_pictures([str(pictures)]))
    changed = sorted(pictures.glob("*.png"))[2]
    os.utime(changed, ns=(0, 10**9))
    os.unlink(sorted(pictures.glob("*.png"))[3])
    done = glimpse("index", "--db", tmp_path / "index.db", "--import", folder, "--json", check=False)
    assert "changed since it was embedded" in done.stderr and "not found here" in done.stderr
    assert summary_of(done)["added"] == PICTURES - 2


# ------------------------------------------------------------------------ videos

def search_with_times(*arguments, k=8):
    """Each query's [(path, time or None, score)] from glimpse search --json."""
    lines = glimpse("search", *arguments, "-k", k, "--json", *QUERIES).stdout.splitlines()
    return [[(r["image"], r.get("time"), r["score"]) for r in json.loads(line)["results"]] for line in lines]


@pytest.fixture(scope="module")
def video_collection(tmp_path_factory, collection):
    """A folder of 6 demo pictures and trip.mp4, a video showing 3 others for 2 s each (10 frames a second,
    made by the ffmpeg tool), and a video cut short after its header."""
    if not shutil.which("ffmpeg"):
        pytest.skip("no ffmpeg tool to make a video")
    folder = tmp_path_factory.mktemp("videos")
    pictures = sorted(collection.glob("*.png"))
    for picture in pictures[:6]:
        shutil.copy(picture, folder)
    inputs = [a for picture in pictures[6:9] for a in ("-loop", "1", "-t", "2", "-r", "10", "-i", str(picture))]
    filters = "".join(f"[{i}:v]scale=128:96,setsar=1[v{i}];" for i in range(3)) + \
        "".join(f"[v{i}]" for i in range(3)) + "concat=n=3:v=1:a=0,format=yuv420p[out]"
    subprocess.run(["ffmpeg", "-nostdin", "-hide_banner", "-loglevel", "error", "-y", *inputs, "-filter_complex",
                    filters, "-map", "[out]", "-c:v", "libx264", "-r", "10", str(folder / "trip.mp4")], check=True)
    (folder / "cut.mp4").write_bytes((folder / "trip.mp4").read_bytes()[:1200])
    return folder


def test_a_video_cut_after_its_first_frames_is_broken(tmp_path, model, video_collection):
    """A video whose index comes first and whose frames are cut at 70% is broken whole, as glimpse index
    counts it, not kept as if its first frames were all; the same video whole gives its 3 frames."""
    import glimpse as binding
    fast, cut = tmp_path / "fast.mp4", tmp_path / "cut.mp4"
    subprocess.run(["ffmpeg", "-nostdin", "-hide_banner", "-loglevel", "error", "-y", "-i",
                    str(video_collection / "trip.mp4"), "-c", "copy", "-movflags", "+faststart", str(fast)], check=True)
    cut.write_bytes(fast.read_bytes()[:fast.stat().st_size * 7 // 10])
    sampling = {"every": None, "scenes": None}
    vectors, records = glimpse_dask.embed_video(model, str(fast), 8, sampling)
    assert vectors.shape[0] == 3 and [r["time"] for r in records] == [0.0, 2.0, 4.0]
    with pytest.raises(binding.GlimpseError, match="damaged or cut short"):
        glimpse_dask.embed_video(model, str(cut), 8, sampling)


def test_videos_go_from_shards_to_sqlite_and_faiss_as_frames(tmp_path, model, video_collection):
    """glimpse.dask's frames of a video are glimpse embed's (times and vectors, bit for bit); imported into
    SQLite they search as glimpse index's own frames do; glimpse.faiss keeps their times."""
    import glimpse as binding
    out = tmp_path / "embeddings"
    sampling = binding.video_sampling()
    paths = glimpse_dask.list_pictures([str(video_collection)])
    assert [os.path.basename(p) for p in paths][-2:] == ["cut.mp4", "trip.mp4"]
    assert glimpse_dask.list_pictures([str(video_collection)], videos=False) == paths[:-2]
    manifest = write_embeddings(out, model, paths, video={"every": None, "scenes": None}, sampling=sampling)
    vectors, pictures, _ = shards.load_embeddings(str(out))
    frames = [(row, p) for row, p in enumerate(pictures) if "frame" in p]
    assert (manifest["pictures"], manifest["frames"], manifest["videos"], manifest["broken"]) == (9, 3, 1, 1)
    assert [p["time"] for _, p in frames] == [0.0, 2.0, 4.0] and [p["frame"] for _, p in frames] == [0, 1, 2]
    broken = (out / "broken.tsv").read_text()
    assert broken.startswith(str(video_collection / "cut.mp4") + "\t"), broken
    cli = glimpse("embed", "-m", DEMO_CLIP, "--threads", "1", "--json", "-i", video_collection / "trip.mp4")
    rows = [json.loads(line) for line in cli.stdout.splitlines()]
    assert [row["time"] for row in rows] == [p["time"] for _, p in frames]
    np.testing.assert_array_equal(vectors[[row for row, _ in frames]],
                                  np.array([row["embedding"] for row in rows], dtype=np.float32))

    # into SQLite: one video of three frames, searched as glimpse index's own
    db, built = tmp_path / "imported.db", tmp_path / "built.db"
    done = glimpse("index", "--db", db, "--import", out, "--json", check=False)
    assert done.returncode == 1 and "cut.mp4" in done.stderr
    assert (summary_of(done)["added"], summary_of(done)["failed"]) == (7, 1)
    stats = json.loads(glimpse("index", "--db", db, "--stats", "--json").stdout)
    assert (stats["videos"], stats["frames"], stats["video_sampling"]) == (1, 3, sampling)
    assert glimpse("index", "-m", DEMO_CLIP, "--db", built, video_collection, check=False).returncode == 1
    imported = search_with_times("--db", db, k=9)
    assert any(time is not None for results in imported for _, time, _ in results)
    for mine, theirs in zip(imported, search_with_times("--db", built, k=9), strict=True):
        assert [(path, time) for path, time, _ in mine] == [(path, time) for path, time, _ in theirs]
        np.testing.assert_allclose([s for *_, s in mine], [s for *_, s in theirs], rtol=0, atol=1e-4)
    # importing again, or glimpse index over the folder, finds the video unchanged
    assert summary_of(glimpse("index", "--db", db, "--import", out, "--json", check=False))["unchanged"] == 7
    refreshed = summary_of(glimpse("index", "-m", DEMO_CLIP, "--db", db, "--json", video_collection, check=False))
    assert (refreshed["added"], refreshed["updated"], refreshed["unchanged"]) == (0, 0, 7)
    # frames sampled another way are refused by an index that samples every 2 s
    manifest_path = out / "manifest.json"
    manifest_path.write_text(json.dumps(dict(json.loads(manifest_path.read_text()), video_sampling="every 5 s")))
    done = glimpse("index", "--db", db, "--import", out, check=False)
    assert done.returncode == 1 and "every 5 s" in done.stderr, done.stderr
    manifest_path.write_text(json.dumps(dict(json.loads(manifest_path.read_text()), video_sampling=sampling)))
    # a shard whose frames are out of order is damaged: skipped whole
    record = out / "part-00000.json"
    original = record.read_text()
    value = json.loads(original)
    value["pictures"][-1]["frame"] = 5
    record.write_text(json.dumps(value))
    done = glimpse("index", "--db", tmp_path / "damaged.db", "--import", out, check=False)
    assert done.returncode == 1 and "the shard is skipped" in done.stderr, done.stderr
    record.write_text(original)

    # FAISS: the frames' times are kept, in Python and in glimpse search --faiss
    if not faiss_available():
        return
    pytest.importorskip("faiss", reason="Debian's python3-faiss is not installed")
    from glimpse import faiss as glimpse_faiss
    glimpse_faiss.build(str(out), str(tmp_path / "faiss"), kind="flat")
    times = np.load(tmp_path / "faiss" / "times.npy")
    assert list(times) == [p.get("time", -1.0) for p in pictures]
    index = glimpse_faiss.FaissIndex(str(tmp_path / "faiss"), model)
    found = index.search(QUERIES[0], k=9, with_times=True)
    assert sorted(t for _, _, t in found if t is not None) == [0.0, 2.0, 4.0]
    for mine, theirs in zip(search_with_times("--faiss", tmp_path / "faiss", k=9), imported, strict=True):
        assert [(path, time) for path, time, _ in mine] == [(path, time) for path, time, _ in theirs]


# ------------------------------------------------------------------------ glimpse search --faiss

def faiss_available():
    done = glimpse("search", "--faiss", "/nonexistent", "query", check=False)
    return "built without FAISS" not in done.stderr


needs_faiss = pytest.mark.skipif(not faiss_available(), reason="this glimpse was built without FAISS")


@needs_faiss
def test_faiss_search_of_pictures_equals_the_sqlite_index(tmp_path, embeddings, built):
    pytest.importorskip("faiss", reason="Debian's python3-faiss is not installed")
    from glimpse import faiss as glimpse_faiss
    for kind in ("flat", "ivfpq"):
        glimpse_faiss.build(str(embeddings), str(tmp_path / kind), kind=kind)
        assert_same_results(search("--faiss", tmp_path / kind), search("--db", built))


@needs_faiss
def test_faiss_search_at_a_few_thousand_vectors_is_exact_when_every_list_is_searched(tmp_path, model):
    """3,000 vectors in 16 IVF-PQ lists: with nprobe = nlist and every candidate re-scored, recall is 1 by
    construction, so glimpse search --faiss must give exact search's results and scores."""
    pytest.importorskip("faiss", reason="Debian's python3-faiss is not installed")
    from glimpse import faiss as glimpse_faiss
    count, dim = 3000, model.embedding_dim
    rng = np.random.default_rng(4)
    centres = rng.standard_normal((30, dim))
    vectors = centres[rng.integers(0, 30, count)] + 0.5 * rng.standard_normal((count, dim))
    vectors = (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)
    paths = [f"/synthetic/{i:05d}.jpg" for i in range(count)]
    folder = tmp_path / "index"
    parameters = glimpse_faiss.write_index(str(folder), vectors, paths, glimpse_dask.model_identity(model),
                                           kind="ivfpq", nlist=16, nprobe=16)
    assert parameters["nlist"] == 16 and parameters["quantizer"] == "flat"
    params = json.loads((folder / "params.json").read_text())
    (folder / "params.json").write_text(json.dumps(dict(params, rescore_factor=count)))
    found = search("--faiss", folder, k=10)
    for query, results in zip(QUERIES, found, strict=True):
        embedding = model.embed_texts([query])[0]
        cosines = vectors @ embedding
        best = np.argsort(-cosines, kind="stable")[:10]
        assert [path for path, _ in results] == [paths[i] for i in best]
        np.testing.assert_allclose([s for _, s in results], model.logit_scale * cosines[best] + model.logit_bias,
                                   rtol=0, atol=1e-4)
    # the default nprobe and candidates still find most of them; --nprobe 1 fewer, and never anything else
    (folder / "params.json").write_text(json.dumps(params))
    narrow = search("--faiss", folder, "--nprobe", 1, k=10)
    assert all(len(results) == 10 for results in narrow)
    # without vectors.npy, FAISS's own (PQ) scores are given
    os.unlink(folder / "vectors.npy")
    assert all(len(results) == 10 for results in search("--faiss", folder, k=10))


@needs_faiss
def test_faiss_searches_the_lists_of_the_exact_centroid_ranking(tmp_path, model):
    """With one list searched and every candidate re-scored, the results are exactly the best vectors of the
    list whose centroid is nearest the query, in Python and in glimpse search --faiss."""
    faiss = pytest.importorskip("faiss", reason="Debian's python3-faiss is not installed")
    from glimpse import faiss as glimpse_faiss
    count, dim = 2000, model.embedding_dim
    rng = np.random.default_rng(7)
    vectors = rng.standard_normal((count, dim)) + 2.0 * rng.standard_normal((20, dim))[rng.integers(0, 20, count)]
    vectors = (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)
    paths = [f"/synthetic/{i:05d}.jpg" for i in range(count)]
    folder = tmp_path / "index"
    glimpse_faiss.write_index(str(folder), vectors, paths, glimpse_dask.model_identity(model), kind="ivfpq", nlist=16,
                              nprobe=1)
    params = json.loads((folder / "params.json").read_text())
    (folder / "params.json").write_text(json.dumps(dict(params, rescore_factor=count)))
    index = glimpse_faiss.FaissIndex(str(folder), model)
    read = faiss.read_index(str(folder / "index.faiss"))  # (kept: ivf is a view into it)
    ivf = faiss.extract_index_ivf(read)
    centroids = ivf.quantizer.reconstruct_n(0, ivf.nlist)
    members = {}
    for l in range(ivf.nlist):
        size = ivf.invlists.list_size(l)
        members[l] = faiss.rev_swig_ptr(ivf.invlists.get_ids(l), size).copy() if size else np.empty(0, np.int64)
    found = search("--faiss", folder, k=5)
    for query, results in zip(QUERIES, found, strict=True):
        embedding = model.embed_texts([query])[0]
        nearest = int(np.argmax(centroids @ embedding))
        rows = members[nearest][np.argsort(-(vectors[members[nearest]] @ embedding), kind="stable")[:5]]
        assert [path for path, _ in results] == [paths[r] for r in rows]
        assert [path for path, _ in index.search(embedding, k=5)] == [paths[r] for r in rows]


@needs_faiss
def test_a_populated_mapping_searches_alike(tmp_path, faiss_index):
    """FaissIndex(populate=True) maps vectors.npy whole at open; the results are the same, bit for bit."""
    from glimpse import faiss as glimpse_faiss
    plain, populated = glimpse_faiss.FaissIndex(str(faiss_index)), glimpse_faiss.FaissIndex(str(faiss_index),
                                                                                            populate=True)
    queries = np.ascontiguousarray(plain.vectors[::7][:20] + 0.01, dtype=np.float32)
    for a, b in zip(plain.search_vectors(queries, k=5), populated.search_vectors(queries, k=5), strict=True):
        assert np.array_equal(a, b)


@pytest.fixture(scope="module")
def faiss_index(tmp_path_factory, embeddings):
    pytest.importorskip("faiss", reason="Debian's python3-faiss is not installed")
    from glimpse import faiss as glimpse_faiss
    folder = tmp_path_factory.mktemp("faiss") / "index"
    glimpse_faiss.build(str(embeddings), str(folder), kind="ivfpq")
    return folder


@needs_faiss
@pytest.mark.parametrize("how, message", [
    ("missing folder", "no such FAISS index folder"),
    ("no index.faiss", "index.faiss: missing"),
    ("index.faiss garbage", "not a FAISS index glimpse reads"),
    ("index.faiss truncated", "not a FAISS index glimpse reads"),
    ("params.json damaged", "params.json: not valid JSON"),
    ("params.json count", "where params.json says"),
    ("offsets.npy truncated", "offsets.npy: not a NumPy array file"),
    ("paths.bin short", "do not span paths.bin"),
    ("vectors.npy wrong shape", "vectors.npy: holds"),
    ("another model", "another model"),
])
def test_faiss_index_damage_is_a_clear_error(tmp_path, faiss_index, how, message):
    folder = tmp_path / "index"
    shutil.copytree(faiss_index, folder)
    params = json.loads((folder / "params.json").read_text())
    if how == "missing folder":
        shutil.rmtree(folder)
    elif how == "no index.faiss":
        os.unlink(folder / "index.faiss")
    elif how == "index.faiss garbage":
        (folder / "index.faiss").write_bytes(b"\0" * 4096)
    elif how == "index.faiss truncated":
        data = (folder / "index.faiss").read_bytes()
        (folder / "index.faiss").write_bytes(data[:len(data) // 2])
    elif how == "params.json damaged":
        (folder / "params.json").write_text("{\"kind\": ")
    elif how == "params.json count":
        (folder / "params.json").write_text(json.dumps(dict(params, count=params["count"] + 1)))
    elif how == "offsets.npy truncated":
        data = (folder / "offsets.npy").read_bytes()
        (folder / "offsets.npy").write_bytes(data[:-8])
    elif how == "paths.bin short":
        data = (folder / "paths.bin").read_bytes()
        (folder / "paths.bin").write_bytes(data[:-3])
    elif how == "vectors.npy wrong shape":
        np.save(folder / "vectors.npy", np.load(folder / "vectors.npy")[:-1])
    elif how == "another model":
        record = dict(params["model"], identity="CLIPModel/64/0123456789abcdef")
        (folder / "params.json").write_text(json.dumps(dict(params, model=record)))
    done = glimpse("search", "--faiss", folder, "--json", "a query", check=False)
    assert done.returncode == 1 and message in done.stderr, done.stderr
    assert done.stdout == ""


@needs_faiss
def test_populating_a_large_folder_keeps_its_contents(tmp_path, model):
    """FaissIndex(populate=True) on a folder whose vectors.npy (72 MB) is above the size where a file cached in small
    pages is dropped from the page cache and read again to be mapped by huge ones: the fraction it reports as mapped
    by huge pages is a fraction (0 where the kernel maps none), and the folder reads and searches as before."""
    from glimpse import faiss as glimpse_faiss
    dim = model.embedding_dim
    count = 72 * 2**20 // (4 * dim)
    rows = np.random.default_rng(5).standard_normal((count, dim)).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    folder = tmp_path / "large"
    glimpse_faiss.write_index(str(folder), rows, [f"/p/{i}.jpg" for i in range(count)],
                              glimpse_dask.model_identity(model), kind="flat")
    queries = rows[::4001] + 0.01
    with glimpse_faiss.FaissIndex(str(folder)) as plain:
        expected = plain.search_vectors(queries, k=5)
    with glimpse_faiss.FaissIndex(str(folder), populate=True) as populated:
        assert 0.0 <= populated.huge_mapped <= 1.0
        assert np.array_equal(populated.vectors[::997], rows[::997]) and np.array_equal(populated.vectors[-1], rows[-1])
        for a, b in zip(expected, populated.search_vectors(queries, k=5), strict=True):
            assert np.array_equal(a, b)


def test_the_ivfpq_parameters_follow_the_stated_rule():
    """The defaults docs/scale-out.md states and measured: 4 sqrt(n) lists, nlist/128 of them searched (16 to 48),
    100 (n / 10^6)^0.7 candidates a result re-scored (50 to 1,000) and 64 bytes of PQ code at dimension 512."""
    from glimpse import faiss as glimpse_faiss
    for count, nlist, nprobe, factor in ((200_000, 2048, 16, 50), (1_000_000, 4096, 32, 100),
                                         (10_000_000, 16384, 48, 500), (100_000_000, 32768, 48, 1000)):
        chosen = glimpse_faiss.ivfpq_parameters(count, 512)
        assert (chosen["nlist"], chosen["nprobe"], chosen["rescore_factor"], chosen["pq_sub_vectors"]) == \
            (nlist, nprobe, factor, 64), count


@needs_faiss
def test_the_python_index_opens_a_faiss_folder(tmp_path, model, embeddings, built):
    """glimpse.Index on a FAISS index folder is a FaissIndex: the same results as glimpse.faiss's own class and,
    for an exact (flat) folder, the SQLite index's and glimpse search --faiss's."""
    import glimpse as binding
    from glimpse import faiss as glimpse_faiss
    glimpse_faiss.build(str(embeddings), str(tmp_path / "flat"), kind="flat")
    with binding.Index(tmp_path / "flat", model) as index, binding.Index(built) as sqlite:
        assert isinstance(index, glimpse_faiss.FaissIndex) and len(index) == len(sqlite)
        found = [index.search(query, 8) for query in QUERIES]
        assert_same_results(found, [sqlite.search(query, 8) for query in QUERIES])
        assert_same_results(found, search("--faiss", tmp_path / "flat"))
        assert index.search(QUERIES[0], 0) == []
    assert index.closed  # at the end of with
    with pytest.raises(ValueError):
        index.search(QUERIES[0], 3)
    with pytest.raises(binding.GlimpseError):
        binding.Index(tmp_path / "missing")  # neither a FAISS folder nor an SQLite index


def test_import_keeps_a_shard_with_a_name_that_is_not_utf8(tmp_path, model, collection):
    """A file name that is not UTF-8 reaches the shard's JSON as Python's surrogate escape (\\udcff): the import
    takes it as the file's own bytes and keeps the whole shard, where it used to skip all of it (issue 35, 7)."""
    folder = tmp_path / "names"
    folder.mkdir()
    for name in ("00000.png", "00001.png"):
        shutil.copy(collection / name, folder / name)
    odd = os.path.join(os.fsencode(folder), b"caf\xe9-\xff.png")
    shutil.copy(collection / "00002.png", odd)
    out = tmp_path / "names-embeddings"
    write_embeddings(out, model, glimpse_dask.list_pictures([str(folder)]))
    assert "\\udce9" in (out / "part-00000.json").read_text()
    db = tmp_path / "names.db"
    done = glimpse("index", "--db", db, "--import", out, "--json")
    summary = summary_of(done)
    assert (summary["added"], summary["failed"], summary["shards_skipped"]) == (3, 0, 0), done.stdout
    # the same name glimpse index stores for the file: a later index of the folder finds all three unchanged
    done = glimpse("index", "-m", DEMO_CLIP, "--db", db, "--json", folder)
    assert (summary_of(done)["unchanged"], summary_of(done)["added"]) == (3, 0), done.stdout
