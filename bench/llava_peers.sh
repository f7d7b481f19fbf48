#!/usr/bin/env bash
# llava_peers.sh LLAMA_CPP [THREADS] [RUNS] [MODELS...] — glimpse against llama.cpp on the same full-size random
# LLaVA weights (written by glimpse-make-model from the published configs; default llava-interleave-qwen-0.5b and
# llava-1.5-7b), float16 against float16 and glimpse's int8 against llama.cpp's Q8_0: the language model's prompt
# (the picture's rows and 32 tokens, at once), decoding (tokens per second) from a short cache and after that
# prompt (llama-cli, a prompt as long, then 32 steps), and the image encoder alone
# (tower and projector, one picture). Processes alternate, RUNS rounds of each; the table gives medians and the
# spread (fastest–slowest), the machine, the CPU and the commit.
#
# LLAMA_CPP is a llama.cpp checkout (its tools are built in LLAMA_CPP/build; nothing of it enters glimpse; its
# version is its git commit, or LLAMA_CPP_VERSION where the checkout has no .git). The
# weights go to llama.cpp through bench/llava_gguf.py, and before anything is timed bench/llama_cpp.sh checks the
# conversion on the reference fixtures (llava-llama-tiny's image features, both fixtures' greedy text answers).
# Also glimpse's peak resident memory answering one question, beside the weights' file size.
# Needs a built tree, python3-numpy, python3-sentencepiece and time (installed here from Debian when missing), and
# about 40 GB in build/bench/llava for the 7B (its snapshot, GGUF and Q8_0 copies).
set -euo pipefail
cd "$(dirname "$0")/.."
llama=$(cd "$1" && pwd)
threads=${2:-2}
runs=${3:-5}
shift $(($# < 3 ? $# : 3))
models=("$@")
[ ${#models[@]} -gt 0 ] || models=(llava-hf--llava-interleave-qwen-0.5b-hf llava-hf--llava-1.5-7b-hf)
work=build/bench/llava
configs=${GLIMPSE_CONFIGS:-../shared/configs}
fixtures=${GLIMPSE_FIXTURES:-../shared/fixtures}
mkdir -p "$work"
for p in python3-numpy python3-sentencepiece time; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="${missing:-} $p"
done
if [ -n "${missing:-}" ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null; fi
python=/usr/bin/python3

. bench/llama_cpp.sh # llama.cpp's tools and clip_embed built, the conversion checked on the fixtures
llama_cpp_setup "$llama" "$work" "$fixtures"

# ---- the models, in both runtimes' forms
for model in "${models[@]}"; do
  dir=$work/$model
  [ -f "$dir/config.json" ] || build/glimpse-make-model "$configs/$model.json" "$dir" --f16 >/dev/null
  [ -f "$dir-gguf/text.gguf" ] || "$python" bench/llava_gguf.py "$dir" "$dir-gguf" "$llama" --f16 >/dev/null
  [ -f "$dir-gguf/text-q8_0.gguf" ] ||
    "$llama/build/bin/llama-quantize" "$dir-gguf/text.gguf" "$dir-gguf/text-q8_0.gguf" Q8_0 >/dev/null 2>&1
done

# ---- alternating rounds
results=$work/results.jsonl
: > "$results"
. bench/roof.sh
roof_build "$work"
"$work/roof" "$threads" | sed 's/^{/{"side": "roof", /' >> "$results" # the FMA loop's rate and the bandwidth
for round in $(seq 1 "$runs"); do
  for model in "${models[@]}"; do
    dir=$work/$model
    prompt=$("$python" -c "import json,sys; c=json.load(open('$dir/config.json')); v=c['vision_config']; \
n=(v['image_size']//v['patch_size'])**2; print(n + (1 if c.get('vision_feature_select_strategy','default')=='full' \
and v.get('model_type','')=='clip_vision_model' else 0) + 32)")
    for precision in f16 int8; do
      flag=$([ "$precision" = int8 ] && echo --int8 || true)
      build/glimpse bench -m "$dir" $flag --threads "$threads" --runs 3 --tokens 8 --json 2>/dev/null |
        sed "s/^{/{\"side\": \"glimpse\", \"model\": \"$model\", \"precision\": \"$precision\", \"round\": $round, /" \
        >> "$results"
      gguf=$dir-gguf/text$([ "$precision" = int8 ] && echo -q8_0 || true).gguf
      "$llama/build/bin/llama-bench" -m "$gguf" -p "$prompt" -n 32 -t "$threads" -r 1 -o jsonl 2>/dev/null |
        sed "s/^{/{\"side\": \"llama.cpp\", \"model\": \"$model\", \"precision\": \"$precision\", \"round\": $round, /" \
        >> "$results"
      # decoding after the picture: llama-cli reads a prompt as long as glimpse's (a letter a token with the bench
      # models' vocabularies; the report gives the positions each side read) then 33 tokens; its eval time is
      # the 32 steps after the first
      "$llama/build/bin/llama-cli" -m "$gguf" -p "$(head -c "$prompt" /dev/zero | tr '\0' a)" -n 33 --temp 0 \
        -no-cnv --ignore-eos -t "$threads" --no-warmup 2>&1 >/dev/null | "$python" -c "
import json, re, sys
text = sys.stdin.read()
prompt = re.search(r'prompt eval time =.*/ *(\d+) tokens', text)
steps = re.search(r' eval time = *([\d.]+) ms / *(\d+) runs', text)
if prompt and steps:
    print(json.dumps({'side': 'llama.cpp', 'model': '$model', 'precision': '$precision', 'round': $round,
                      'stage': 'decode_after_prompt', 'positions': int(prompt[1]),
                      'ms': float(steps[1]) / int(steps[2])}))
else:
    sys.exit('llava_peers.sh: llama-cli printed no prompt and eval times; its output ends: ' + text[-2000:])
" >> "$results"
    done
    [ -f "$work/pixels-$model.f32" ] || "$python" -c "import json, numpy as np; \
v = json.load(open('$dir/config.json'))['vision_config']; \
np.random.default_rng(1).standard_normal((3, v['image_size'], v['image_size'])).astype(np.float32).tofile('$work/pixels-$model.f32')"
    if timeout 600 "$work/clip_embed" "$dir-gguf/mmproj.gguf" "$work/pixels-$model.f32" /dev/null "$threads" 2 \
        > "$work/clip.out" 2>/dev/null; then
      grep encode_ms "$work/clip.out" | tail -1 |
        sed "s/^encode_ms \(.*\)/{\"side\": \"llama.cpp\", \"model\": \"$model\", \"stage\": \"image\", \"ms\": \1, \"round\": $round}/" \
        >> "$results"
    else
      echo "{\"side\": \"llama.cpp\", \"model\": \"$model\", \"stage\": \"image\", \"unsupported\": true}" >> "$results"
    fi
  done
done
"$work/roof" "$threads" bandwidth | sed 's/^{/{"side": "roof", /' >> "$results"
# peak resident memory of one answer (8 new tokens) against the weights' file
for model in "${models[@]}"; do
  dir=$work/$model
  for precision in f16 int8; do
    flag=$([ "$precision" = int8 ] && echo --int8 || true)
    kb=$( { /usr/bin/time -f "%M" build/glimpse ask -m "$dir" $flag -q "What is in this picture?" --max-tokens 8 \
      examples/pictures/00000.png >/dev/null; } 2>&1 | tail -1)
    echo "{\"side\": \"glimpse\", \"model\": \"$model\", \"precision\": \"$precision\", \"stage\": \"peak_rss\", \"kb\": $kb, \"file_bytes\": $(stat -c %s "$dir/model.safetensors")}" >> "$results"
  done
done
"$python" bench/llava_report.py "$results" "$threads" "$llama_version"
