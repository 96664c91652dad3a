"""A tokenizer-only GGUF (tokenizer.ggml.model = "llama", SentencePiece BPE
scored by merge rank, as llama.cpp's converter writes Llama 2 files) from the
tiny Llama 2 tokenizer, so that Loom's GGUF SentencePiece path is checked
against the same tokens.json as the tokenizer.json path.

    python tools/golden/spm_gguf.py     # after tiny_models.py
"""

import json
import os
import sys

import gguf

sys.path.insert(0, os.path.dirname(__file__))
import common  # noqa: E402


def main():
    src = os.path.join(common.FIXTURES, "tiny", "llama2", "tokenizer.json")
    with open(src) as f:
        tok = json.load(f)
    vocab = tok["model"]["vocab"]
    tokens = [None] * len(vocab)
    for piece, i in vocab.items():
        tokens[i] = piece
    # A merged piece scores minus its merge rank: llama.cpp merges the
    # highest-scoring pair first, i.e. the lowest rank, as BPE does.
    scores = [0.0] * len(tokens)
    for rank, merge in enumerate(tok["model"]["merges"]):
        left, right = merge.split(" ", 1) if isinstance(merge, str) else merge
        merged = vocab.get(left + right)
        if merged is not None and scores[merged] == 0.0:
            scores[merged] = -float(rank + 1)
    types = []
    for piece in tokens:
        if piece == "<unk>":
            types.append(gguf.TokenType.UNKNOWN)
        elif piece in ("<s>", "</s>"):
            types.append(gguf.TokenType.CONTROL)
        elif piece.startswith("<0x") and piece.endswith(">") and len(piece) == 6:
            types.append(gguf.TokenType.BYTE)
        else:
            types.append(gguf.TokenType.NORMAL)
    out = os.path.join(common.FIXTURES, "tiny", "llama2", "tokenizer.gguf")
    w = gguf.GGUFWriter(out, "llama")
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(vocab["<s>"])
    w.add_eos_token_id(vocab["</s>"])
    w.add_unk_token_id(vocab["<unk>"])
    w.add_add_bos_token(True)
    w.add_add_space_prefix(True)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print("wrote", os.path.relpath(out, common.REPO), os.path.getsize(out), "bytes")


if __name__ == "__main__":
    main()
