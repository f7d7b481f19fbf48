#!/usr/bin/env bash
# clock.sh [THREADS] [SECONDS] [--table] — the cores' clock under each kind of work (bench/clock.c): idle,
# bench/roof.c's FMA and VNNI loops, and glimpse's float32 and int8 products, each on one thread and then on
# THREADS threads (default 2) at once, SECONDS each (default 2); what each does a second and a cycle, and its
# fraction of its loop both ways. A product's distance from its loop a second is the clock the processor gives it
# times its distance a cycle: the first is the machine's, the second the kernel's. Prints a markdown page (machine,
# CPU, commit, the table; with --table the table alone, as bench/run.sh adds it to its page); needs AVX-512 and
# glimpse built in build/ (cmake --build build).
set -euo pipefail
cd "$(dirname "$0")/.."
threads=${1:-2}
seconds=${2:-2}
table_only=${3:-}
[ -z "$table_only" ] || [ "$table_only" = --table ] ||
  { echo "clock.sh: the third argument is --table or nothing" >&2; exit 2; }
[ -f build/libglimpse_core.a ] ||
  { echo "clock.sh: build glimpse first (cmake -B build && cmake --build build)" >&2; exit 1; }
work=build/bench
mkdir -p "$work"
cc -O2 -I. -Iinclude -Ibuild bench/clock.c build/libglimpse_core.a -lm -pthread -ldl -o "$work/clock"
if [ -n "$table_only" ]; then exec "$work/clock" "$threads" "$seconds"; fi
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
family=$(sed -n 's/^cpu family[[:space:]]*: //p' /proc/cpuinfo | head -1)
model=$(sed -n 's/^model[[:space:]]*: //p' /proc/cpuinfo | head -1)
echo "# $(date -u +%Y-%m-%d): \`bench/clock.sh $threads $seconds\`, $cpu"
echo
echo "Machine: $(nproc) cores, $(free -g | awk '/^Mem:/ {print $2}') GiB; CPU: $cpu (family $family, model $model);"\
  "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown). Each kind of work runs alone on 1 and on $threads"\
  "threads, $seconds s each; the clock is the median of the rates of a chain of dependent additions timed after every"\
  "slice of a millisecond or more. Products: 768 → 768, each thread its own (a pool of one)."
echo
"$work/clock" "$threads" "$seconds"
