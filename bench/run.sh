#!/usr/bin/env bash
# run.sh [THREADS] [RUNS] [LLAMA_CPP] — measures glimpse and its peers one after another
# in one run, on the same shapes: glimpse (random full-size models made by
# glimpse-make-model from the published configs), PyTorch (Debian's
# python3-torch and python3-torchvision), ONNX Runtime (npm onnxruntime-node
# on ONNX exports of the same PyTorch models), and the machine's roof (an
# OpenBLAS sgemm, memory bandwidth, a plain AVX-512 FMA loop, the int8
# loops: VNNI, and AMX's tiles where the CPU has them, and the bfloat16 loop
# the int8 models' attention runs at). Prints every figure and the ratios.
# Not part of the tests; needs a built tree (scripts/setup.sh) and network
# access to Debian's and npm's registries on first use.
# With LLAMA_CPP (a llama.cpp checkout), also bench/encoder_peers.sh: the vision towers llama.cpp runs, beside its
# image encoder on the same weights (the conversion checked on the fixtures first).
# Ends with bench/photos.sh: pictures per second indexing 12-megapixel photographs.
# Writes build/bench/benchmarks.md: the machine, CPU, commit and the tables (report.py --markdown and
# towers.sh's) in docs/benchmarks.md's form, to replace its current run (the run it replaces goes, as raw
# results, to bench/results/DATE-MACHINE.md).
set -euo pipefail
llama_cpp=${3:+$(cd "$3" && pwd)} # (before the cd below: the path as the caller gave it)
cd "$(dirname "$0")/.."
threads=${1:-2}
runs=${2:-10}
[ -z "$llama_cpp" ] || [ -f "$llama_cpp/examples/llava/clip.cpp" ] ||
  { echo "run.sh: $llama_cpp is not a llama.cpp checkout with its LLaVA image encoder (examples/llava/clip.cpp)" >&2
    exit 2; }
