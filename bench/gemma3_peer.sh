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

echo "== machine"
date -u
lscpu | grep -E "Model name|^CPU\(s\)"
sha256sum "$MODEL"
echo "input $INPUT_LEN tokens, output $OUTPUT_LEN tokens, greedy, ignore_eos"

# bench NAME BACKEND TARGET CONCURRENCY: twice the concurrency in requests
# (4 at concurrency 1), all sent at once, at most CONCURRENCY in flight, with
# a prompt seed per run so that no run meets an earlier one's prefix cache.
SEED=0
bench() {
  local name=$1 backend=$2 target=$3 conc=$4
  local count=$((conc * 2))
  ((count < 4)) && count=4
  SEED=$((SEED + 1))
  "$BUILD/tools/loom" bench --backend="$backend" --target="$target" --num_prompts=$count \
    --input_len="$INPUT_LEN" --output_len="$OUTPUT_LEN" --range_ratio=0 \
    --max_concurrency="$conc" --seed=$SEED --json="$WORK/$name.json" > "$WORK/$name.txt" 2>&1 ||
    { cat "$WORK/$name.txt"; return 1; }
  python3 - "$WORK/$name.json" "$name" "$conc" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(f"{sys.argv[2]:<24} conc {sys.argv[3]:>3}: {r['completed']:>3} ok {r['failed']} failed, "
      f"{r['total_output_tokens']:>6} out tok, {r['output_throughput']:7.1f} tok/s, "
      f"TTFT p50 {r['median_ttft_ms']:8.1f} ms, ITL p50 {r['median_itl_ms']:6.2f} ms "
      f"p99 {r['p99_itl_ms']:6.2f} ms, TPOT p50 {r['median_tpot_ms']:6.2f} ms")
PY
}

echo "== loomd (--threads=$THREADS)"
"$BUILD/server/loomd" --host=127.0.0.1 --port=$LOOM_PORT --http_port=$LOOM_HTTP_PORT \
  --model="$MODEL" --threads=$THREADS > "$WORK/loomd.log" 2>&1 &
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
