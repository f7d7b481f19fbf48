#!/usr/bin/env bash
# steady.sh [PROCESSES] [THREADS] — how steady the ViT-B/32 vision tower is
# from one process to the next, as a user who runs glimpse once meets it:
# PROCESSES rounds (default 20), each a new `glimpse bench` process and then a
# new ONNX Runtime process on the same shape, alternating so that both sides
# see the same minutes of this machine. Each process reports the median of
# its own 5 runs at batch 1; this prints, per side, the median over the
# processes, the fastest and slowest, and slowest ÷ median (the aim for glimpse:
# at most 1.2). Needs what bench/run.sh sets up (the random
# full-size model and the ONNX export); run that once first.
set -euo pipefail
cd "$(dirname "$0")/.."
processes=${1:-20}
threads=${2:-2}
work=build/bench
model=$work/openai--clip-vit-base-patch32
[ -f "$model/model.safetensors" ] && [ -f "$work/onnx/vit_b_32.onnx" ] ||
  { echo "steady.sh: run bench/run.sh once first (it makes $model and $work/onnx)" >&2; exit 1; }
glimpse_ms=() ort_ms=()
for _ in $(seq "$processes"); do
  glimpse_ms+=("$(build/glimpse bench -m "$model" --batch 1 --threads "$threads" --runs 5 --json |
    sed -n 's/.*"stage": "vision".*"median_ms": \([0-9.]*\).*/\1/p')")
  ort_ms+=("$(NODE_PATH=$work/node/node_modules node bench/ort_bench.js "$work/onnx" "$threads" 5 vision |
    sed -n 's/.*"batch":1,.*"median_ms":\([0-9.]*\).*/\1/p')")
done
summary() { # NAME VALUES...
  local name=$1
  shift
  printf '%s\n' "$@" | sort -n | awk -v name="$name" '{v[NR] = $1} END {
    m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
    printf "%-12s %d processes: median %.1f ms, fastest %.1f, slowest %.1f, slowest/median %.2f\n", name, NR, m, v[1], v[NR], v[NR] / m
  }'
}
summary glimpse "${glimpse_ms[@]}"
summary onnxruntime "${ort_ms[@]}"
echo "every process, in order (glimpse | onnxruntime): ${glimpse_ms[*]} | ${ort_ms[*]}"
