"""report.py — the table of bench/run.sh: each stage's median for glimpse,
PyTorch and ONNX Runtime, and glimpse's speed-up over each (above 1 is
faster), with the machine's roof. With --markdown, the same tables in Markdown, as docs/benchmarks.md
shows them (run.sh writes them, with the machine and commit, to build/bench/benchmarks.md).

run.sh measures glimpse's towers before the peers and again after them
("glimpse-after"); the table's glimpse figure for a tower is the mean of the
two medians, so a drift of the machine during the peers' minutes weighs on
both sides alike. Each decoder step's bound uses the bandwidth measured just
before and after that decoder bench (rows with "beside").

    python3 bench/report.py RESULTS.jsonl [--markdown]"""
import json
import sys

rows = [json.loads(line) for line in open(sys.argv[1]) if line.startswith("{")]


def find(runtime, stage, batch=None, detail=None):
    for r in rows:
        if r.get("runtime") == runtime and r.get("stage") == stage and (batch is None or r.get("batch") == batch):
            if detail is None or detail in r.get("detail", ""):
                return r
    return None


# glimpse's towers: the mean of the medians before and after the peers (both printed below the table)
TOWERS = ("vision", "text", "vision_blip_384", "vision_siglip_base_224", "vision_siglip_so400m_384")
rounds = []
for first in rows:
    if first.get("runtime") == "glimpse" and first.get("stage") in TOWERS:
        after = find("glimpse-after", first["stage"], first.get("batch"), first.get("detail") or None)
        if after:
            rounds.append((first["stage"], first.get("batch"), first["median_ms"], after["median_ms"]))
            mean = (first["median_ms"] + after["median_ms"]) / 2
            if first.get("gflops"):
                first["gflops"] *= first["median_ms"] / mean
            first["median_ms"] = mean

markdown = "--markdown" in sys.argv[2:]
peak = next((r["gflops"] for r in rows if r.get("runtime") == "roof" and r.get("stage") == "fma_peak"), None)
# int8's roof: AMX's int8 tiles where the CPU has them (glimpse's int8 products run there), else the VNNI loop
int8_roof = next(((r["stage"], r["gops"]) for stage in ("amx_int8_peak", "vnni_peak") for r in rows
                  if r.get("runtime") == "roof" and r.get("stage") == stage), (None, None))
int8_name = {"amx_int8_peak": "AMX int8 tiles", "vnni_peak": "VNNI loop"}.get(int8_roof[0], "int8 loop")
if markdown:
    print("| stage | glimpse | PyTorch | ONNX Runtime | vs PyTorch | vs ONNX Runtime | glimpse GFLOP/s | of the FMA loop |")
    print("|---|---|---|---|---|---|---|---|")
else:
    print(f"{'stage':34s} {'glimpse':>10s} {'pytorch':>10s} {'onnxrt':>10s} {'vs torch':>9s} {'vs ort':>8s} {'glimpse GFLOP/s':>16s} {'of FMA peak':>12s}")
cases = [("vision", 1, "ViT-B/32 vision, batch 1", None), ("vision", 8, "ViT-B/32 vision, batch 8 (per image)", None),
         ("text", 1, "CLIP text, 77 tokens", None), ("text", 8, "CLIP text, batch 8 (per text)", None),
         ("vision_blip_384", 1, "BLIP-base vision, 384 px", None),
         ("vision_siglip_base_224", 1, "SigLIP base vision, 224 px", None),
         ("vision_siglip_so400m_384", 1, "SigLIP so400m vision, 384 px", None),
         ("decoder_step", 1, "BLIP-base decoder step, greedy", "greedy, position 20"),
         ("decoder_step", 3, "BLIP-base decoder step, 3 beams", "3 beams, position 20"),
         ("caption_vit_gpt2", 1, "ViT-GPT2 caption, 16 tokens, greedy", "16 tokens, greedy")]
for stage, batch, name, detail in cases:
    g = find("glimpse", stage, batch if not detail else None, detail)
    t = find("pytorch", stage, batch)
    o = find("onnxruntime", stage, batch)
    cell = lambda r: f"{r['median_ms']:8.1f}ms" if r else "       -  "
    ratio = lambda r: f"{r['median_ms'] / g['median_ms']:8.2f}x" if r and g else "       - "
    rate = f"{g['gflops']:16.1f}" if g and g.get("gflops") else ""
    share = f"{100 * g['gflops'] / peak:11.0f}%" if peak and g and g.get("gflops") else ""
    if markdown:
        md = lambda r: f"{r['median_ms']:.1f} ms" if r else "–"
        mdr = lambda r: f"{r['median_ms'] / g['median_ms']:.2f}×" if r and g else "–"
        print(f"| {name} | {md(g)} | {md(t)} | {md(o)} | {mdr(t)} | {mdr(o)} | {rate.strip() or '–'} | {share.strip() or '–'} |")
        continue
    print(f"{name:34s} {cell(g)} {cell(t)} {cell(o)} {ratio(t)} {ratio(o)} {rate} {share}")
