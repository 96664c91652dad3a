#!/usr/bin/env bash
# The GPU machine's one script (docs/benchmarks.md, BENCHMARKS.md §3).
#
#   bash .bundle/gpu.sh OUT [--stages a,b]    bundle made by scripts/gpu_bundle
#
# Stages, in order (--stages runs only those named):
#   machine       nvidia-smi, OS, torch, ldd of every binary
#   gpu_tests     the gpu-labelled tests except cuda_executor_test (LOOM_REQUIRE_GPU=1)
#   golden        cuda_executor_test: the CUDA executor against the CPU executor on
#                 the committed tiny golden models (tests/fixtures/tiny)
#   ceilings      gpu_ceilings: copy bandwidth and bf16 GEMM
#   attention_v1  gpu_attention, v1 rows: batch 1/8/64/256 at 1k, 1/8/64 at 4k
#   attention_v2  v2 rows of the same run (checked against v1 before timing)
#   decode        gpu_decode: decode steps of a Llama-3-8B-shaped dummy model at
#                 batch 1/8/64/256 (1k) and 1/8/64 (4k), eager and graphs; prefill
#   hf_peer       transformers generate on the same shapes (hf_generate.py), with
#                 the machine's own LD_LIBRARY_PATH
#   loomd_bench   loomd --device=cuda --load_format=dummy (the default model's
#                 config) serving `loom bench`, 64 streams
# A stage passes when its programs exit 0 and print every RESULT row it
# expects; a missing binary or row fails it. Without a GPU every stage is
# skipped with its reason and the script exits 0, or 1 under LOOM_REQUIRE_GPU=1.
# The whole run is held to LOOM_GPU_LIMIT_S (420) seconds; each stage gets at
# most what is left. Exit status: 0 only when every selected stage passed (or,
# without a GPU, was skipped); 2 for bad arguments.
#
# OUT gets four files (at most 8 come back from the GPU machine): log.txt (all
# output), results.txt (every RESULT row, by stage), summary.txt (stage table
# and figures, written last) and gpu_results.tar.gz (per-stage logs, gtest XML,
# hf.json, bench.json).
set -u -o pipefail
STAGES=(machine gpu_tests golden ceilings attention_v1 attention_v2 decode hf_peer loomd_bench)
usage() { echo "usage: gpu.sh OUT_DIR [--stages $(IFS=,; echo "${STAGES[*]}")]" >&2; exit 2; }

OUT="" SELECTED=""
while [ $# -gt 0 ]; do
  case $1 in
    --stages) [ $# -ge 2 ] || usage; SELECTED=$2; shift 2 ;;
    --stages=*) SELECTED=${1#--stages=}; shift ;;
    -*) usage ;;
    *) [ -z "$OUT" ] || usage; OUT=$1; shift ;;
  esac
done
[ -n "$OUT" ] || usage
[ -n "$SELECTED" ] || SELECTED=$(IFS=,; echo "${STAGES[*]}")
for s in ${SELECTED//,/ }; do
  [[ " ${STAGES[*]} " == *" $s "* ]] || { echo "gpu.sh: unknown stage '$s'" >&2; usage; }
done
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
BUNDLE=$HERE
[ -f "$BUNDLE/manifest.txt" ] || BUNDLE=$REPO/.bundle
LIMIT=${LOOM_GPU_LIMIT_S:-420}

# --- The outer run: holds the inner one to LIMIT, then summarises and packs.
if [ -z "${LOOM_GPU_WORK:-}" ]; then
  mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd)
  rm -f "$OUT"/{log.txt,results.txt,summary.txt,gpu_results.tar.gz}
  WORK=$(mktemp -d "${TMPDIR:-/tmp}/loom-gpu.XXXXXX")
  start=$(date +%s)
  LOOM_GPU_WORK=$WORK LOOM_GPU_DEADLINE=$((start + LIMIT - 15)) LOOM_GPU_OUT=$OUT \
    timeout -k 5 "$LIMIT" bash "${BASH_SOURCE[0]}" "$OUT" --stages "$SELECTED" 2>&1 |
    tee -a "$OUT/log.txt"
  rc=${PIPESTATUS[0]}
  [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ] && echo "gpu.sh: overall limit of $LIMIT s reached" |
    tee -a "$OUT/log.txt" "$WORK/cut_off"
  python3 "$HERE/gpu_summary.py" "$WORK" "${STAGES[*]}" "$SELECTED" "$OUT/results.txt" \
    > "$WORK/summary.txt"
  src=$?
  tar -czf "$OUT/gpu_results.tar.gz" -C "$WORK" .
  cat "$WORK/summary.txt" | tee -a "$OUT/log.txt"
  echo "total $(($(date +%s) - start)) s; work folder $WORK" | tee -a "$OUT/log.txt"
  cp "$WORK/summary.txt" "$OUT/summary.txt"
  [ "$rc" -eq 0 ] && [ "$src" -eq 0 ]
  exit $?
