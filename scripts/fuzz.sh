#!/usr/bin/env bash
# fuzz.sh [SECONDS] — builds the libFuzzer targets with clang, AddressSanitizer
# and UndefinedBehaviorSanitizer in build-fuzz/, and runs each for SECONDS
# (default 30) from a seed corpus: the repository's demo models, pictures and
# configs, plus the reference fixtures when ../shared/fixtures is there.
# GLIMPSE_FUZZ_TARGETS="fuzz_a fuzz_b" builds and runs only those. FAISS is left
# out (no target reads it, and clang's OpenMP is not what Debian's FAISS needs).
# Runs as many targets at once as there are cores. Prints the executions per target. A crash keeps its input under
# build-fuzz/crashes/ and fails; add it to fuzz/regressions/TARGET/ once fixed.
# Built at -O1 -g1 (line tables: the stack traces name file and line) with no
# build type, so that assertions stay on; the products, which no target runs, at -O0 (CMakeLists.txt).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/build.sh
seconds=${1:-30}
fixtures=${GLIMPSE_FIXTURES:-../shared/fixtures}
flags="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -g1 -O1"
CC=clang CXX=clang++ cmake -S . -B build-fuzz -DGLIMPSE_FUZZ=ON -DGLIMPSE_WITH_FAISS=OFF -DCMAKE_BUILD_TYPE= \
  -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=address,undefined" \
  >/dev/null
all_targets="fuzz_safetensors fuzz_config fuzz_tokenizers fuzz_images fuzz_video fuzz_images_stb fuzz_torch_bin
  fuzz_florence2_post"
targets=${GLIMPSE_FUZZ_TARGETS:-$all_targets}
build_quietly build-fuzz --target $targets || exit 1

corpus=build-fuzz/corpus
rm -rf "$corpus" build-fuzz/crashes
mkdir -p build-fuzz/crashes
for t in $all_targets; do mkdir -p "$corpus/$t"; cp fuzz/regressions/$t/* "$corpus/$t/" 2>/dev/null || true; done
# safetensors: the first 64 KiB of each weights file (the header and some data)
for f in examples/models/*/model.safetensors "$fixtures"/*/*.safetensors; do
  [ -f "$f" ] && head -c 65536 "$f" > "$corpus/fuzz_safetensors/$(echo "$f" | tr '/' '_')"
done
# PyTorch .bin: the small files test_torch_bin reads, and each fixture checkpoint's data.pkl (its pickle alone)
if [ -d "$corpus/fuzz_torch_bin" ]; then
  cp tests/data/torch_bin/*.bin "$corpus/fuzz_torch_bin/"
  for f in "$fixtures"/*/pytorch_model.bin; do
    [ -f "$f" ] && unzip -p "$f" '*/data.pkl' 2>/dev/null | head -c 65536 > "$corpus/fuzz_torch_bin/$(echo "$f" | tr '/' '_').pkl"  || true
  done
fi
for f in examples/models/*/*.json tools/configs/*.json "$fixtures"/*/config.json "$fixtures"/*/preprocessor_config.json; do
  [ -f "$f" ] && cp "$f" "$corpus/fuzz_config/$(echo "$f" | tr '/' '_')"
done
cut -f2 examples/pictures/captions.tsv | split -l 1 - "$corpus/fuzz_tokenizers/caption-"
printf 'A caf\xc3\xa9 \xe2\x80\x94 na\xc3\xafve \xf0\x9f\x8e\xa8! \xe6\x97\xa5\xe6\x9c\xac [SEP] don'"'"'t\xff' > "$corpus/fuzz_tokenizers/unicode"
for f in examples/pictures/*.png "$fixtures"/images/*; do
  [ -f "$f" ] && [ "$(stat -c %s "$f")" -le 262144 ] && cp "$f" "$corpus/fuzz_images/"
done
# every format and EXIF layout test_image_formats checks, when Pillow is there to make them
if /usr/bin/python3 tests/data/make_image_cases.py build-fuzz/image_cases 2>/dev/null; then
  find build-fuzz/image_cases -type f ! -name '*.ppm' ! -name '*.tsv' -size -64k -exec cp {} "$corpus/fuzz_images/" \;
  # the simple formats on their own target: stb_image's BMP, GIF, TGA and decode_pnm.c's PNM
  find build-fuzz/image_cases -type f \( -name '*.bmp' -o -name '*.gif' -o -name '*.tga' -o -name '*.pnm' \
    -o -name '*.pgm' -o -name '*.pbm' \) -size -64k -exec cp {} "$corpus/fuzz_images_stb/" \;
fi
# small videos of each container and codec the reader takes, made by the ffmpeg tool
if command -v ffmpeg >/dev/null; then
  make_video() { ffmpeg -nostdin -hide_banner -loglevel error -y -f lavfi -i testsrc=size=16x16:rate=5:duration=0.6 "$@"; }
  make_video -c:v libx264 -preset ultrafast "$corpus/fuzz_video/h264.mp4" || true
  make_video -c:v libx265 -preset ultrafast -x265-params log-level=none "$corpus/fuzz_video/h265.mkv" || true
  make_video -c:v libvpx-vp9 -deadline realtime "$corpus/fuzz_video/vp9.webm" || true
  make_video -c:v libaom-av1 -cpu-used 8 "$corpus/fuzz_video/av1.mkv" || true
  make_video -c:v mjpeg "$corpus/fuzz_video/mjpeg.avi" || true
  make_video -c:v mpeg2video -f mpegts "$corpus/fuzz_video/mpeg2.ts" || true
fi

# fuzz_one TARGET: runs one target, leaving "ok EXECUTIONS" or "crash" in build-fuzz/TARGET.result
fuzz_one() {
  local t=$1 log=build-fuzz/$1.log runs
  if ASAN_OPTIONS=detect_leaks=1 LSAN_OPTIONS=suppressions=$PWD/fuzz/lsan-suppressions.txt ./build-fuzz/fuzz/$t "$corpus/$t" -max_total_time="$seconds" -max_len=65536 \
       -rss_limit_mb=3072 -timeout=20 -print_final_stats=1 -artifact_prefix=build-fuzz/crashes/$t- >"$log" 2>&1; then
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
    echo "ok $runs" > "build-fuzz/$t.result"
  else
    echo "crash" > "build-fuzz/$t.result"
  fi
}
# one target per core at a time (each libFuzzer process runs on one thread)
for t in $targets; do
  while [ "$(jobs -rp | wc -l)" -ge "$(nproc)" ]; do wait -n || true; done
  fuzz_one "$t" &
done
wait
failed=0
for t in $targets; do
  read -r kind runs < "build-fuzz/$t.result"
  if [ "$kind" = ok ]; then
    echo "fuzz: $t: $runs executions in ${seconds}s, no crash"
  else
    echo "fuzz: $t: CRASH — input kept in build-fuzz/crashes/; log build-fuzz/$t.log"
    tail -30 "build-fuzz/$t.log"
    failed=$((failed + 1))
  fi
done
echo "fuzz: $(( $(echo $targets | wc -w) - failed )) passed, $failed failed"
[ "$failed" -eq 0 ]
