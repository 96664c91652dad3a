// Request bodies parsed with their objects' keys in the order the client
// wrote them: a JSON Schema's properties (response_format, a tool's
// parameters) must reach the grammar and the chat template in that order.
// nlohmann's ordered_json finds duplicate keys by a linear scan per insert,
// quadratic in an object's size; this parser keeps a hash index per object
// while it builds, so that a large body costs linear time.
#pragma once

#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace loom::openai {

using Json = nlohmann::ordered_json;

// The document, or a discarded value when `text` is not JSON. A repeated key
// keeps its first position and its last value, as nlohmann's parse does.
Json ParseOrderedJson(absl::string_view text);

}  // namespace loom::openai
