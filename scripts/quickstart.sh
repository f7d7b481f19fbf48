#!/usr/bin/env bash
# quickstart.sh — sets up, builds, and runs glimpse on pictures and a model
# made right here (no download): draws example pictures of coloured shapes,
# writes a CLIP model with the published ViT-B/32 shapes, then classifies and
# ranks the pictures with it.
#
# The model's weights are random until the trained demo model lands, so its
# answers show the pipeline running at full size, not meaningful rankings;
# the fixture parity tests (scripts/test.sh) prove the numbers.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh

pictures=build/examples
model=build/models/clip-vit-b32-random
if [ ! -f "$pictures/captions.tsv" ]; then
  build/glimpse-make-pictures --out "$pictures" --count 6 --seed 2026 >/dev/null
fi
if [ ! -f "$model/model.safetensors" ]; then
  mkdir -p build/models
  build/glimpse-make-model tools/configs/clip-vit-base-patch32-shape.json "$model" >/dev/null
fi

echo "== pictures (true captions)"
cat "$pictures/captions.tsv"
echo
echo "== glimpse classify -m $model -l circle -l square -l triangle $pictures/*.png"
build/glimpse classify -m "$model" -l circle -l square -l triangle "$pictures"/*.png
echo
echo "== glimpse rank -m $model -t 'a red circle' --top 3 $pictures/*.png"
build/glimpse rank -m "$model" -t "a red circle" --top 3 "$pictures"/*.png
