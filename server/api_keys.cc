#include "server/api_keys.h"

#include <openssl/crypto.h>
#include <openssl/sha.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace loom {
namespace {

constexpr size_t kMaxTenantBytes = 64;

std::array<uint8_t, 32> Sha256(std::string_view text) {
  std::array<uint8_t, 32> digest{};
  SHA256(reinterpret_cast<const unsigned char*>(text.data()), text.size(), digest.data());
  return digest;
}

bool ValidTenant(std::string_view tenant) {
  if (tenant.empty() || tenant.size() > kMaxTenantBytes) {
    return false;
  }
  return std::all_of(tenant.begin(), tenant.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
  });
}

}  // namespace

std::string DeriveCacheSalt(const Caller& caller, std::string_view request_salt) {
  if (!caller.tenant_isolation) {
    return std::string(request_salt);
  }
  // "tenant:<length>:<tenant>:<request salt>": the length fixes where the
  // tenant ends, so no request salt can reproduce another tenant's prefix.
  return absl::StrCat("tenant:", caller.tenant.size(), ":", caller.tenant, ":",
                      std::string(request_salt));
}

absl::StatusOr<ApiKeySet> ApiKeySet::Parse(std::string_view text) {
  ApiKeySet set;
  int line_number = 0;
  const std::vector<std::string> lines = absl::StrSplit(std::string(text), '\n');
  for (const std::string& raw : lines) {
    ++line_number;
    const std::string line(absl::StripAsciiWhitespace(raw));
    if (line.empty() || line[0] == '#') {
      continue;
    }
    std::vector<std::string> fields =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    if (fields.size() > 2) {
      return absl::InvalidArgumentError(
          absl::StrCat("line ", line_number, ": expected a key and an optional tenant; got ",
                       fields.size(), " fields"));
    }
    Entry entry{.digest = Sha256(fields[0]), .tenant = {}};
    if (fields.size() == 2) {
      if (!ValidTenant(fields[1])) {
        return absl::InvalidArgumentError(absl::StrCat("line ", line_number,
                                                       ": a tenant must be 1 to ", kMaxTenantBytes,
                                                       " characters of [A-Za-z0-9_.-]"));
      }
      entry.tenant = fields[1];
      set.has_tenants_ = true;
    }
    for (const Entry& other : set.entries_) {
      if (other.digest == entry.digest) {
        return absl::InvalidArgumentError(
            absl::StrCat("line ", line_number, ": the key of an earlier line is repeated"));
      }
    }
    set.entries_.push_back(std::move(entry));
  }
  if (set.entries_.empty()) {
    return absl::InvalidArgumentError("no key: every line is blank or a # comment");
  }
  return set;
}

std::optional<Caller> ApiKeySet::Find(std::string_view key) const {
  const Digest digest = Sha256(key);
  // Every entry is compared, whatever matched: the time does not depend on
  // which key (if any) the caller holds.
  size_t match = entries_.size();
  for (size_t i = 0; i < entries_.size(); ++i) {
    const bool equal = CRYPTO_memcmp(digest.data(), entries_[i].digest.data(), digest.size()) == 0;
    match = equal ? i : match;
  }
  if (match == entries_.size()) {
    return std::nullopt;
  }
  return Caller{.tenant = entries_[match].tenant, .tenant_isolation = has_tenants_};
}

std::vector<std::string> ApiKeySet::Tenants() const {
  std::vector<std::string> tenants;
  for (const Entry& entry : entries_) {
    if (!entry.tenant.empty()) {
      tenants.push_back(entry.tenant);
    }
  }
  std::sort(tenants.begin(), tenants.end());
  tenants.erase(std::unique(tenants.begin(), tenants.end()), tenants.end());
  return tenants;
}

namespace {

absl::StatusOr<ApiKeySet> ReadKeys(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(absl::StrCat("cannot read --api_keys_file=", path));
  }
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<ApiKeySet> keys = ApiKeySet::Parse(text.str());
  if (!keys.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--api_keys_file=", path, ": ", keys.status().message()));
  }
  return keys;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ApiKeyStore>> ApiKeyStore::Load(std::string path) {
  std::optional<FileStamp> stamp = StampOf(path);
  if (!stamp.has_value()) {
    return absl::NotFoundError(
        absl::StrCat("--api_keys_file: cannot stat ", path, ": ", std::strerror(errno)));
  }
  absl::StatusOr<ApiKeySet> keys = ReadKeys(path);
  if (!keys.ok()) {
    return keys.status();
  }
  return std::unique_ptr<ApiKeyStore>(new ApiKeyStore(
      std::move(path), std::make_shared<const ApiKeySet>(*std::move(keys)), *stamp));
}

ApiKeyStore::ApiKeyStore(std::string path, std::shared_ptr<const ApiKeySet> keys, FileStamp stamp)
    : path_(std::move(path)), keys_(std::move(keys)), stamp_(stamp) {}

std::shared_ptr<const ApiKeySet> ApiKeyStore::keys() const {
  MutexLock lock(mu_);
  return keys_;
}

absl::StatusOr<Caller> ApiKeyStore::Authenticate(std::string_view authorization) const {
  const std::string value(absl::StripAsciiWhitespace(std::string(authorization)));
  if (value.empty()) {
    return absl::UnauthenticatedError(
        "missing API key: send the header \"Authorization: Bearer <key>\"");
  }
  const std::string key = absl::StartsWithIgnoreCase(value, "bearer ")
                              ? std::string(absl::StripAsciiWhitespace(value.substr(7)))
                              : std::string();
  if (key.empty()) {
    return absl::UnauthenticatedError("the Authorization header must be \"Bearer <key>\"");
  }
  std::optional<Caller> caller = keys()->Find(key);
  if (!caller.has_value()) {
    return absl::UnauthenticatedError("invalid API key");
  }
  return *std::move(caller);
}

absl::StatusOr<bool> ApiKeyStore::Reload(bool force) {
  std::optional<FileStamp> stamp = StampOf(path_);
  if (!stamp.has_value()) {
    return absl::NotFoundError(absl::StrCat("cannot stat ", path_, ": ", std::strerror(errno)));
  }
  {
    MutexLock lock(mu_);
    if (!force && *stamp == stamp_) {
      return false;
    }
  }
  absl::StatusOr<ApiKeySet> keys = ReadKeys(path_);
  MutexLock lock(mu_);
  stamp_ = *stamp;  // a bad file is reported once, not at every look
  if (!keys.ok()) {
    return keys.status();
  }
  keys_ = std::make_shared<const ApiKeySet>(*std::move(keys));
  return true;
}

}  // namespace loom
