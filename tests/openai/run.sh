#!/usr/bin/env bash
# run.sh GLIMPSE SOURCE_DIR BUILD_DIR — OpenAI's npm client (tests/openai/client.mjs) against glimpse serve with
# the LLaVA and BLIP-2 fixtures. The client is installed from the npm registry into BUILD_DIR/openai-client
# once (the version package.json pins). Skipped (77) without Node.js and npm, without the fixtures, or when
# the registry cannot be reached.
set -euo pipefail
glimpse=$1 source_dir=$2 build_dir=$3
fixtures=${GLIMPSE_FIXTURES:-$source_dir/../shared/fixtures}
command -v node >/dev/null && command -v npm >/dev/null || { echo "Node.js or npm missing: skipped"; exit 77; }
[ -f "$fixtures/llava-llama-tiny/expected.json" ] || { echo "no fixtures at $fixtures: skipped"; exit 77; }
client=$build_dir/openai-client
mkdir -p "$client"
cp "$source_dir/tests/openai/package.json" "$source_dir/tests/openai/client.mjs" "$client/"
if [ ! -d "$client/node_modules/openai" ]; then
  # one quick retry: where the registry cannot be reached (no network, a proxy's certificate) the test is skipped
  # in seconds, not after npm's default minute of retries in each of the suite's passes
  if ! (cd "$client" && npm install --no-audit --no-fund --loglevel=error --fetch-retries=1 \
        --fetch-retry-mintimeout=2000 --fetch-retry-maxtimeout=5000 >npm.log 2>&1); then
    echo "npm install openai failed (is the npm registry reachable?): skipped"; cat "$client/npm.log"; exit 77
  fi
fi
log=$(mktemp)
trap '[ -z "$server" ] || { kill "$server" 2>/dev/null; wait "$server" 2>/dev/null; }; rm -f "$log"' EXIT
"$glimpse" serve -m "$fixtures/llava-llama-tiny" -m "$fixtures/llava-qwen2-tiny" -m "$fixtures/blip2-opt-tiny" \
  --allow-local-images "$fixtures/images" --port 0 --threads 2 2>"$log" &
server=$!
for _ in $(seq 100); do grep -q "listening on" "$log" && break; sleep 0.1; done
url=$(grep -o "http://[^ ]*" "$log" | head -1)
[ -n "$url" ] || { echo "glimpse serve did not start:"; cat "$log"; exit 1; }
node "$client/client.mjs" "${url%/}/v1" "$fixtures"
# the server stops cleanly on SIGTERM (under the sanitizers: without a leak or an error)
kill -TERM "$server"
if ! wait "$server"; then echo "glimpse serve did not stop cleanly:"; cat "$log"; exit 1; fi
server=
