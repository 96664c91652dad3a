// The vocabulary as a byte trie in preorder: a node's subtree is the index
// range [node, subtree_end), so a walk that finds no stack for a prefix skips
// every token that starts with it in one jump. Built once per vocabulary and
// shared by every compiled constraint.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace loom::constraint {

class TokenTrie {
 public:
  struct Node {
    int32_t subtree_end = 0;
    int32_t tokens_begin = 0;  // into token_ids(): the tokens spelled by this path
    int32_t tokens_end = 0;
    int32_t depth = 0;  // bytes from the root
    uint8_t byte = 0;   // the byte that leads here from the parent
  };

  // Tokens with empty bytes are left out (they never spell text).
  explicit TokenTrie(const std::vector<std::string>& token_bytes);

  // nodes()[0] is the root (depth 0, no tokens).
  const std::vector<Node>& nodes() const { return nodes_; }
  // Token ids grouped by node, in preorder, which is byte order.
  const std::vector<int32_t>& token_ids() const { return token_ids_; }
  int32_t max_depth() const { return max_depth_; }

 private:
  std::vector<Node> nodes_;
  std::vector<int32_t> token_ids_;
  int32_t max_depth_ = 0;
};

}  // namespace loom::constraint
