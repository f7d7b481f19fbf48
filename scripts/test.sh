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
#   5. the tests of the threaded paths (the pool, decoding ahead of the
#      towers, index updates, caption batching, the server's queue and its
#      batching, videos) built with ThreadSanitizer, which stops at the first
#      data race (the rest of the suite has no threads of its own to check);
#   6. each libFuzzer target for a short, fixed time (FUZZ_SECONDS, default 15).
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
threaded='^(test_threads|test_search|test_index_video|test_video|test_cli|test_cli_inputs|test_api|test_caption_batch|test_serve|test_serve_load|test_serve_openai)$'
threaded_suite() {
  (ctest_arguments=(-R "$threaded" "${ctest_arguments[@]}")
   suite build-thread-sanitize -DCMAKE_BUILD_TYPE=Debug -DGLIMPSE_SANITIZE=thread)
}
TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" pass "threaded tests under ThreadSanitizer" threaded_suite
pass "fuzzing" scripts/fuzz.sh "${FUZZ_SECONDS:-15}"
