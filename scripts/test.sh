#!/usr/bin/env bash
# test.sh — sets up and builds glimpse, then runs every test:
#   1. the whole suite (ctest) on the normal build, including the installed
#      package and the examples built against it;
#   2. the whole suite again built with AddressSanitizer and
#      UndefinedBehaviorSanitizer (GLIMPSE_SANITIZE; the install test builds
#      its examples with the same sanitizers);
#   3. the suite again on the paths CPUs without AVX-512 take: the same
#      build, run with GLIMPSE_NO_AVX512=1, which makes the kernels' run-time
#      choice exactly as on such a CPU (OpenBLAS and plain loops, 16-bit
#      weights widened at load) — only on a CPU that has AVX-512: elsewhere
#      pass 1 already ran every product on those paths. Left out of this
#      pass are the tests whose assertions are about files, processes and
#      packaging, not numbers (no_kernel_tests below);
#   4. the suite of the minimal build (every GLIMPSE_WITH_* part OFF, leaving
#      JPEG, PNG, the stb formats and OpenBLAS; and GLIMPSE_AVX512=OFF, so that
#      a build without the AVX-512 sources compiles and passes, its int8
#      products on the AVX2 kernel), built in build-minimal: the tests of the
#      parts left out are not registered there, and test_features checks what
#      the build says instead;
#   5. the tests of the threaded paths (the pool, decoding ahead of the
#      towers, index updates, caption batching, the server's queue and its
#      batching, videos) built with ThreadSanitizer, which stops at the first
#      data race (the rest of the suite has no threads of its own to check,
#      so only these tests and what they run are built);
#   6. each libFuzzer target for a short, fixed time (FUZZ_SECONDS, default 8:
#      with the regression inputs ctest replays, a smoke test; longer
#      campaigns are scripts/fuzz.sh SECONDS).
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
# suite BUILD_DIR CMAKE_OPTION... — configures and builds BUILD_DIR (only the targets in
# build_targets when that is set), then runs ctest there
build_targets=()
suite() {
  local build=$1
  shift
  cmake -S . -B "$build" "$@" >/dev/null
  local targets=()
  [ ${#build_targets[@]} -gt 0 ] && targets=(--target "${build_targets[@]}")
  if ! cmake --build "$build" -j"$(nproc)" "${targets[@]}" >"$build/build.log" 2>&1; then
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
# the tests pass 3 leaves out: their assertions are about files, processes and packaging (and the *_without_*
# repeats, which this pass makes of everything)
no_kernel_tests='^(test_index_damage|test_make_model|test_install|test_python_dask|test_python_scale|test_serve_load|test_chat_terminal|.*_without_.*|.*_float32_tiles)$'
if grep -qw avx512f /proc/cpuinfo 2>/dev/null; then
  without_avx512() { (cd build && GLIMPSE_NO_AVX512=1 ctest --output-on-failure -j2 -E "$no_kernel_tests" "${ctest_arguments[@]}"); }
  pass "tests without the AVX-512 kernels" without_avx512
else
  echo "== tests without the AVX-512 kernels: skipped, this CPU has none (the first pass ran without them)"
fi
minimal=()
for part in VIDEO HEIF TIFF WEBP INDEX SERVER FAISS; do minimal+=("-DGLIMPSE_WITH_$part=OFF"); done
pass "tests of the minimal build" suite build-minimal -DCMAKE_BUILD_TYPE=Release -DGLIMPSE_AVX512=OFF "${minimal[@]}"
# the threaded tests: those built from C, then those that run the glimpse program
threaded_programs=(test_threads test_search test_index_video test_video test_cli test_cli_inputs test_api
  test_caption_batch test_serve)
threaded_scripts=(test_serve_load test_serve_openai)
threaded_suite() {
  local all=("${threaded_programs[@]}" "${threaded_scripts[@]}")
  (ctest_arguments=(-R "^($(IFS='|'; echo "${all[*]}"))\$" "${ctest_arguments[@]}")
   build_targets=(glimpse glimpse-make-model glimpse-make-pictures "${threaded_programs[@]}")
   suite build-thread-sanitize -DCMAKE_BUILD_TYPE=Debug -DGLIMPSE_SANITIZE=thread)
}
TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" pass "threaded tests under ThreadSanitizer" threaded_suite
pass "fuzzing" scripts/fuzz.sh "${FUZZ_SECONDS:-8}"
