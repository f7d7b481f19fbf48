# build.sh — sourced by setup.sh, test.sh and fuzz.sh: how they build.
#
# Ninja starts each library's files while the libraries they link to are still compiling (make waits for them), so
# the 2-core build of every target takes about a fifth less time; a build folder keeps the generator it was made with.
export CMAKE_GENERATOR=${CMAKE_GENERATOR:-Ninja}

# build_quietly BUILD_DIR [CMAKE_BUILD_ARGUMENT...] — builds BUILD_DIR into BUILD_DIR/build.log, showing only its
# warnings and errors ("warning:", "error:": progress lines name files such as error.c). A failed build also shows
# its last lines (a step that fails without the word "error", such as a script of the build, is not hidden) and
# returns 1.
build_quietly() {
  local build=$1
  shift
  local log=$build/build.log
  if ! cmake --build "$build" -j"$(nproc)" "$@" >"$log" 2>&1; then
    grep -E "error|warning" "$log" || true
    echo "the build in $build failed; its last lines ($log):" >&2
    tail -20 "$log" >&2
    return 1
  fi
  grep -E "error:|warning:" "$log" || true
}
