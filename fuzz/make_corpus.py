#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets into fuzz/corpus/<target>/.

Small, valid inputs of every format, so that the fuzzers start from files
that load and mutate from there. Run from the repository root; needs protoc
for the request seeds. The output is committed; rerun only to change seeds.
"""
import json
import os
import struct
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "fuzz", "corpus")


def write(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# --- GGUF -----------------------------------------------------------------
U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
GGML_F32, GGML_F16, GGML_Q4_0, GGML_Q8_0 = 0, 1, 2, 8


def gstr(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def gvalue(t, v):
    if t == STR:
        return gstr(v)
    if t == ARR:
        et, items = v
        return struct.pack("<IQ", et, len(items)) + b"".join(gvalue(et, i) for i in items)
    fmt = {U8: "B", I8: "b", U16: "H", I16: "h", U32: "I", I32: "i", F32: "f", BOOL: "?",
           U64: "Q", I64: "q", F64: "d"}[t]
    return struct.pack("<" + fmt, v)


def q8_0(n):
    # n elements in blocks of 32: an fp16 scale then 32 int8 quants.
    return b"".join(struct.pack("<e", 0.01) + bytes((i * 7) % 256 for i in range(32))
                    for _ in range(n // 32))


def q4_0(n):
    return b"".join(struct.pack("<e", 0.02) + bytes((i * 13) % 256 for i in range(16))
                    for _ in range(n // 32))


def gguf(kvs, tensors, alignment=32):
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs))
    for key, t, v in kvs:
        out += gstr(key) + struct.pack("<I", t) + gvalue(t, v)
    data = b""
    for name, gtype, ne, payload in tensors:
        while len(data) % alignment:
            data += b"\0"
        out += gstr(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", n) for n in ne)
        out += struct.pack("<IQ", gtype, len(data))
        data += payload
    while len(out) % alignment:
        out += b"\0"
    return out + data


def f32(n):
    return b"".join(struct.pack("<f", ((i % 7) - 3) / 10) for i in range(n))


def llama_gguf(tokenizer_kvs, vocab):
    dim, ff = 32, 32
    kvs = [
        ("general.architecture", STR, "llama"),
        ("general.name", STR, "fuzz-seed"),
        ("llama.block_count", U32, 1),
        ("llama.context_length", U32, 64),
        ("llama.embedding_length", U32, dim),
        ("llama.feed_forward_length", U32, ff),
        ("llama.attention.head_count", U32, 2),
        ("llama.attention.head_count_kv", U32, 1),
        ("llama.attention.layer_norm_rms_epsilon", F32, 1e-5),
        ("llama.rope.freq_base", F32, 10000.0),
        ("general.alignment", U32, 32),
    ] + tokenizer_kvs
    tensors = [
        ("token_embd.weight", GGML_Q4_0, [dim, vocab], q4_0(dim * vocab)),
        ("output_norm.weight", GGML_F32, [dim], f32(dim)),
        ("blk.0.attn_norm.weight", GGML_F32, [dim], f32(dim)),
        ("blk.0.ffn_norm.weight", GGML_F32, [dim], f32(dim)),
        ("blk.0.attn_q.weight", GGML_Q8_0, [dim, dim], q8_0(dim * dim)),
        ("blk.0.attn_k.weight", GGML_Q8_0, [dim, dim // 2], q8_0(dim * dim // 2)),
        ("blk.0.attn_v.weight", GGML_Q8_0, [dim, dim // 2], q8_0(dim * dim // 2)),
        ("blk.0.attn_output.weight", GGML_Q8_0, [dim, dim], q8_0(dim * dim)),
        ("blk.0.ffn_gate.weight", GGML_Q8_0, [dim, ff], q8_0(dim * ff)),
        ("blk.0.ffn_up.weight", GGML_Q8_0, [dim, ff], q8_0(dim * ff)),
        ("blk.0.ffn_down.weight", GGML_F16, [ff, dim],
         b"".join(struct.pack("<e", 0.01 * (i % 5)) for i in range(ff * dim))),
    ]
    return gguf(kvs, tensors)


BYTE_TOKENS = ["H", "e", "l", "o", "Ġ", "w", "r", "d", "!", "1", "2", "He", "ll", "Hell", "Hello",
               "Ġw", "Ġwor", "<|endoftext|>", "<|im_start|>", "<|im_end|>"]
GPT2_MERGES = ["H e", "l l", "He ll", "Hell o", "Ġ w", "Ġw o", "Ġwo r"]


def gguf_seeds():
    n = len(BYTE_TOKENS)
    gpt2 = [
        ("tokenizer.ggml.model", STR, "gpt2"),
        ("tokenizer.ggml.pre", STR, "smollm"),
        ("tokenizer.ggml.tokens", ARR, (STR, BYTE_TOKENS)),
        ("tokenizer.ggml.token_type", ARR, (I32, [1] * (n - 3) + [3, 3, 3])),
        ("tokenizer.ggml.merges", ARR, (STR, GPT2_MERGES)),
        ("tokenizer.ggml.bos_token_id", U32, n - 3),
        ("tokenizer.ggml.eos_token_id", U32, n - 1),
        ("tokenizer.chat_template", STR, CHATML),
    ]
    write("gguf", "llama_gpt2_tokenizer.gguf", llama_gguf(gpt2, n))
    sp_tokens = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(0x20, 0x30)] + \
                ["▁", "▁H", "ello", "▁Hello", "▁w", "orld"]
    m = len(sp_tokens)
    llama = [
        ("tokenizer.ggml.model", STR, "llama"),
        ("tokenizer.ggml.tokens", ARR, (STR, sp_tokens)),
        ("tokenizer.ggml.scores", ARR, (F32, [float(-i) for i in range(m)])),
        ("tokenizer.ggml.token_type", ARR, (I32, [2, 3, 3] + [6] * 16 + [1] * 6)),
        ("tokenizer.ggml.unknown_token_id", U32, 0),
        ("tokenizer.ggml.bos_token_id", U32, 1),
        ("tokenizer.ggml.eos_token_id", U32, 2),
        ("tokenizer.ggml.add_bos_token", BOOL, True),
    ]
    write("gguf", "llama_sentencepiece_tokenizer.gguf", llama_gguf(llama, m))
    # Every metadata type, nested arrays, and no tensors.
    kvs = [("u8", U8, 1), ("i8", I8, -1), ("u16", U16, 2), ("i16", I16, -2), ("u32", U32, 3),
           ("i32", I32, -3), ("f32", F32, 1.5), ("bool", BOOL, True), ("str", STR, "x"),
           ("u64", U64, 1 << 40), ("i64", I64, -(1 << 40)), ("f64", F64, 2.5),
           ("arr", ARR, (ARR, [(U8, [1, 2]), (STR, ["a"])]))]
    write("gguf", "metadata_types.gguf", gguf(kvs, []))


# --- safetensors -------------------------------------------------------------
def safetensors(entries, metadata=None):
    header, data = {}, b""
    for name, dtype, shape, payload in entries:
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [len(data), len(data) + len(payload)]}
        data += payload
    if metadata is not None:
        header["__metadata__"] = metadata
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    return struct.pack("<Q", len(h)) + h + data


def safetensors_seeds():
    write("safetensors", "f32_bf16.safetensors", safetensors(
        [("model.embed_tokens.weight", "F32", [2, 3], f32(6)),
         ("model.norm.weight", "BF16", [4], b"\x80\x3f" * 4)], {"format": "pt"}))
    write("safetensors", "f16_scalar.safetensors", safetensors(
        [("lm_head.weight", "F16", [2, 2], struct.pack("<4e", 1, 2, 3, 4)),
         ("scale", "F32", [], f32(1))]))
    write("safetensors", "empty.safetensors", safetensors([]))


# --- tokenizer.json -----------------------------------------------------------
def tokenizer_json_seeds():
    vocab = {t: i for i, t in enumerate(BYTE_TOKENS)}
    added = [{"id": vocab[t], "content": t, "special": True, "lstrip": False, "rstrip": False,
              "normalized": False, "single_word": False}
             for t in ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]]
    write("tokenizer_json", "byte_level.json", json.dumps({
        "version": "1.0", "added_tokens": added, "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                          "use_regex": True},
        "post_processor": None, "decoder": {"type": "ByteLevel"},
        "model": {"type": "BPE", "vocab": vocab, "merges": GPT2_MERGES}}))
    # A NUL ends the tokenizer.json; the rest is the text to encode.
    write("tokenizer_json", "byte_level_with_text.json", json.dumps({
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": True},
        "model": {"type": "BPE", "vocab": vocab, "merges": GPT2_MERGES}}).encode() +
        b"\0Hello   world!\n\t12345 \xc3\xa9\xe4\xb8\xad \xf0\x9f\xa6\x99 \xff\xfe<|im_end|>")
    write("tokenizer_json", "llama3_style.json", json.dumps({
        "added_tokens": [{"id": 17, "content": "<|begin_of_text|>", "special": True}],
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": "\\p{N}{1,3}| ?\\p{L}+|\\s+"},
             "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "use_regex": False}]},
        "post_processor": {"type": "TemplateProcessing", "single": [
            {"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}},
            {"Sequence": {"id": "A", "type_id": 0}}]},
        "model": {"type": "BPE", "ignore_merges": True, "vocab": vocab,
                  "merges": [m.split(" ") for m in GPT2_MERGES]}}))
    sp_vocab = {t: i for i, t in enumerate(
        ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(256)] +
        ["▁", "▁H", "ello", "▁Hello", "▁w", "orld", "▁world"])}
    write("tokenizer_json", "sentencepiece_style.json", json.dumps({
        "added_tokens": [{"id": 0, "content": "<unk>", "special": True},
                         {"id": 1, "content": "<s>", "special": True},
                         {"id": 2, "content": "</s>", "special": True}],
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "▁"}, {"type": "Replace", "pattern": {"String": " "},
                                                  "content": "▁"}]},
        "pre_tokenizer": None,
        "post_processor": {"type": "TemplateProcessing", "single": [
            {"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}]},
        "decoder": {"type": "Sequence", "decoders": [{"type": "ByteFallback"},
                                                      {"type": "Strip", "content": " ", "start": 1}]},
        "model": {"type": "BPE", "byte_fallback": True, "unk_token": "<unk>", "vocab": sp_vocab,
                  "merges": ["▁ H", "▁H ello", "▁ w", "or ld", "▁w orld"]}}))
    write("tokenizer_json", "metaspace.json", json.dumps({
        "pre_tokenizer": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first",
                          "split": False},
        "decoder": {"type": "Metaspace"},
        "model": {"type": "BPE", "byte_fallback": True, "vocab": sp_vocab, "merges": []}}))


# --- chat templates -----------------------------------------------------------
CHATML = ("{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
          "{{ '<|im_start|>system\\nYou are a helpful AI assistant named SmolLM, trained by "
          "Hugging Face<|im_end|>\\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\\n' + "
          "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}"
          "{{ '<|im_start|>assistant\\n' }}{% endif %}")


def chat_template_seeds():
    messages = b"\0You are terse.\0Hello!\0Hi. What can I do?\0Tell me a joke."
    write("chat_template", "chatml", CHATML.encode() + messages)
    for model in ["llama2", "llama3", "mistral", "qwen2"]:
        path = os.path.join(ROOT, "tests", "fixtures", "tiny", model, "tokenizer_config.json")
        with open(path) as f:
            template = json.load(f)["chat_template"]
        write("chat_template", model, template.encode() + messages)
    write("chat_template", "builtins",
          "{%- set xs = [3, 1, 2] -%}{% for x in xs %}{{ x }}{% if not loop.last %}, "
          "{% endif %}{% endfor %} {{ messages | length }} {{ 'a b' | upper | replace('A', 'z') }}"
          " {{ (messages[0].content | trim)[:3] }}{% if messages[0].content is string %}s"
          "{% elif true %}t{% else %}f{% endif %}{{ raise_exception('no') if false }}"
          "{{ messages[-1]['role'] ~ '|' ~ (1 + 2 * 3) }}\0one\0two")
    # The tools template: the last part is also a tool's parameters and a call's arguments.
    with open(os.path.join(ROOT, "tests", "fixtures", "chat_templates", "hermes_tools.jinja")) as f:
        hermes = f.read()
    write("chat_template", "hermes_tools",
          hermes.encode() + b'\0Weather in Paris?\0{"type": "object", "properties": '
          b'{"city": {"type": "string"}}, "required": ["city"]}')


# --- requests -----------------------------------------------------------------
REQUESTS = {
    "prompt_sampling": """
