#!/usr/bin/env bash
# test.sh — sets up, builds and runs every test (ctest). Parity tests read
# the reference fixtures from ../shared/fixtures (or $GLIMPSE_FIXTURES) and
# are skipped, saying so, where that folder is absent.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cd build
ctest --output-on-failure -j2 "$@"
