#!/usr/bin/env python3
"""florence2_report.py RESULTS.jsonl MODEL_CONFIG THREADS PICTURE [VERSIONS] — bench/florence2.sh's table: per
Florence-2 call (task and beams) glimpse float32's, PyTorch's and glimpse int8's milliseconds, each the median over
the rounds of each process's median with the fastest–slowest process, PyTorch ÷ glimpse, and how many of glimpse's
calls gave PyTorch's ids (float32) and the reference's (int8); then the loads, and the first token's work (GFLOP,
counted from the config: products, convolutions and attention; norms, activations and softmax left out) over its
time. Markdown on stdout, with the CPU, threads, commit and the peer's versions."""
import json
import math
import os
import statistics
import subprocess
import sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from table import commit, cpu_name, spread  # noqa: E402

TASKS = {"<CAPTION>": "caption", "<OCR>": "ocr", "<OD>": "detect"}


def first_token_flops(config, image_size, prompt_tokens):
    """2 × multiply-adds of the first token's work: DaViT (patch convolutions, depthwise convolutions, qkv, window
    and channel attention, projections, MLPs), the image projection, the BART encoder over the image rows and the
    prompt, one decoder step (its cross-attention keys and values over the encoder's rows included) and the LM head."""
    v, t = config["vision_config"], config["text_config"]
    side, channels_in, total = image_size, 3, 0.0
    window = v["window_size"]
    for s in range(4):
        k, stride, pad = v["patch_size"][s], v["patch_stride"][s], v["patch_padding"][s]
        side = (side + 2 * pad - k) // stride + 1
        n, c = side * side, v["dim_embed"][s]
        total += 2 * n * c * channels_in * k * k
        padded = math.ceil(side / window) * window
        for _ in range(v["depths"][s]):
            block = 2 * (2 * n * c * 9) + 2 * n * c * 3 * c + 2 * n * c * c + 2 * 2 * n * c * 4 * c
            total += block + 4 * padded * padded * window * window * c  # spatial block: windows of window²
            total += block + 4 * n * c * c / v["num_groups"][s]  # channel block: per group a (C/g)² matrix
        channels_in = c
    rows = side * side + 1
    total += 2 * rows * channels_in * v["projection_dim"]
    d, vocab = t["d_model"], t["vocab_size"]
    length = rows + prompt_tokens
    total += t["encoder_layers"] * (8 * length * d * d + 4 * length * length * d + 4 * length * d * t["encoder_ffn_dim"])
    total += t["decoder_layers"] * (8 * d * d + 4 * d + 4 * d * d + 4 * length * d * d + 4 * length * d
                                    + 4 * d * t["decoder_ffn_dim"])
    total += 2 * d * vocab
    return total


def show(triple, unit=" ms"):
    if triple is None:
        return "—"
    median, low, high = triple
    digits = 0 if median >= 100 else 1
    return f"{median:.{digits}f}{unit} ({low:.{digits}f}–{high:.{digits}f})"


