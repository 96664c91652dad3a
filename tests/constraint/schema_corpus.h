// The JSON Schema corpus of tests/constraint/schemas: one file per schema,
// with documents it accepts ("valid") and documents it rejects ("invalid"),
// which tools/check_schema_corpus.py checks against the jsonschema package.
// Documents are JSON values, written out here in the forms a model produces:
// compact, indented by two, and Python's default ", " / ": " spacing.
#pragma once

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace loom::testing {

struct SchemaCase {
  std::string name;    // the file's stem
  std::string schema;  // as text
  std::vector<nlohmann::ordered_json> valid;
  std::vector<nlohmann::ordered_json> invalid;
  std::vector<std::string> forms;  // "compact", "indent", "python"
};

// Python's json.dumps default: ", " between items, ": " after keys.
inline std::string PythonStyle(const nlohmann::ordered_json& v) {
  if (v.is_object()) {
    std::string out = "{";
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (it != v.begin()) out += ", ";
      out += nlohmann::ordered_json(it.key()).dump() + ": " + PythonStyle(it.value());
    }
    return out + "}";
  }
  if (v.is_array()) {
    std::string out = "[";
    for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + PythonStyle(v[i]);
    return out + "]";
  }
  return v.dump();
}

inline std::string Render(const nlohmann::ordered_json& v, const std::string& form) {
  if (form == "indent") return v.dump(2);
  if (form == "python") return PythonStyle(v);
  return v.dump();
}

inline std::vector<SchemaCase> LoadSchemaCorpus(const std::string& dir) {
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() == ".json") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  std::vector<SchemaCase> cases;
  for (const auto& path : files) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    const nlohmann::ordered_json doc = nlohmann::ordered_json::parse(ss.str());
    SchemaCase c;
    c.name = path.stem().string();
    c.schema = doc["schema"].dump();
    for (const auto& v : doc["valid"]) c.valid.push_back(v);
    for (const auto& v : doc["invalid"]) c.invalid.push_back(v);
    c.forms = doc.contains("forms") ? doc["forms"].get<std::vector<std::string>>()
                                    : std::vector<std::string>{"compact", "indent", "python"};
    cases.push_back(std::move(c));
  }
  return cases;
}

}  // namespace loom::testing
