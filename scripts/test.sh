#!/usr/bin/env bash
# test.sh — sets up and builds glimpse, then runs every test:
#   1. the whole suite (ctest) on the normal build, including the installed
#      package and the examples built against it;
#   2. the whole suite again built with AddressSanitizer and
#      UndefinedBehaviorSanitizer (the install test builds its examples with
#      the same sanitizer flags);
#   3. each libFuzzer target for a short, fixed time (FUZZ_SECONDS, default 20).
# Parity tests read the reference fixtures from ../shared/fixtures (or
# $GLIMPSE_FIXTURES) and are skipped, saying so, where that folder is absent.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh

echo "== tests"
(cd build && ctest --output-on-failure -j2 "$@")

echo "== tests under AddressSanitizer and UndefinedBehaviorSanitizer"
sanitize="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -O1 -g"
cmake -S . -B build-sanitize -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS="$sanitize" -DCMAKE_CXX_FLAGS="$sanitize" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=address,undefined" \
  >/dev/null
cmake --build build-sanitize -j"$(nproc)" 2>&1 | grep -E "error|warning:" || true
(cd build-sanitize && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  GLIMPSE_EXAMPLE_FLAGS="-fsanitize=address,undefined" ctest --output-on-failure -j2 "$@")

echo "== fuzzing"
scripts/fuzz.sh "${FUZZ_SECONDS:-20}"
