"""dask.py — embeds a picture and video collection across a Dask distributed cluster: the files under the roots
are split into shards, the shards mapped over the workers (each loads the model once, through a worker plugin),
and the client writes each shard's result atomically into the output folder (format: glimpse/shards.py).
A video gives a row per sampled frame, as glimpse index samples it (every 2 s by default).

    python -m glimpse.dask embed --scheduler tcp://HOST:8786 -m MODEL --out DIR ROOTS...

Workers read the files themselves, so every worker must see the roots and the model at the same paths
(a shared or synced folder); the output folder is written by the client only. A worker that dies has its
shards run again elsewhere by Dask; a run that stops is resumed by running the same command again."""

import argparse
import contextlib
import hashlib
import os
import subprocess
import sys
import time

import numpy as np

from . import shards

PLUGIN_NAME = "glimpse-model"
# the names glimpse index walks for (search/walk.c): the decoders go by the bytes, these only choose the files
IMAGE_EXTENSIONS = {".jpg", ".jpeg", ".jpe", ".jfif", ".jif", ".jfi", ".pjpeg", ".pjp", ".png", ".webp", ".tif",
                    ".tiff", ".heic", ".heif", ".hif", ".avif", ".bmp", ".gif", ".tga", ".ppm", ".pgm", ".pnm"}
VIDEO_EXTENSIONS = {".mp4", ".m4v", ".mov", ".qt", ".3gp", ".3g2", ".mkv", ".webm", ".avi", ".mts", ".m2ts", ".ts",
                    ".mpg", ".mpeg", ".vob", ".flv", ".wmv", ".asf", ".ogv", ".ogg"}


def list_pictures(roots, videos=True):
    """Every picture file (and video file, with videos) under the roots (files given directly are kept
    whatever their name), absolute, sorted: the same roots give the same order, hence the same shards."""
    extensions = IMAGE_EXTENSIONS | (VIDEO_EXTENSIONS if videos else set())
    found = set()
    for root in roots:
        root = os.path.abspath(root)
        if os.path.isfile(root):
            found.add(root)
            continue
        if not os.path.isdir(root):
            raise FileNotFoundError(f"{root}: no such file or folder")
        for folder, _, names in os.walk(root):
            found.update(os.path.join(folder, name) for name in names
                         if os.path.splitext(name)[1].lower() in extensions)
    return sorted(found)


def hash_file(digest, path):
    """Feeds the file at path to digest, a MiB at a time (a video or a weight file may be gigabytes). Only a
    regular file is read: a named pipe among the pictures raises OSError at once (and is listed as broken)
    instead of blocking the worker until something writes to it."""
    import glimpse
    with glimpse.open_regular(path) as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest


def file_sha256(path):
    """The SHA-256 of a file, in hex."""
    return hash_file(hashlib.sha256(), path).hexdigest()


def model_identity(model):
    """What the manifest records of a model: its description, the identity a glimpse search index records
    (glimpse index --import compares them) and a SHA-256 over its config.json and weight files, so that a
    resumed run refuses to mix in another model's vectors."""
    digest = hashlib.sha256()
    for name in sorted(os.listdir(model.path)):
        if name == "config.json" or name.endswith(".safetensors"):
            digest.update(name.encode())
            hash_file(digest, os.path.join(model.path, name))
    return {"path": model.path, "identity": model.identity, "architecture": model.architecture, "kind": model.kind,
            "embedding_dim": model.embedding_dim, "precision": model.precision, "logit_scale": model.logit_scale,
            "logit_bias": model.logit_bias, "weight_dtype": model.weight_dtype, "sha256": digest.hexdigest()}


# ------------------------------------------------------------ on the workers

class ModelPlugin:
    """A Dask worker plugin that loads the model once when the worker starts (or when the plugin is
    registered), shared by the worker's task threads (each gets its own glimpse context)."""

    name = PLUGIN_NAME

    def __init__(self, model_path, precision="float32", threads=0):
        self.model_path, self.precision, self.threads = model_path, precision, threads
        self.model = None

    def setup(self, worker):
        import glimpse
        self.model = glimpse.Model(self.model_path, threads=self.threads, precision=self.precision)

    def teardown(self, worker):
        if self.model is not None:
            self.model.close()

    def __getstate__(self):  # the loaded model stays on its worker
        return {"model_path": self.model_path, "precision": self.precision, "threads": self.threads}

    def __setstate__(self, state):
        self.__dict__.update(state, model=None)


def describe(path):
    """A file's record: path, size, mtime_ns (as the file is now) and sha256."""
    status = os.stat(path)
    return {"path": path, "size": status.st_size, "mtime_ns": status.st_mtime_ns, "sha256": file_sha256(path)}


def _reason(error):
    import glimpse
    return error.message if isinstance(error, glimpse.GlimpseError) else error.strerror or str(error)


