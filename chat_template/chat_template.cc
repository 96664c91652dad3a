#include "chat_template/chat_template.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "chat_template/ast.h"

namespace loom {

ChatTemplate::~ChatTemplate() = default;

absl::StatusOr<std::unique_ptr<ChatTemplate>> ChatTemplate::FromJinja(std::string source,
                                                                      std::string bos_token,
                                                                      std::string eos_token) {
  if (source.size() > jinja::kMaxSourceBytes) {
    return absl::ResourceExhaustedError(absl::StrCat("chat template: source of ", source.size(),
                                                     " bytes exceeds the limit of ",
                                                     jinja::kMaxSourceBytes, " bytes"));
  }
  LOOM_ASSIGN_OR_RETURN(jinja::NodeList nodes, jinja::Parse(source));
  std::unique_ptr<ChatTemplate> t(new ChatTemplate());
  t->source_ = std::move(source);
  t->bos_token_ = std::move(bos_token);
  t->eos_token_ = std::move(eos_token);
  t->program_ = std::make_unique<jinja::Program>();
  t->program_->nodes = std::move(nodes);
  return t;
}

absl::StatusOr<std::string> ChatTemplate::Render(std::span<const ChatMessage> messages,
                                                 bool add_generation_prompt) const {
  jinja::Value::List list;
  for (const ChatMessage& m : messages) {
    list.push_back(jinja::Value::MakeDict(
        {{"role", jinja::Value(m.role)}, {"content", jinja::Value(m.content)}}));
  }
  const jinja::Value::Dict globals = {
      {"messages", jinja::Value::MakeList(std::move(list))},
      {"add_generation_prompt", jinja::Value(add_generation_prompt)},
      {"bos_token", jinja::Value(bos_token_)},
      {"eos_token", jinja::Value(eos_token_)},
      // transformers passes these as None when the request has none.
      {"tools", jinja::Value(jinja::Value::None{})},
      {"documents", jinja::Value(jinja::Value::None{})},
  };
  return jinja::Render(program_->nodes, globals);
}

}  // namespace loom
