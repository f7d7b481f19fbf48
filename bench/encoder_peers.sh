#!/usr/bin/env bash
# encoder_peers.sh LLAMA_CPP [ROUNDS] [THREADS] — the vision towers llama.cpp runs, glimpse beside llama.cpp's image
# encoder (its clip.cpp, through bench/clip_embed.cpp) on the same full-size random weights, in float32 and in
# float16. llama.cpp runs a vision tower only as a LLaVA's: to its feature layer (the second-to-last), then the
# projector; so each tower is timed in that form on both sides (glimpse's `bench` image stage, which also
# preprocesses its picture; llama.cpp's clip_image_encode on pixels already preprocessed), inside a LLaVA whose
# language model keeps one layer (it is not timed): CLIP ViT-B/32 at 224 px (openai/clip-vit-base-patch32's tower,
# with LLaVA-1.5's projector), CLIP ViT-L/14 at 336 px (llava-1.5-7b's) and SigLIP so400m/14 at 384 px
# (llava-interleave-qwen-0.5b's, which this llama.cpp may refuse: then the table says so).
#
# Each round a new process per side, tower and precision, the sides alternating so that both see the same minutes
# of the machine; each process gives the median of its 3 runs. Prints the median of the processes' medians, the
# fastest and slowest process, GFLOP/s (the work counted as glimpse counts it, the same computation on both sides)
# and the fraction of the FMA loop (bench/roof.c, before the first round and after the last), and the ratio.
# Before anything is timed bench/llama_cpp.sh checks the conversion (bench/llava_gguf.py) on the reference
# fixtures. LLAMA_CPP is a llama.cpp checkout (built in LLAMA_CPP/build; nothing of it enters glimpse). Needs a
# built tree and the published configs; installs python3-numpy and python3-sentencepiece from Debian when missing.
# Raw figures: build/bench/encoders/encoders.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { echo "usage: bench/encoder_peers.sh LLAMA_CPP [ROUNDS] [THREADS]" >&2; exit 2; }
llama=$(cd "$1" && pwd)
rounds=${2:-3}
threads=${3:-2}
work=build/bench/encoders
configs=${GLIMPSE_CONFIGS:-../shared/configs}
fixtures=${GLIMPSE_FIXTURES:-../shared/fixtures}
python=/usr/bin/python3
mkdir -p "$work"
for p in python3-numpy python3-sentencepiece; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="${missing:-} $p"
done
if [ -n "${missing:-}" ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null; fi
. bench/llama_cpp.sh
llama_cpp_setup "$llama" "$work" "$fixtures" >&2

# ---- the towers as LLaVAs of one language-model layer, in both runtimes' forms and both precisions
towers=(clip_b32_224 clip_l14_336 siglip_so400m_384)
declare -A pixels # tower -> the file of random pixels llama.cpp reads (3 × size × size float32)
for tower in "${towers[@]}"; do
  case $tower in
    clip_b32_224) base=llava-hf--llava-1.5-7b-hf vision=openai--clip-vit-base-patch32 ;;
    clip_l14_336) base=llava-hf--llava-1.5-7b-hf vision= ;;
    siglip_so400m_384) base=llava-hf--llava-interleave-qwen-0.5b-hf vision= ;;
  esac
  [ -f "$work/$tower.json" ] || "$python" - "$configs" "$base" "$vision" "$work/$tower.json" <<'PY'
import json, os, sys
configs, base, vision, out = sys.argv[1:]
config = json.load(open(os.path.join(configs, base + ".json")))
config["text_config"]["num_hidden_layers"] = 1
if vision:
    config["vision_config"] = json.load(open(os.path.join(configs, vision + ".json")))["vision_config"]
json.dump(config, open(out, "w"), indent=1)
PY
  for precision in f32 f16; do
    dir=$work/$tower-$precision f16=()
    [ "$precision" = f16 ] && f16=(--f16)
    [ -f "$dir/model.safetensors" ] || build/glimpse-make-model "$work/$tower.json" "$dir" "--$precision" >/dev/null
    [ -f "$dir-gguf/mmproj.gguf" ] ||
      "$python" bench/llava_gguf.py "$dir" "$dir-gguf" "$llama" "${f16[@]}" >/dev/null
  done
  size=$("$python" -c "import json; print(json.load(open('$work/$tower.json'))['vision_config']['image_size'])")
  pixels[$tower]=$work/pixels-$size.f32
  [ -f "${pixels[$tower]}" ] || "$python" -c "import numpy as np; \
np.random.default_rng(1).standard_normal((3, $size, $size)).astype(np.float32).tofile('${pixels[$tower]}')"
done

