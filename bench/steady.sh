#!/usr/bin/env bash
# steady.sh [PROCESSES] [THREADS] [--int8] — how steady the ViT-B/32 vision
# tower is from one process to the next, as a user who runs glimpse once
# meets it: PROCESSES rounds (default 20), each a new `glimpse bench` process
# (float32, or with --int8 int8) and then a new ONNX Runtime process (float32)
# on the same shape, alternating so that both sides see the same minutes of
# this machine. Each process reports the median of its own 5 runs at batch 1;
# this prints, per side, the median over the processes, the fastest and
# slowest, and slowest ÷ median (the aim for glimpse: at most 1.2). Before
# each round bench/roof.c measures how far apart the first two CPUs are (a
# cache line handed from one to the other): on a virtual machine the host
# may run them on cores that share a cache (tens of ns) or not (over 100 ns),
# and moves them; glimpse's processes are then summed up for each kind too.
# Needs what bench/run.sh sets up (the random full-size model and the ONNX
# export); run that once first.
set -euo pipefail
cd "$(dirname "$0")/.."
processes=${1:-20}
threads=${2:-2}
precision=${3:-}
[ -z "$precision" ] || [ "$precision" = --int8 ] || { echo "steady.sh: the third argument is --int8 or nothing" >&2; exit 2; }
work=build/bench
model=$work/openai--clip-vit-base-patch32
[ -f "$model/model.safetensors" ] && [ -f "$work/onnx/vit_b_32.onnx" ] ||
  { echo "steady.sh: run bench/run.sh once first (it makes $model and $work/onnx)" >&2; exit 1; }
. bench/roof.sh
roof_build "$work"
glimpse_ms=() ort_ms=() apart_ns=()
for _ in $(seq "$processes"); do
  apart_ns+=("$("$work/roof" "$threads" core_to_core | sed -n 's/.*"ns": \([0-9.]*\).*/\1/p')")
  # shellcheck disable=SC2086 # (precision: one word or none)
  glimpse_ms+=("$(build/glimpse bench -m "$model" $precision --batch 1 --threads "$threads" --runs 5 --json |
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
summary "glimpse${precision:+ int8}" "${glimpse_ms[@]}"
summary onnxruntime "${ort_ms[@]}"
near=() far=()
for i in "${!glimpse_ms[@]}"; do
  case ${apart_ns[$i]} in
    '') ;;                                     # (no figure: CPUs this process may not pin to)
    ?.* | ??.*) near+=("${glimpse_ms[$i]}") ;; # under 100 ns (roof prints one decimal)
    *) far+=("${glimpse_ms[$i]}") ;;
  esac
done
[ ${#near[@]} -eq 0 ] || summary "glimpse, CPUs under 100 ns apart" "${near[@]}"
[ ${#far[@]} -eq 0 ] || summary "glimpse, CPUs 100 ns or more apart" "${far[@]}"
echo "every process, in order (glimpse | onnxruntime | ns between the CPUs before it):" \
  "${glimpse_ms[*]} | ${ort_ms[*]} | ${apart_ns[*]}"
