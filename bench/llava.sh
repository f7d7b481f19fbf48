#!/usr/bin/env bash
# llava.sh BUILD WORK [RUNS] [THREADS] — glimpse alone on a full-size random LLaVA (default
# llava-interleave-qwen-0.5b; GLIMPSE_LLAVA_MODEL names another config of ../shared/configs): the snapshot written
# by BUILD/glimpse-make-model into WORK in float32 (--f32) and float16 (--f16), the float16 one also quantized at
# load (--int8). RUNS rounds (default 5) alternate the three forms, each a `glimpse bench` process: the image
# encoder (tower and projector, one picture), the prompt (the picture's rows and 32 tokens at once), greedy
# decoding steps (after 16 positions: the weights' share; and after the prompt); the read bandwidth
# (bench/roof.c) before and after. Then each form's peak resident memory answering one question (8 tokens) under
# /usr/bin/time, beside the weights' file size. Prints a table of medians and spreads (fastest–slowest) with the
# bound of a step: the bytes of weights it reads over the read bandwidth. Needs /usr/bin/time (Debian's `time`)
# and about 6 GB in WORK.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "$1" && pwd)
work=$2
runs=${3:-5}
threads=${4:-2}
configs=${GLIMPSE_CONFIGS:-$here/../shared/configs}
model=${GLIMPSE_LLAVA_MODEL:-llava-hf--llava-interleave-qwen-0.5b-hf}
mkdir -p "$work"
work=$(cd "$work" && pwd)
for precision in f32 f16; do
  [ -f "$work/$precision/config.json" ] ||
    "$build/glimpse-make-model" "$configs/$model.json" "$work/$precision" "--$precision" --seed 1 >/dev/null
done
cc -O2 -mavx512f -pthread "$here/bench/roof.c" -o "$work/roof"
results=$work/results.jsonl
: > "$results"
"$work/roof" "$threads" bandwidth >> "$results"
forms=(f32 f16 int8)
for round in $(seq 1 "$runs"); do
  for form in "${forms[@]}"; do
    folder=$work/$([ "$form" = int8 ] && echo f16 || echo "$form")
    flag=$([ "$form" = int8 ] && echo --int8 || true)
    "$build/glimpse" bench -m "$folder" $flag --threads "$threads" --runs 1 --tokens 4 --json 2>/dev/null |
      sed "s/^{/{\"form\": \"$form\", \"round\": $round, /" >> "$results"
  done
done
"$work/roof" "$threads" bandwidth >> "$results"
for form in "${forms[@]}"; do
  folder=$work/$([ "$form" = int8 ] && echo f16 || echo "$form")
  flag=$([ "$form" = int8 ] && echo --int8 || true)
  kb=$( { /usr/bin/time -f "%M" "$build/glimpse" ask -m "$folder" $flag --threads "$threads" \
    -q "What is in this picture?" --max-tokens 8 "$here/examples/pictures/00000.png" >/dev/null; } 2>&1 | tail -1)
  echo "{\"form\": \"$form\", \"stage\": \"peak_rss\", \"kb\": $kb, \"file_bytes\": $(du -cb "$folder"/*.safetensors | tail -1 | cut -f1)}" >> "$results"
done
cpu=$(grep -m1 "model name" /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')
family=$(grep -m1 "cpu family" /proc/cpuinfo | cut -d: -f2 | tr -d ' ')
cpu_model=$(grep -m1 "^model[[:space:]]" /proc/cpuinfo | cut -d: -f2 | tr -d ' ')
commit=$(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo unknown)
python3 - "$results" "$model" "$threads" "$cpu (family $family, model $cpu_model)" "$commit" <<'PY'
import json, statistics, sys
path, model, threads, cpu, commit = sys.argv[1:]
rows = [json.loads(line) for line in open(path) if line.strip()]
bandwidth = [r["gbytes_per_s"] for r in rows if r.get("stage") == "bandwidth_read"]
gbps = statistics.median(bandwidth)
def times(form, stage, detail=None):
    return [r["median_ms"] for r in rows if r.get("form") == form and r.get("stage") == stage
            and (detail is None or r.get("detail", "").startswith(detail))]
def cell(values, fmt="%.1f"):
    if not values: return "–"
    return (fmt % statistics.median(values)) + " (" + (fmt % min(values)) + "–" + (fmt % max(values)) + ")"
print(f"{model}, {threads} threads, {cpu}, commit {commit}; read bandwidth {min(bandwidth):.1f}–{max(bandwidth):.1f} "
      f"GB/s (median {gbps:.1f}); medians of {max(r.get('round', 0) for r in rows)} alternating processes "
      "(fastest–slowest)\n")
print("| form | image encoder, ms | prompt, tokens/s | decoding step after 16, ms | after the prompt, ms "
      "| bytes a step reads | bound at median bandwidth, ms | step / bound | peak RSS | weights' files |")
print("|---|---|---|---|---|---|---|---|---|---|")
for form in ("f32", "f16", "int8"):
    prompt = [r for r in rows if r.get("form") == form and r.get("stage") == "prompt"]
    positions = int(prompt[0]["detail"].split()[0]) if prompt else 0
    rates = [positions / (r["median_ms"] / 1000) for r in prompt]
    early = times(form, "decoder_step", "greedy, position 16")
    late = times(form, "decoder_step", f"greedy, position {positions}")
    step_bytes = [r["bytes"] for r in rows if r.get("form") == form and r.get("stage") == "decoder_step_bytes"]
    bound = step_bytes[0] / (gbps * 1e6) if step_bytes else None
    rss = [r for r in rows if r.get("form") == form and r.get("stage") == "peak_rss"]
    print(f"| {form} | {cell(times(form, 'image'), '%.0f')} | {cell(rates, '%.0f')} ({positions} positions) "
          f"| {cell(early)} | {cell(late)} | {step_bytes[0] / 1e6:.0f} MB | {bound:.1f} "
          f"| {statistics.median(early) / bound:.2f} | {rss[0]['kb'] / 1024:.0f} MB | {rss[0]['file_bytes'] / 1e6:.0f} MB |")
PY
