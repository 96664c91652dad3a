"""Helpers shared by the golden-fixture scripts: reference forward passes and
fixture writing. Run with the packages of requirements.txt installed."""

import json
import os

import torch

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FIXTURES = os.path.join(REPO, "tests", "fixtures")
TOP_K = 20
GREEDY_STEPS = 32


@torch.no_grad()
def reference_run(model, prompt_ids, top_k=TOP_K, steps=GREEDY_STEPS):
    """Top-k logits after the prompt and a greedy continuation that ignores EOS.

    margins[i] is top1 - top2 of the logits that chose greedy[i]: a small
    margin means a tiny numeric difference could pick another token there.
    """
    ids = torch.tensor([prompt_ids], dtype=torch.long)
    out = model(input_ids=ids, use_cache=True)
    logits = out.logits[0, -1].float()
    top = torch.topk(logits, top_k)
    result = {
        "prompt_ids": list(prompt_ids),
        "top_logits": [
            {"id": int(i), "logit": round(float(v), 5)} for v, i in zip(top.values, top.indices)
        ],
        "greedy": [],
        "margins": [],
    }
    past = out.past_key_values
    for _ in range(steps):
        best = torch.topk(logits, 2)
        token = int(best.indices[0])
        result["greedy"].append(token)
        result["margins"].append(round(float(best.values[0] - best.values[1]), 5))
        out = model(input_ids=torch.tensor([[token]]), past_key_values=past, use_cache=True)
        past = out.past_key_values
        logits = out.logits[0, -1].float()
    return result


def token_cases(encode, decode, texts):
    """Token ids (with and without special tokens) and the decoded text per string."""
    cases = []
    for text in texts:
        for add_special in (True, False):
            ids = encode(text, add_special)
            cases.append({
                "text": text,
                "add_special_tokens": add_special,
                "ids": ids,
                "decoded": decode(ids),
            })
    return cases


def write_json(relpath, obj):
    path = os.path.join(FIXTURES, relpath)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print("wrote", os.path.relpath(path, REPO), os.path.getsize(path), "bytes")
