#include "model/kv_layout.h"

#include <numeric>

namespace loom {

ModelKvLayout KvLayoutOf(const ModelConfig& c) {
  std::vector<int32_t> full, sliding;
  for (int32_t l = 0; l < c.num_layers; ++l) (IsSlidingLayer(c, l) ? sliding : full).push_back(l);
  ModelKvLayout out;
  out.cache.groups.clear();
  out.layers_per_page =
      std::gcd(static_cast<int32_t>(full.size()), static_cast<int32_t>(sliding.size()));
  out.entry.resize(c.num_layers);
  out.buffer.resize(c.num_layers);
  int32_t first_entry = 0;
  // Full-attention layers first: entry 0 of a logical block is then a page
  // every later query reads, which KV-cache events report.
  for (const auto& [layers, window] :
       {std::pair{&full, 0}, std::pair{&sliding, c.sliding_window}}) {
    if (layers->empty()) continue;
    const auto pages = static_cast<int32_t>(layers->size()) / out.layers_per_page;
    out.cache.groups.push_back(KvCacheGroup{.num_pages = pages, .sliding_window = window});
    for (size_t i = 0; i < layers->size(); ++i) {
      const auto index = static_cast<int32_t>(i);
      out.entry[(*layers)[i]] = first_entry + index / out.layers_per_page;
      out.buffer[(*layers)[i]] = index % out.layers_per_page;
    }
    first_entry += pages;
  }
  return out;
}

}  // namespace loom
