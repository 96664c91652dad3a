"""tiny/qwen3/model.gguf: the tiny Qwen3 model as llama.cpp's converter writes
a `qwen3` GGUF (qwen3.* metadata, blk.N.* tensor names with the q/k head
norms, no output.weight for the tied head, Q/K rows in Hugging Face's order,
the tokenizer as in tiny/qwen2/tokenizer.gguf), in float32, so that the GGUF
path of the architecture is checked against the same golden.json as its
safetensors directory.

    python tools/golden/tiny_gguf.py     # after tiny_models.py
"""

import json
import os
import sys

import gguf
from safetensors.torch import load_file

sys.path.insert(0, os.path.dirname(__file__))
import common  # noqa: E402
import tokenizer_ggufs  # noqa: E402

LAYER_TENSORS = {
    "input_layernorm": "attn_norm",
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "self_attn.q_norm": "attn_q_norm",
    "self_attn.k_norm": "attn_k_norm",
    "post_attention_layernorm": "ffn_norm",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
}


def gguf_name(hf_name):
    if hf_name == "model.embed_tokens.weight":
        return "token_embd.weight"
    if hf_name == "model.norm.weight":
        return "output_norm.weight"
    parts = hf_name.split(".")
    assert parts[:2] == ["model", "layers"], hf_name
    return f"blk.{parts[2]}.{LAYER_TENSORS['.'.join(parts[3:-1])]}.weight"


def main():
    src = os.path.join(common.FIXTURES, "tiny", "qwen3")
    with open(os.path.join(src, "config.json")) as f:
        config = json.load(f)
    assert config["tie_word_embeddings"]
    vocab, tokens, merges, specials = tokenizer_ggufs.load("qwen3")
    out = os.path.join(src, "model.gguf")
    w = gguf.GGUFWriter(out, "qwen3")
    w.add_context_length(config["max_position_embeddings"])
    w.add_embedding_length(config["hidden_size"])
    w.add_block_count(config["num_hidden_layers"])
    w.add_feed_forward_length(config["intermediate_size"])
    w.add_head_count(config["num_attention_heads"])
    w.add_head_count_kv(config["num_key_value_heads"])
    w.add_key_length(config["head_dim"])
    w.add_value_length(config["head_dim"])
    w.add_layer_norm_rms_eps(config["rms_norm_eps"])
    rope = config.get("rope_parameters") or {"rope_theta": config["rope_theta"]}
    w.add_rope_freq_base(rope["rope_theta"])
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(tokens)
    tokenizer_ggufs.fill_byte_level(None, "<|im_end|>")(w, vocab, tokens, merges, specials)
    w.add_add_bos_token(False)
    weights = load_file(os.path.join(src, "model.safetensors"))
    for name in sorted(weights):
        w.add_tensor(gguf_name(name), weights[name].float().numpy())
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print("wrote", os.path.relpath(out, common.REPO), os.path.getsize(out), "bytes")


if __name__ == "__main__":
    main()
