#include "chat_template/builtin_templates.h"

namespace loom {
namespace {

// Gemma's turn format: <start_of_turn>user|model, the text, <end_of_turn>, a
// newline each; a system message has no turn of its own and opens the first
// turn, followed by a blank line; contents are trimmed; the generation prompt
// opens a model turn. Turns other than user and assistant (tool results) have
// no place in it.
constexpr std::string_view kGemma = R"({{ bos_token }}
{%- if messages and messages[0]['role'] == 'system' -%}
  {%- set opening = messages[0]['content'] | trim -%}
  {%- set turns = messages[1:] -%}
{%- else -%}
  {%- set opening = '' -%}
  {%- set turns = messages -%}
{%- endif -%}
{%- for message in turns -%}
  {%- if message['role'] == 'user' -%}
    {%- set speaker = 'user' -%}
  {%- elif message['role'] == 'assistant' -%}
    {%- set speaker = 'model' -%}
  {%- else -%}
    {{ raise_exception("Gemma's chat format has user and assistant turns (and a system message first) only; got role " + message['role']) }}
  {%- endif -%}
  {{ '<start_of_turn>' + speaker + '\n' }}
  {%- if loop.first and opening -%}{{ opening + '\n\n' }}{%- endif -%}
  {{ message['content'] | trim }}{{ '<end_of_turn>\n' }}
{%- endfor -%}
{%- if add_generation_prompt -%}{{ '<start_of_turn>model\n' }}{%- endif -%})";

}  // namespace

std::optional<std::string_view> BuiltinChatTemplate(std::string_view architecture) {
  if (architecture == "Gemma3ForCausalLM") return kGemma;
  return std::nullopt;
}

}  // namespace loom
