#!/usr/bin/env bash
# setup.sh — installs what glimpse needs from Debian (when missing), for the
# full build with every optional part (GLIMPSE_WITH_*), and builds it into
# build/. Safe to run again: it only does what is left to do.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(build-essential cmake ninja-build pkg-config libopenblas-dev libpng-dev libjpeg62-turbo-dev zlib1g-dev
          libstb-dev libcmocka-dev libutf8proc-dev libcjson-dev libsqlite3-dev libsentencepiece-dev binutils
          libwebp-dev libtiff-dev libheif-dev  # WebP, TIFF, HEIC/AVIF decoding (libheif brings libde265, dav1d, aom)
          python3-pil libheif-examples webp libtiff-tools  # test_image_formats' references: Pillow 9.4, heif-convert, tiffcp
          libmicrohttpd-dev       # glimpse serve's HTTP server
          python3-numpy python3-pytest python3-setuptools python3-pip python3-venv  # python/: its tests, pip install
          python3-distributed python3-faiss  # glimpse.dask (dask-scheduler, dask-worker) and glimpse.faiss
          libfaiss-dev  # glimpse search --faiss (FAISS from C++, search/faiss_engine.cpp; -DGLIMPSE_WITH_FAISS=OFF without)
          clang libclang-rt-14-dev  # clang: the libFuzzer targets
          tmux                    # glimpse chat in a terminal (test_chat_terminal drives a tmux pane)
          fonts-dejavu-core chromium  # explain: the labels' font; the --html page's browser test
          libavformat-dev libavcodec-dev libswscale-dev libavutil-dev ffmpeg)  # video; ffmpeg: test_video's reference
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
# Node.js and npm: the openai client from npm against glimpse serve (test_serve_openai); any install of them
# will do (a machine may have NodeSource's, whose nodejs holds npm)
command -v npm >/dev/null || missing+=(nodejs npm)
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

source scripts/build.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
build_quietly build || exit 1
test -x build/glimpse
