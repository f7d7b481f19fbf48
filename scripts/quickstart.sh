#!/usr/bin/env bash
# quickstart.sh — sets up and builds glimpse, then runs it on the example
# pictures with the bundled demo models (trained here on synthetic pictures
# of coloured shapes, so no download is needed): captions each picture,
# ranks the pictures against texts, and classifies them.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh

pictures=(examples/pictures/*.png)
echo "== the pictures and their true captions"
sed 's/^/  examples\/pictures\//' examples/pictures/captions.tsv
echo
echo "== glimpse caption -m examples/models/demo-blip-caption examples/pictures/*.png"
build/glimpse caption -m examples/models/demo-blip-caption "${pictures[@]}"
echo
echo "== glimpse rank -m examples/models/demo-clip -t 'a yellow triangle' -t 'a red square' --top 2 examples/pictures/*.png"
build/glimpse rank -m examples/models/demo-clip -t "a yellow triangle" -t "a red square" --top 2 "${pictures[@]}"
echo
echo "== glimpse classify -m examples/models/demo-clip --template 'a {}' -l 'green square' -l 'yellow triangle' -l 'red square' ..."
build/glimpse classify -m examples/models/demo-clip --template "a {}" -l "green square" -l "yellow triangle" -l "red square" \
  "${pictures[1]}" "${pictures[2]}" "${pictures[5]}"
