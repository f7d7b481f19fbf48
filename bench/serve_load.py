#!/usr/bin/python3
"""serve_load.py — load and batching benchmark of `glimpse serve` (Python standard library only).

Load (the default): starts `glimpse serve` with the demo models and an index of the example
pictures, then CLIENTS threads (default 16), each on its own keep-alive connection, send
REQUESTS requests in all (default 10,000) mixing image and text embeddings, rankings, captions
and searches. Every answer is checked (status 200 and the expected fields); it prints the
throughput, p50/p99 latency overall and per kind, the failures, and the server's resident
memory after warm-up (the first tenth of the requests) and at the end. Exit status 1 on any
failure, or when the memory grew more than --max-rss-growth percent.

--batching: the same server twice, with --max-batch 1 (one image at a time: each request's
image is embedded alone, glimpse_embed_images with one image) and with its default batching
(--max-batch 8), both started at once and taking turns for --rounds rounds, each round 8
clients embedding REQUESTS / ROUNDS images as fast as they can; prints each server's median
rate, its spread and CPU time per image, and the median of the rounds' ratios.

    /usr/bin/python3 bench/serve_load.py --glimpse build/glimpse --requests 10000
    /usr/bin/python3 bench/serve_load.py --glimpse build/glimpse --batching --requests 2000
    /usr/bin/python3 bench/serve_load.py --batching --model build/bench/openai--clip-vit-base-patch32 --requests 400

Timings mean something only on a quiet machine.
"""
import argparse
import http.client
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLIP = os.path.join(ROOT, "examples", "models", "demo-clip")
CAPTIONER = os.path.join(ROOT, "examples", "models", "demo-blip-caption")
PICTURES = os.path.join(ROOT, "examples", "pictures")
TEXTS = ["a red square", "a green circle above a blue triangle", "a yellow triangle", "two shapes"]


def read_pictures():
    names = sorted(n for n in os.listdir(PICTURES) if n.endswith(".png"))
    return [open(os.path.join(PICTURES, n), "rb").read() for n in names]


def multipart(fields):
    """fields: (name, value) with value str (a field) or bytes (a file part)."""
    boundary = uuid.uuid4().hex
    chunks = []
    for name, value in fields:
        if isinstance(value, bytes):
            chunks.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"; filename="{name}.png"\r\n'
                          f"Content-Type: image/png\r\n\r\n".encode() + value + b"\r\n")
        else:
            chunks.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode())
    chunks.append(f"--{boundary}--\r\n".encode())
    return f"multipart/form-data; boundary={boundary}", b"".join(chunks)


