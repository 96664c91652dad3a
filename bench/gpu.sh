#!/usr/bin/env bash
# The GPU machine's one script (docs/benchmarks.md, BENCHMARKS.md §3): prints
# the machine, runs the gpu tests, measures the device ceilings, paged decode
# attention, decode steps and prefill of a Llama-3-8B-shaped dummy model, and
# transformers generate on the same shapes; ends with a summary table.
#
#   bash .bundle/gpu.sh OUT    binaries built by scripts/gpu_bundle (normal use)
#   bash bench/gpu.sh OUT      from a source tree: builds what it can with nvcc
#
# Files in OUT: log.txt (everything), results.txt (RESULT lines), summary.txt,
# kernels_gpu_test.xml, cuda_executor_test.xml, hf.json.
set -u -o pipefail
OUT=${1:?usage: gpu.sh OUT_DIR}
mkdir -p "$OUT"
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
export LD_LIBRARY_PATH="$HERE/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export LOOM_REQUIRE_GPU=1
export LOOM_FIXTURES_DIR="$REPO/tests/fixtures"
export PYTHONUNBUFFERED=1
exec > >(tee -a "$OUT/log.txt") 2>&1
BIN="$HERE/bin"
start=$SECONDS
stage() { echo; echo "=== $* ($((SECONDS - start)) s)"; }

stage machine
date -u
nvidia-smi || true
cat /etc/os-release | head -4
nvcc --version 2>/dev/null | tail -2 || true
python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)' || true
if [ -d "$HERE/lib-compat" ] && ldd "$BIN/gpu_decode" 2>&1 | grep -q "GLIBCXX.*not found"; then
  echo "this machine's libstdc++ is older than the build's: using the bundled one"
  export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$HERE/lib-compat"
fi
for b in "$BIN"/*; do [ -x "$b" ] && { echo "--- ldd $(basename "$b")"; ldd "$b"; }; done

# Carried binaries that cannot start here (missing library, older glibc) are
# replaced by what nvcc can build from source without absl/gtest.
if [ ! -x "$BIN/gpu_ceilings" ] || ldd "$BIN/gpu_ceilings" 2>&1 | grep -q "not found"; then
  stage "fallback build with nvcc (carried binaries unusable)"
  BIN="$OUT/../gpu_fallback_bin"
  mkdir -p "$BIN"
  K="$REPO/kernels/cuda"
  for prog in gpu_ceilings gpu_attention; do
    nvcc -O3 -std=c++17 -arch=sm_90 -I"$REPO" -o "$BIN/$prog" "$REPO/bench/$prog.cu" \
      "$K/attention.cu" "$K/random_fill.cu" "$K/gemm.cu" -lcublasLt -lcublas || echo "build of $prog failed"
  done
fi

run() {  # run NAME TIMEOUT CMD...: keeps going after a failure, records it
  local name=$1 limit=$2; shift 2
  stage "$name"
  timeout "$limit" "$@"
  local rc=$?
  echo "=== $name: exit $rc"
  [ $rc -eq 0 ] || echo "FAILED $name exit=$rc" >> "$OUT/failures.txt"
}

[ -x "$BIN/kernels_gpu_test" ] && run kernels_gpu_test 90 "$BIN/kernels_gpu_test" --gtest_output=xml:"$OUT/kernels_gpu_test.xml"
[ -x "$BIN/cuda_executor_test" ] && run cuda_executor_test 60 "$BIN/cuda_executor_test" --gtest_output=xml:"$OUT/cuda_executor_test.xml"
run gpu_ceilings 30 "$BIN/gpu_ceilings"
run gpu_attention 60 "$BIN/gpu_attention"
[ -x "$BIN/gpu_decode" ] && run gpu_decode 120 "$BIN/gpu_decode"
HF="$HERE/hf_generate.py"; [ -f "$HF" ] || HF="$REPO/bench/hf_generate.py"
run hf_generate 180 python3 "$HF" --json "$OUT/hf.json"

stage summary
grep -h '^RESULT' "$OUT/log.txt" | sed 's/^RESULT //' > "$OUT/results.txt"
python3 - "$OUT/results.txt" <<'PY' | tee "$OUT/summary.txt"
import sys
rows = {}
for line in open(sys.argv[1]):
    name, *kv = line.split()
    rows.setdefault(name, {}).update(dict(x.split("=", 1) for x in kv if "=" in x))
def get(name, key, fmt="{:.2f}", scale=1.0):
    v = rows.get(name, {}).get(key)
    return fmt.format(float(v) * scale) if v is not None else "-"
print(f"Ceilings: copy {get('ceilings', 'copy_bytes_per_s', '{:.2f}', 1e-12)} TB/s, "
      f"bf16 GEMM {get('ceilings', 'gemm_bf16_flops', '{:.0f}', 1e-12)} TFLOP/s")
print("\nPaged decode attention (32 q / 8 kv heads, head_dim 128, block 16, bf16)")
print("| batch | context | us | TB/s | of copy |\n|---|---|---|---|---|")
for ctx in (1024, 4096):
    for b in (1, 8, 64, 256):
        n = f"attn_b{b}_c{ctx}"
        print(f"| {b} | {ctx} | {get(n, 'us', '{:.1f}')} | {get(n, 'bytes_per_s', '{:.2f}', 1e-12)} "
              f"| {get(n, 'of_copy')} |")
print("\nDecode step, Llama-3-8B shape, bf16, 1k context (HF = transformers generate)")
print("| batch | graph ms | eager ms | roofline ms | of roofline | Loom tok/s | HF tok/s | Loom/HF |")
print("|---|---|---|---|---|---|---|---|")
for b in (1, 8, 64, 256):
    d, h = f"decode_b{b}", f"hf_b{b}"
    lt, ht = rows.get(d, {}).get("tokens_per_s"), rows.get(h, {}).get("tokens_per_s")
    ratio = f"{float(lt) / float(ht):.1f}" if lt and ht else "-"
    print(f"| {b} | {get(d, 'graph_ms')} | {get(d, 'eager_ms')} | {get(d, 'roofline_ms')} | "
          f"{get(d, 'of_roofline')} | {get(d, 'tokens_per_s', '{:.0f}')} | "
          f"{get(h, 'tokens_per_s', '{:.0f}')} | {ratio} |")
print(f"\nCUDA graph speedup over eager, batch 1: {get('graph_speedup', 'b1')}x")
print(f"Prefill {get('prefill', 'seqs', '{:.0f}')} x {get('prefill', 'prompt', '{:.0f}')} tokens: "
      f"{get('prefill', 'tokens_per_s', '{:.0f}')} tokens/s, "
      f"{get('prefill', 'flops', '{:.0f}', 1e-12)} TFLOP/s = {get('prefill', 'of_gemm')} of GEMM")
PY
[ -f "$OUT/failures.txt" ] && { echo "Failures:"; cat "$OUT/failures.txt"; }
echo "total $((SECONDS - start)) s"
