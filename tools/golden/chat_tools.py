"""Chat templates rendering tools and tool calls, the way transformers'
apply_chat_template renders an OpenAI request that vLLM hands it.

transformers compiles chat templates with jinja2 in an immutable sandbox with
trim_blocks, lstrip_blocks and loop controls, a `tojson` filter that calls
json.dumps(ensure_ascii=False, sort_keys=False) and a `raise_exception`
global; vLLM passes `tools` as the request's list and each assistant tool
call's arguments parsed from their JSON text. This script does the same with
jinja2 alone (no model download), for the Hermes-style fixture template,
Llama 3.1's and one that describes tools with macros, and writes
tests/fixtures/chat_tools.json.

    python tools/golden/chat_tools.py
"""

import copy
import json
import os
import sys

import jinja2
import jinja2.ext
import jinja2.sandbox

sys.path.insert(0, os.path.dirname(__file__))
import templates  # noqa: E402

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "fixtures")
HERMES = os.path.join(FIXTURES, "chat_templates", "hermes_tools.jinja")

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather of a city — in °C or °F.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                "days": {"type": "integer", "minimum": 1, "maximum": 7},
                "detail": {"type": "number", "default": 0.5},
                "alerts": {"type": "boolean"},
            },
            "required": ["city", "unit"],
            "additionalProperties": False,
        },
    },
}
CLOCK = {"type": "function", "function": {"name": "now"}}
SEARCH = {
    "type": "function",
    "function": {
        "name": "search",
        "parameters": {
            "type": "object",
            "properties": {
                "terms": {"type": "array", "items": {"type": "string"}},
                "filters": {"type": "object", "additionalProperties": {"type": "integer"}},
                "pages": {"type": "array", "items": {"type": "array", "items": {"type": "integer"}}},
                "anything": {},
            },
        },
    },
}

# A template that describes functions with macros, as Hermes 2 Pro's
# tool-use template does: a recursive one for types, one with a default and a
# keyword argument for signatures.
MACROS = """{%- macro py_type(spec) -%}
{%- if spec.type == 'array' -%}
list[{{ py_type(spec['items']) if spec['items'] is defined else 'Any' }}]
{%- elif spec.type == 'object' -%}
dict[str, {{ py_type(spec.additionalProperties) if spec.additionalProperties is mapping else 'Any' }}]
{%- elif spec.type is defined -%}
{{ {'string': 'str', 'integer': 'int', 'number': 'float', 'boolean': 'bool'}[spec.type] | default(spec.type) }}
{%- else -%}
Any
{%- endif -%}
{%- endmacro -%}
{%- macro signature(function, sep=', ') -%}
{%- set parameters = function.parameters if function.parameters is defined else {} -%}
{{ function.name }}(
{%- for name, spec in (parameters.properties | default({})) | items -%}
{{ name }}: {{ py_type(spec) }}{{ sep if not loop.last }}
{%- endfor -%}
)
{%- endmacro -%}
{%- if tools %}<|im_start|>system
Functions:
{% for tool in tools %}- {{ signature(tool.function) if loop.first else signature(tool.function, sep='; ') }}
{% endfor %}<|im_end|>
{% endif %}
{%- for message in messages %}<|im_start|>{{ message.role }}
{{ message.content }}<|im_end|>
{% endfor %}
{%- if add_generation_prompt %}<|im_start|>assistant
{% endif %}"""

CALL = {
    "id": "call_0",
    "type": "function",
    "function": {"name": "get_weather", "arguments": '{"city": "Zürich", "unit": "celsius"}'},
}

CHATS = [
    ([{"role": "user", "content": "Weather in Paris?"}], [WEATHER]),
    ([{"role": "system", "content": "Be brief."},
      {"role": "user", "content": "Weather in Paris? And the time?"}], [WEATHER, CLOCK]),
    ([{"role": "user", "content": "Weather in Zürich?"},
      {"role": "assistant", "content": "", "tool_calls": [CALL]},
      {"role": "tool", "tool_call_id": "call_0", "content": '{"temperature": 21.5}'},
      {"role": "user", "content": "Thanks."}], [WEATHER]),
    ([{"role": "user", "content": "Two cities?"},
      {"role": "assistant", "content": "Checking.", "tool_calls": [CALL, CALL]},
      {"role": "tool", "tool_call_id": "call_0", "content": "sunny"},
      {"role": "tool", "tool_call_id": "call_0", "content": "rainy"}], [WEATHER]),
    ([{"role": "user", "content": "No tools here."}], []),
    ([{"role": "user", "content": "Find it."}], [SEARCH, WEATHER, CLOCK]),
]


def environment():
    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env


def vllm_messages(messages):
    """Tool-call arguments parsed from their JSON text, as vLLM hands them over."""
    out = copy.deepcopy(messages)
    for message in out:
        for call in message.get("tool_calls", []):
            if isinstance(call["function"]["arguments"], str):  # a call listed twice is one object
                call["function"]["arguments"] = json.loads(call["function"]["arguments"])
    return out


def write_json(path, obj):
    """As common.write_json, which this script cannot import (common needs torch)."""
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print("wrote", os.path.normpath(path), os.path.getsize(path), "bytes")


def main():
    with open(HERMES, encoding="utf-8") as f:
        sources = {"hermes": f.read(), "llama31": templates.LLAMA31, "macros": MACROS}
    specials = {"hermes": ("<|im_start|>", "<|im_end|>"),
                "llama31": ("<|begin_of_text|>", "<|eot_id|>"),
                "macros": ("<|im_start|>", "<|im_end|>")}
    env = environment()
    cases = []
    for name, source in sources.items():
        template = env.from_string(source)
        bos, eos = specials[name]
        for messages, tools in CHATS:
            case = {"template": name, "messages": messages, "tools": tools,
                    "add_generation_prompt": True}
            try:
                case["rendered"] = template.render(
                    messages=vllm_messages(messages), tools=tools or None,
                    add_generation_prompt=True, bos_token=bos, eos_token=eos)
            except jinja2.exceptions.TemplateError as e:
                case["error"] = str(e)
            cases.append(case)
    write_json(os.path.join(FIXTURES, "chat_tools.json"), {
        "source": f"jinja2 {jinja2.__version__} configured as transformers' apply_chat_template",
        # Fixture files of the templates (llama32_tied's chat.json holds Llama 3.1's).
        "templates": {"hermes": "chat_templates/hermes_tools.jinja",
                      "llama31": "tiny/llama32_tied/chat.json"},
        "macros": MACROS,
        "cases": cases,
    })


if __name__ == "__main__":
    main()
