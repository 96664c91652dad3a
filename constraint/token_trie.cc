#include "constraint/token_trie.h"

#include <algorithm>
#include <string_view>

namespace loom::constraint {

TokenTrie::TokenTrie(const std::vector<std::string>& token_bytes) {
  std::vector<int32_t> order;
  for (size_t id = 0; id < token_bytes.size(); ++id) {
    if (!token_bytes[id].empty()) order.push_back(static_cast<int32_t>(id));
  }
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return std::string_view(token_bytes[a]) < std::string_view(token_bytes[b]);
  });
  nodes_.push_back(Node{});
  // path[d]: the open node at depth d on the way to the current token.
  std::vector<int32_t> path = {0};
  std::string_view prev;
  for (int32_t id : order) {
    const std::string_view bytes = token_bytes[id];
    size_t lcp = 0;
    while (lcp < prev.size() && lcp < bytes.size() && prev[lcp] == bytes[lcp]) ++lcp;
    while (path.size() > lcp + 1) {
      nodes_[path.back()].subtree_end = static_cast<int32_t>(nodes_.size());
      path.pop_back();
    }
    for (size_t d = lcp; d < bytes.size(); ++d) {
      Node node;
      node.depth = static_cast<int32_t>(d + 1);
      node.byte = static_cast<uint8_t>(bytes[d]);
      node.tokens_begin = node.tokens_end = static_cast<int32_t>(token_ids_.size());
      path.push_back(static_cast<int32_t>(nodes_.size()));
      nodes_.push_back(node);
    }
    Node& leaf = nodes_[path.back()];
    if (leaf.tokens_begin == leaf.tokens_end)
      leaf.tokens_begin = static_cast<int32_t>(token_ids_.size());
    token_ids_.push_back(id);
    leaf.tokens_end = static_cast<int32_t>(token_ids_.size());
    max_depth_ = std::max(max_depth_, static_cast<int32_t>(bytes.size()));
    prev = bytes;
  }
  for (int32_t n : path) nodes_[n].subtree_end = static_cast<int32_t>(nodes_.size());
}

}  // namespace loom::constraint