work=build/bench
mkdir -p "$work"
configs=${GLIMPSE_CONFIGS:-../shared/configs}
for p in python3-torch python3-torchvision python3-numpy time; do # time: the BLIP-2 process's peak memory
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="${missing:-} $p"
done
command -v npm >/dev/null || missing="${missing:-} nodejs npm"
if [ -n "${missing:-}" ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null; fi
if [ ! -d "$work/node/node_modules/onnxruntime-node" ]; then
  mkdir -p "$work/node"
  # the CPU library ships inside the npm package; its install script only fetches GPU extras
  (cd "$work/node" && npm install onnxruntime-node@1 --ignore-scripts --no-audit --no-fund >/dev/null)
fi
for model in openai--clip-vit-base-patch32 Salesforce--blip-image-captioning-base google--siglip-base-patch16-224 \
  google--siglip-so400m-patch14-384 nlpconnect--vit-gpt2-image-captioning; do
  [ -f "$work/$model/model.safetensors" ] || build/glimpse-make-model "$configs/$model.json" "$work/$model" >/dev/null
done
# the same captioner stored as float16 (its weight matrices stay 16-bit in memory)
[ -f "$work/blip-base-f16/model.safetensors" ] ||
  build/glimpse-make-model "$configs/Salesforce--blip-image-captioning-base.json" "$work/blip-base-f16" --f16 >/dev/null

. bench/roof.sh
roof_build "$work"
results=$work/results.jsonl
: > "$results"
# A virtual machine's memory speed can drift by tens of percent over minutes: each decoder bench gets the bandwidth
# measured just before and just after it (report.py takes their mean for its step bound), and the
# towers are measured again after the peers (report.py compares the peers with the mean of both).
bandwidth_beside() { "$work/roof" "$threads" bandwidth | sed "s/^{/{\"beside\": \"$1\", /" >> "$results"; }
clip_towers() { # RUNTIME-LABEL
  for batch in 1 8; do
    build/glimpse bench -m "$work/openai--clip-vit-base-patch32" --batch "$batch" --threads "$threads" --runs "$runs" \
      --json | sed "s/^{/{\"runtime\": \"$1\", /" >> "$results"
  done
}
blip() { # RUNTIME-LABEL MODEL [--int8]
  local label=$1 model=$2
  shift 2
  bandwidth_beside "$label"
  build/glimpse bench -m "$work/$model" "$@" --threads "$threads" --runs 3 --json \
    | sed "s/^{/{\"runtime\": \"$label\", /; s/\"stage\": \"vision\"/\"stage\": \"vision_blip_384\"/" >> "$results"
  bandwidth_beside "$label"
}
siglip_towers() { # RUNTIME-LABEL: SigLIP base 224 and so400m 384 vision towers (with the attention-pooling head)
  local model
  for model in base-patch16-224 so400m-patch14-384; do
    build/glimpse bench -m "$work/google--siglip-$model" --threads "$threads" --runs 3 --json | grep '"stage": "vision"' \
      | sed "s/^{/{\"runtime\": \"$1\", /; s/\"stage\": \"vision\"/\"stage\": \"vision_siglip_${model%%-*}_${model##*-}\"/" \
      >> "$results"
  done
}
echo "glimpse..." >&2
clip_towers glimpse
siglip_towers glimpse
blip glimpse Salesforce--blip-image-captioning-base
echo "glimpse, ViT-GPT2 (nlpconnect/vit-gpt2-image-captioning's shapes)..." >&2
vit_gpt2() { # RUNTIME-LABEL [--int8]: a whole caption of 16 tokens, the public call (ViT-B/16 224 px, GPT-2 small)
  local label=$1
  shift
  build/glimpse bench -m "$work/${vit_gpt2_model:-nlpconnect--vit-gpt2-image-captioning}" "$@" --tokens 16 \
    --threads "$threads" --runs 3 --json | grep '"stage": "caption"' \
    | sed "s/^{/{\"runtime\": \"$label\", /; s/\"stage\": \"caption\"/\"stage\": \"caption_vit_gpt2\"/" >> "$results"
}
vit_gpt2 glimpse
# Continuous batching: 16 pictures of 20 tokens in one call, batched and one at a time, greedy and 3 beams,
# in three processes (each alternating the two ways); report.py takes the medians of their rows.
echo "glimpse, captions of 16 pictures batched and one at a time (BLIP-base, ViT-GPT2)..." >&2
for round in 1 2 3; do
  for model in Salesforce--blip-image-captioning-base nlpconnect--vit-gpt2-image-captioning; do
    build/glimpse bench -m "$work/$model" --captions 16 --tokens 20 --threads "$threads" --runs 1 --json \
      | grep '"stage": "captions"' | sed "s/^{/{\"runtime\": \"glimpse\", \"model\": \"$model\", \"round\": $round, /" \
      >> "$results"
  done
done
echo "glimpse, float16 BLIP-base..." >&2
blip glimpse-f16 blip-base-f16
echo "glimpse cold start (rank, 1 image + 1 text, a new process each time, file in the page cache)..." >&2
picture=examples/pictures/00000.png
# The page cache keeps a file in the folios it was first cached in: a checkpoint just written (by
# glimpse-make-model here, by a downloader for users) sits in small ones, and every process then maps
# it page by page. Drop it from the cache, so the first rank reads it from disk through glimpse's own
# mapping, as after a reboot (large folios); that first run is reported apart.
dd if="$work/openai--clip-vit-base-patch32/model.safetensors" iflag=nocache count=0 status=none
start=$(date +%s%N)
build/glimpse rank -m "$work/openai--clip-vit-base-patch32" --threads "$threads" -t "a photo" "$picture" >/dev/null
echo "{\"runtime\": \"glimpse\", \"stage\": \"cold_start_rank_from_disk\", \"batch\": 1, \"threads\": $threads, \"median_ms\": $(( ($(date +%s%N) - start) / 1000000 ))}" >> "$results"
times=()
for _ in $(seq "$runs"); do
  start=$(date +%s%N)
  build/glimpse rank -m "$work/openai--clip-vit-base-patch32" --threads "$threads" -t "a photo" "$picture" >/dev/null
  times+=($(( ($(date +%s%N) - start) / 1000 )))
done
median=$(printf '%s\n' "${times[@]}" | sort -n | awk '{v[NR] = $1} END {print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) / 1000}')
echo "{\"runtime\": \"glimpse\", \"stage\": \"cold_start_rank\", \"batch\": 1, \"threads\": $threads, \"median_ms\": $median}" >> "$results"
echo "glimpse --int8..." >&2
for batch in 1 8; do
  build/glimpse bench -m "$work/openai--clip-vit-base-patch32" --int8 --batch "$batch" --threads "$threads" --runs "$runs" \
    --json | sed 's/^{/{"runtime": "glimpse-int8", /' >> "$results"
done
blip glimpse-int8 Salesforce--blip-image-captioning-base --int8
# BLIP-2 OPT-2.7B as published: float16, two shards, 7.7 GB (written once, streamed). Its vision tower and
# Q-Former, the time to the first token, each decoder step against its bound (decoder_step_bytes over the
# read bandwidth measured beside it), whole captions, in float16 and --int8; then one whole `glimpse caption`
# process, timed, with its peak resident memory beside the size of the mapped files.
blip2=Salesforce--blip2-opt-2.7b
[ -f "$work/$blip2/model.safetensors.index.json" ] ||
  build/glimpse-make-model "$configs/$blip2.json" "$work/$blip2" >/dev/null
blip2_bench() { # RUNTIME-LABEL [--int8]
  local label=$1
  shift
  bandwidth_beside "$label"
  build/glimpse bench -m "$work/$blip2" "$@" --threads "$threads" --runs 3 --tokens 20 --json \
    | sed "s/^{/{\"runtime\": \"$label\", /; s/\"stage\": \"vision\"/\"stage\": \"vision_blip2_224\"/" >> "$results"
  bandwidth_beside "$label"
}
echo "glimpse, BLIP-2 OPT-2.7B float16 and int8..." >&2
blip2_bench glimpse-blip2
blip2_bench glimpse-blip2-int8 --int8
for precision in "" --int8; do
  start=$(date +%s%N)
  peak_kb=$( { /usr/bin/time -f "%M" build/glimpse caption -m "$work/$blip2" $precision --threads "$threads" \
    --max-tokens 20 --min-tokens 20 "$picture" >/dev/null; } 2>&1 | tail -1)
  echo "{\"runtime\": \"glimpse-blip2${precision:+-int8}\", \"stage\": \"caption_process\", \"threads\": $threads," \
    "\"median_ms\": $(( ($(date +%s%N) - start) / 1000000 )), \"peak_rss_bytes\": $((peak_kb * 1024))," \
    "\"mapped_bytes\": $(cat "$work/$blip2"/*.safetensors | wc -c)}" >> "$results"
done
vit_gpt2 glimpse-int8 --int8
echo "glimpse peak resident memory per command (against the model file it maps)..." >&2
memory() { # STAGE MODEL COMMAND-ARGUMENTS...
  local stage=$1 model=$2 kb
  shift 2
  kb=$( { /usr/bin/time -f "%M" build/glimpse "$@" -m "$work/$model" --threads "$threads" >/dev/null; } 2>&1 | tail -1)
  echo "{\"runtime\": \"glimpse\", \"stage\": \"$stage\", \"peak_mb\": $((kb / 1024)), \"file_mb\": $(( $(stat -c %s "$work/$model/model.safetensors") / 1048576 ))}" >> "$results"
}
pictures=(examples/pictures/0000[0-7].png)
memory memory_rank_vit_b32 openai--clip-vit-base-patch32 rank -t "a photo" -t "a drawing" "${pictures[@]}"
memory memory_rank_vit_b32_int8 openai--clip-vit-base-patch32 rank --int8 -t "a photo" -t "a drawing" "${pictures[@]}"
memory memory_caption_blip_base Salesforce--blip-image-captioning-base caption "${pictures[@]}"
memory memory_caption_blip_base_int8 Salesforce--blip-image-captioning-base caption --int8 "${pictures[@]}"
memory memory_caption_blip_base_f16 blip-base-f16 caption "${pictures[@]}"
echo "pytorch..." >&2
. bench/peer_env.sh # OpenBLAS on its best kernels for PyTorch's products
"${peer_python[@]}" bench/peers.py --threads "$threads" --runs "$runs" \
  --onnx-dir "$work/onnx" --vit-gpt2-config "$configs/nlpconnect--vit-gpt2-image-captioning.json" \
  --caption-tokens 16 --blip2 2>/dev/null >> "$results"
echo "onnxruntime..." >&2
NODE_PATH=$work/node/node_modules node bench/ort_bench.js "$work/onnx" "$threads" "$runs" >> "$results"
echo "glimpse again, after the peers..." >&2
clip_towers glimpse-after
siglip_towers glimpse-after
blip glimpse-after Salesforce--blip-image-captioning-base
echo "roof (FMA, VNNI and AMX tile peaks, read bandwidth)..." >&2
"$work/roof" "$threads" >> "$results"
/usr/bin/python3 bench/report.py "$results"
page=$work/benchmarks.md
{
  echo "| | |"
  echo "|---|---|"
  echo "| date | $(date -u +%Y-%m-%d) |"
  echo "| machine | $(nproc) cores of $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)" \
    "(family $(sed -n 's/^cpu family[[:space:]]*: //p' /proc/cpuinfo | head -1)," \
    "model $(sed -n 's/^model[[:space:]]*: //p' /proc/cpuinfo | head -1)), $(free -g | awk '/^Mem:/ {print $2}') GiB |"
  echo "| commit measured | $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo ' (with local changes)') |"
  echo "| command | \`bench/run.sh $threads $runs${llama_cpp:+ LLAMA_CPP}\` |"
  echo
  /usr/bin/python3 bench/report.py "$results" --markdown
} > "$page"
echo "glimpse serve: 16 clients, 10,000 requests; then the batching gain (demo CLIP, then ViT-B/32)..." >&2
/usr/bin/python3 bench/serve_load.py --glimpse build/glimpse --requests 10000 --max-rss-growth 5
/usr/bin/python3 bench/serve_load.py --glimpse build/glimpse --batching --requests 2000
/usr/bin/python3 bench/serve_load.py --glimpse build/glimpse --batching --requests 400 \
  --model "$work/openai--clip-vit-base-patch32"
echo "towers as alternating processes: float32 on FMA and on AMX's tiles, int8, ONNX Runtime (3 rounds)..." >&2
{ echo; bench/towers.sh 3 "$threads"; } | tee -a "$page"
if [ -n "$llama_cpp" ]; then
  echo "vision towers beside llama.cpp's image encoder, float32 and float16 (3 rounds)..." >&2
  { echo; bench/encoder_peers.sh "$llama_cpp" 3 "$threads"; } | tee -a "$page"
fi
if grep -qw avx512f /proc/cpuinfo; then
  echo "the clock each kind of work runs at, and its work a cycle (bench/clock.c)..." >&2
  { echo; echo "The cores' clock under each kind of work and what it does a cycle (\`bench/clock.sh $threads 2\`):"; echo
    bench/clock.sh "$threads" 2 --table || echo "(bench/clock.sh could not run: its message is above)"; } |
    tee -a "$page"
fi
echo "photos: glimpse index of 100 twelve-megapixel JPEGs, exact and --fast-decode, beside Pillow + ONNX Runtime and Pillow + PyTorch..." >&2
bench/photos.sh "$threads" 3 100
echo "the tables for docs/benchmarks.md: $page" >&2
