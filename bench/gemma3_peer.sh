#!/usr/bin/env bash
# Gemma 3 270M Q4_K_M (the file scripts/setup fetches) on loomd and on
# llama-server, the same file, one after the other (BENCHMARKS.md §1 and §4):
# `loom bench` drives loomd over gRPC and llama-server over its OpenAI HTTP
# API at 1 and 16 streams. llama.cpp is built outside this repository; pass
# the folder that holds its llama-server binary.
#
#   bench/gemma3_peer.sh LLAMA_CPP_BIN_DIR [LOOM_BUILD_DIR]
#
# Every request: INPUT_LEN random prompt ids, exactly OUTPUT_LEN output tokens
# (ignore_eos), greedy; 2 threads per server; one server runs at a time;
# loomd gets no flag beyond --model but its ports and threads.
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"

LLAMA=${1:?usage: bench/gemma3_peer.sh LLAMA_CPP_BIN_DIR [LOOM_BUILD_DIR]}
BUILD=${2:-build/release}
MODEL=${LOOM_MODEL:-${LOOM_CACHE:-$HOME/.cache/loom}/llm_gemma3/gemma-3-270m-q4_k_m.gguf}
THREADS=2
INPUT_LEN=${INPUT_LEN:-128}
OUTPUT_LEN=${OUTPUT_LEN:-128}
STREAMS=${STREAMS:-1 16}
LOOM_PORT=50788
LOOM_HTTP_PORT=18788
LLAMA_PORT=18789
WORK=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$WORK"' EXIT

machine_header "$MODEL"
echo "input $INPUT_LEN tokens, output $OUTPUT_LEN tokens, greedy, ignore_eos"

# bench NAME BACKEND TARGET CONCURRENCY: loom_bench (bench/lib.sh) at
# INPUT_LEN and OUTPUT_LEN with a seed of its own.
SEED=0
bench() {
  SEED=$((SEED + 1))
  loom_bench "$1" "$2" "$3" "$INPUT_LEN" "$OUTPUT_LEN" "$4" "$SEED"
}

echo "== loomd (--threads=$THREADS ${LOOMD_FLAGS:-})"
# shellcheck disable=SC2086
"$BUILD/server/loomd" --host=127.0.0.1 --port=$LOOM_PORT --http_port=$LOOM_HTTP_PORT \
  --model="$MODEL" --threads=$THREADS ${LOOMD_FLAGS:-} > "$WORK/loomd.log" 2>&1 &
server=$!
wait_for curl -sf http://127.0.0.1:$LOOM_HTTP_PORT/readyz
for conc in $STREAMS; do
  bench "loomd-grpc-$conc" loom 127.0.0.1:$LOOM_PORT "$conc"
done
kill $server && wait $server 2>/dev/null || true

# 16 slots, each with room for one request (llama-server splits -c among them).
CTX=$((16 * (INPUT_LEN + OUTPUT_LEN + 16)))
echo "== llama-server (-t $THREADS -np 16 -c $CTX)"
"$LLAMA/llama-server" -m "$MODEL" -t $THREADS -np 16 -c $CTX --host 127.0.0.1 \
  --port $LLAMA_PORT > "$WORK/llama-server.log" 2>&1 &
server=$!
wait_for curl -sf http://127.0.0.1:$LLAMA_PORT/health
for conc in $STREAMS; do
  bench "llama-server-$conc" openai http://127.0.0.1:$LLAMA_PORT "$conc"
done
kill $server && wait $server 2>/dev/null || true
