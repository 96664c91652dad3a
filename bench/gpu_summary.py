"""Summary of a bench/gpu.sh run: the stage table and the figures as ratios.

  gpu_summary.py WORK "ALL STAGES" SELECTED,STAGES RESULTS_TXT

Reads WORK/stages/<stage>.{status,reason,missing,started} and the RESULT rows
of WORK/<stage>.log; writes every RESULT row, prefixed by its stage, to
RESULTS_TXT and prints the summary. Exit status 0 when every selected stage
passed, or when every one was skipped for want of a GPU and LOOM_REQUIRE_GPU=1
was not set; else 1.
"""
import os
import sys


def read(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def stage_rows(work, stage):
    """{key: {field: value}} of a stage's RESULT rows; key is the row name,
    plus @ctx when the row has a ctx field."""
    rows, lines = {}, []
    text = read(os.path.join(work, f"{stage}.log")) or ""
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 2 or parts[0] != "RESULT":
            continue
        lines.append(f"{stage} {' '.join(parts[1:])}")
        fields = dict(p.split("=", 1) for p in parts[2:] if "=" in p)
        key = parts[1] + (f"@{fields['ctx']}" if "ctx" in fields else "")
        rows.setdefault(key, {}).update(fields)
    return rows, lines


def num(rows, key, field, scale=1.0):
    v = rows.get(key, {}).get(field)
    try:
        return float(v) * scale
    except (TypeError, ValueError):
        return None


def fmt(v, spec="{:.2f}"):
    return "-" if v is None else spec.format(v)


def ratio(a, b, spec="{:.2f}"):
    return "-" if a is None or not b else spec.format(a / b)


def stage_table(work, stages, selected):
    out, statuses = ["| stage | status | seconds | reason |", "|---|---|---|---|"], {}
    cut = read(os.path.join(work, "cut_off"))
    for s in stages:
        if s not in selected:
            out.append(f"| {s} | not selected | | |")
            continue
        status = read(os.path.join(work, "stages", f"{s}.status"))
        reason = (read(os.path.join(work, "stages", f"{s}.missing")) or
                  read(os.path.join(work, "stages", f"{s}.reason")) or "")
        if status:
            state, secs = (status.split() + [""])[:2]
        elif os.path.exists(os.path.join(work, "stages", f"{s}.started")):
            state, secs, reason = "failed", "", cut or "cut off"
        else:
            state, secs, reason = "failed", "", f"not reached ({cut or 'run ended early'})"
        statuses[s] = state
        out.append(f"| {s} | {state} | {secs} | {reason} |")
    return out, statuses


def figures(r):
    c, a1, a2, d, hf, lb = (r.get(s, {}) for s in
                            ("ceilings", "attention_v1", "attention_v2", "decode", "hf_peer",
                             "loomd_bench"))
    copy = num(c, "ceilings", "copy_bytes_per_s") or num(d, "decode_ceilings", "copy_bytes_per_s")
    gemm = num(c, "ceilings", "gemm_bf16_flops") or num(d, "decode_ceilings", "gemm_bf16_flops")
    out = [f"Ceilings: copy {fmt(copy and copy * 1e-12)} TB/s, "
           f"bf16 GEMM {fmt(gemm and gemm * 1e-12, '{:.0f}')} TFLOP/s", "",
           "Paged decode attention (32 q / 8 kv heads, head_dim 128, block 16, bf16): "
           "bytes/s over copy bandwidth",
           "| batch | context | v1 us | v1 of copy | v2 us | v2 of copy | v1/v2 time |",
           "|---|---|---|---|---|---|---|"]
    for ctx in (1024, 4096):
        for b in (1, 8, 64, 256):
            k, k2 = f"attn_b{b}_c{ctx}", f"attn_v2_b{b}_c{ctx}"
            u1, u2 = num(a1, k, "us"), num(a2, k2, "us")
            out.append(f"| {b} | {ctx} | {fmt(u1, '{:.1f}')} | {fmt(num(a1, k, 'of_copy'))} | "
                       f"{fmt(u2, '{:.1f}')} | {fmt(num(a2, k2, 'of_copy'))} | {ratio(u1, u2)} |")
    out += ["", "Decode step, Llama-3-8B shape, bf16 (HF = transformers generate)",
            "| batch | context | graph ms | eager ms | roofline ms | of roofline | graph speedup "
            "| Loom tok/s | HF tok/s | Loom/HF |", "|---|---|---|---|---|---|---|---|---|---|"]
    for ctx, batches in ((1025, (1, 8, 64, 256)), (4097, (1, 8, 64))):
        for b in batches:
            k, h = f"decode_b{b}@{ctx}", f"hf_b{b}@{ctx}"
            lt, ht = num(d, k, "tokens_per_s"), num(hf, h, "tokens_per_s")
            out.append(f"| {b} | {ctx} | {fmt(num(d, k, 'graph_ms'), '{:.3f}')} | "
                       f"{fmt(num(d, k, 'eager_ms'), '{:.3f}')} | "
                       f"{fmt(num(d, k, 'roofline_ms'), '{:.3f}')} | "
                       f"{fmt(num(d, k, 'of_roofline'))} | {fmt(num(d, k, 'graph_speedup'))} | "
                       f"{fmt(lt, '{:.0f}')} | {fmt(ht, '{:.0f}')} | {ratio(lt, ht, '{:.1f}')} |")
    out.append(f"\nCUDA graph speedup over eager, batch 1: {fmt(num(d, 'graph_speedup', 'b1'))}x")
    hf_pre = num(hf, "hf_b8@1025", "prefill_ms")
    hf_tps = 8 * 1024 / (hf_pre * 1e-3) if hf_pre else None
    pre = num(d, "prefill", "tokens_per_s")
    out.append(f"Prefill 8 x 1024 tokens: Loom {fmt(pre, '{:.0f}')} tokens/s = "
               f"{fmt(num(d, 'prefill', 'of_gemm'))} of GEMM; HF {fmt(hf_tps, '{:.0f}')} tokens/s; "
               f"Loom/HF {ratio(pre, hf_tps)}")
    out.append(f"loomd + loom bench (SmolLM2-135M shape, dummy weights, 64 streams): "
               f"{fmt(num(lb, 'loomd_bench', 'output_tokens_per_s'), '{:.0f}')} output tok/s, "
               f"median TTFT {fmt(num(lb, 'loomd_bench', 'median_ttft_ms'), '{:.1f}')} ms, "
               f"median TPOT {fmt(num(lb, 'loomd_bench', 'median_tpot_ms'))} ms, "
               f"failed {fmt(num(lb, 'loomd_bench', 'failed'), '{:.0f}')}")
    return out


def main():
    work, stages, selected, results = sys.argv[1], sys.argv[2].split(), sys.argv[3].split(","), \
        sys.argv[4]
    table, statuses = stage_table(work, stages, selected)
    rows, lines = {}, []
    for s in selected:
        rows[s], more = stage_rows(work, s)
        lines += more
    with open(results, "w") as f:
        f.write("".join(line + "\n" for line in lines))
    require = read(os.path.join(work, "require_gpu_failed"))
    ran = any(st not in ("skipped",) for st in statuses.values())
    print("\n".join(["", "Stages"] + table + ([""] + figures(rows) if ran else [])))
    if require:
        print(require)
    states = set(statuses.values())
    ok = states <= {"passed"} or (states == {"skipped"} and not require)
    failed = [s for s, st in statuses.items() if st not in ("passed", "skipped")]
    print(f"\ngpu.sh: {'OK' if ok else 'FAILED'}"
          f"{': ' + ', '.join(failed) if failed else ''}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
