#!/bin/sh
# merge-archives.sh OUTPUT.a INPUT.a... — makes the installable libglimpse.a:
# one relocatable object linked from every module archive, in which only the
# public glimpse_* symbols stay global (internal names such as pool_create
# cannot clash with an application's), archived alone.
set -eu
output=$1
shift
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
ld -r -o "$work/glimpse.o" --whole-archive "$@" --no-whole-archive
objcopy -w --keep-global-symbol='glimpse_*' "$work/glimpse.o"
rm -f "$output"
ar rcs "$output" "$work/glimpse.o"
