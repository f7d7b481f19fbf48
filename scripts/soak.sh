#!/usr/bin/env bash
# soak.sh — one `glimpse index` over a library of COUNT files (default 10,000) mixing good pictures (PNG,
# JPEG, WebP, TIFF, some with names that are not UTF-8), videos, and hostile files (truncated pictures and
# videos, lying headers, pictures claiming 100,000 × 100,000 pixels, empty files, FIFOs, symbolic-link loops,
# a directory named like a picture), run with the AddressSanitizer build. It passes when the run ends without
# a crash, a hang or a leak; every good picture and video is in the index; every bad file is reported on
# stderr with a reason; and a second run finds nothing to do. The numbers are printed at the end.
#   scripts/soak.sh [BUILD_DIR] [COUNT] [WORK_DIR]
# Defaults: build-sanitize (configured with -DGLIMPSE_SANITIZE="address;undefined"; built here if missing),
# 10000, /tmp/glimpse-soak. Not part of the test suite (it takes about 10 minutes on 2 cores).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-sanitize}
count=${2:-10000}
work=${3:-/tmp/glimpse-soak}
if [ ! -x "$build/glimpse" ]; then
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Debug -DGLIMPSE_SANITIZE="address;undefined" >/dev/null
  cmake --build "$build" -j"$(nproc)" --target glimpse glimpse-make-pictures >/dev/null
fi
rm -rf "$work"
mkdir -p "$work/library"
library=$work/library
videos=$((count / 500 > 0 ? count / 500 : 1)) # 20 videos in 10,000 files
hostile=$((count / 10))           # 1,000 hostile files
good=$((count - videos - hostile)) # the rest: good pictures
"$build/glimpse-make-pictures" --out "$work/drawn" --count "$good" --seed 7 >/dev/null

# good pictures in four formats (every tenth with a name that is not UTF-8), then hostile files
/usr/bin/python3 - "$work/drawn" "$library" "$good" "$hostile" <<'PY'
import os, random, sys
from PIL import Image
drawn, library, good, hostile = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
random.seed(7)
formats = [("png", "PNG"), ("jpg", "JPEG"), ("webp", "WEBP"), ("tif", "TIFF")]
os.makedirs(os.path.join(library, "good"), exist_ok=True)
sources = []
for i in range(good):
    extension, kind = formats[i % 4]
    folder = os.path.join(library, "good", f"{i // 1000:02d}").encode()
    os.makedirs(folder, exist_ok=True)
    name = f"{i:05d}.{extension}".encode()
    if i % 10 == 9:
        name = b"\xff\xfe-" + name  # not UTF-8
    path = os.path.join(folder, name)
    with Image.open(os.path.join(drawn, f"{i:05d}.png")) as picture:
        picture.save(path, kind)
    if i < 64:
        sources.append(path)
bad = os.path.join(library, "bad")
os.makedirs(bad, exist_ok=True)
made = 0
def write(name, data):
    global made
    with open(os.path.join(bad, name), "wb") as f:
        f.write(data)
    made += 1