# int8 (--int8) beside ONNX Runtime's float32 and glimpse's own float32
if markdown:
    print()
    print("| stage, int8 | glimpse int8 | glimpse float32 | ONNX Runtime float32 | vs glimpse float32 | vs ONNX Runtime | "
          f"GOP/s | of the {int8_name} |")
    print("|---|---|---|---|---|---|---|---|")
else:
    print(f"\n{'int8 stage':34s} {'int8':>10s} {'float32':>10s} {'onnxrt':>10s} {'vs f32':>9s} {'vs ort':>8s} "
          f"{'GOP/s':>8s} {'of ' + int8_name:>14s}")
for stage, batch, name, detail in cases:
    q = find("glimpse-int8", stage, batch if not detail else None, detail)
    g = find("glimpse", stage, batch if not detail else None, detail)
    o = find("onnxruntime", stage, batch)
    if not q:
        continue
    rate = f"{q['gflops']:.1f}" if q.get("gflops") else "–"
    share = f"{100 * q['gflops'] / int8_roof[1]:.0f}%" if int8_roof[1] and q.get("gflops") else "–"
    if markdown:
        md = lambda r: f"{r['median_ms']:.1f} ms" if r else "–"
        mdr = lambda r: f"{r['median_ms'] / q['median_ms']:.2f}×" if r else "–"
        print(f"| {name} | {md(q)} | {md(g)} | {md(o)} | {mdr(g)} | {mdr(o)} | {rate} | {share} |")
    else:
        cell = lambda r: f"{r['median_ms']:8.1f}ms" if r else "       -  "
        ratio = lambda r: f"{r['median_ms'] / q['median_ms']:8.2f}x" if r else "       - "
        print(f"{name:34s} {cell(q)} {cell(g)} {cell(o)} {ratio(g)} {ratio(o)} {rate:>8s} {share:>14s}")
for r in [] if markdown else rows:
    if r.get("runtime") == "roof":
        print("roof:", r["stage"], {k: v for k, v in r.items() if k not in ("runtime", "stage")})

if rounds and not markdown:
    print("glimpse towers before / after the peers (the table has their mean):",
          ", ".join(f"{stage} b{batch} {a:.1f} / {b:.1f} ms" for stage, batch, a, b in rounds))

# a caption step reads every decoder weight once: its bound is their bytes over the read bandwidth,
# measured just before and after each decoder bench (else the one roof measurement at the end)
roof_bandwidth = next((r["gbytes_per_s"] for r in rows if r.get("stage") == "bandwidth_read" and "beside" not in r),
                      None)
# BLIP-base: 123.2 M weights, 4 bytes, 2 (float16 checkpoint) or 1 (+ scales)
STEP_BYTES = {"glimpse": 493.0e6, "glimpse-f16": 246.5e6, "glimpse-int8": 123.6e6, "glimpse-after": 493.0e6}
if not markdown:
    for runtime, size in STEP_BYTES.items():
        beside = [r["gbytes_per_s"] for r in rows if r.get("stage") == "bandwidth_read" and r.get("beside") == runtime]
        bandwidth = round(sum(beside) / len(beside), 1) if beside else roof_bandwidth
        if not bandwidth:
            continue
        when = f"beside it: {' and '.join(map(str, beside))}" if beside else "at the end"
        for detail in ("greedy, position 20", "3 beams, position 20"):
            r = find(runtime, "decoder_step", None, detail)
            if r:
                bound = size / (bandwidth * 1e9) * 1e3
                print(f"{runtime} decoder step, {detail}: {r['median_ms']:.1f} ms = {r['median_ms'] / bound:.2f}x "
                      f"the {size / 1e6:.0f} MB / {bandwidth} GB/s bound ({bound:.1f} ms; bandwidth {when})")

# float16 BLIP-base beside float32 (the same shapes; 16-bit weights widened inside the products)
if not markdown:
    for stage, detail, name in [("vision_blip_384", None, "BLIP-base vision, 384 px"),
                                ("decoder_step", "greedy, position 20", "BLIP-base decoder step, greedy"),
                                ("decoder_step", "3 beams, position 20", "BLIP-base decoder step, 3 beams")]:
        h, g = find("glimpse-f16", stage, None, detail), find("glimpse", stage, None, detail)
        if h and g:
            print(f"float16 {name}: {h['median_ms']:.1f} ms vs float32 {g['median_ms']:.1f} ms "
                  f"({g['median_ms'] / h['median_ms']:.2f}x)")

# cold start: a whole `glimpse rank` process (load, decode, both towers, output) against the warm towers alone
cold = find("glimpse", "cold_start_rank")
vision, text = find("glimpse", "vision", 1), find("glimpse", "text", 1)
if cold and vision and text and not markdown:
    compute = vision["median_ms"] + text["median_ms"]
    print(f"glimpse rank cold start (ViT-B/32, 1 image + 1 text): {cold['median_ms']:.1f} ms, warm compute "
          f"{compute:.1f} ms (vision + text at batch 1), {cold['median_ms'] - compute:.1f} ms over (150 asked)")
    disk = find("glimpse", "cold_start_rank_from_disk")
    if disk:
        print(f"  (its first run, the file read from disk: {disk['median_ms']:.0f} ms)")


