"""test_dask.py — a real Dask cluster on localhost (dask-scheduler and two dask-worker processes over TCP):
glimpse.dask embeds a few hundred demo pictures while one worker is killed with SIGKILL, and the shards must
hold every picture exactly once with the vectors of `glimpse embed`, bit for bit; a rerun resumes; then a
FAISS index of the shards must find what an exact search finds."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from conftest import BUILD, DEMO_CLIP, SOURCE

distributed = pytest.importorskip("distributed", reason="Debian's python3-distributed is not installed")
faiss = pytest.importorskip("faiss", reason="Debian's python3-faiss is not installed")
DASK_BIN = os.path.dirname(sys.executable)
if not os.path.exists(os.path.join(DASK_BIN, "dask-scheduler")):
    pytest.skip(f"no dask-scheduler beside {sys.executable}", allow_module_level=True)

from glimpse import dask as glimpse_dask  # noqa: E402
from glimpse import faiss as glimpse_faiss  # noqa: E402
from glimpse import shards  # noqa: E402

PICTURES = 240
SHARD_SIZE = 8  # a multiple of glimpse embed's batch of 8, so that the batches are the CLI's


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A scheduler and two single-threaded workers over TCP: (address, worker processes)."""
    environment = dict(os.environ, PYTHONPATH=str(SOURCE / "python"), PYTHONDONTWRITEBYTECODE="1")
    with glimpse_dask.local_cluster(str(tmp_path_factory.mktemp("cluster")), 2, 1, environment) as running:
        yield running