kinds = ["truncated", "lying", "huge", "empty", "noise"]
while made < hostile - 8:
    source = random.choice(sources)
    data = open(source, "rb").read()
    extension = os.path.splitext(source)[1].decode()
    kind = kinds[made % len(kinds)]
    if kind == "truncated":
        # cut within the first three quarters: a PNG cut only in its last chunk (IEND) still holds the whole
        # picture, which Pillow reads, and so does glimpse
        write(f"cut-{made}{extension}", data[:random.randint(1, len(data) * 3 // 4)])
    elif kind == "lying":  # the right magic, then the bytes of another format or noise
        head = {".png": b"\x89PNG\r\n\x1a\n", ".jpg": b"\xff\xd8\xff\xe0", ".webp": b"RIFF\x00\x01\x00\x00WEBPVP8 ",
                ".tif": b"II*\x00"}[extension]
        write(f"lying-{made}{extension}", head + random.randbytes(random.randint(0, 4096)))
    elif kind == "huge":  # a PNG header claiming 100,000 x 100,000 pixels, then a cut IDAT
        import struct, zlib
        ihdr = struct.pack(">IIBBBBB", 100000, 100000, 8, 2, 0, 0, 0)
        chunk = lambda tag, body: struct.pack(">I", len(body)) + tag + body + struct.pack(">I", zlib.crc32(tag + body))
        write(f"huge-{made}.png", b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", random.randbytes(64)))
    elif kind == "empty":
        write(f"empty-{made}{extension}", b"")
    else:
        write(f"noise-{made}{extension}", random.randbytes(random.randint(1, 65536)))
# the special files: FIFOs, symbolic-link loops, a directory named like a picture
for i in range(3):
    os.mkfifo(os.path.join(bad, f"fifo-{i}.jpg"))
os.symlink("loop-b.jpg", os.path.join(bad, "loop-a.jpg"))
os.symlink("loop-a.jpg", os.path.join(bad, "loop-b.jpg"))
os.symlink(".", os.path.join(bad, "self"))  # a folder that contains itself
os.makedirs(os.path.join(bad, "folder.jpg"))
os.symlink("/nonexistent/target.png", os.path.join(bad, "dangling.png"))
PY

# videos: good ones, and as many cut in the middle (the hostile count includes them)
mkdir -p "$library/videos"
for i in $(seq 1 "$videos"); do
  ffmpeg -loglevel error -f lavfi -i "testsrc=size=160x120:rate=10:duration=3" -c:v libx264 -pix_fmt yuv420p \
    "$library/videos/clip-$i.mp4"
done
for i in $(seq 1 $((videos < 5 ? videos : 5))); do
  size=$(stat -c %s "$library/videos/clip-$i.mp4")
  head -c $((size / 2)) "$library/videos/clip-$i.mp4" > "$library/bad/cut-video-$i.mp4"
done
files=$(find "$library" -type f | wc -l)
echo "soak: $files files in $library ($good good pictures, $videos videos, the rest hostile), plus FIFOs and links"

start=$SECONDS
status=0
ASAN_OPTIONS=detect_leaks=1 timeout 3600 "$build/glimpse" index -m examples/models/demo-clip --db "$work/soak.db" "$library" \
  >"$work/index.out" 2>"$work/index.err" || status=$?
seconds=$((SECONDS - start))
indexed=$("$build/glimpse" index --db "$work/soak.db" --stats --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["images"])')
reported=$(grep -c "^glimpse: .*/bad/" "$work/index.err" || true)
expected_bad=$(find "$library/bad" -mindepth 1 -maxdepth 1 | wc -l)
echo "soak: exit status $status in $seconds s; $indexed files indexed of $((good + videos)) good; $reported of" \
     "$expected_bad bad entries reported"
fail=0
grep -q "ERROR: \(AddressSanitizer\|LeakSanitizer\)\|runtime error:" "$work/index.err" && { echo "soak: a sanitizer spoke"; fail=1; }
[ "$status" -eq 1 ] || { echo "soak: exit status $status, expected 1 (bad files were skipped)"; fail=1; }
[ "$indexed" -eq $((good + videos)) ] || { echo "soak: not every good file was indexed"; fail=1; }
[ "$reported" -ge $((expected_bad - 2)) ] || { echo "soak: bad files went unreported"; fail=1; }
# a second run: nothing new, nothing lost
ASAN_OPTIONS=detect_leaks=1 "$build/glimpse" index -m examples/models/demo-clip --db "$work/soak.db" "$library" \
  >"$work/again.out" 2>"$work/again.err" || true
grep -q "ERROR: \(AddressSanitizer\|LeakSanitizer\)" "$work/again.err" && { echo "soak: a sanitizer spoke (again)"; fail=1; }
echo "soak: second run: $(tail -1 "$work/again.out")"
[ "$fail" -eq 0 ] || { echo "soak: FAILED (logs in $work)"; exit 1; }
echo "soak: passed (logs in $work)"
