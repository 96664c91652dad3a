# Shell helpers the bench/ scripts share; source it.

# wait_for COMMAND...: runs the command every half second until it succeeds,
# for up to ${WAIT_FOR_TRIES:-240} tries (two minutes by default).
wait_for() {
  for _ in $(seq "${WAIT_FOR_TRIES:-240}"); do
    if "$@" > /dev/null 2>&1; then return 0; fi
    sleep 0.5
  done
  echo "timed out waiting for: $*" >&2
  return 1
}

# machine_header MODEL: what every benchmark prints first.
machine_header() {
  echo "== machine"
  date -u
  uptime
  lscpu | grep -E "Model name|^CPU\(s\)"
  sha256sum "$1"
}

# loom_bench NAME BACKEND TARGET INPUT_LEN OUTPUT_LEN CONCURRENCY SEED: one
# `loom bench` run ($BUILD/tools/loom) of twice CONCURRENCY requests (4 at
# concurrency 1), all sent at once, at most CONCURRENCY in flight, prompts
# drawn with SEED (a seed per run keeps runs out of each other's prefix
# cache); its JSON and text go to $WORK/NAME.*, and one summary line is printed.
loom_bench() {
  local name=$1 backend=$2 target=$3 in=$4 out=$5 conc=$6 seed=$7
  local count=$((conc * 2))
  ((count < 4)) && count=4
  "$BUILD/tools/loom" bench --backend="$backend" --target="$target" --num_prompts=$count \
    --input_len="$in" --output_len="$out" --range_ratio=0 --max_concurrency="$conc" \
    --seed="$seed" --json="$WORK/$name.json" > "$WORK/$name.txt" 2>&1 ||
    { cat "$WORK/$name.txt"; return 1; }
  python3 - "$WORK/$name.json" "$name" "$conc" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(f"{sys.argv[2]:<24} conc {sys.argv[3]:>3}: {r['completed']:>3} ok {r['failed']} failed, "
      f"{r['total_output_tokens']:>6} out tok, {r['output_throughput']:7.1f} tok/s, "
      f"TTFT p50 {r['median_ttft_ms']:8.1f} ms mean {r['mean_ttft_ms']:8.1f} ms, "
      f"ITL p50 {r['median_itl_ms']:6.2f} ms p99 {r['p99_itl_ms']:7.2f} ms, "
      f"TPOT p50 {r['median_tpot_ms']:6.2f} ms")
PY
}