# ---- alternating rounds
out=$work/encoders.txt
: > "$out"
. bench/roof.sh
roof_build "$work"
roof() { roof_lines "$work" "$threads" >> "$out"; }
roof
refused=()
for round in $(seq "$rounds"); do
  echo "encoder_peers.sh: round $round of $rounds" >&2
  for tower in "${towers[@]}"; do
    [[ " ${refused[*]} " == *" $tower "* ]] && continue
    for precision in f32 f16; do
      dir=$work/$tower-$precision
      status=0
      timeout 600 "$work/clip_embed" "$dir-gguf/mmproj.gguf" "${pixels[$tower]}" /dev/null "$threads" 3 \
        > "$work/clip.out" 2> "$work/clip.err" || status=$?
      if [ "$status" -ne 0 ]; then
        why=$(grep -m1 -iE 'assert|error' "$work/clip.err" | tr -s ' ' | cut -c1-160 || true)
        [ "$status" -eq 124 ] && why="no result within 600 s"
        echo "llama.cpp $precision $tower refused ${why:-(exit status $status, no message)}" >> "$out"
        refused+=("$tower")
        break
      fi
      grep encode_ms "$work/clip.out" | awk '{print $2}' | sort -g | sed -n 2p |
        sed "s/^/llama.cpp $precision $tower $round /" >> "$out"
      build/glimpse bench -m "$dir" --threads "$threads" --runs 3 --tokens 1 --json | grep '"stage": "image"' |
        sed -E "s/.*\"median_ms\": ([0-9.]+).*\"gflop\": ([0-9.]+).*/glimpse $precision $tower $round \1 \2/" >> "$out"
    done
  done
done
roof
# shellcheck disable=SC2154 # (llama_version: set by llama_cpp_setup)
"$python" - "$out" "$llama_version" "$threads" <<'PY'
import collections, platform, statistics, sys
sys.path.insert(0, "bench")
from table import commit, cpu_name, spread
times, work, roofs, refused = collections.defaultdict(list), {}, collections.defaultdict(list), {}
for line in open(sys.argv[1]):
    parts = line.split()
    if parts[0] == "roof":
        roofs[parts[1]].append(float(parts[2]))
    elif parts[3] == "refused":
        refused[parts[2]] = " ".join(parts[4:])
    else:
        times[(parts[0], parts[1], parts[2])].append(float(parts[4]))
        if len(parts) == 6:
            work[parts[2]] = float(parts[5])
fma = statistics.mean(roofs["fma_peak"]) if roofs.get("fma_peak") else None
names = {"clip_b32_224": "CLIP ViT-B/32, 224 px", "clip_l14_336": "CLIP ViT-L/14, 336 px (llava-1.5-7b)",
         "siglip_so400m_384": "SigLIP so400m/14, 384 px (llava-interleave-qwen-0.5b)"}
def cell(values, tower):
    if not values:
        return "–"
    m, fastest, slowest = spread(values)
    rate = f"; {work[tower] / m * 1e3:.0f} GFLOP/s" if tower in work else ""
    share = f", **{1e5 * work[tower] / m / fma:.0f}%**" if fma and tower in work else ""
    return f"{m:.1f} ms ({fastest:.1f}–{slowest:.1f}{rate}{share})"
print(f"Machine: {platform.node()}, {cpu_name()}, {sys.argv[3]} threads; glimpse {commit()}, "
      f"llama.cpp {sys.argv[2]}; FMA loop "
      f"(bench/roof.c, before / after): {' / '.join(f'{v:.0f}' for v in roofs.get('fma_peak', []))} GFLOP/s.\n")
print("| tower (one picture, to LLaVA's feature layer and through its projector; median of processes, "
      "fastest–slowest; GFLOP/s, of the FMA loop) | weights | glimpse | llama.cpp | glimpse ÷ llama.cpp |")
print("|---|---|---|---|---|")
for tower, name in names.items():
    for precision, label in (("f32", "float32"), ("f16", "float16")):
        ours, theirs = times.get(("glimpse", precision, tower)), times.get(("llama.cpp", precision, tower))
        if tower in refused:
            print(f"| {name} | {label} | – | not run: llama.cpp {sys.argv[2]} refuses it ({refused[tower]}) | |")
            break
        ratio = f"**{statistics.median(theirs) / statistics.median(ours):.2f}×**" if ours and theirs else ""
        print(f"| {name} | {label} | {cell(ours, tower)} | {cell(theirs, tower)} | {ratio} |")
PY