fi

# --- The inner run.
WORK=$LOOM_GPU_WORK
DEADLINE=$LOOM_GPU_DEADLINE
BIN=$BUNDLE/bin
mkdir -p "$WORK/stages"
ORIG_LD_SET=${LD_LIBRARY_PATH+1}
ORIG_LD=${LD_LIBRARY_PATH:-}
export PYTHONUNBUFFERED=1
export LOOM_FIXTURES_DIR="$REPO/tests/fixtures"
REQUIRE=${LOOM_REQUIRE_GPU:-0}

echo "=== gpu.sh $(date -u +%FT%TZ) on $(hostname); bundle $BUNDLE"
[ -f "$BUNDLE/manifest.txt" ] && sed 's/^/    /' "$BUNDLE/manifest.txt"

# CUDA 13 libraries: ldconfig, /usr/local/cuda*, then the nvidia/*/lib folders
# of the machine's Python packages. Each one found puts its folder on the path.
cuda_candidates() {
  ldconfig -p 2>/dev/null | awk -v n="$1" '$1 == n {print $NF}'
  ls /usr/local/cuda*/lib64/"$1" /usr/local/cuda*/targets/*/lib/"$1" 2>/dev/null
  local sp
  for sp in $(python3 -c 'import site, sys
print("\n".join(site.getsitepackages() + [site.getusersitepackages()] + sys.path))' 2>/dev/null |
      sort -u); do
    ls "$sp"/nvidia/*/lib/"$1" "$sp"/nvidia/*/lib64/"$1" 2>/dev/null
  done
}
LIB_PATH=$BUNDLE/lib
for lib in libcudart.so.13 libcublas.so.13 libcublasLt.so.13; do
  found=$(cuda_candidates "$lib" | head -1)
  if [ -n "$found" ]; then
    echo "    $lib: $found"
    dir=$(dirname "$found")
    [[ ":$LIB_PATH:" == *":$dir:"* ]] || LIB_PATH=$LIB_PATH:$dir
  else
    echo "    $lib: NOT FOUND (ldconfig, /usr/local/cuda*, python nvidia/*/lib)"
  fi
done
export LD_LIBRARY_PATH=$LIB_PATH${ORIG_LD:+:$ORIG_LD}

GPU_REASON=""
if ! command -v nvidia-smi >/dev/null; then
  GPU_REASON="no GPU: nvidia-smi is not installed"
elif ! nvidia-smi -L 2>&1 | grep -q '^GPU '; then
  GPU_REASON="no GPU: nvidia-smi -L lists none ($(nvidia-smi -L 2>&1 | head -1))"
fi
if [ -n "$GPU_REASON" ]; then
  echo "    $GPU_REASON"
else
  export LOOM_REQUIRE_GPU=1  # a GPU test that skips here is a failure
fi

fail() { echo "$*" > "$WORK/stages/$STAGE.reason"; return 1; }

need_bins() {  # every binary present and its libraries resolved
  local b
  for b in "$@"; do
    [ -x "$BIN/$b" ] || { echo "missing $BIN/$b" > "$WORK/stages/$STAGE.missing"; return 1; }
    if ldd "$BIN/$b" 2>&1 | grep -q "not found"; then
      echo "$b: $(ldd "$BIN/$b" 2>&1 | grep "not found" | awk '{print $1}' | tr '\n' ' ')not found" \
        > "$WORK/stages/$STAGE.missing"
      return 1
    fi
  done
}

budget() {  # seconds this stage may run: its own limit or what is left
  local left=$((DEADLINE - $(date +%s)))
  [ "$left" -lt "$1" ] && echo "$left" || echo "$1"
}

run_step() {  # run_step LIMIT CMD...: one program of a stage, under its time budget
  local limit rc name a
  limit=$(budget "$1"); shift
  [ "$limit" -ge 5 ] || fail "no time left in the overall $LIMIT s limit" || return 1
  for a in "$@"; do  # the program's name, past env and its settings
    [[ $a == env || $a == -u || $a == LD_LIBRARY_PATH* ]] || { name=$(basename "$a"); break; }
  done
  echo "--- $* (limit ${limit} s)"
  timeout -k 5 "$limit" "$@"
  rc=$?
  [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ] && { fail "$name timed out after $limit s"; return 1; }
  [ "$rc" -eq 0 ] || fail "$name exited $rc"
}