# BLIP-2 OPT-2.7B (float16 as published, and --int8): the image side, the time to the first token, each
# decoder step against its bound (the bytes of weights it reads, from decoder_step_bytes, over the read
# bandwidth measured beside it), whole captions and one whole process with its peak resident memory.
if not markdown:
    torch_vision, torch_step = find("pytorch", "vision_blip2_224"), find("pytorch", "decoder_step_blip2")
    for runtime in ("glimpse-blip2", "glimpse-blip2-int8"):
        size = find(runtime, "decoder_step_bytes")
        if not size:
            continue
        beside = [r["gbytes_per_s"] for r in rows if r.get("stage") == "bandwidth_read" and r.get("beside") == runtime]
        bandwidth = sum(beside) / len(beside) if beside else roof_bandwidth
        vision, qformer, first = (find(runtime, s) for s in ("vision_blip2_224", "qformer", "first_token"))
        if vision and qformer:
            peer = f" (PyTorch float32 vision {torch_vision['median_ms']:.0f} ms)" if torch_vision else ""
            print(f"{runtime}: vision {vision['median_ms']:.0f} ms + Q-Former {qformer['median_ms']:.1f} ms{peer}")
        if first:
            print(f"{runtime}: time to first token {first['median_ms']:.0f} ms (vision, Q-Former, 11-token prompt)")
        for detail in ("greedy, position 1", "greedy, position 20", "3 beams, position 20"):
            r = find(runtime, "decoder_step", None, detail)
            if r and bandwidth:
                bound = size["bytes"] / (bandwidth * 1e9) * 1e3
                print(f"{runtime} decoder step, {detail}: {r['median_ms']:.0f} ms = {r['median_ms'] / bound:.2f}x the "
                      f"{size['bytes'] / 1e9:.2f} GB / {bandwidth:.1f} GB/s bound ({bound:.0f} ms)")
        if torch_step and runtime == "glimpse-blip2":
            print(f"  PyTorch float32 decoder step of the same shapes: {torch_step['median_ms']:.0f} ms")
        for detail in ("greedy", "3 beams"):
            r = find(runtime, "caption", None, detail)
            if r:
                print(f"{runtime} caption, 20 tokens, {detail}: {r['median_ms'] / 1e3:.1f} s")
        process = find(runtime, "caption_process")
        if process:
            print(f"{runtime}: `glimpse caption` of 20 tokens, whole process: {process['median_ms'] / 1e3:.1f} s, peak "
                  f"resident {process['peak_rss_bytes'] / 1e9:.2f} GB for {process['mapped_bytes'] / 1e9:.2f} GB mapped "
                  f"({process['peak_rss_bytes'] / process['mapped_bytes']:.2f}x; at most 1.10 asked)")

# peak resident memory of whole commands against the model file they map (8 pictures)
if not markdown:
    for r in rows:
        if r.get("stage", "").startswith("memory_"):
            print(f"peak memory, {r['stage'][7:]}: {r['peak_mb']} MB for a {r['file_mb']} MB model file "
                  f"({r['peak_mb'] - r['file_mb']:+} MB)")

# continuous batching (bench --captions): per model and search, the medians over run.sh's rounds (separate
# processes) of the decoder's tokens per second and the captions per second, batched and one at a time
if not markdown:
    captions = [r for r in rows if r.get("stage") == "captions" and "median_ms" in r]
    median = lambda values: sorted(values)[len(values) // 2] if len(values) % 2 else \
        sum(sorted(values)[len(values) // 2 - 1:len(values) // 2 + 1]) / 2
    for model in dict.fromkeys(r.get("model", "?") for r in captions):
        for search in ("greedy", "3 beams"):
            ways = {}
            for way in ("batched", "alone"):
                mine = [r for r in captions if r.get("model", "?") == model and r["detail"] == f"{way}, {search}"]
                if mine:
                    ways[way] = (median([r["decoder_tokens_per_s"] for r in mine]),
                                 median([r["captions_per_s"] for r in mine]), len(mine), mine[0]["pictures"])
            if len(ways) < 2:
                continue
            (bt, bc, n, pictures), (at, ac, _, _) = ways["batched"], ways["alone"]
            gains = [r["decoder_ratio"] for r in rows if r.get("stage") == "captions" and r.get("model", "?") == model
                     and r.get("detail") == f"gain, {search}"]
            spread = f", per round {min(gains):.2f}-{max(gains):.2f}x" if gains else ""
            print(f"captions, {model}, {pictures} pictures, {search}: decoder {bt:.1f} vs {at:.1f} tokens/s "
                  f"({bt / at:.2f}x{spread}), whole captions {bc:.2f} vs {ac:.2f}/s ({bc / ac:.2f}x), "
                  f"batched vs one at a time, medians of {n} processes")