def embed_video(model, path, batch_size, video):
    """The frames of the video at path, sampled as video (a dict of glimpse.Video's every/scenes) says, embedded
    batch_size at a time: (vectors, records), a record per frame with its number and time. Raises on a video
    that fails anywhere (the whole video is then broken, as in glimpse index)."""
    import glimpse
    record = describe(path)
    vectors, records, frames = [], [], []

    def flush():
        if frames:
            vectors.append(model.embed_images([image for _, image in frames], batch_size=len(frames)))
            for _, image in frames:
                image.close()
            frames.clear()
    with glimpse.Video(path, **video) as reader:
        if not reader.whole:  # as glimpse index: broken whole, not kept as if its first frames were all
            raise glimpse.GlimpseError(glimpse._c.STATUS_NAMES.index("BAD_FORMAT"),
                                       f"{path}: the video is damaged or cut short: it ends before the frames "
                                       "its container lists")
        try:
            for seconds, image in reader:
                records.append(dict(record, frame=len(records), time=seconds))
                frames.append((seconds, image))
                if len(frames) == batch_size:
                    flush()
            flush()
        finally:
            for _, image in frames:
                image.close()
    dim = model.embedding_dim
    return (np.concatenate(vectors) if vectors else np.empty((0, dim), np.float32)), records


def embed_pictures(model, paths, batch_size=8, video=None):
    """Embeds paths batch_size at a time (a batch's pictures that fail to decode are left out of it, the
    others embedded together), so the vectors equal `glimpse embed`'s bit for bit when it is given the same
    pictures in the same batches (it fills each batch with the next pictures that decode). With video (a
    dict of glimpse.Video's every/scenes), a file with a video's name whose bytes are a video gives its
    sampled frames, in batches of their own. Returns (vectors, pictures, broken)."""
    import glimpse
    vectors, pictures, broken = [], [], []
    for first in range(0, len(paths), batch_size):
        images, described = [], []
        for path in paths[first:first + batch_size]:
            if not path:
                continue  # padding of the plan
            try:
                if video is not None and os.path.splitext(path)[1].lower() in VIDEO_EXTENSIONS and \
                        glimpse.is_video(path):
                    frame_vectors, records = embed_video(model, path, batch_size, video)
                    vectors.append(frame_vectors)
                    pictures.extend(records)
                    continue
                record = describe(path)
                images.append(glimpse.Image(path))  # from the file, as glimpse embed reads it
                described.append(record)
            except (OSError, glimpse.GlimpseError) as error:
                broken.append({"path": path, "reason": _reason(error)})
        if images:
            vectors.append(model.embed_images(images, batch_size=len(images)))
            pictures.extend(described)
            for image in images:
                image.close()
    dim = model.embedding_dim
    return (np.concatenate(vectors) if vectors else np.empty((0, dim), np.float32)), pictures, broken


def embed_shard(shard, paths, batch_size, video=None):
    """The task run on a worker: the shard's (shard, vectors, pictures, broken, seconds)."""
    from distributed import get_worker
    started = time.perf_counter()
    worker = get_worker()
    plugin = worker.plugins.get(PLUGIN_NAME)
    if plugin is None or plugin.model is None:
        raise RuntimeError(f"glimpse.dask: worker {worker.name} has no model loaded (did its plugin fail?)")
    model = plugin.model
    vectors, pictures, broken = embed_pictures(model, paths, batch_size, video)
    return shard, vectors, pictures, broken, time.perf_counter() - started


# ------------------------------------------------------------ on the client

def plan(out, roots, manifest_model, shard_size, sampling=None):
    """The shards' paths: pictures.txt of an earlier run, extended with pictures found since (starting on a
    new shard, the last one padded), or a new plan. sampling: how videos are sampled, in words (None: no
    videos). Returns (paths, shard count)."""
    listing = list_pictures(roots, videos=sampling is not None)
    if os.path.exists(os.path.join(out, "manifest.json")):
        manifest = shards.read_manifest(out)
        if manifest["model"]["sha256"] != manifest_model["sha256"] or \
                manifest["model"]["precision"] != manifest_model["precision"]:
            raise ValueError(f"{out} holds embeddings of another model ({manifest['model']['path']}, "
                             f"{manifest['model']['precision']}); use another output folder")
        if manifest.get("video_sampling") != sampling:
            was, now = (f"sampled {value}" if value else "without videos"
                        for value in (manifest.get("video_sampling"), sampling))
            raise ValueError(f"{out} holds embeddings made {was}, not {now}; give the same, or use another "
                             "output folder")
        shard_size = manifest["shard_size"]
        paths = shards.read_plan(out)
        planned = set(paths)
        new = [path for path in listing if path not in planned]
        if new:
            paths += [""] * (-len(paths) % shard_size) + new
    else:
        paths = listing
    return paths, shard_size, (len(paths) + shard_size - 1) // shard_size