request_id: "req-1" prompt: "Hello"
sampling { temperature: 0.7 top_p: 0.9 top_k: 40 min_p: 0.05 repetition_penalty: 1.1
           presence_penalty: 0.5 frequency_penalty: -0.5 seed: 42 n: 2 logit_bias { key: 5 value: -100 } }
stopping { max_tokens: 16 min_tokens: 2 stop: "\\n" stop: "END" stop_token_ids: 2 ignore_eos: true }
priority: -1 logprobs: 5 add_special_tokens: false truncate: TRUNCATION_LEFT cache_salt: "s"
""",
    "token_ids": "prompt_token_ids { ids: 1 ids: 2 ids: 49151 } stopping { max_tokens: 1 }",
    "messages": """messages { messages { role: "system" content: "Be brief." }
                              messages { role: "user" content: "Hi" } }""",
    "invalid": "prompt: \"\" sampling { temperature: 250 top_p: 0 } logprobs: 50",
    "constraint_json_schema": """prompt: "A person:" stopping { max_tokens: 8 }
json_schema: "{\\"type\\": \\"object\\", \\"properties\\": {\\"age\\": {\\"type\\": \\"integer\\"}}}" """,
    "constraint_choice": 'prompt: "?" choice { choices: "yes" choices: "no" }',
    "tools_forced": """messages {
  messages { role: "user" content: "Weather?" }
  messages { role: "assistant" tool_calls { id: "c" name: "get_weather" arguments: "{}" } }
  messages { role: "tool" tool_call_id: "c" content: "sunny" }
  tools { name: "get_weather" description: "d"
          parameters: "{\\"type\\": \\"object\\", \\"properties\\": {\\"city\\": {\\"type\\": \\"string\\"}}}" }
  tools { name: "now" }
  tool_choice: TOOL_CHOICE_FUNCTION tool_choice_function: "get_weather" }
stopping { max_tokens: 8 }""",
}

# Requests the request_builder target starts from (after its max_model_len byte).
BUILDER_REQUESTS = ["constraint_json_schema", "constraint_choice", "tools_forced"]


def request_seeds():
    proto = os.path.join(ROOT, "proto")
    for name, text in REQUESTS.items():
        data = subprocess.run(
            ["protoc", "--proto_path=" + proto, "--encode=loom.v1.GenerateRequest",
             "loom/v1/generation.proto"], input=text.encode(), check=True,
            capture_output=True).stdout
        write("request_validator", name, data)
        if name in BUILDER_REQUESTS:
            write("request_builder", name, bytes([64]) + data)
    data = subprocess.run(
        ["protoc", "--proto_path=" + proto, "--encode=loom.v1.TokenizeRequest",
         "loom/v1/generation.proto"], input=b'text: "Hello" add_special_tokens: true', check=True,
        capture_output=True).stdout
    write("request_validator", "tokenize", data)


if __name__ == "__main__":
    gguf_seeds()
    safetensors_seeds()
    tokenizer_json_seeds()
    chat_template_seeds()
    request_seeds()
    sys.exit(0)
