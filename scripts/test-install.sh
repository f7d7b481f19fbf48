#!/usr/bin/env bash
# test-install.sh BUILD_DIR — installs glimpse into a scratch prefix, checks
# what it exports, then builds the examples against the installed package
# through pkg-config (shared and static) and through CMake's find_package,
# and runs them on the demo models and example pictures. Run by ctest.
set -euo pipefail
source_dir=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$source_dir/build}" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" >/dev/null
libdir=$(dirname "$(find "$prefix" -name libglimpse.so -print -quit)")
export PKG_CONFIG_PATH=$libdir/pkgconfig
export LD_LIBRARY_PATH=$libdir
checks=0
check() { checks=$((checks + 1)); }

# only the public API is visible, in the shared and the static library
leaked=$(nm -D --defined-only "$libdir/libglimpse.so" | awk '$2 ~ /[TDBR]/ {print $3}' | grep -v '^glimpse_' || true)
[ -z "$leaked" ] || { echo "libglimpse.so exports internal symbols: $leaked"; exit 1; }
leaked=$(nm --defined-only -g "$libdir/libglimpse.a" | awk 'NF == 3 {print $3}' | grep -v '^glimpse_' || true)
[ -z "$leaked" ] || { echo "libglimpse.a exports internal symbols: $leaked"; exit 1; }
readelf -d "$libdir/libglimpse.so" | grep -q 'SONAME.*libglimpse.so.0' || { echo "no versioned SONAME"; exit 1; }
check

# GLIMPSE_EXAMPLE_FLAGS: compiler flags the examples need to link this build
# (ctest sets it to a GLIMPSE_SANITIZE build's -fsanitize option)
flags=${GLIMPSE_EXAMPLE_FLAGS:-}
examples="embed_memory caption_frame rank_images search_index"
for example in $examples; do
  cc -O2 -Wall $flags -o "$work/$example" "$source_dir/examples/$example.c" $(pkg-config --cflags --libs glimpse)
done
cc -O2 $flags -o "$work/rank_images_static" "$source_dir/examples/rank_images.c" $(pkg-config --cflags glimpse) \
  "$libdir/libglimpse.a" $(pkg-config --static --libs glimpse | sed 's/-lglimpse//')
cmake -S "$source_dir/examples" -B "$work/cmake" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_C_FLAGS="$flags" \
  -DCMAKE_EXE_LINKER_FLAGS="$flags" >/dev/null
cmake --build "$work/cmake" >/dev/null
check

clip=$source_dir/examples/models/demo-clip
blip=$source_dir/examples/models/demo-blip-caption
pictures=$source_dir/examples/pictures
# search_index needs the index (GLIMPSE_WITH_INDEX): without it, it must say so
with_index=$("$prefix/bin/glimpse" --version | grep -qw index && echo 1 || echo 0)
for bin in "$work" "$work/cmake"; do
  "$bin/embed_memory" "$clip" "$pictures/00000.png" "a red circle" | grep -q "embedding of a 224x224 image"
  "$bin/caption_frame" "$blip" "$pictures/00001.png" | grep -q "token ids"
  "$bin/rank_images" "$clip" "a red circle" "$pictures"/*.png | grep -c png | grep -q 6
  if [ "$with_index" = 1 ]; then
    "$bin/search_index" "$clip" "$bin/index.db" "$pictures" "a blue square" | grep -q "6 in the index"
  else
    ! "$bin/search_index" "$clip" "$bin/index.db" "$pictures" "a blue square" 2>"$work/error" &&
      grep -q "GLIMPSE_WITH_INDEX=OFF" "$work/error"
  fi
  check
done
"$work/rank_images_static" "$clip" "a red circle" "$pictures"/*.png | grep -c png | grep -q 6
"$work/cmake/rank_images_static" "$clip" "a red circle" "$pictures"/*.png | grep -c png | grep -q 6
check
echo "install: $checks passed, 0 failed"