class Progress:
    """Shards done / total and pictures per second across the cluster, on stderr (one line rewritten on
    a terminal, a line per shard elsewhere)."""

    def __init__(self, total, quiet):
        self.total, self.quiet, self.done, self.pictures, self.broken = total, quiet, 0, 0, 0
        self.started = time.perf_counter()
        self.terminal = sys.stderr.isatty()

    def shard(self, pictures, broken):
        self.done += 1
        self.pictures += pictures
        self.broken += broken
        if self.quiet:
            return
        rate = self.pictures / max(time.perf_counter() - self.started, 1e-9)
        line = (f"glimpse.dask: {self.done}/{self.total} shards, {self.pictures} pictures, {rate:.1f} pictures/s"
                + (f", {self.broken} broken" if self.broken else ""))
        print(("\r" + line) if self.terminal else line, end="" if self.terminal else "\n", file=sys.stderr,
              flush=True)

    def end(self):
        if self.terminal and not self.quiet:
            print(file=sys.stderr)


def embed(scheduler, model_path, out, roots, shard_size=1024, batch_size=8, precision="float32", threads=0,
          quiet=False, videos=True, every=None, scenes=None):
    """Embeds the pictures (and, with videos, the videos' frames sampled every `every` seconds, 2 by default,
    or at scene changes of `scenes`) under roots on the Dask cluster at scheduler (an address or a
    distributed.Client) into the folder out; resumes an earlier run there. Returns the manifest (counts of
    pictures and broken files; the broken files themselves are in out/broken.tsv and the shards' .json)."""
    import glimpse
    from distributed import Client, as_completed

    if shard_size <= 0 or batch_size <= 0:
        raise ValueError("shard_size and batch_size must be positive")
    video = {"every": every, "scenes": scenes} if videos else None
    sampling = glimpse.video_sampling(every, scenes) if videos else None
    os.makedirs(out, exist_ok=True)
    if os.path.isdir(model_path):  # the workers may start elsewhere: a folder is named absolutely
        model_path = os.path.abspath(model_path)
    with glimpse.Model(model_path, precision=precision, load_text=False) as model:
        identity = model_identity(model)
    paths, shard_size, shard_count = plan(out, roots, identity, shard_size, sampling)
    shards.write_plan(out, paths)
    manifest = {"format": shards.MANIFEST_FORMAT, "model": identity, "library_version": glimpse.version(),
                "shard_size": shard_size, "batch_size": batch_size, "shards": shard_count,
                "roots": [os.path.abspath(root) for root in roots], "video_sampling": sampling, "complete": False}
    shards.write_json(os.path.join(out, "manifest.json"), manifest)

    todo = [shard for shard in range(shard_count) if not shards.shard_is_complete(out, shard)]
    progress = Progress(shard_count, quiet)
    progress.done = shard_count - len(todo)
    client = scheduler if isinstance(scheduler, Client) else Client(scheduler)
    try:
        if todo:
            client.register_worker_plugin(ModelPlugin(model_path, precision, threads), name=PLUGIN_NAME)
            futures = [client.submit(embed_shard, shard, paths[shard * shard_size:(shard + 1) * shard_size],
                                     batch_size, video, key=f"glimpse-shard-{identity['sha256'][:12]}-{shard}",
                                     retries=2, pure=False)
                       for shard in todo]
            for future in as_completed(futures):
                shard, vectors, pictures, broken, _ = future.result()
                shards.write_shard(out, shard, vectors, pictures, broken)
                progress.shard(len(pictures), len(broken))
                future.release()
        progress.end()
    finally:
        if client is not scheduler:
            client.close()
    return finish(out, manifest)


def finish(out, manifest):
    """Once every shard is complete: counts in the manifest (pictures: rows, a video's frames each one; frames
    and videos among them), marked complete, broken files in broken.tsv."""
    pictures, frames, videos, broken = 0, 0, 0, []
    for shard in range(manifest["shards"]):
        found = shards.read_shard(out, shard)
        if found is None:
            raise RuntimeError(f"{out}: shard {shard} did not complete")
        pictures += len(found[1]["pictures"])
        frames += sum("frame" in record for record in found[1]["pictures"])
        videos += sum(record.get("frame") == 0 for record in found[1]["pictures"])
        broken += found[1]["broken"]
    shards.write_atomically(os.path.join(out, "broken.tsv"), lambda file: file.write("".join(
        f"{item['path']}\t{item['reason']}\n" for item in broken).encode(errors="surrogateescape")))
    manifest.update(complete=True, pictures=pictures, frames=frames, videos=videos, broken=len(broken))
    shards.write_json(os.path.join(out, "manifest.json"), manifest)
    return manifest