class Server:
    """`glimpse serve` started on a free port; stopped with SIGTERM."""

    def __init__(self, glimpse, arguments):
        self.log = tempfile.TemporaryFile()
        self.process = subprocess.Popen([glimpse, "serve", *arguments, "--port", "0"], stderr=self.log)
        deadline = time.time() + 30
        self.port = None
        while time.time() < deadline and self.port is None:
            self.log.seek(0)
            found = re.search(rb"listening on http://127\.0\.0\.1:(\d+)/", self.log.read())
            if found:
                self.port = int(found.group(1))
            elif self.process.poll() is not None:
                break
            else:
                time.sleep(0.05)
        if self.port is None:
            self.log.seek(0)
            raise SystemExit("glimpse serve did not start:\n" + self.log.read().decode(errors="replace"))

    def rss_kib(self):
        with open(f"/proc/{self.process.pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def stop(self):
        self.process.terminate()
        return self.process.wait(timeout=60)


def make_requests(pictures):
    """The kinds of request: name -> (method, path, content type, body, check of the JSON answer)."""
    rank_type, rank_body = multipart([("image", pictures[0]), ("image", pictures[1]), ("text", TEXTS[0]),
                                      ("text", TEXTS[2])])
    return {
        "embed_image": ("POST", "/v1/embed", "image/png", pictures[2], lambda a: len(a["embedding"]) > 0),
        "embed_text": ("POST", "/v1/embed", "application/json", json.dumps({"text": TEXTS[1]}).encode(),
                       lambda a: len(a["embedding"]) > 0),
        "rank": ("POST", "/v1/rank", rank_type, rank_body, lambda a: len(a["scores"]) == 2),
        "caption": ("POST", "/v1/caption", "image/png", pictures[3], lambda a: len(a["caption"]) > 0),
        "search": ("GET", "/v1/search?q=a+yellow+triangle&k=3", None, None, lambda a: len(a["results"]) == 3),
    }


def percentile(values, fraction):
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def run_clients(port, plan, clients, on_done=None):
    """Runs plan (a list of (kind, request)) over `clients` threads; returns latencies by kind and failures."""
    latencies, failures, lock = {}, [], threading.Lock()
    position = [0]

    def client():
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        while True:
            with lock:
                index = position[0]
                position[0] += 1
            if index >= len(plan):
                break
            kind, (method, path, content_type, body, check) = plan[index]
            headers = {"Content-Type": content_type} if content_type else {}
            started = time.perf_counter()
            try:
                connection.request(method, path, body=body, headers=headers)
                answer = connection.getresponse()
                data = answer.read()
                ok = answer.status == 200 and check(json.loads(data))
                problem = None if ok else f"{kind}: {answer.status} {data[:200]!r}"
            except Exception as error:  # a failed request is counted, the client reconnects
                problem = f"{kind}: {error!r}"
                connection.close()
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            elapsed = time.perf_counter() - started
            with lock:
                latencies.setdefault(kind, []).append(elapsed)
                if problem:
                    failures.append(problem)
            if on_done:
                on_done(index)
        connection.close()

    threads = [threading.Thread(target=client) for _ in range(clients)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return latencies, failures, time.perf_counter() - started


def thread_option(arguments):
    return ["--threads", str(arguments.threads)] if arguments.threads else []


def load(arguments):
    pictures = read_pictures()
    with tempfile.TemporaryDirectory() as folder:
        index = os.path.join(folder, "index.db")
        subprocess.run([arguments.glimpse, "index", "-m", CLIP, "--db", index, PICTURES], check=True,
                       stdout=subprocess.DEVNULL)
        server = Server(arguments.glimpse, ["-m", CLIP, "-m", CAPTIONER, "--db", index, "--queue", "256",
                                            *thread_option(arguments)])
        try:
            kinds = make_requests(pictures)
            names = sorted(kinds)
            plan = [(names[i % len(names)], kinds[names[i % len(names)]]) for i in range(arguments.requests)]
            warm = max(1, arguments.requests // 10)
            rss = {}

            def on_done(index):
                if index == warm:
                    rss["warm"] = server.rss_kib()

            latencies, failures, seconds = run_clients(server.port, plan, arguments.clients, on_done)
            rss["end"] = server.rss_kib()
        finally:
            status = server.stop()
    every = [v for values in latencies.values() for v in values]
    print(f"glimpse serve load: {arguments.clients} clients, {len(every)} requests in {seconds:.1f} s "
          f"({len(every) / seconds:.1f}/s), {len(failures)} failed")
    print(f"  all: p50 {percentile(every, 0.5) * 1e3:.1f} ms, p99 {percentile(every, 0.99) * 1e3:.1f} ms")
    for kind in sorted(latencies):
        values = latencies[kind]
        print(f"  {kind}: {len(values)} requests, p50 {percentile(values, 0.5) * 1e3:.1f} ms, "
              f"p99 {percentile(values, 0.99) * 1e3:.1f} ms")
    growth = 100.0 * (rss["end"] - rss.get("warm", rss["end"])) / max(1, rss.get("warm", rss["end"]))
    print(f"  resident memory: {rss.get('warm', 0) / 1024:.1f} MiB after warm-up ({warm} requests), "
          f"{rss['end'] / 1024:.1f} MiB at the end ({growth:+.1f}%)")
    print(f"  server exit status after SIGTERM: {status}")
    for problem in failures[:10]:
        print("  failure: " + problem)
    bad = failures or status != 0 or (arguments.max_rss_growth is not None and growth > arguments.max_rss_growth)
    return 1 if bad else 0


def cpu_seconds(pid):
    """User + system CPU time of a process so far (from /proc/PID/stat)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def batching(arguments):
    """Both servers run at once but take turns: ROUNDS rounds, each giving REQUESTS / ROUNDS image embeddings by
    8 clients to one server then the other (the idle one's threads sleep), so that a machine whose load
    changes during the run weighs on both alike. Per server: the median rate over the rounds and its spread,
    and its CPU time per image; the gain is the median of each round's ratio."""
    pictures = read_pictures()
    labels = ("one at a time", "batched")
    servers = {}
    try:
        for label, batch in zip(labels, ("1", str(arguments.max_batch))):
            servers[label] = Server(arguments.glimpse, ["-m", arguments.model, "--max-batch", batch, "--queue", "256",
                                                        *thread_option(arguments),
                                                        *(["--int8"] if arguments.int8 else [])])
        per_round = max(8, arguments.requests // arguments.rounds)
        plan = [("embed_image", ("POST", "/v1/embed", "image/png", pictures[i % len(pictures)],
                                 lambda a: len(a["embedding"]) > 0)) for i in range(per_round)]
        rates = {label: [] for label in labels}
        cpu = {label: 0.0 for label in labels}
        latencies = {label: [] for label in labels}
        failures = []
        for label in labels:
            run_clients(servers[label].port, plan[:32], 8)  # warm-up
        for _ in range(arguments.rounds):
            for label in labels:
                server = servers[label]
                used = cpu_seconds(server.process.pid)
                times, failed, seconds = run_clients(server.port, plan, 8)
                cpu[label] += cpu_seconds(server.process.pid) - used
                rates[label].append(len(plan) / seconds)
                latencies[label] += times.get("embed_image", [])
                failures += failed
        means = {}
        for label in labels:
            connection = http.client.HTTPConnection("127.0.0.1", servers[label].port)
            connection.request("GET", "/metrics")
            metrics = connection.getresponse().read().decode()
            batches = re.search(r"glimpse_batch_size_count (\d+)", metrics)
            images = re.search(r"glimpse_batch_size_sum (\d+)", metrics)
            means[label] = int(images.group(1)) / max(1, int(batches.group(1)))
    finally:
        for server in servers.values():
            server.stop()
    for label in labels:
        values = sorted(rates[label])
        print(f"{label}: {arguments.rounds} rounds of {len(plan)} image embeddings by 8 clients: median "
              f"{percentile(values, 0.5):.1f}/s ({values[0]:.1f}-{values[-1]:.1f}), p50 latency "
              f"{percentile(latencies[label], 0.5) * 1e3:.1f} ms, server CPU "
              f"{cpu[label] / (len(plan) * arguments.rounds) * 1e3:.1f} ms per image, mean batch {means[label]:.2f}")
    ratios = sorted(b / a for a, b in zip(rates[labels[0]], rates[labels[1]]))
    print(f"batching gain: {percentile(ratios, 0.5):.2f}x (median of the rounds' ratios; {ratios[0]:.2f}-"
          f"{ratios[-1]:.2f}), {len(failures)} failed")
    return 1 if failures else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--glimpse", default=os.path.join(ROOT, "build", "glimpse"), help="the glimpse program")
    parser.add_argument("--requests", type=int, default=10000, help="requests in all (default 10000)")
    parser.add_argument("--clients", type=int, default=16, help="concurrent clients (default 16)")
    parser.add_argument("--threads", type=int, default=0, help="the server's --threads (default all cores)")
    parser.add_argument("--max-rss-growth", type=float, default=None,
                        help="fail when resident memory grew more than this percent after warm-up")
    parser.add_argument("--batching", action="store_true", help="measure the batching gain instead")
    parser.add_argument("--max-batch", type=int, default=8, help="--batching: the batched server's --max-batch")
    parser.add_argument("--int8", action="store_true", help="--batching: both servers load the model with --int8")
    parser.add_argument("--rounds", type=int, default=7, help="--batching: turns each server takes (default 7)")
    parser.add_argument("--model", default=CLIP,
                        help="--batching: the CLIP or SigLIP model (default the demo CLIP, whose 64-pixel tower is "
                             "cheap beside decoding and resizing; a full-size one shows what batching the tower gains)")
    arguments = parser.parse_args()
    sys.exit(batching(arguments) if arguments.batching else load(arguments))


if __name__ == "__main__":
    main()
