"""dask_workers.py — pictures per second of glimpse.dask with 1 and with 2 workers on this machine (a real
local cluster over TCP, each worker single-task with --threads glimpse threads), on pictures drawn by
glimpse-make-pictures. A benchmark, not a test: run it on a quiet machine.

    /usr/bin/python3 bench/dask_workers.py [-m MODEL] [--pictures 2000] [--threads 1] [--build build]"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, os.path.join(SOURCE, "python"))
from glimpse import dask as glimpse_dask  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-m", "--model", default=os.path.join(SOURCE, "examples", "models", "demo-clip"))
    parser.add_argument("--pictures", type=int, default=2000)
    parser.add_argument("--threads", type=int, default=1, help="glimpse threads per worker")
    parser.add_argument("--shard-size", type=int, default=64)
    parser.add_argument("--build", default=os.path.join(SOURCE, "build"))
    arguments = parser.parse_args()
    build = os.path.abspath(arguments.build)
    environment = dict(os.environ, PYTHONPATH=os.path.join(SOURCE, "python"),
                       GLIMPSE_LIBRARY=os.environ.get("GLIMPSE_LIBRARY", os.path.join(build, "libglimpse.so.0")))
    os.environ.update(GLIMPSE_LIBRARY=environment["GLIMPSE_LIBRARY"])
    work = tempfile.mkdtemp(prefix="glimpse-dask-bench-")
    try:
        pictures = os.path.join(work, "pictures")
        subprocess.run([os.path.join(build, "glimpse-make-pictures"), "--out", pictures, "--count",
                        str(arguments.pictures), "--seed", "3"], check=True, capture_output=True)
        results = []
        for workers in (1, 2):
            folder = os.path.join(work, f"cluster-{workers}")
            os.makedirs(folder)
            with glimpse_dask.local_cluster(folder, workers, 1, environment) as (address, _):
                started = time.perf_counter()
                manifest = glimpse_dask.embed(address, arguments.model, os.path.join(folder, "out"), [pictures],
                                              arguments.shard_size, threads=arguments.threads, quiet=True)
                seconds = time.perf_counter() - started
            results.append({"workers": workers, "pictures": manifest["pictures"], "seconds": round(seconds, 2),
                            "pictures_per_second": round(manifest["pictures"] / seconds, 1)})
            print(json.dumps(results[-1]), flush=True)
        print(json.dumps({"speedup_2_vs_1": round(results[1]["pictures_per_second"] /
                                                  results[0]["pictures_per_second"], 2)}))
    finally:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
