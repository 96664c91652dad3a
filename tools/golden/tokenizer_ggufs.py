"""Tokenizer-only GGUF files (no tensors) holding the tiny models' tokenizers
as llama.cpp's converter writes them, so that Loom's GGUF tokenizer paths are
checked against the same tokens.json as the tokenizer.json path:

- tiny/llama2/tokenizer.gguf: tokenizer.ggml.model "llama" (SentencePiece
  BPE), pieces scored by merge rank, byte and control token types;
- tiny/llama3/tokenizer.gguf: "gpt2" with pre "llama-bpe";
- tiny/qwen2/tokenizer.gguf: "gpt2" with pre "qwen2".

    python tools/golden/tokenizer_ggufs.py     # after tiny_models.py
"""

import json
import os
import sys

import gguf

sys.path.insert(0, os.path.dirname(__file__))
import common  # noqa: E402


def load(name):
    with open(os.path.join(common.FIXTURES, "tiny", name, "tokenizer.json")) as f:
        tok = json.load(f)
    vocab = tok["model"]["vocab"]
    for added in tok["added_tokens"]:
        vocab[added["content"]] = added["id"]
    tokens = [None] * (max(vocab.values()) + 1)
    for piece, i in vocab.items():
        tokens[i] = piece
    merges = [m.split(" ", 1) if isinstance(m, str) else m for m in tok["model"]["merges"]]
    specials = {a["content"] for a in tok["added_tokens"] if a["special"]}
    return vocab, tokens, merges, specials


def write(name, model, pre, add_bos, fill):
    vocab, tokens, merges, specials = load(name)
    out = os.path.join(common.FIXTURES, "tiny", name, "tokenizer.gguf")
    w = gguf.GGUFWriter(out, "llama")
    w.add_tokenizer_model(model)
    if pre:
        w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    fill(w, vocab, tokens, merges, specials)
    w.add_add_bos_token(add_bos)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print("wrote", os.path.relpath(out, common.REPO), os.path.getsize(out), "bytes")


def fill_sentencepiece(w, vocab, tokens, merges, specials):
    # A merged piece scores minus its merge rank: llama.cpp merges the
    # highest-scoring pair first, i.e. the lowest rank, as BPE does.
    scores = [0.0] * len(tokens)
    for rank, (left, right) in enumerate(merges):
        merged = vocab.get(left + right)
        if merged is not None and scores[merged] == 0.0:
            scores[merged] = -float(rank + 1)
    types = []
    for piece in tokens:
        if piece == "<unk>":
            types.append(gguf.TokenType.UNKNOWN)
        elif piece in specials:
            types.append(gguf.TokenType.CONTROL)
        elif piece.startswith("<0x") and piece.endswith(">") and len(piece) == 6:
            types.append(gguf.TokenType.BYTE)
        else:
            types.append(gguf.TokenType.NORMAL)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(vocab["<s>"])
    w.add_eos_token_id(vocab["</s>"])
    w.add_unk_token_id(vocab["<unk>"])
    w.add_add_space_prefix(True)


def fill_byte_level(bos, eos):
    def fill(w, vocab, tokens, merges, specials):
        w.add_token_merges([f"{a} {b}" for a, b in merges])
        w.add_token_types([gguf.TokenType.CONTROL if t in specials else gguf.TokenType.NORMAL
                           for t in tokens])
        if bos:
            w.add_bos_token_id(vocab[bos])
        w.add_eos_token_id(vocab[eos])
    return fill


def main():
    write("llama2", "llama", None, True, fill_sentencepiece)
    write("llama3", "gpt2", "llama-bpe", True,
          fill_byte_level("<|begin_of_text|>", "<|eot_id|>"))
    write("qwen2", "gpt2", "qwen2", False, fill_byte_level(None, "<|im_end|>"))


if __name__ == "__main__":
    main()
