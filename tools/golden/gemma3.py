"""Golden fixtures for Gemma 3 270M, the Q4_K_M GGUF that scripts/setup fetches.

Writes tests/fixtures/gemma3/{tokens,golden}.json. The tokenizer reference is
transformers' tokenizer built from the GGUF (GemmaTokenizer: BPE with byte
fallback, merges in the order of the vocabulary, control and user-defined
tokens added); the model reference is transformers loading the GGUF as
Gemma3ForCausalLM (weights dequantized to float32 by gguf-py), run in float32
with eager attention, so that the sliding layers mask with their 512-token
window. Two prompts run past the window.

    python tools/golden/gemma3.py [path/to/gemma-3-270m-q4_k_m.gguf]
"""

import os
import sys

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

sys.path.insert(0, os.path.dirname(__file__))
import common  # noqa: E402
import corpus  # noqa: E402

DEFAULT_GGUF = os.path.join(
    os.environ.get("LOOM_CACHE", os.path.expanduser("~/.cache/loom")),
    "llm_gemma3", "gemma-3-270m-q4_k_m.gguf")

# Gemma's own specials and user-defined tokens (whitespace runs, HTML tags)
# written in the text.
GEMMA_TEXTS = [
    "<start_of_turn>user\nHi there<end_of_turn>\n<start_of_turn>model\n",
    "<bos>text<eos> more <pad><unk> end",
    "<table><tr><td>cell</td></tr></table> and <div>block</div><h1>Title</h1>",
    "a  b   c    d     e" + " " * 40 + "f",
    "\t\ttwo tabs\n\n\n\nfour newlines\t \t",
    "<0x41> and [multimodal] and <start_of_image>",
    "▁ a literal lower one eighth block ▁▁",
]

# Two prompts longer than the 512-token window of the sliding layers.
_STORY = (
    "The lighthouse keeper climbed the spiral stairs every evening at dusk, counting the steps "
    "as his father had taught him, one hundred and twelve, and at the top he trimmed the wick, "
    "polished the great lens and wrote the weather in a leather book. ")
LONG_PROMPTS = [
    _STORY * 14 + "Years later, when the lamp was automated, the keeper",
    "Notes on the history of bridges.\n\n" + " ".join(
        f"Section {i}: the bridge at crossing {i} was built of {['stone', 'iron', 'timber'][i % 3]} "
        f"in the year {1700 + 7 * i} and carried {i * 13} carts a day." for i in range(40)) +
    "\n\nIn summary, the oldest bridge",
]


def main():
    gguf_path = sys.argv[1] if len(sys.argv) > 1 else DEFAULT_GGUF
    torch.manual_seed(0)
    torch.set_num_threads(2)
    gguf_dir, gguf_name = os.path.split(gguf_path)
    tok = AutoTokenizer.from_pretrained(gguf_dir, gguf_file=gguf_name)

    def encode(text, add_special):
        return tok(text, add_special_tokens=add_special)["input_ids"]

    def decode(ids):
        return tok.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)

    common.write_json("gemma3/tokens.json", {
        "source": f"transformers AutoTokenizer of {gguf_name} (GemmaTokenizer from the GGUF)",
        "cases": common.token_cases(encode, decode, corpus.TEXTS + GEMMA_TEXTS),
    })

    model = AutoModelForCausalLM.from_pretrained(
        gguf_dir, gguf_file=gguf_name, dtype=torch.float32, attn_implementation="eager")
    model.eval()
    runs = []
    for prompt in corpus.PROMPTS + LONG_PROMPTS:
        run = {"text": prompt, "chat": False}
        run.update(common.reference_run(model, encode(prompt, True)))
        run["greedy_text"] = decode(run["greedy"])
        print(len(run["prompt_ids"]), "prompt tokens ->", repr(run["greedy_text"]))
        runs.append(run)
    common.write_json("gemma3/golden.json", {
        "model": gguf_name,
        "reference": "transformers float32 eager forward of the dequantized GGUF",
        "top_k": common.TOP_K,
        "runs": runs,
    })


if __name__ == "__main__":
    main()
