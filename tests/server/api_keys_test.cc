// API keys: the file's format and its errors (which never show a key), the
// Authorization header, reloads, and the tenant-derived prefix-cache salt.
#include "server/api_keys.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace loom {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(ApiKeySetTest, ParsesKeysTenantsCommentsAndBlankLines) {
  absl::StatusOr<ApiKeySet> keys =
      ApiKeySet::Parse("# operators\n\nsk-admin\n  sk-a1  alpha \nsk-a2\talpha\nsk-b beta\n");
  ASSERT_TRUE(keys.ok()) << keys.status();
  EXPECT_EQ(keys->size(), 4u);
  EXPECT_TRUE(keys->has_tenants());
  EXPECT_THAT(keys->Tenants(), ElementsAre("alpha", "beta"));

  std::optional<Caller> admin = keys->Find("sk-admin");
  ASSERT_TRUE(admin.has_value());
  EXPECT_EQ(admin->tenant, "");
  EXPECT_TRUE(admin->tenant_isolation);
  EXPECT_EQ(keys->Find("sk-a1")->tenant, "alpha");
  EXPECT_EQ(keys->Find("sk-a2")->tenant, "alpha");
  EXPECT_EQ(keys->Find("sk-b")->tenant, "beta");
  for (const char* wrong : {"", "sk-", "sk-b ", "SK-B", "sk-bb", "# operators", "alpha"}) {
    EXPECT_FALSE(keys->Find(wrong).has_value()) << wrong;
  }
}

TEST(ApiKeySetTest, KeysWithoutTenantsLeaveSaltsAlone) {
  absl::StatusOr<ApiKeySet> keys = ApiKeySet::Parse("one\ntwo\n");
  ASSERT_TRUE(keys.ok());
  EXPECT_FALSE(keys->has_tenants());
  EXPECT_FALSE(keys->Find("two")->tenant_isolation);
}

