"""Texts and chats shared by the golden-fixture scripts.

The strings are chosen to hit tokenizer edge cases: whitespace runs before
words and digits, digit groups, CJK, emoji (4-byte UTF-8), combining marks,
contractions, special tokens written in the text, and long words.
"""

TEXTS = [
    "",
    "Hello world",
    "Hello, world! How are you?",
    " leading space",
    "trailing space ",
    "double  space and   triple",
    "tabs\tand\nnewlines\n\n\nthree",
    "\n\n  \t mixed whitespace\r\n",
    "    indented code():\n        return 42",
    "1234567890 and 3.14159 and 1,000,000",
    "  12 spaced digits 007",
    "I'm, you're, he'll, we've, they'd, it's, DON'T, She'S",
    "The quick brown fox jumps over the lazy dog.",
    "CJK: 你好，世界。日本語のテキスト。한국어 텍스트",
    "Emoji: 😀👍🏽 🇫🇷 👨‍👩‍👧‍👦 done",
    "Accents: café naïve Zürich São Paulo ñ",
    "Combining: e\u0301 a\u0308",
    "Symbols: @#$%^&*()_+-=[]{}|;':\",./<>?`~",
    "URL https://example.com/path?query=1&x=y#frag",
    "supercalifragilisticexpialidocious antidisestablishmentarianism",
    "pneumonoultramicroscopicsilicovolcanoconiosis" * 3,
    "ALLCAPS and camelCaseWords and snake_case_words",
    "Non-breaking\u00a0space and ideographic\u3000space",
    "a\u200bzero width",
    "What is the capital of France?",
]

# Special tokens spelled out in the text, per tokenizer family.
SPECIAL_TEXTS = {
    "chatml": [
        "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n",
        "text<|im_end|>more <|endoftext|> end",
        "<|im_start|><|im_start|>double",
    ],
    "llama3": [
        "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>",
        "mid<|eot_id|>text <|end_of_text|>",
    ],
    "llama2": [
        "<s>[INST] Hi [/INST] Hello</s>",
        "text <s> more</s>end",
        "<0x41> is not a byte token in text",
    ],
}

CHATS = [
    [{"role": "user", "content": "What is the capital of France?"}],
    [
        {"role": "system", "content": "You are a terse assistant."},
        {"role": "user", "content": "Name three colours."},
    ],
    [
        {"role": "user", "content": "Hi!"},
        {"role": "assistant", "content": "Hello! How can I help?"},
        {"role": "user", "content": "Tell me a joke.\nMake it short."},
    ],
]

# Prompts for logits and greedy continuations.
PROMPTS = [
    "The capital of France is",
    "def fibonacci(n):\n",
    "Once upon a time, in a land far away,",
]
