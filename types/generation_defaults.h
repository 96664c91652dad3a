// Server-wide defaults for the sampling fields a request leaves unset, as
// vLLM's --generation_config: what the model ships (its generation_config.json
// or GGUF general.sampling.* keys), then --override_generation_config on top.
// A field left unset here keeps the API default (docs/api.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace loom {

struct GenerationDefaults {
  std::optional<float> temperature;
  std::optional<float> top_p;
  std::optional<int32_t> top_k;
  std::optional<float> min_p;
  std::optional<float> repetition_penalty;
  std::optional<float> presence_penalty;
  std::optional<float> frequency_penalty;
  std::optional<int32_t> max_tokens;

  bool empty() const {
    return !temperature && !top_p && !top_k && !min_p && !repetition_penalty && !presence_penalty &&
           !frequency_penalty && !max_tokens;
  }

  // The fields set in `over` replace these.
  void MergeFrom(const GenerationDefaults& over) {
    auto take = [](auto& mine, const auto& theirs) {
      if (theirs.has_value()) mine = theirs;
    };
    take(temperature, over.temperature);
    take(top_p, over.top_p);
    take(top_k, over.top_k);
    take(min_p, over.min_p);
    take(repetition_penalty, over.repetition_penalty);
    take(presence_penalty, over.presence_penalty);
    take(frequency_penalty, over.frequency_penalty);
    take(max_tokens, over.max_tokens);
  }

  // "temperature=0.6 top_p=0.9" (the set fields, for the start-up log); "none".
  std::string ToString() const {
    std::string out;
    auto add = [&out](const char* name, const auto& value) {
      if (!value.has_value()) return;
      if (!out.empty()) out += ' ';
      out += name;
      out += '=';
      std::string number = std::to_string(*value);
      if (number.find('.') != std::string::npos) {  // 0.600000 -> 0.6
        number.erase(number.find_last_not_of('0') + 1);
        if (number.back() == '.') number.pop_back();
      }
      out += number;
    };
    add("temperature", temperature);
    add("top_p", top_p);
    add("top_k", top_k);
    add("min_p", min_p);
    add("repetition_penalty", repetition_penalty);
    add("presence_penalty", presence_penalty);
    add("frequency_penalty", frequency_penalty);
    add("max_tokens", max_tokens);
    return out.empty() ? "none" : out;
  }
};

}  // namespace loom
