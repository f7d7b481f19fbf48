#!/usr/bin/env bash
# florence2.sh [ROUNDS] [THREADS] — Florence-2-base (DaViT at 768×768 and BART) in glimpse against PyTorch running
# Florence-2's own code (the fixtures' reference setup: transformers 4.40.2 and Microsoft's modeling_florence2.py /
# processing_florence2.py, laid out by bench/florence2_peer_setup.sh), on the same full-size random weights: whole
# `caption` (<CAPTION>), `ocr` (<OCR>) and `detect` (<OD>) calls from the picture's file to the processor's result,
# 3 beams (the checkpoint's) and greedy, every call made to generate exactly TOKENS tokens (default 20: min and max
# new tokens alike, so that random weights cannot stop early); and the first token alone (the picture through DaViT,
# the BART encoder and one decoder step, greedy), with the GFLOP/s that work reaches.
#
# Each round runs a new process per side, in turn: glimpse float32, PyTorch float32, glimpse int8 (quantized at
# load). A process loads the model (its time reported apart), makes one untimed call, then CALLS timed calls of each
# kind, each timed inside the process (glimpse: bench/florence2_call.c on the public API, glimpse_image_load_file +
# glimpse_run_task; PyTorch: bench/florence2_torch.py, Image.open + processor + generate + batch_decode +
# post_process_generation, time.perf_counter). The table (bench/florence2_report.py) gives per call the median over
# the rounds of each process's median, the fastest–slowest process, PyTorch ÷ glimpse, and whether the two sides'
# ids were identical. Before timing, the peer is checked on the fixture florence2-tiny: every case of its
# expected.json must come out with the reference's ids, text and parsed result.
#
# The weights: bench/florence2_torch.py make builds Florence2ForConditionalGeneration from
# ../shared/configs/microsoft--Florence-2-base.json (seeded; the remote code's own initialisation) and saves its
# state_dict as pytorch_model.bin (float32; glimpse reads .bin checkpoints as they are), with the published
# preprocessor config and the hub's tokenizer files (those of the fixture florence2-tiny), in
# build/bench/florence2-base-torch.
#
# Environment: GLIMPSE_FLORENCE2_PEER (the peer, default /work/peers/florence2), GLIMPSE_CONFIGS,
# GLIMPSE_FIXTURES, GLIMPSE_FLORENCE2_PICTURE (default the fixtures' astronaut.png, 512×512), GLIMPSE_FLORENCE2_TOKENS
# (20), GLIMPSE_FLORENCE2_CALLS (timed calls of each kind per process, 1), GLIMPSE_FLORENCE2_BEAMS ("3 1").
# Needs a built tree (build/glimpse, build/libglimpse.so) and the peer. Not part of the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
threads=${2:-2}
peer=${GLIMPSE_FLORENCE2_PEER:-/work/peers/florence2}
configs=${GLIMPSE_CONFIGS:-../shared/configs}
fixtures=${GLIMPSE_FIXTURES:-../shared/fixtures}
picture=${GLIMPSE_FLORENCE2_PICTURE:-$fixtures/images/astronaut.png}
tokens=${GLIMPSE_FLORENCE2_TOKENS:-20}
calls=${GLIMPSE_FLORENCE2_CALLS:-1}
beams=${GLIMPSE_FLORENCE2_BEAMS:-3 1}
work=build/bench
model=$work/florence2-base-torch
export GLIMPSE_FLORENCE2_PEER=$peer
[ -d "$peer/site/florence2" ] || { echo "florence2.sh: no peer in $peer: lay it out with" \
  "bench/florence2_peer_setup.sh $peer TRANSFORMERS_GIT HUB_GIT FLORENCE2_GIT" >&2; exit 1; }
[ -f build/libglimpse.so ] || { echo "florence2.sh: needs a built tree (build/libglimpse.so)" >&2; exit 1; }
mkdir -p "$work"
. bench/peer_env.sh
python=("${peer_python[@]}" -W ignore)

# ---- the peer is the reference
"${python[@]}" bench/florence2_torch.py check "$fixtures/florence2-tiny"

# ---- the weights both sides read, and glimpse's caller
if [ ! -f "$model/pytorch_model.bin" ]; then
  "${python[@]}" bench/florence2_torch.py make "$configs/microsoft--Florence-2-base.json" \
    "$configs/microsoft--Florence-2-base.preprocessor_config.json" "$fixtures/florence2-tiny" "$model"
fi
cc -O2 -I include bench/florence2_call.c -o "$work/florence2_call" -L build -lglimpse -Wl,-rpath,"$PWD/build"
cc -O2 -mavx512f -pthread bench/roof.c -o "$work/roof"

# the first token alone first (its untimed twin warms the process up cheaply), then the whole calls
specs=("<CAPTION>:1:1:0")
for task in "<CAPTION>" "<OCR>" "<OD>"; do
  for b in $beams; do specs+=("$task:$b:$tokens:$tokens"); done
done
# and a long greedy caption: (its time - the first token's) / (steps - 1) is one decoding step's
specs+=("<CAPTION>:1:$((tokens * 5 + 1)):$((tokens * 5 + 1))")

results=$work/florence2.jsonl
: > "$results"
tag() { sed "s/^{/{\"round\": $1, /" >> "$results"; }
"$work/roof" "$threads" | tag 0 # the machine's roofs: a two-thread FMA loop and the read bandwidth
for round in $(seq "$rounds"); do
  "$work/florence2_call" "$model" "$picture" "$threads" "$calls" "${specs[@]}" | tag "$round"
  OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads "${python[@]}" bench/florence2_torch.py time "$model" "$picture" "$threads" "$calls" "${specs[@]}" | tag "$round"
  "$work/florence2_call" "$model" "$picture" "$threads" "$calls" --int8 "${specs[@]}" | tag "$round"
  "$work/roof" "$threads" bandwidth | tag "$round"
  echo "round $round of $rounds done" >&2
done
"${python[@]}" bench/florence2_report.py "$results" "$model/config.json" "$threads" "$picture" "$peer/VERSIONS"
