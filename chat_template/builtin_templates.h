// Chat templates for architectures whose model files often ship without one.
// A GGUF or checkpoint that carries its own template always wins; these only
// fill the gap, so that `messages` work with no --chat_template.
#pragma once

#include <optional>
#include <string_view>

namespace loom {

// The built-in template of `architecture` (ModelConfig::architecture, e.g.
// "Gemma3ForCausalLM"), or nullopt where there is none.
std::optional<std::string_view> BuiltinChatTemplate(std::string_view architecture);

}  // namespace loom
