// Chat templates come from model files, so they are untrusted input: the
// bytes up to the first NUL are the Jinja source, and each further
// NUL-separated part is the content of a message (roles alternate user,
// assistant, with a system message first when there are three or more).
// A third render passes the last part as a tool's parameters and as the
// arguments of a call on the last message too (untrusted request JSON).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "chat_template/chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    const size_t nul = input.find('\0', start);
    parts.push_back(input.substr(start, nul == std::string_view::npos ? nul : nul - start));
    if (nul == std::string_view::npos) break;
    start = nul + 1;
  }
  absl::StatusOr<std::unique_ptr<loom::ChatTemplate>> tmpl =
      loom::ChatTemplate::FromJinja(std::string(parts[0]), "<s>", "</s>");
  if (!tmpl.ok()) return 0;
  std::vector<loom::ChatMessage> messages;
  const bool with_system = parts.size() >= 4;
  for (size_t i = 1; i < parts.size(); ++i) {
    std::string role = (with_system && i == 1)                  ? "system"
                       : ((i - (with_system ? 2 : 1)) % 2 == 0) ? "user"
                                                                : "assistant";
    messages.push_back({std::move(role), std::string(parts[i])});
  }
  (void)(*tmpl)->Render(messages, /*add_generation_prompt=*/true);
  (void)(*tmpl)->Render(messages, /*add_generation_prompt=*/false);
  if (!messages.empty()) {
    const std::string json(parts.back());
    messages.back().tool_calls.push_back({"call_0", "f", json});
    const loom::ChatTool tools[] = {{"f", "a tool", json}, {"g"}};
    (void)(*tmpl)->Render(messages, /*add_generation_prompt=*/true, tools);
  }
  return 0;
}