@pytest.fixture(scope="module")
def collection(tmp_path_factory):
    """PICTURES demo pictures in two folders, and a broken file among them."""
    folder = tmp_path_factory.mktemp("collection")
    (folder / "b").mkdir()
    subprocess.run([str(BUILD / "glimpse-make-pictures"), "--out", str(folder / "a"), "--count", str(PICTURES // 2),
                    "--seed", "5"], check=True, capture_output=True)
    subprocess.run([str(BUILD / "glimpse-make-pictures"), "--out", str(folder / "b" / "c"), "--count",
                    str(PICTURES // 2), "--seed", "6"], check=True, capture_output=True)
    (folder / "a" / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n not really")
    return folder


def run_embed(address, out, collection):
    return subprocess.Popen([sys.executable, "-m", "glimpse.dask", "embed", "--scheduler", address, "-m",
                             str(DEMO_CLIP), "--out", str(out), "--shard-size", str(SHARD_SIZE), "--threads", "1",
                             str(collection)], env=dict(os.environ, PYTHONPATH=str(SOURCE / "python")),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_a_killed_worker_loses_nothing_and_a_rerun_resumes(cluster, collection, tmp_path):
    address, workers = cluster
    out = tmp_path / "embeddings"
    run = run_embed(address, out, collection)
    # kill a worker with SIGKILL once the first shards are written: the run is under way and both
    # workers hold shards, so the killed one's must be run again by the other
    deadline = time.monotonic() + 60
    while len(list(out.glob("part-*.json"))) < 2 and run.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    done_at_kill = len(list(out.glob("part-*.json")))
    assert run.poll() is None, "the run ended before the worker could be killed"
    workers[1].send_signal(signal.SIGKILL)
    _, errors = run.communicate(timeout=120)
    assert run.returncode == 0, errors
    assert workers[1].wait(timeout=10) == -signal.SIGKILL
    shard_count = -(-(PICTURES + 1) // SHARD_SIZE)
    assert done_at_kill < shard_count
    assert f"{shard_count}/{shard_count} shards" in errors and "broken.png" in errors

    # every picture exactly once, the broken one listed, vectors equal to glimpse embed's bit for bit
    vectors, pictures, manifest = shards.load_embeddings(out)
    paths = [picture["path"] for picture in pictures]
    expected = sorted(str(p) for p in collection.rglob("*.png") if p.name != "broken.png")
    assert len(paths) == len(set(paths)) == PICTURES and sorted(paths) == expected
    assert manifest["complete"] and manifest["pictures"] == PICTURES and manifest["broken"] == 1
    assert (out / "broken.tsv").read_text().startswith(str(collection / "a" / "broken.png") + "\t")
    # the CLI given each shard's pictures (its batches then hold the same pictures as the shard's: glimpse
    # embed fills a batch with the next pictures that decode, and an embedding can differ in its last bit with
    # its batch's company), and once all of them with the broken file, which it skips and fails on at the end
    cli = {}
    for shard in sorted(out.glob("part-*.json")):
        listing = [a for p in (picture["path"] for picture in json.loads(shard.read_text())["pictures"])
                   for a in ("-i", p)]
        embedded = subprocess.run([str(BUILD / "glimpse"), "embed", "-m", str(DEMO_CLIP), "--threads", "1",
                                   "--json", *listing], capture_output=True, text=True)
        assert embedded.returncode == 0, embedded.stderr
        cli.update({row["image"]: row["embedding"] for row in map(json.loads, embedded.stdout.splitlines())})
    np.testing.assert_array_equal(vectors, np.array([cli[p] for p in paths], dtype=np.float32))
    broken = subprocess.run([str(BUILD / "glimpse"), "embed", "-m", str(DEMO_CLIP), "-i", paths[0], "-i",
                             str(collection / "a" / "broken.png")], capture_output=True, text=True)
    assert broken.returncode != 0 and "broken.png" in broken.stderr
    import hashlib
    first = pictures[0]
    assert first["sha256"] == hashlib.sha256(open(first["path"], "rb").read()).hexdigest()
    assert first["size"] == os.path.getsize(first["path"])

    # a rerun skips complete shards: one removed shard is made again, the others are not touched
    written = {p.name: p.stat().st_mtime_ns for p in out.glob("part-*.npy")}
    os.unlink(out / "part-00003.json")
    rerun = run_embed(address, out, collection)
    _, errors = rerun.communicate(timeout=120)
    assert rerun.returncode == 0, errors
    rewritten = [p.name for p in out.glob("part-*.npy") if p.stat().st_mtime_ns != written[p.name]]
    assert rewritten == ["part-00003.npy"]
    again, _, _ = shards.load_embeddings(out)
    np.testing.assert_array_equal(again, vectors)


    # FAISS: the exact flat index and an IVF-PQ index (re-scored) find what a brute-force search finds
    model = __import__("glimpse").Model(DEMO_CLIP)
    query = model.embed_texts(["a red circle above a blue square"])[0]
    best = np.argsort(-(vectors @ query), kind="stable")[:5]
    for kind in ("flat", "ivfpq"):
        glimpse_faiss.build(out, tmp_path / kind, kind=kind)
        index = glimpse_faiss.FaissIndex(tmp_path / kind, model)
        found = index.search("a red circle above a blue square", k=5)
        assert [path for path, _ in found] == [paths[i] for i in best], kind
        np.testing.assert_allclose([score for _, score in found], model.logit_scale * (vectors[best] @ query),
                                   rtol=1e-5)
    command = subprocess.run([sys.executable, "-m", "glimpse.faiss", "search", str(tmp_path / "ivfpq"), "-k", "5",
                              "--json", "a red circle above a blue square"], capture_output=True, text=True,
                             env=dict(os.environ, PYTHONPATH=str(SOURCE / "python")))
    assert command.returncode == 0, command.stderr
    assert [r["image"] for r in json.loads(command.stdout)["results"]] == [paths[i] for i in best]
    params = json.loads((tmp_path / "ivfpq" / "params.json").read_text())
    assert params["kind"] == "ivfpq" and params["count"] == PICTURES and params["rescore"]
    shutil.rmtree(tmp_path / "flat")

    # a picture added since is appended as a new shard (the last planned one padded), the rest kept
    shutil.copy(collection / "a" / "00000.png", collection / "zz-new.png")
    rerun = run_embed(address, out, collection)
    _, errors = rerun.communicate(timeout=120)
    assert rerun.returncode == 0, errors
    grown, grown_pictures, manifest = shards.load_embeddings(out)
    assert manifest["shards"] == shard_count + 1 and manifest["pictures"] == PICTURES + 1
    assert grown_pictures[-1]["path"] == str(collection / "zz-new.png") and len(shards.read_plan(out)) % 8 == 1
    np.testing.assert_array_equal(grown[:-1], vectors)
    os.unlink(collection / "zz-new.png")


def test_videos_on_the_cluster_are_their_sampled_frames(cluster, collection, tmp_path):
    """A video among pictures: each sampled frame is a row with its time, as glimpse embed gives it; a run with
    another sampling is refused by the folder; --no-videos leaves the video out."""
    if not shutil.which("ffmpeg"):
        pytest.skip("no ffmpeg tool to make a video")
    folder = tmp_path / "album"
    folder.mkdir()
    pictures = sorted((collection / "a").glob("0000*.png"))
    for picture in pictures[:3]:
        shutil.copy(picture, folder)
    inputs = [a for picture in pictures[3:5] for a in ("-loop", "1", "-t", "2", "-r", "10", "-i", str(picture))]
    subprocess.run(["ffmpeg", "-nostdin", "-hide_banner", "-loglevel", "error", "-y", *inputs, "-filter_complex",
                    "[0:v]setsar=1[a];[1:v]setsar=1[b];[a][b]concat=n=2:v=1:a=0,format=yuv420p[out]", "-map",
                    "[out]", "-c:v", "libx264", "-r", "10", str(folder / "clip.mp4")], check=True)
    address, _ = cluster

    def run(out, *options):
        return subprocess.run([sys.executable, "-m", "glimpse.dask", "embed", "--scheduler", address, "-m",
                               str(DEMO_CLIP), "--out", str(out), "--threads", "1", *options, str(folder)],
                              env=dict(os.environ, PYTHONPATH=str(SOURCE / "python")), capture_output=True,
                              text=True, timeout=120)
    done = run(tmp_path / "out", "--every", "1")
    assert done.returncode == 0, done.stderr
    assert "7 pictures (4 of them frames of 1 videos)" in done.stderr, done.stderr
    vectors, pictures_found, manifest = shards.load_embeddings(tmp_path / "out")
    assert manifest["video_sampling"] == "every 1 s" and (manifest["frames"], manifest["videos"]) == (4, 1)
    frames = [(row, p) for row, p in enumerate(pictures_found) if "frame" in p]
    cli = [json.loads(line) for line in subprocess.run(
        [str(BUILD / "glimpse"), "embed", "-m", str(DEMO_CLIP), "--threads", "1", "--json", "--every", "1", "-i",
         str(folder / "clip.mp4")], capture_output=True, text=True, check=True).stdout.splitlines()]
    assert [p["time"] for _, p in frames] == [row["time"] for row in cli] == [0.0, 1.0, 2.0, 3.0]
    np.testing.assert_array_equal(vectors[[row for row, _ in frames]],
                                  np.array([row["embedding"] for row in cli], dtype=np.float32))
    refused = run(tmp_path / "out", "--scenes")
    assert refused.returncode == 1 and "sampled every 1 s" in refused.stderr, refused.stderr
    done = run(tmp_path / "stills", "--no-videos")
    assert done.returncode == 0 and "3 pictures in" in done.stderr, done.stderr


def test_an_incomplete_run_is_not_indexed(tmp_path):
    """A folder whose run has not completed, or whose shard is damaged, is refused by glimpse.faiss."""
    out = tmp_path / "embeddings"
    out.mkdir()
    model = {"path": "m", "embedding_dim": 4, "precision": "float32", "sha256": "0", "logit_scale": 1.0,
             "logit_bias": 0.0}
    manifest = {"format": shards.MANIFEST_FORMAT, "model": model, "shard_size": 8, "shards": 2, "complete": False}
    shards.write_json(str(out / "manifest.json"), manifest)
    shards.write_shard(str(out), 0, np.eye(4, dtype=np.float32)[:2], [{"path": "a"}, {"path": "b"}], [])
    with pytest.raises(ValueError, match="not complete"):
        glimpse_faiss.build(str(out), str(tmp_path / "index"))
    shards.write_json(str(out / "manifest.json"), dict(manifest, complete=True))
    with pytest.raises(ValueError, match="shard 1 is missing"):
        glimpse_faiss.build(str(out), str(tmp_path / "index"))
    np.save(out / "part-00000.npy", np.eye(4, dtype=np.float32)[:3])  # 3 rows for 2 pictures: damaged
    assert not shards.shard_is_complete(str(out), 0)
