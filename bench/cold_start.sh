#!/usr/bin/env bash
# cold_start.sh [RUNS] [THREADS] — what a user who runs one glimpse command meets: for each family, the time
# from starting a new process to its first result (load, map, preprocess, the towers, the first token of a
# caption or answer: --max-tokens 1, greedy) and the process's peak resident memory beside the size of the
# weights it maps. Each command runs RUNS times (default 5) with the weights in the page cache ("warm": a
# second run) and, when this process may drop the page cache (root), RUNS times after dropping it ("cold":
# the first run after a reboot, the weights read from disk). Families run in turn within each round, so that
# all see the same minutes of the machine. Models: random full-size weights made by glimpse-make-model from the
# published configs (GLIMPSE_CONFIGS, default ../shared/configs) into build/bench/CONFIG (bench/run.sh's own,
# where it made them already; CONFIG-f16 for float16); llava-1.5-7b (13.5 GB) only with GLIMPSE_COLD_7B=1. Prints a markdown table (medians, min–max), the machine, CPU and commit.
# Not part of the tests; needs a built tree (scripts/setup.sh) and GNU time (apt install time).
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}
threads=${2:-2}
configs=${GLIMPSE_CONFIGS:-../shared/configs}
work=build/bench
picture=examples/pictures/00000.png
mkdir -p "$work"
[ -x /usr/bin/time ] || { echo "cold_start.sh: needs GNU time (apt install time)" >&2; exit 1; }

# LABEL CONFIG MAKE-OPTIONS COMMAND...: the family's model and the command that gives its first result
declare -a labels names commands shown
add() {
  local label=$1 config=$2 options=$3 name=$2
  shift 3
  [ -z "$options" ] || name=$config-f16
  [ -f "$configs/$config.json" ] || { echo "cold_start.sh: no $configs/$config.json, $label left out" >&2; return; }
  if [ ! -f "$work/$name/model.safetensors" ] && [ ! -f "$work/$name/model.safetensors.index.json" ]; then # (one file, or shards)
    echo "making $name ..." >&2
    # shellcheck disable=SC2086
    build/glimpse-make-model "$configs/$config.json" "$work/$name" $options >/dev/null
  fi
  labels+=("$label")
  names+=("$name")
  commands+=("$(printf '%q ' "$@")")
  local word words=()
  for word in "$@"; do [[ $word == *" "* ]] && word="\"$word\""; words+=("$word"); done
  shown+=("${words[*]}")
}
greedy="--beams 1 --max-tokens 1 --min-tokens 0"
add clip-vit-base-patch32 openai--clip-vit-base-patch32 "" embed
add siglip-base-patch16-224 google--siglip-base-patch16-224 "" embed
add blip-caption-base Salesforce--blip-image-captioning-base "" caption $greedy
add vit-gpt2 nlpconnect--vit-gpt2-image-captioning "" caption $greedy
add florence2-base microsoft--Florence-2-base "" task --task '<CAPTION>' $greedy
add "blip2-opt-2.7b f16" Salesforce--blip2-opt-2.7b "--f16" ask -q "What is this?" $greedy
add "llava-interleave-0.5b f16" llava-hf--llava-interleave-qwen-0.5b-hf "--f16" ask -q "What is this?" $greedy
if [ "${GLIMPSE_COLD_7B:-0}" = 1 ]; then
  add "llava-1.5-7b f16" llava-hf--llava-1.5-7b-hf "--f16" ask -q "What is this?" $greedy
fi

can_drop=0
if [ -w /proc/sys/vm/drop_caches ]; then can_drop=1; fi
results=$work/results.tsv
: > "$results"
# run_one KIND I: family I's command in a new process, "NAME KIND SECONDS PEAK_KB" appended to the results
run_one() {
  local kind=$1 name=${names[$2]} start end peak
  local -a command
  eval "command=(${commands[$2]})"
  if [ "$kind" = cold ]; then sync; echo 3 > /proc/sys/vm/drop_caches; fi
  start=$(date +%s.%N)
  /usr/bin/time -f "%M" -o "$work/peak" build/glimpse "${command[0]}" -m "$work/$name" --threads "$threads" \
    "${command[@]:1}" "$picture" >/dev/null 2>"$work/stderr" ||
    { echo "cold_start.sh: $name failed:" >&2; cat "$work/stderr" >&2; exit 1; }
  end=$(date +%s.%N)
  peak=$(tail -1 "$work/peak")
  printf '%s\t%s\t%s\t%s\n' "$name" "$kind" "$(echo "$end - $start" | bc)" "$peak" >> "$results"
}
for round in $(seq "$runs"); do
  for i in "${!names[@]}"; do
    # cold (the page cache dropped), then warm: the cold run has just read this family's weights into the cache
    # (a warm run after another family's cold run would find them dropped)
    if [ "$can_drop" = 1 ]; then
      run_one cold "$i"
    elif [ "$round" = 1 ]; then
      run_one warming "$i" # (not counted: it puts the weights in the page cache)
    fi
    run_one warm "$i"
  done
  echo "round $round of $runs done" >&2
done

cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
echo "Machine: $(nproc) cores, $(free -g | awk '/^Mem:/ {print $2}') GiB; CPU: $cpu; $threads threads;"\
  "commit $(git rev-parse --short HEAD); $(date -u +%Y-%m-%d); $runs runs per cell (medians, min–max)."
echo
echo "| family (random full-size weights; f16: stored float16) | command | weights | cold: first result | warm: first result | peak resident | resident ÷ weights |"
echo "|---|---|---|---|---|---|---|"
for i in "${!names[@]}"; do
  name=${names[$i]}
  weights=$(du -cb "$work/$name"/*.safetensors | tail -1 | cut -f1)
  stats() { # KIND COLUMN: "median (min–max)" of that column of the rows of NAME and KIND
    awk -F'\t' -v n="$name" -v k="$1" -v c="$2" '$1 == n && $2 == k {print $c}' "$results" | sort -g |
      awk '{v[NR] = $1} END {if (!NR) {print "—"; exit} m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
           printf "%.2f s (%.2f–%.2f)", m, v[1], v[NR]}'
  }
  peak_kb=$(awk -F'\t' -v n="$name" '$1 == n && $2 == "warm" {print $4}' "$results" | sort -g | tail -1)
  cold=$( [ "$can_drop" = 1 ] && stats cold 3 || echo "— (needs root)")
  printf '| %s | `glimpse %s` | %.0f MiB | %s | %s | %.0f MiB | %.2f |\n' "${labels[$i]}" "${shown[$i]}" \
    "$(echo "$weights / 1048576" | bc -l)" "$cold" "$(stats warm 3)" "$(echo "$peak_kb / 1024" | bc -l)" \
    "$(echo "$peak_kb * 1024 / $weights" | bc -l)"
done
