"""Hugging Face transformers `generate` on a Llama-3-8B-shaped model with random
bf16 weights made on the GPU (no downloads): the peer of bench/gpu_decode.

For each shape of --shapes (PROMPT_LEN:BATCH,BATCH,... groups; by default
batch 1, 8, 64 and 256 with 1k prompts and 1, 8 and 64 with 4k, as
bench/gpu_decode): prompts of random tokens; greedy generate with 1 new token
(prefill) and with --new_tokens new tokens; the decode step time is the
difference over the extra tokens. Prints "RESULT hf_b<batch> ctx=<len + 1> ..."
lines (ctx: the context of the first decode step, as gpu_decode prints it),
and writes them as JSON to --json when given.
"""
import argparse
import json
import time

import torch
import transformers
from transformers import LlamaConfig, LlamaForCausalLM


def timed_generate(model, ids, new_tokens):
    torch.cuda.synchronize()
    t = time.perf_counter()
    model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=new_tokens,
                   min_new_tokens=new_tokens, do_sample=False, pad_token_id=0)
    torch.cuda.synchronize()
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="1024:1,8,64,256 4096:1,8,64")
    ap.add_argument("--new_tokens", type=int, default=17)
    ap.add_argument("--json", default="")
    args = ap.parse_args()

    config = LlamaConfig(vocab_size=128256, hidden_size=4096, intermediate_size=14336,
                         num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8,
                         head_dim=128, max_position_embeddings=8192, rms_norm_eps=1e-5,
                         rope_theta=500000.0, tie_word_embeddings=False)
    t = time.perf_counter()
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = LlamaForCausalLM(config).to(torch.bfloat16)
    model.eval()
    print(f"transformers {transformers.__version__} torch {torch.__version__}: "
          f"model ready in {time.perf_counter() - t:.1f} s", flush=True)

    shapes = [(int(length), int(b)) for group in args.shapes.split()
              for length, batches in [group.split(":")] for b in batches.split(",")]
    results = {}
    with torch.inference_mode():
        for i, (prompt_len, batch) in enumerate(shapes):
            ids = torch.randint(0, 128000, (batch, prompt_len), device="cuda")
            if i == 0:
                timed_generate(model, ids, 2)  # warm-up: CUDA context, cuBLAS handles
            prefill = timed_generate(model, ids, 1)
            full = timed_generate(model, ids, args.new_tokens)
            step = (full - prefill) / (args.new_tokens - 1)
            results[f"b{batch}_ctx{prompt_len + 1}"] = {
                "prefill_ms": prefill * 1e3, "step_ms": step * 1e3, "tokens_per_s": batch / step}
            print(f"RESULT hf_b{batch} ctx={prompt_len + 1} prefill_ms={prefill * 1e3:.1f} "
                  f"step_ms={step * 1e3:.3f} tokens_per_s={batch / step:.0f}", flush=True)
            del ids
            torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
