#!/usr/bin/env bash
# siglip.sh [ROUNDS] [THREADS] — SigLIP's vision towers (base 224 px and so400m
# 384 px, attention-pooling head included, batch 1) in glimpse, PyTorch and
# ONNX Runtime, each round a new process per side, alternating so that every
# side sees the same minutes of this machine; prints per side and shape the
# median over the rounds of each process's median, the fastest and slowest
# process, and glimpse's ratios. The PyTorch and ONNX models are
# bench/peers.py's SiglipVision of the published shapes (random weights, as
# glimpse's from glimpse-make-model). Needs a built tree and what
# bench/run.sh installs (python3-torch, npm onnxruntime-node).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
threads=${2:-2}
work=build/bench
configs=${GLIMPSE_CONFIGS:-../shared/configs}
mkdir -p "$work/onnx"
for model in google--siglip-base-patch16-224 google--siglip-so400m-patch14-384; do
  [ -f "$work/$model/model.safetensors" ] || build/glimpse-make-model "$configs/$model.json" "$work/$model" >/dev/null
done
[ -d "$work/node/node_modules/onnxruntime-node" ] ||
  { echo "siglip.sh: run bench/run.sh once first (it installs onnxruntime-node)" >&2; exit 1; }
. bench/peer_env.sh
python=("${peer_python[@]}")
if [ ! -f "$work/onnx/vision_siglip_so400m_384.onnx" ]; then
  "${python[@]}" - "$work/onnx" <<'PY'
import sys, torch
sys.path.insert(0, "bench")
from peers import SIGLIP_SHAPES, SiglipVision, export_siglip
torch.manual_seed(0)
export_siglip(sys.argv[1], {stage: SiglipVision(*shape) for stage, shape in SIGLIP_SHAPES.items()})
PY
fi
results=$work/siglip.jsonl
: > "$results"
for _ in $(seq "$rounds"); do
  for model in base-patch16-224 so400m-patch14-384; do
    stage=vision_siglip_${model%%-*}_${model##*-}
    build/glimpse bench -m "$work/google--siglip-$model" --threads "$threads" --runs 3 --json | grep '"stage": "vision"' \
      | sed "s/^{/{\"runtime\": \"glimpse\", /; s/\"stage\": \"vision\"/\"stage\": \"$stage\"/" >> "$results"
    "${python[@]}" - "$stage" "$threads" >> "$results" <<'PY'
import json, sys, torch
sys.path.insert(0, "bench")
from peers import SIGLIP_SHAPES, SiglipVision, timed
stage, threads = sys.argv[1], int(sys.argv[2])
torch.set_num_threads(threads)
shape = SIGLIP_SHAPES[stage]
model = SiglipVision(*shape).eval()
x = torch.randn(1, 3, shape[5], shape[5])
with torch.no_grad():
    seconds = timed(lambda: model(x), 3)
print(json.dumps({"runtime": "pytorch", "stage": stage, "batch": 1, "median_ms": round(seconds * 1e3, 3)}))
PY
    NODE_PATH=$work/node/node_modules node bench/ort_bench.js "$work/onnx" "$threads" 3 "$stage" >> "$results"
  done
done
"${python[@]}" - "$results" <<'PY'
import json, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1]) if line.startswith("{")]
for stage in ("vision_siglip_base_224", "vision_siglip_so400m_384"):
    medians = {}
    for runtime in ("glimpse", "pytorch", "onnxruntime"):
        times = sorted(r["median_ms"] for r in rows if r["runtime"] == runtime and r["stage"] == stage)
        if times:
            medians[runtime] = statistics.median(times)
            print(f"{stage:26s} {runtime:12s} median {medians[runtime]:9.1f} ms over {len(times)} processes "
                  f"(fastest {times[0]:.1f}, slowest {times[-1]:.1f})")
    if "glimpse" in medians:
        print(f"{stage:26s} glimpse vs pytorch {medians.get('pytorch', 0) / medians['glimpse']:.2f}x, "
              f"vs onnxruntime {medians.get('onnxruntime', 0) / medians['glimpse']:.2f}x")
PY
