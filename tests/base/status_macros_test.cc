#include "base/status_macros.h"

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gtest/gtest.h"

namespace loom {
namespace {

absl::StatusOr<int> Parse(const std::string& text) {
  if (text.empty()) return absl::InvalidArgumentError("text is empty");
  return static_cast<int>(text.size());
}

absl::StatusOr<std::unique_ptr<int>> MakeBox(int value) {
  if (value < 0) return absl::OutOfRangeError("value must be >= 0");
  return std::make_unique<int>(value);
}

absl::Status Check(bool ok) { return ok ? absl::OkStatus() : absl::NotFoundError("missing"); }

int calls = 0;
absl::Status CountedCheck() {
  ++calls;
  return absl::OkStatus();
}

absl::Status UseReturnIfError(bool ok, int* reached) {
  LOOM_RETURN_IF_ERROR(Check(ok));
  ++*reached;
  return absl::OkStatus();
}

absl::Status ReturnIfErrorOnStatusOr(const std::string& text) {
  LOOM_RETURN_IF_ERROR(Parse(text));
  return absl::OkStatus();
}

absl::StatusOr<int> SumOfLengths(const std::string& a, const std::string& b) {
  LOOM_ASSIGN_OR_RETURN(int x, Parse(a));
  LOOM_ASSIGN_OR_RETURN(const int y, Parse(b));  // two on one scope need distinct temporaries
  return x + y;
}

absl::StatusOr<int> AssignToExisting(int value) {
  std::unique_ptr<int> box;
  LOOM_ASSIGN_OR_RETURN(box, MakeBox(value));  // move-only value
  return *box;
}

TEST(StatusMacrosTest, ReturnIfErrorPassesOkAndReturnsTheError) {
  int reached = 0;
  EXPECT_TRUE(UseReturnIfError(true, &reached).ok());
  EXPECT_EQ(reached, 1);
  const absl::Status status = UseReturnIfError(false, &reached);
  EXPECT_EQ(status, absl::NotFoundError("missing"));
  EXPECT_EQ(reached, 1);
}

TEST(StatusMacrosTest, ReturnIfErrorTakesAStatusOr) {
  EXPECT_TRUE(ReturnIfErrorOnStatusOr("abc").ok());
  EXPECT_EQ(ReturnIfErrorOnStatusOr(""), absl::InvalidArgumentError("text is empty"));
}

TEST(StatusMacrosTest, ReturnIfErrorEvaluatesOnce) {
  calls = 0;
  auto run = []() -> absl::Status {
    LOOM_RETURN_IF_ERROR(CountedCheck());
    return absl::OkStatus();
  };
  EXPECT_TRUE(run().ok());
  EXPECT_EQ(calls, 1);
}

TEST(StatusMacrosTest, AssignOrReturnDeclaresAndPropagates) {
  EXPECT_EQ(SumOfLengths("ab", "cde").value(), 5);
  EXPECT_EQ(SumOfLengths("ab", "").status(), absl::InvalidArgumentError("text is empty"));
  EXPECT_EQ(SumOfLengths("", "x").status(), absl::InvalidArgumentError("text is empty"));
}

TEST(StatusMacrosTest, AssignOrReturnMovesIntoAnExistingVariable) {
  EXPECT_EQ(AssignToExisting(7).value(), 7);
  EXPECT_EQ(AssignToExisting(-1).status().code(), absl::StatusCode::kOutOfRange);
}

}  // namespace
}  // namespace loom