expect_rows() {  # expect_rows ROW...: RESULT rows this stage's log must hold (NAME or NAME@CTX)
  local row missing=()
  for row in "$@"; do
    awk -v row="$row" '$1 == "RESULT" {
        key = $2; for (i = 3; i <= NF; ++i) if ($i ~ /^ctx=/) key = key "@" substr($i, 5)
        if (key == row || $2 == row) found = 1 }
      END { exit !found }' "$WORK/$STAGE.log" || missing+=("$row")
  done
  [ ${#missing[@]} -eq 0 ] || fail "missing RESULT rows: ${missing[*]}"
}

GPU_TESTS=$(sed -n 's/^gpu_tests //p' "$BUNDLE/manifest.txt" 2>/dev/null)
OTHER_TESTS=$(for t in ${GPU_TESTS:-kernels_gpu_test cuda_executor_test}; do
  [ "$t" = cuda_executor_test ] || echo "$t"; done)

bins_machine() {
  sed -n 's/^binaries //p' "$BUNDLE/manifest.txt" 2>/dev/null | grep . ||
    echo kernels_gpu_test cuda_executor_test gpu_ceilings gpu_attention gpu_decode loomd loom
}
stage_machine() {
  nvidia-smi; nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv
  head -4 /etc/os-release; uname -r; ldd --version | head -1
  timeout 60 python3 -c 'import torch, transformers; print("torch", torch.__version__, "cuda", torch.version.cuda,
"transformers", transformers.__version__)'
  local b bad=0
  for b in "$BIN"/*; do
    echo "--- ldd $(basename "$b")"; ldd "$b" | grep -v -E "^\s+(libabsl_|libgrpc|libgpr|libupb)"
    ldd "$b" | grep -q "not found" && bad=1
  done
  [ $bad -eq 0 ] || fail "a binary has unresolved libraries (see ldd above)"
}

bins_gpu_tests() { echo "$OTHER_TESTS"; }
stage_gpu_tests() {
  local t ok=0
  for t in $OTHER_TESTS; do
    run_step 120 "$BIN/$t" --gtest_output=xml:"$WORK/$t.xml" || ok=1
  done
  [ $ok -eq 0 ]
}

bins_golden() { echo cuda_executor_test; }
stage_golden() {
  [ -d "$LOOM_FIXTURES_DIR/tiny" ] || fail "no fixtures at $LOOM_FIXTURES_DIR/tiny" || return 1
  run_step 120 "$BIN/cuda_executor_test" --gtest_output=xml:"$WORK/cuda_executor_test.xml"
}

bins_ceilings() { echo gpu_ceilings; }
stage_ceilings() { run_step 60 "$BIN/gpu_ceilings" && expect_rows ceilings; }

ATTN_ROWS=(b1_c1024 b8_c1024 b64_c1024 b256_c1024 b1_c4096 b8_c4096 b64_c4096)
# gpu_attention measures every v1 case, then v2 on the same data (each v2
# output checked against v1's first), so one run serves both stages: v1
# passes on its rows even when v2 fails, and v2 reads the same log.
attention_run() {
  local log=$WORK/attention.log
  if [ ! -s "$log" ]; then
    run_step 120 "$BIN/gpu_attention" > "$log" 2>&1
    echo $? > "$WORK/attention.rc"
  fi
  cat "$log"
}
stage_attention_v1() {
  attention_run
  expect_rows "${ATTN_ROWS[@]/#/attn_}" || return 1
  if [ "$(cat "$WORK/attention.rc")" -ne 0 ]; then
    grep -q '^RESULT attn_v2 ok=0' "$WORK/attention.log" || fail "gpu_attention failed before its v2 phase" ||
      return 1
    rm -f "$WORK/stages/$STAGE.reason"  # its exit code is v2's verdict, reported by attention_v2
  fi
}
stage_attention_v2() {
  attention_run
  grep -q '^RESULT attn_v2 ok=1' "$WORK/attention.log" ||
    fail "v2 failed: $(grep -m1 -i 'fail\|mismatch' "$WORK/attention.log" | head -c 300)" || return 1
  expect_rows "${ATTN_ROWS[@]/#/attn_v2_}"
}
bins_attention_v1() { echo gpu_attention; }
bins_attention_v2() { echo gpu_attention; }

bins_decode() { echo gpu_decode; }
stage_decode() {
  run_step 150 "$BIN/gpu_decode" &&
    expect_rows decode_b1@1025 decode_b8@1025 decode_b64@1025 decode_b256@1025 \
      decode_b1@4097 decode_b8@4097 decode_b64@4097 prefill graph_speedup
}

bins_hf_peer() { :; }
stage_hf_peer() {
  local env=(env -u LD_LIBRARY_PATH) shown="(unset)"
  [ -n "$ORIG_LD_SET" ] && env=(env LD_LIBRARY_PATH="$ORIG_LD") && shown="'$ORIG_LD'"
  echo "python3 runs with the machine's LD_LIBRARY_PATH: $shown"
  run_step 170 "${env[@]}" python3 "$HERE/hf_generate.py" --json "$WORK/hf.json" &&
    expect_rows hf_b1@1025 hf_b8@1025 hf_b64@1025 hf_b256@1025 hf_b1@4097 hf_b8@4097 hf_b64@4097
}

bins_loomd_bench() { echo loomd loom; }
stage_loomd_bench() {
  local model=$REPO/bench/models/smollm2-135m-dummy port=50777 http=18777 pid rc limit
  limit=$(budget 120)
  [ "$limit" -ge 30 ] || fail "no time left in the overall $LIMIT s limit" || return 1
  timeout -k 5 "$limit" "$BIN/loomd" --model="$model" --load_format=dummy --device=cuda \
    --host=127.0.0.1 --port=$port --http_port=$http --kv_cache_bytes=$((16 << 30)) \
    --drain_timeout=5s > "$WORK/loomd.log" 2>&1 &
  pid=$!
  local serving=0
  for _ in $(seq 60); do
    "$BIN/loom" health --target=127.0.0.1:$port --timeout=2s >/dev/null 2>&1 && serving=1 && break
    kill -0 $pid 2>/dev/null || break
    sleep 1
  done
  if [ $serving -eq 0 ]; then
    kill -TERM $pid 2>/dev/null; wait $pid; tail -20 "$WORK/loomd.log"
    fail "loomd did not report SERVING within 60 s (loomd.log)"
    return 1
  fi
  run_step 90 "$BIN/loom" bench --target=127.0.0.1:$port --num_prompts=256 --max_concurrency=64 \
    --input_len=512 --output_len=128 --range_ratio=0 --seed=0 --json="$WORK/bench.json"
  rc=$?
  kill -TERM $pid 2>/dev/null
  wait $pid
  local drc=$?
  tail -20 "$WORK/loomd.log"
  [ $rc -eq 0 ] || return 1
  [ $drc -eq 0 ] || fail "loomd exited $drc after SIGTERM" || return 1
  python3 -c 'import json, sys
r = json.load(open(sys.argv[1]))
print("RESULT loomd_bench completed=%d failed=%d output_tokens_per_s=%.1f median_ttft_ms=%.1f"
      " median_tpot_ms=%.2f" % (r["completed"], r["failed"], r["output_throughput"],
      r["median_ttft_ms"], r["median_tpot_ms"]))' "$WORK/bench.json" &&
    expect_rows loomd_bench
}

for STAGE in ${SELECTED//,/ }; do
  t0=$(date +%s)
  echo; echo "=== $STAGE ($((t0 - DEADLINE + LIMIT - 15)) s)"
  touch "$WORK/stages/$STAGE.started"
  status=passed
  # shellcheck disable=SC2046  # one binary name a word
  if ! need_bins $("bins_$STAGE"); then
    status=missing
  elif [ -n "$GPU_REASON" ]; then
    status=skipped
    echo "$GPU_REASON" > "$WORK/stages/$STAGE.reason"
  else
    # Straight to the file, so that the stage's checks read all it printed.
    "stage_$STAGE" > "$WORK/$STAGE.log" 2>&1 || status=failed
    cat "$WORK/$STAGE.log"
  fi
  echo "$status $(($(date +%s) - t0))" > "$WORK/stages/$STAGE.status"
  echo "=== $STAGE: $status $(cat "$WORK/stages/$STAGE".{missing,reason} 2>/dev/null)"
done
if [ -n "$GPU_REASON" ] && [ "$REQUIRE" = 1 ]; then
  echo "LOOM_REQUIRE_GPU=1 and $GPU_REASON" | tee "$WORK/require_gpu_failed"
fi
exit 0
