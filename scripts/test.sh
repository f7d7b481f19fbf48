#!/usr/bin/env bash
# test.sh — sets up and builds glimpse, then runs every test:
#   1. the whole suite (ctest) on the normal build, including the installed
#      package and the examples built against it;
#   2. the whole suite again built with AddressSanitizer and
#      UndefinedBehaviorSanitizer (GLIMPSE_SANITIZE; the install test builds
#      its examples with the same sanitizers);
#   3. the suite of the minimal build, built in build-minimal: every
#      GLIMPSE_WITH_* part OFF (leaving JPEG, PNG, the stb formats and
#      OpenBLAS), and GLIMPSE_AVX512=OFF, so that every test of numbers (the
#      kernels against their twins, every parity test, float16 and int8) runs
#      again on the paths CPUs without AVX-512 take: OpenBLAS, plain loops,
#      16-bit weights widened at load, int8 on the AVX2 kernel (test_core's
#      *_without_avx512 twin runs the plain int8 loops in every pass). The
#      tests of the parts left out are not registered there (they check files,
#      processes and protocols, not the kernels' choice), and test_features
#      checks what the build says instead;
#   4. the tests of the threaded paths (the pool, decoding ahead of the
#      towers, index updates, caption batching, the server's queue and its
#      batching, videos) built with ThreadSanitizer, which stops at the first
#      data race (the rest of the suite has no threads of its own to check,
#      so only these tests and what they run are built; test_cli is left
#      out: its commands start the pool and the CLI's pictures decoded ahead
#      (tools/cli_inputs.c), which test_threads and test_cli_inputs drive,
#      and under ThreadSanitizer it took a minute);
#   5. each libFuzzer target for a short, fixed time (FUZZ_SECONDS, default 3:
#      with the regression inputs ctest replays, a smoke test; longer
#      campaigns are scripts/fuzz.sh SECONDS; 3 rather than 5 keeps the whole
#      script under the 15 minutes CI allows on a slow day of a 2-core VM).
# Each pass prints how long it took. Parity tests read the reference fixtures
# from ../shared/fixtures (or $GLIMPSE_FIXTURES) and are skipped, saying so,
# where that folder is absent.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
source scripts/build.sh

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
  build_quietly "$build" "${targets[@]}" || return 1
  (cd "$build" && ctest --output-on-failure -j2 "${ctest_arguments[@]}")
}
ctest_arguments=("$@")

pass "tests" suite build -DCMAKE_BUILD_TYPE=Release
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  pass "tests under AddressSanitizer and UndefinedBehaviorSanitizer" \
  suite build-sanitize -DCMAKE_BUILD_TYPE=Debug -DGLIMPSE_SANITIZE="address;undefined"
minimal=()
for part in VIDEO HEIF TIFF WEBP INDEX SERVER FAISS; do minimal+=("-DGLIMPSE_WITH_$part=OFF"); done
pass "tests of the minimal build, without the AVX-512 kernels" suite build-minimal -DCMAKE_BUILD_TYPE=Release -DGLIMPSE_AVX512=OFF "${minimal[@]}"
# the threaded tests: those built from C, then those that run the glimpse program
threaded_programs=(test_threads test_search test_index_video test_video test_cli_inputs test_api test_caption_batch
  test_serve)
threaded_scripts=(test_serve_load test_serve_openai)
threaded_suite() {
  local all=("${threaded_programs[@]}" "${threaded_scripts[@]}")
  (ctest_arguments=(-R "^($(IFS='|'; echo "${all[*]}"))\$" "${ctest_arguments[@]}")
   build_targets=(glimpse glimpse-make-model glimpse-make-pictures "${threaded_programs[@]}")
   suite build-thread-sanitize -DCMAKE_BUILD_TYPE=Debug -DGLIMPSE_SANITIZE=thread)
}
TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" pass "threaded tests under ThreadSanitizer" threaded_suite
pass "fuzzing" scripts/fuzz.sh "${FUZZ_SECONDS:-3}"