def main(path, config_path, threads, picture, versions=None):
    rows = [json.loads(line) for line in open(path) if line.strip().startswith("{")]
    config = json.load(open(config_path))
    preprocessor = json.load(open(os.path.join(os.path.dirname(config_path), "preprocessor_config.json")))
    image_size = preprocessor["size"]["height"]
    calls = defaultdict(list)  # (side, cell, round) -> ms
    ids = defaultdict(list)  # (side, cell, round) -> [ids]
    loads = defaultdict(list)  # side -> ms
    cells, prompt_tokens, torch_version = [], {}, "?"
    roofs = defaultdict(list)  # "fma_peak" -> GFLOP/s, "bandwidth_read" -> GB/s
    for r in rows:
        if r["runtime"] == "roof":
            roofs[r["stage"]].append(r.get("gflops", r.get("gbytes_per_s")))
            continue
        side = "pytorch" if r["runtime"] == "pytorch" else f"glimpse {r['precision']}"
        if r.get("stage") == "load":
            loads[side].append(r["ms"])
            torch_version = r.get("torch", torch_version)
            continue
        cell = (r["task"], r["beams"], r["max_tokens"], r["min_tokens"])
        if cell not in cells:
            cells.append(cell)
        calls[(side, cell, r["round"])].append(r["ms"])
        ids[(side, cell, r["round"])].append(r["ids"])
        if "prompt_tokens" in r:
            prompt_tokens[r["task"]] = r["prompt_tokens"]
    rounds = sorted({key[2] for key in calls})
    sides = ("glimpse f32", "pytorch", "glimpse int8")

    def per_process(side, cell):
        return spread([statistics.median(calls[(side, cell, n)]) for n in rounds if calls.get((side, cell, n))])

    def agreement(side, cell):
        same = total = 0
        for n in rounds:
            reference = ids.get(("pytorch", cell, n))
            for got in ids.get((side, cell, n), []):
                total += 1
                same += bool(reference) and got == reference[0]
        return same, total

    weights = os.path.getsize(os.path.join(os.path.dirname(config_path), "pytorch_model.bin"))
    date = subprocess.run(["date", "-u", "+%Y-%m-%d"], capture_output=True, text=True).stdout.strip()
    debian = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", "python3-torch"], capture_output=True,
                            text=True).stdout.strip()
    if debian:
        torch_version = f"{debian.split('+')[0]} (Debian's python3-torch {debian})"
    measured = commit()
    peer = ""
    if versions and os.path.exists(versions):
        parts = dict(line.split()[0:3:2] for line in open(versions) if line.strip())
        peer = (f", transformers 4.40.2 ({parts.get('transformers', '?')[:9]}) with Florence-2's code at "
                f"{parts.get('florence2', '?')[:12]}")
    try:
        from PIL import Image
        with Image.open(picture) as image:
            size = f"{image.width}×{image.height}"
    except Exception:
        size = "?"
    print(f"CPU: {cpu_name()} ({os.cpu_count()} cores); {threads} threads; glimpse {measured}; PyTorch {torch_version}"
          f"{peer}; {len(rounds)} round{'s' if len(rounds) != 1 else ''} of alternating processes (glimpse float32, "
          f"PyTorch, glimpse int8); picture {os.path.basename(picture)} ({size}, {image_size}×{image_size} after the "
          f"processor's resize); full-size random Florence-2-base weights, float32 pytorch_model.bin of "
          f"{weights / 2**20:.0f} MiB; {date}.\n")
    print("| call | glimpse float32 | PyTorch float32 | PyTorch ÷ glimpse | glimpse int8 | PyTorch ÷ int8 "
          "| ids as PyTorch's: float32, int8 |")
    print("|---|---|---|---|---|---|---|")
    first = long = None
    for cell in cells:
        task, beams, most, least = cell
        if most > 1 and most == max(c[2] for c in cells) and beams == 1 and most > min(c[2] for c in cells if c[2] > 1):
            long = cell  # the decoding step's measure, below the table
            continue
        search = "greedy" if beams == 1 else f"{beams} beams"
        if most == 1:
            label = "first token (DaViT, encoder, one step), greedy"
            first = cell
        else:
            label = f"`{TASKS.get(task, task)}` (`{task}`), {most} tokens, {search}"
        f32, torch_, int8 = (per_process(side, cell) for side in sides)
        ratio = lambda a, b: f"**{a[0] / b[0]:.2f}×**" if a and b else "—"  # noqa: E731
        same32, n32 = agreement("glimpse f32", cell)
        same8, n8 = agreement("glimpse int8", cell)
        print(f"| {label} | {show(f32)} | {show(torch_)} | {ratio(torch_, f32)} | {show(int8)} | {ratio(torch_, int8)} "
              f"| {same32}/{n32}, {same8}/{n8} |")
    print()
    print("Load (from_pretrained / glimpse_model_load, page cache warm): " + ", ".join(
        f"{name} {show(spread(loads[side]))}" for side, name in
        (("glimpse f32", "glimpse float32"), ("glimpse int8", "glimpse int8"), ("pytorch", "PyTorch")) if loads[side]) + ".")
    if first:
        gflop = first_token_flops(config, image_size, prompt_tokens.get(first[0], 8)) / 1e9
        rates = []
        for side, name in (("glimpse f32", "glimpse float32"), ("glimpse int8", "glimpse int8"), ("pytorch", "PyTorch")):
            timing = per_process(side, first)
            if timing:
                rates.append(f"{name} {gflop / (timing[0] / 1e3):.1f}")
        print(f"First token: {gflop:.1f} GFLOP (the picture through DaViT, the BART encoder over "
              f"{image_size // 32 * (image_size // 32) + 1} image rows and {prompt_tokens.get(first[0], 8)} prompt "
              f"tokens, one decoder step), GFLOP/s at the median: {', '.join(rates)}.")
        peak = spread(roofs["fma_peak"])
        timing = per_process("glimpse f32", first)
        if peak and timing:
            print(f"glimpse float32's {gflop / (timing[0] / 1e3):.1f} GFLOP/s is {gflop / (timing[0] / 1e3) / peak[0]:.0%} "
                  f"of the {peak[0]:.0f} GFLOP/s a two-thread FMA loop reaches here (bench/roof.c).")
    if first and long:
        text = config["text_config"]
        d, f, layers, vocab = text["d_model"], text["decoder_ffn_dim"], text["decoder_layers"], text["vocab_size"]
        step_bytes = 4 * (layers * (6 * d * d + 2 * d * f) + vocab * d)  # self q k v o, cross q o, MLP; the tied head
        bandwidth = spread(roofs["bandwidth_read"])
        parts = []
        for side, name in (("glimpse f32", "glimpse float32"), ("glimpse int8", "glimpse int8"), ("pytorch", "PyTorch")):
            a, b = per_process(side, first), per_process(side, long)
            if a and b:
                parts.append(f"{name} {(b[0] - a[0]) / (long[2] - 1):.2f} ms")
        bound = f"; reading the float32 step's {step_bytes / 1e6:.0f} MB of weights at the {bandwidth[0]:.1f} GB/s " \
                f"measured ({bandwidth[1]:.1f}–{bandwidth[2]:.1f}) takes {step_bytes / bandwidth[0] / 1e6:.2f} ms" \
                if bandwidth else ""
        print(f"One decoding step (greedy, {long[2]} tokens' call less the first token's, over {long[2] - 1} steps): "
              f"{', '.join(parts)}{bound}.")


if __name__ == "__main__":
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    main(*sys.argv[1:6])
