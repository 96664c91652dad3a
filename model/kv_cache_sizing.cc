#include "model/kv_cache_sizing.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "base/check.h"

namespace loom {
namespace {

bool OwnsKv(const KvCacheSpec& spec, int32_t layer) {
  return spec.kv_sharing.empty() || spec.kv_sharing[layer] < 0;
}

int64_t BytesPerLayerBlock(const KvCacheSpec& spec) {
  return 2 * static_cast<int64_t>(spec.num_kv_heads) * spec.head_dim * spec.block_size *
         spec.dtype_bytes;
}

}  // namespace

absl::Status ValidateKvCacheSpec(const KvCacheSpec& spec) {
  if (spec.num_layers <= 0 || spec.num_kv_heads <= 0 || spec.head_dim <= 0 ||
      spec.block_size <= 0 || spec.dtype_bytes <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("KV cache spec needs positive dimensions: layers=", spec.num_layers,
                     " kv_heads=", spec.num_kv_heads, " head_dim=", spec.head_dim,
                     " block_size=", spec.block_size, " dtype_bytes=", spec.dtype_bytes));
  }
  if (!spec.kv_sharing.empty() && spec.kv_sharing.size() != static_cast<size_t>(spec.num_layers)) {
    return absl::InvalidArgumentError(absl::StrCat("KV sharing map has ", spec.kv_sharing.size(),
                                                   " entries for ", spec.num_layers, " layers"));
  }
  for (int32_t layer = 0; layer < static_cast<int32_t>(spec.kv_sharing.size()); ++layer) {
    const int32_t target = spec.kv_sharing[layer];
    // Pointing only backwards rules out cycles and lets the owner's KV be
    // written earlier in the same forward pass.
    if (target < -1 || target >= layer) {
      return absl::InvalidArgumentError(absl::StrCat("layer ", layer, " shares the KV of layer ",
                                                     target, "; it must be an earlier layer"));
    }
  }
  return absl::OkStatus();
}

std::vector<int32_t> KvBufferOwners(const KvCacheSpec& spec) {
  LOOM_CHECK(ValidateKvCacheSpec(spec).ok());
  std::vector<int32_t> owners(static_cast<size_t>(spec.num_layers));
  for (int32_t layer = 0; layer < spec.num_layers; ++layer) {
    // Targets are earlier layers, already resolved to their owners.
    owners[layer] = OwnsKv(spec, layer) ? layer : owners[spec.kv_sharing[layer]];
  }
  return owners;
}

int64_t KvBytesPerBlock(const KvCacheSpec& spec) {
  LOOM_CHECK(ValidateKvCacheSpec(spec).ok());
  int64_t num_owners = 0;
  for (int32_t layer = 0; layer < spec.num_layers; ++layer) {
    if (OwnsKv(spec, layer)) {
      ++num_owners;
    }
  }
  return num_owners * BytesPerLayerBlock(spec);
}

int64_t KvBufferBytes(const KvCacheSpec& spec, int32_t num_blocks) {
  LOOM_CHECK(ValidateKvCacheSpec(spec).ok() && num_blocks >= 0);
  return BytesPerLayerBlock(spec) * num_blocks;
}

int32_t NumBlocksForBudget(const KvCacheSpec& spec, int64_t budget_bytes) {
  const int64_t per_block = KvBytesPerBlock(spec);
  if (budget_bytes <= 0) {
    return 0;
  }
  return static_cast<int32_t>(
      std::min<int64_t>(budget_bytes / per_block, std::numeric_limits<int32_t>::max()));
}

}  // namespace loom
