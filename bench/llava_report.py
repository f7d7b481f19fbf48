#!/usr/bin/env python3
"""llava_report.py RESULTS.jsonl THREADS LLAMA_CPP_VERSION — bench/llava_peers.sh's table: per model and precision,
glimpse's and llama.cpp's prompt and decoding tokens per second (from a short cache, and after the prompt) and the
image encoder's milliseconds, each the median of the rounds with its spread (slowest–fastest), their ratio, and
glimpse's decoding step against the bound that reading its weights at the measured bandwidth sets. Markdown on
stdout, with the machine, CPU and commit."""
import json
import os
import platform
import statistics
import sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from table import commit, cpu_name, spread  # noqa: E402


def show(triple, digits=1):
    if triple is None:
        return "—"
    median, low, high = triple
    return f"{median:.{digits}f} ({low:.{digits}f}–{high:.{digits}f})"


def main(path, threads, llama_version):
    rows = [json.loads(line) for line in open(path) if line.strip()]
    bandwidth = [r["gbytes_per_s"] for r in rows if r.get("side") == "roof" and "gbytes_per_s" in r]
    fma = [r["gflops"] for r in rows if r.get("side") == "roof" and r.get("stage") == "fma_peak"]
    figures = defaultdict(list)  # (model, precision, side, what) -> values
    step_bytes = {}
    unsupported = set()
    prompt_positions = {}  # model -> the positions glimpse's prompt fills (its steps after it are "decode_deep")
    deep_positions = defaultdict(set)  # (model, side) -> the positions each side decoded after
    for r in rows:
        side, model, precision = r.get("side"), r.get("model"), r.get("precision", "f16")
        if side == "glimpse":
            stage = r.get("stage")
            if stage == "prompt":
                positions = prompt_positions[model] = int(str(r["detail"]).split()[0])
                figures[(model, precision, side, "prompt")].append(positions / (r["median_ms"] / 1000))
                figures[(model, precision, side, "prompt_gflops")].append(r["gflops"])
            elif stage == "decoder_step" and figures.get((model, precision, side, "first_step_detail")) in (None, [r["detail"]]):
                figures[(model, precision, side, "first_step_detail")] = [r["detail"]]
                figures[(model, precision, side, "decode")].append(1000 / r["median_ms"])
            elif stage == "decoder_step" and str(r["detail"]).endswith(f"position {prompt_positions.get(model)}"):
                figures[(model, precision, side, "decode_deep")].append(1000 / r["median_ms"])
                deep_positions[(model, side)].add(prompt_positions[model])
            elif stage == "image" and precision == "f16":
                figures[(model, "f16", side, "image")].append(r["median_ms"])
            elif stage == "decoder_step_bytes":
                step_bytes[(model, precision)] = r["bytes"]
        elif side == "llama.cpp":
            if r.get("stage") == "image":
                if r.get("unsupported"):
                    unsupported.add(model)
                else:
                    figures[(model, "f16", side, "image")].append(r["ms"])
            elif r.get("stage") == "decode_after_prompt":
                figures[(model, precision, side, "decode_deep")].append(1000 / r["ms"])
                deep_positions[(model, side)].add(r["positions"])
            elif r.get("n_prompt"):
                figures[(model, precision, side, "prompt")].append(r["avg_ts"])
            elif r.get("n_gen"):
                figures[(model, precision, side, "decode")].append(r["avg_ts"])
    measured = commit()
    print(f"Machine: {platform.node()}, {cpu_name()}, {threads} threads; glimpse {measured}, llama.cpp {llama_version}; "
          f"read bandwidth {show(spread(bandwidth))} GB/s.\n")
    print("| model | precision | what | glimpse | llama.cpp | glimpse ÷ llama.cpp |")
    print("|---|---|---|---|---|---|")
    models = sorted({key[0] for key in figures})
    for model in models:
        for precision in ("f16", "int8"):
            deep = "decode after " + " / ".join("+".join(str(n) for n in sorted(deep_positions[(model, side)])) or "—"
                                                for side in ("glimpse", "llama.cpp"))
            for what, unit, higher_better in (("prompt", "tokens/s", True), ("decode", "tokens/s", True),
                                              ("decode_deep", "tokens/s", True), ("image", "ms", False)):
                if what == "image" and precision != "f16":
                    continue
                ours, theirs = spread(figures.get((model, precision, "glimpse", what), [])), \
                    spread(figures.get((model, precision, "llama.cpp", what), []))
                if ours is None and theirs is None and not (what == "image" and model in unsupported):
                    continue
                ratio = "—"
                if ours and theirs:
                    ratio = f"{(ours[0] / theirs[0]) if higher_better else (theirs[0] / ours[0]):.2f}×"
                label = {"f16": "float16", "int8": "int8 / Q8_0"}[precision]
                theirs_text = "not supported by this llama.cpp" if what == "image" and model in unsupported \
                    else show(theirs)
                name = deep + " positions" if what == "decode_deep" else what
                print(f"| {model} | {label} | {name} ({unit}) | {show(ours)} | {theirs_text} | {ratio} |")
            rate = spread(figures.get((model, precision, "glimpse", "prompt_gflops"), []))
            if rate and fma and precision == "f16":
                print(f"| {model} | {precision} | glimpse's prompt against the FMA loop | {rate[0]:.0f} GFLOP/s | "
                      f"{statistics.median(fma):.0f} GFLOP/s | {rate[0] / statistics.median(fma):.0%} of it |")
            decode = spread(figures.get((model, precision, "glimpse", "decode"), []))
            if decode and bandwidth and (model, precision) in step_bytes:
                bound = step_bytes[(model, precision)] / (statistics.median(bandwidth) * 1e9) * 1000
                print(f"| {model} | {precision} | glimpse's step against its bound | {1000 / decode[0]:.1f} ms | "
                      f"{bound:.1f} ms ({step_bytes[(model, precision)] / 1e6:.0f} MB at the median bandwidth) | "
                      f"{1000 / decode[0] / bound:.2f}× the bound |")
    for r in rows:
        if r.get("stage") == "peak_rss":
            print(f"\nPeak resident memory, {r['model']} {r['precision']}: {r['kb'] / 1024:.0f} MiB answering one question "
                  f"(8 new tokens), beside {r['file_bytes'] / 2**20:.0f} MiB of weights in the file.", end="")
    print("\n\nRatios above 1 favour glimpse. Prompt: the picture's rows and 32 tokens read at once; decode: glimpse's "
          "step after 16 positions (the weights' share; a longer cache adds to it, as glimpse bench's later steps show), "
          "llama.cpp's llama-bench over 32 tokens from an empty cache; decode after N / M positions: glimpse's step "
          "after its prompt's N positions, llama.cpp's 32 steps after a prompt of M tokens (llama-cli); image: the tower "
          "and projector on one picture (glimpse's image stage includes its preprocessing).")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        raise SystemExit(__doc__)
    main(*sys.argv[1:])