TEST(ApiKeySetTest, ErrorsNameTheLineAndNeverTheKey) {
  const std::pair<const char*, const char*> cases[] = {
      {"ok-key\nsecret-key tenant extra\n",
       "line 2: expected a key and an optional tenant; got 3 fields"},
      {"secret-key bad/tenant\n", "line 1: a tenant must be 1 to 64 characters of [A-Za-z0-9_.-]"},
      {"secret-key\n#\nsecret-key t\n", "line 3: the key of an earlier line is repeated"},
      {"# nothing\n\n", "no key: every line is blank or a # comment"},
  };
  for (const auto& [text, message] : cases) {
    absl::StatusOr<ApiKeySet> keys = ApiKeySet::Parse(text);
    ASSERT_FALSE(keys.ok()) << text;
    EXPECT_EQ(keys.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(keys.status().message(), message);
    EXPECT_THAT(std::string(keys.status().message()), Not(HasSubstr("secret")));
  }
  EXPECT_FALSE(ApiKeySet::Parse(std::string("k ") + std::string(65, 't')).ok());
  EXPECT_TRUE(ApiKeySet::Parse(std::string("k ") + std::string(64, 't')).ok());
}

TEST(DeriveCacheSaltTest, TenantsNeverShareOrForgeASalt) {
  const Caller none{.tenant = "", .tenant_isolation = false};
  EXPECT_EQ(DeriveCacheSalt(none, "abc"), "abc");
  const Caller a{.tenant = "a", .tenant_isolation = true};
  const Caller ab{.tenant = "a:b", .tenant_isolation = true};
  const Caller b{.tenant = "b", .tenant_isolation = true};
  const Caller keyless{.tenant = "", .tenant_isolation = true};
  // The same request salt apart by tenant; and no request salt of one tenant
  // (or of a key without one) reproduces another's derived salt.
  EXPECT_NE(DeriveCacheSalt(a, "s"), DeriveCacheSalt(b, "s"));
  EXPECT_NE(DeriveCacheSalt(a, "b:s"), DeriveCacheSalt(ab, "s"));
  EXPECT_NE(DeriveCacheSalt(b, DeriveCacheSalt(a, "")), DeriveCacheSalt(a, ""));
  EXPECT_NE(DeriveCacheSalt(keyless, "tenant:1:a:"), DeriveCacheSalt(a, ""));
  EXPECT_EQ(DeriveCacheSalt(a, "s"), DeriveCacheSalt(a, "s"));
}

class ApiKeyStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = std::filesystem::temp_directory_path() /
            ("loom_api_keys_test_" + std::to_string(getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    Write("sk-one alpha\n");
    absl::StatusOr<std::unique_ptr<ApiKeyStore>> store = ApiKeyStore::Load(path_.string());
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
  }
  void TearDown() override { std::filesystem::remove(path_); }

  // Replaces the file (a new inode, as a Kubernetes Secret update does).
  void Write(const std::string& text) {
    const std::filesystem::path tmp = path_.string() + ".tmp";
    std::ofstream(tmp) << text;
    std::filesystem::rename(tmp, path_);
  }

  std::filesystem::path path_;
  std::unique_ptr<ApiKeyStore> store_;
};

TEST_F(ApiKeyStoreTest, AuthorizationHeaderForms) {
  absl::StatusOr<Caller> caller = store_->Authenticate("Bearer sk-one");
  ASSERT_TRUE(caller.ok()) << caller.status();
  EXPECT_EQ(caller->tenant, "alpha");
  EXPECT_TRUE(store_->Authenticate("bearer   sk-one ").ok());

  const std::pair<const char*, const char*> rejected[] = {
      {"", "missing API key: send the header \"Authorization: Bearer <key>\""},
      {"sk-one", "the Authorization header must be \"Bearer <key>\""},
      {"Basic c2stb25lOg==", "the Authorization header must be \"Bearer <key>\""},
      {"Bearer ", "the Authorization header must be \"Bearer <key>\""},
      {"Bearer sk-two", "invalid API key"},
  };
  for (const auto& [header, message] : rejected) {
    absl::StatusOr<Caller> bad = store_->Authenticate(header);
    ASSERT_FALSE(bad.ok()) << header;
    EXPECT_EQ(bad.status().code(), absl::StatusCode::kUnauthenticated);
    EXPECT_EQ(bad.status().message(), message) << header;
  }
}

TEST_F(ApiKeyStoreTest, ReloadsWhenTheFileChangesAndKeepsKeysOnABadFile) {
  absl::StatusOr<bool> unchanged = store_->Reload(false);
  ASSERT_TRUE(unchanged.ok());
  EXPECT_FALSE(*unchanged);

  Write("sk-two beta\n");
  absl::StatusOr<bool> changed = store_->Reload(false);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_TRUE(*changed);
  EXPECT_FALSE(store_->Authenticate("Bearer sk-one").ok());
  EXPECT_EQ(store_->Authenticate("Bearer sk-two")->tenant, "beta");

  Write("sk-three a b c\n");
  absl::StatusOr<bool> bad = store_->Reload(false);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()),
              HasSubstr("line 1: expected a key and an optional tenant; got 4 fields"));
  EXPECT_TRUE(store_->Authenticate("Bearer sk-two").ok()) << "the keys in force stay";
  // Reported once: the next look finds the same (bad) file and says nothing.
  EXPECT_TRUE(store_->Reload(false).ok());

  // A forced reload (SIGHUP) reads the file even when nothing seems changed.
  Write("sk-four\n");
  ASSERT_TRUE(*store_->Reload(true));
  EXPECT_FALSE(store_->Authenticate("Bearer sk-four")->tenant_isolation);
}

TEST(ApiKeyStoreLoadTest, MissingOrBadFileIsAnErrorNamingIt) {
  absl::StatusOr<std::unique_ptr<ApiKeyStore>> missing =
      ApiKeyStore::Load("/nonexistent/loom/keys");
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("/nonexistent/loom/keys"));
}

}  // namespace
}  // namespace loom