@contextlib.contextmanager
def local_cluster(folder, workers=2, threads_per_worker=1, environment=None, timeout=60):
    """A real cluster on this machine, for tests and benchmarks: dask-scheduler and `workers` dask-worker
    processes (without nanny: a killed worker stays dead) talking TCP on 127.0.0.1, from the Dask found
    beside this Python. Yields (address, worker Popen objects); stops what it started. Logs go to folder."""
    from distributed import Client
    programs = os.path.dirname(sys.executable)
    scheduler_file = os.path.join(folder, "scheduler.json")
    started = []

    def start(program, *arguments):
        log = open(os.path.join(folder, f"{program}-{len(started)}.log"), "w")
        started.append(subprocess.Popen([os.path.join(programs, program), *arguments, "--no-dashboard"],
                                        env=environment, cwd=folder, stdout=log, stderr=subprocess.STDOUT))
        log.close()
        return started[-1]
    try:
        start("dask-scheduler", "--host", "127.0.0.1", "--port", "0", "--scheduler-file", scheduler_file)
        deadline = time.monotonic() + timeout
        while not os.path.exists(scheduler_file) and time.monotonic() < deadline:
            time.sleep(0.05)
        processes = [start("dask-worker", "--scheduler-file", scheduler_file, "--nthreads", str(threads_per_worker),
                           "--no-nanny", "--name", f"worker-{n}") for n in range(workers)]
        with Client(scheduler_file=scheduler_file, timeout=timeout) as client:
            client.wait_for_workers(workers, timeout=timeout)
            address = client.scheduler.address
        yield address, processes
    finally:
        for process in started:
            if process.poll() is None:
                process.terminate()
        for process in started:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m glimpse.dask",
                                     description="Embeds the pictures under ROOTS on a Dask cluster into DIR.")
    commands = parser.add_subparsers(dest="command", required=True)
    command = commands.add_parser("embed", help="embed pictures into shards (resumes a run in DIR)")
    command.add_argument("--scheduler", required=True, help="the Dask scheduler's address (tcp://HOST:8786)")
    command.add_argument("-m", "--model", required=True, help="a CLIP or SigLIP snapshot folder, at the same "
                         "path on every worker")
    command.add_argument("--out", required=True, metavar="DIR", help="the output folder (written by this client)")
    command.add_argument("--shard-size", type=int, default=1024, help="pictures per shard (default 1024)")
    command.add_argument("--batch-size", type=int, default=8, help="pictures per model call (default 8)")
    command.add_argument("--threads", type=int, default=0, help="glimpse threads per worker task (0 = all cores)")
    command.add_argument("--int8", action="store_true", help="int8 precision (close to, not equal to, float32)")
    command.add_argument("--every", type=float, metavar="SECONDS",
                         help="a video's frames: one at the start and every SECONDS after it (default 2)")
    command.add_argument("--scenes", action="store_true", help="a video's frames at its start and scene changes "
                         "instead (as glimpse index --scenes)")
    command.add_argument("--scene-threshold", type=float, metavar="T", default=0.1,
                         help="the change that makes a scene, of full scale (default 0.1)")
    command.add_argument("--no-videos", action="store_true", help="pictures only: leave videos out")
    command.add_argument("--quiet", action="store_true", help="no progress")
    command.add_argument("roots", nargs="+", metavar="ROOTS", help="picture and video files and folders (walked)")
    arguments = parser.parse_args(argv)
    if arguments.scenes and arguments.every is not None:
        parser.error("--every and --scenes choose the frames two ways: give one")
    try:
        manifest = embed(arguments.scheduler, arguments.model, arguments.out, arguments.roots, arguments.shard_size,
                         arguments.batch_size, "int8" if arguments.int8 else "float32", arguments.threads,
                         arguments.quiet, videos=not arguments.no_videos, every=arguments.every,
                         scenes=arguments.scene_threshold if arguments.scenes else None)
    except (OSError, ValueError, RuntimeError) as error:
        print(f"glimpse.dask: {error}", file=sys.stderr)
        return 1
    if manifest["broken"]:
        with open(os.path.join(arguments.out, "broken.tsv"), encoding="utf-8", errors="replace") as file:
            for line in file:
                print("glimpse.dask: broken: " + line.rstrip("\n").replace("\t", ": ", 1), file=sys.stderr)
    frames = f" ({manifest['frames']} of them frames of {manifest['videos']} videos)" if manifest.get("videos") else ""
    print(f"glimpse.dask: {manifest['pictures']} pictures{frames} in {manifest['shards']} shards in {arguments.out}"
          + (f", {manifest['broken']} broken (listed in broken.tsv)" if manifest["broken"] else ""), file=sys.stderr)
    return 0


if __name__ == "__main__":
    from glimpse.dask import main as module_main  # the tasks must come from glimpse.dask, not __main__
    sys.exit(module_main())
