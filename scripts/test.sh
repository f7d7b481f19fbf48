#!/usr/bin/env bash
# test.sh — sets up and builds glimpse, then runs every test:
#   1. the whole suite (ctest) on the normal build, including the installed
#      package and the examples built against it;
#   2. the whole suite again built with AddressSanitizer and
#      UndefinedBehaviorSanitizer (GLIMPSE_SANITIZE; the install test builds
#      its examples with the same sanitizers);
#   3. the whole suite again built without the AVX-512 kernels
#      (GLIMPSE_AVX512=OFF), as on CPUs that lack them — only on a CPU that
#      has them: elsewhere pass 1 already ran every product on the paths
#      without them, and the pass would repeat it minute for minute;
#   4. the suite of the minimal build (every GLIMPSE_WITH_* part OFF: JPEG,
#      PNG and the stb formats, OpenBLAS), built in build-minimal: the
#      tests of the parts left out are not registered there, and
#      test_features checks what the build says instead;
#   5. each libFuzzer target for a short, fixed time (FUZZ_SECONDS, default 20).
# Each pass prints how long it took. Parity tests read the reference fixtures
# from ../shared/fixtures (or $GLIMPSE_FIXTURES) and are skipped, saying so,
# where that folder is absent.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh

# pass NAME COMMAND... — runs one pass and says how long it took
pass() {
  local name=$1 start=$SECONDS
  shift
  echo "== $name"
  "$@"
  echo "== $name: $((SECONDS - start)) s"
}
# suite BUILD_DIR CMAKE_OPTION... — configures and builds BUILD_DIR, then runs ctest there
suite() {
  local build=$1
  shift
  cmake -S . -B "$build" "$@" >/dev/null
  if ! cmake --build "$build" -j"$(nproc)" >"$build/build.log" 2>&1; then
    grep -E "error|warning:" "$build/build.log" || true
    echo "the build in $build failed; its last lines:" >&2
    tail -20 "$build/build.log" >&2
    return 1
  fi
  grep -E "error:|warning:" "$build/build.log" || true
  (cd "$build" && ctest --output-on-failure -j2 "${ctest_arguments[@]}")
}
ctest_arguments=("$@")

pass "tests" suite build -DCMAKE_BUILD_TYPE=Release
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  pass "tests under AddressSanitizer and UndefinedBehaviorSanitizer" \
  suite build-sanitize -DCMAKE_BUILD_TYPE=Debug -DGLIMPSE_SANITIZE="address;undefined"
if grep -qw avx512f /proc/cpuinfo 2>/dev/null; then
  pass "tests without the AVX-512 kernels" suite build-plain -DCMAKE_BUILD_TYPE=Release -DGLIMPSE_AVX512=OFF
else
  echo "== tests without the AVX-512 kernels: skipped, this CPU has none (the first pass ran without them)"
fi
minimal=()
for part in VIDEO HEIF TIFF WEBP INDEX SERVER FAISS; do minimal+=("-DGLIMPSE_WITH_$part=OFF"); done
pass "tests of the minimal build" suite build-minimal -DCMAKE_BUILD_TYPE=Release "${minimal[@]}"
pass "fuzzing" scripts/fuzz.sh "${FUZZ_SECONDS:-20}"
