#!/usr/bin/env bash
# photos.sh [THREADS] [ROUNDS] [COUNT] — pictures per second indexing
# twelve-megapixel photographs (4032x3024 JPEGs at quality 90: the fixtures'
# five real photographs, scikit-image's, cropped a little differently each
# time and upscaled bicubically; COUNT of them, default 100), on a
# ViT-B/32 (CLIP ViT-B/32's shapes, random weights, glimpse-make-model):
#   glimpse index (exact), glimpse index --fast-decode, a new index each run;
#   Pillow + ONNX Runtime: Pillow decodes and preprocesses as CLIPImageProcessor
#     does (bench/photos.py feed) and pipes batches of 8 to ONNX Runtime
#     (npm onnxruntime-node, bench/ort_photos.js) running torchvision's
#     ViT-B/32 exported by peers.py: the two overlap, as a photo application's
#     decoding and inference threads would;
#   Pillow + PyTorch: the same preprocessing, then torchvision's ViT-B/32 in
#     one Python process (bench/photos.py torch).
# Each is run ROUNDS times (default 3), the four alternating, and the median
# printed with the spread. Then the stages of one photograph (glimpse bench
# --picture), and --fast-decode's cosines to the exact path on the photographs
# and on examples/pictures (upscaled to 12 MP the same way), with demo-clip
# (trained) and the random ViT-B/32. Prints JSON Lines, then a table.
# GLIMPSE_BASELINE=BINARY adds another build's `glimpse index` to the rounds.
# Not part of the tests; needs a built tree, bench/run.sh's npm install and
# Debian's python3-torch, python3-torchvision and python3-pil.
set -euo pipefail
cd "$(dirname "$0")/.."
threads=${1:-2}
rounds=${2:-3}
count=${3:-100}
work=build/bench
model=${GLIMPSE_PHOTOS_MODEL:-$work/openai--clip-vit-base-patch32}
. bench/peer_env.sh
python=("${peer_python[@]}")
photos=$work/photos$count
onnx=$work/photos-onnx
node_modules=${GLIMPSE_NODE_MODULES:-$work/node/node_modules}
mkdir -p "$work"
[ -f "$model/model.safetensors" ] ||
  build/glimpse-make-model "${GLIMPSE_CONFIGS:-../shared/configs}/openai--clip-vit-base-patch32.json" "$model" >/dev/null
[ -f "$photos/photo$(printf %04d $((count - 1))).jpg" ] || "${python[@]}" bench/photos.py make "$photos" "$count"
[ -f "$onnx/vit_b_32.onnx" ] || "${python[@]}" bench/photos.py export "$onnx" >/dev/null 2>&1
results=$work/photos.jsonl
: > "$results"

glimpse_index() { # LABEL [--fast-decode]   (GLIMPSE_BIN: another build's glimpse, for a before-and-after)
  local label=$1 db=$work/photos-bench.db
  shift
  rm -f "$db" "$db.vectors"
  local start end
  start=$(date +%s.%N)
  "${GLIMPSE_BIN:-build/glimpse}" index -m "$model" --db "$db" --threads "$threads" --quiet "$@" "$photos" >/dev/null
  end=$(date +%s.%N)
  awk -v label="$label" -v n="$count" -v s="$start" -v e="$end" \
    'BEGIN { printf "{\"runtime\": \"%s\", \"pictures\": %d, \"seconds\": %.3f, \"pictures_per_s\": %.3f}\n", label, n, e - s, n / (e - s) }' \
    >> "$results"
}
for round in $(seq "$rounds"); do
  echo "round $round of $rounds..." >&2
  glimpse_index "glimpse index"
  glimpse_index "glimpse index --fast-decode" --fast-decode
  if [ -n "${GLIMPSE_BASELINE:-}" ]; then GLIMPSE_BIN=$GLIMPSE_BASELINE glimpse_index "baseline glimpse index"; fi
  "${python[@]}" bench/photos.py feed "$photos" | NODE_PATH=$node_modules node bench/ort_photos.js "$onnx/vit_b_32.onnx" "$threads" >> "$results"
  "${python[@]}" bench/photos.py torch "$photos" "$threads" >> "$results"
done

# where one photograph's time goes: decoding, resizing and the rest, the tower (per picture, batches of 8)
for fast in "" --fast-decode; do
  build/glimpse bench -m "$model" --picture "$photos/photo0002.jpg" $fast --batch 8 --threads "$threads" --runs 5 --json \
    | grep -E '"stage": "(decode|preprocess|vision)"' | sed "s/^{/{\"runtime\": \"glimpse stages${fast:+ fast}\", /" >> "$results"
done

# --fast-decode's embeddings against the exact path's
drawings=$work/photos-drawings
if [ ! -f "$drawings/00005.jpg" ]; then
  mkdir -p "$drawings"
  for p in examples/pictures/*.png; do
    "${python[@]}" -c "from PIL import Image; import sys; Image.open(sys.argv[1]).convert('RGB').resize((4032, 3024), Image.BICUBIC).save(sys.argv[2], quality=90)" \
      "$p" "$drawings/$(basename "${p%.png}").jpg"
  done
fi
for m in examples/models/demo-clip "$model"; do
  for set in "$photos" "$drawings"; do
    build/glimpse embed -m "$m" --json "$set" > "$work/photos-exact.jsonl"
    build/glimpse embed -m "$m" --json --fast-decode "$set" > "$work/photos-fast.jsonl"
    "${python[@]}" bench/photos.py cosine "$work/photos-exact.jsonl" "$work/photos-fast.jsonl" \
      | sed "s|^{|{\"runtime\": \"fast-decode cosine\", \"model\": \"$(basename "$m")\", \"set\": \"$(basename "$set")\", |" >> "$results"
  done
done
cat "$results"
"${python[@]}" - "$results" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
runs = {}
for r in rows:
    if "pictures_per_s" in r:
        runs.setdefault(r["runtime"], []).append(r["pictures_per_s"])
ort = statistics.median(runs.get("pillow+onnxruntime", [0])) or 1
print("\n| pipeline | pictures/s (median) | spread | vs Pillow + ONNX Runtime |\n|---|---|---|---|")
for name, values in runs.items():
    m = statistics.median(values)
    print(f"| {name} | {m:.2f} | {min(values):.2f}-{max(values):.2f} | {m / ort:.2f}x |")
PY
