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


def write_embeddings(out, model, paths):
    """The folder glimpse.dask embed writes for paths, made here shard by shard with the same code."""
    os.makedirs(out, exist_ok=True)
    count = (len(paths) + SHARD_SIZE - 1) // SHARD_SIZE
    shards.write_plan(str(out), paths)
    manifest = {"format": shards.MANIFEST_FORMAT, "model": glimpse_dask.model_identity(model),
                "shard_size": SHARD_SIZE, "batch_size": 8, "shards": count, "roots": [], "complete": False}
    for shard in range(count):
        vectors, pictures, broken = glimpse_dask.embed_pictures(model, paths[shard * SHARD_SIZE:][:SHARD_SIZE])
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
