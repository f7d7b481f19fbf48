#!/bin/sh
# run.sh BUILD_DIR [PYTEST ARGS...] — runs the Python package's tests (pytest) against the libglimpse and
# glimpse program of BUILD_DIR, with Debian's python3 (pytest, numpy, Pillow). Exit 77 (skipped) without them.
build=$(cd "$1" && pwd) || exit 1
shift
python=${GLIMPSE_PYTHON:-/usr/bin/python3}
if ! "$python" -c "import pytest, numpy, PIL" 2>/dev/null; then
  echo "skipped: $python lacks pytest, numpy or Pillow (apt-get install python3-pytest python3-numpy python3-pil)"
  exit 77
fi
export GLIMPSE_BUILD_DIR="$build" GLIMPSE_LIBRARY="$build/libglimpse.so.0" PYTHONDONTWRITEBYTECODE=1
if [ -f "$build/libglimpse-faiss.so.0" ]; then export GLIMPSE_FAISS_LIBRARY="$build/libglimpse-faiss.so.0"; fi
exec "$python" -m pytest -q -p no:cacheprovider "$@"
