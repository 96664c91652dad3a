#include "openai/ordered_json.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace loom::openai {
namespace {

class OrderedBuilder final : public nlohmann::json_sax<Json> {
 public:
  explicit OrderedBuilder(Json& root) : root_(root) {}

  bool null() override { return Add(Json(nullptr)) != nullptr; }
  bool boolean(bool v) override { return Add(Json(v)) != nullptr; }
  bool number_integer(number_integer_t v) override { return Add(Json(v)) != nullptr; }
  bool number_unsigned(number_unsigned_t v) override { return Add(Json(v)) != nullptr; }
  bool number_float(number_float_t v, const string_t& /*text*/) override {
    return Add(Json(v)) != nullptr;
  }
  bool string(string_t& v) override { return Add(Json(std::move(v))) != nullptr; }
  bool binary(binary_t& v) override { return Add(Json::binary(std::move(v))) != nullptr; }
  bool key(string_t& v) override {
    frames_.back().key = std::move(v);
    return true;
  }
  bool start_object(std::size_t /*size*/) override { return Open(Json::object()); }
  bool start_array(std::size_t /*size*/) override { return Open(Json::array()); }
  bool end_object() override { return Close(); }
  bool end_array() override { return Close(); }
  bool parse_error(std::size_t /*position*/, const std::string& /*last_token*/,
                   const nlohmann::detail::exception& /*error*/) override {
    return false;
  }

 private:
  struct Frame {
    Json* container;
    absl::flat_hash_map<std::string, size_t> index;  // objects: key -> position
    std::string key;                                 // objects: the key of the next value
  };

  // Adds a value to the open container (or as the root); where it now lives.
  Json* Add(Json value) {
    if (frames_.empty()) {
      root_ = std::move(value);
      return &root_;
    }
    Frame& frame = frames_.back();
    if (frame.container->is_array()) {
      frame.container->push_back(std::move(value));
      return &frame.container->back();
    }
    // The index rules out duplicates, so the items vector is appended to
    // directly, without ordered_map's linear search.
    Json::object_t::Container& items = frame.container->get_ref<Json::object_t&>();
    const auto [it, inserted] = frame.index.try_emplace(frame.key, items.size());
    if (!inserted) {
      items[it->second].second = std::move(value);
      return &items[it->second].second;
    }
    items.emplace_back(std::move(frame.key), std::move(value));
    return &items.back().second;
  }

  bool Open(Json container) {
    Json* added = Add(std::move(container));
    frames_.push_back({added, {}, {}});
    return true;
  }

  bool Close() {
    frames_.pop_back();
    return true;
  }

  Json& root_;
  std::vector<Frame> frames_;
};

}  // namespace

Json ParseOrderedJson(absl::string_view text) {
  Json root;
  OrderedBuilder builder(root);
  if (!Json::sax_parse(text.begin(), text.end(), &builder)) {
    return Json(Json::value_t::discarded);
  }
  return root;
}

}  // namespace loom::openai
