// API keys (--api_keys_file): who may call the generation RPCs and the OpenAI
// routes, and which tenant each key speaks for. The file holds one key per
// line, optionally followed by whitespace and a tenant name; blank lines and
// lines starting with '#' are skipped. Keys are compared by their SHA-256
// digests in constant time, against every key, so neither a key's bytes nor
// its length leaks through timing. Keys never reach logs or metrics: an error
// names the line, not the key.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/mutex.h"
#include "server/file_stamp.h"

namespace loom {

// Who a request comes from, as its key says.
struct Caller {
  // The key's tenant; empty for a key without one (or with auth off).
  std::string tenant;
  // True when the keys file names tenants: then every request's prefix-cache
  // salt derives from its tenant (DeriveCacheSalt).
  bool tenant_isolation = false;
};

// The salt the prefix cache hashes with. With tenant isolation, the tenant
// and the request's own cache_salt are joined in a form no request salt can
// forge (the tenant's length comes first), so two tenants never share a block
// and a tenant that writes another's salt still hashes apart. Without, the
// request's salt as it is.
std::string DeriveCacheSalt(const Caller& caller, std::string_view request_salt);

// One parsed keys file; immutable.
class ApiKeySet {
 public:
  // INVALID_ARGUMENT naming the line (never the key) for a malformed file: a
  // line with more than two fields, a tenant outside [A-Za-z0-9_.-]{1,64}, a
  // key repeated, or no key at all.
  static absl::StatusOr<ApiKeySet> Parse(std::string_view text);

  // The caller a key belongs to; nullopt for an unknown key. Constant time
  // in the key's content and length.
  [[nodiscard]] std::optional<Caller> Find(std::string_view key) const;

  [[nodiscard]] size_t size() const { return entries_.size(); }
  [[nodiscard]] bool has_tenants() const { return has_tenants_; }
  // Every tenant the file names, sorted, once each.
  [[nodiscard]] std::vector<std::string> Tenants() const;

 private:
  using Digest = std::array<uint8_t, 32>;
  struct Entry {
    Digest digest;
    std::string tenant;
  };
  std::vector<Entry> entries_;
  bool has_tenants_ = false;
};

// The keys file, reloaded when it changes. Thread-safe.
class ApiKeyStore {
 public:
  // Reads and parses path; its error names the file.
  static absl::StatusOr<std::unique_ptr<ApiKeyStore>> Load(std::string path);

  // The caller of a request whose Authorization header (or gRPC metadata
  // "authorization") is `authorization`; UNAUTHENTICATED, without echoing
  // the key, when it is missing, not "Bearer <key>", or unknown.
  absl::StatusOr<Caller> Authenticate(std::string_view authorization) const;

  // Re-reads the file when force is set or its size, modification time or
  // inode changed since the last read. A file that fails to read or parse
  // keeps the keys in force, and the error comes back (for the log). True
  // when new keys took effect.
  absl::StatusOr<bool> Reload(bool force);

  [[nodiscard]] std::shared_ptr<const ApiKeySet> keys() const;
  [[nodiscard]] const std::string& path() const { return path_; }

 private:
  ApiKeyStore(std::string path, std::shared_ptr<const ApiKeySet> keys, FileStamp stamp);

  const std::string path_;
  mutable Mutex mu_;
  std::shared_ptr<const ApiKeySet> keys_ ABSL_GUARDED_BY(mu_);
  FileStamp stamp_ ABSL_GUARDED_BY(mu_);
};

}  // namespace loom
