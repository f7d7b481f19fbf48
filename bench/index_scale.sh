#!/bin/sh
# index_scale.sh — the search index at scale: a made-up index of ROWS
# clustered 512-float embeddings (ViT-B/32's size), then a new `glimpse
# search` process's first result (--like a stored picture: no model loaded;
# a text query: the text tower loaded too), warm searches and the top-10
# agreement with the exact float32 search over QUERIES queries.
#   bench/index_scale.sh [BUILD_DIR] [ROWS] [QUERIES] [WORK_DIR]
# Defaults: build, 1000000, 1000, /tmp/glimpse-scale (about 7 GB there:
# the SQLite file and its vector file). Run it on a quiet machine.
set -eu
BUILD=${1:-build}
ROWS=${2:-1000000}
QUERIES=${3:-1000}
WORK=${4:-/tmp/glimpse-scale}
HERE=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$WORK"
if [ ! -d "$WORK/model" ]; then
    "$BUILD/glimpse-make-model" "$HERE/tools/configs/clip-vit-base-patch32-shape.json" "$WORK/model" --seed 1 > /dev/null
fi
DB="$WORK/index-$ROWS.db"
if [ ! -f "$DB.vectors" ]; then
    rm -f "$DB" "$DB.vectors"
    "$BUILD/glimpse-bench-index" make -m "$WORK/model" --db "$DB" --rows "$ROWS"
fi
ls -l "$DB" "$DB.vectors"
milliseconds() { date +%s%N | cut -c1-13; }
new_process() { # label, then the search's arguments; the first run warms the page cache and is not counted
    label=$1
    shift
    "$BUILD/glimpse" search --db "$DB" -k 10 "$@" > /dev/null
    times=""
    for run in 1 2 3 4 5; do
        start=$(milliseconds)
        "$BUILD/glimpse" search --db "$DB" -k 10 "$@" > /dev/null
        times="$times $(($(milliseconds) - start))"
    done
    echo "new process, $label: ms$times"
}
new_process "--like a stored picture (no model)" --like /photos/000000042.jpg
new_process "a text query (text tower loaded)" "a photo of a dog on the beach"
"$BUILD/glimpse-bench-index" run --db "$DB" --queries "$QUERIES"
grep -m1 "model name" /proc/cpuinfo
nproc
