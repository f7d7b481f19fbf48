# shellcheck shell=bash
# roof.sh — sourced by the benchmark scripts that state fractions of the machine's peak (bench/run.sh,
# towers.sh, encoder_peers.sh, llava_peers.sh): bench/roof.c's FMA, VNNI and AMX tile loops and its
# read-bandwidth and core-to-core probes, built once per script.

# roof_build WORK: compiles bench/roof.c into WORK/roof.
roof_build() { cc -O2 -mavx512f -pthread bench/roof.c -o "$1/roof"; }

# roof_lines WORK THREADS: the peaks on THREADS threads, one "roof STAGE VALUE" line each, the form towers.sh
# and encoder_peers.sh keep beside their timings.
roof_lines() { "$1/roof" "$2" | sed -E 's/.*"stage": "([a-z_0-9]+)".*: ([0-9.]+)}$/roof \1 \2/'; }
