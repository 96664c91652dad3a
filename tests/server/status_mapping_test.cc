// API.md's status table: each outcome keeps its code and message over gRPC.
#include "server/status_mapping.h"

#include "gtest/gtest.h"

namespace loom {
namespace {

TEST(StatusMappingTest, KeepsCodeAndMessage) {
  struct Case {
    absl::Status in;
    grpc::StatusCode out;
  };
  const Case cases[] = {
      {absl::InvalidArgumentError("sampling.n must be in [1, 16]; got 0"),
       grpc::StatusCode::INVALID_ARGUMENT},
      {absl::ResourceExhaustedError("queue has 1024 requests; limit 1024"),
       grpc::StatusCode::RESOURCE_EXHAUSTED},
      {DrainingStatus(), grpc::StatusCode::UNAVAILABLE},
      {absl::DeadlineExceededError("deadline passed"), grpc::StatusCode::DEADLINE_EXCEEDED},
      {absl::CancelledError("aborted"), grpc::StatusCode::CANCELLED},
      {EngineFailedStatus(), grpc::StatusCode::INTERNAL},
      {absl::UnimplementedError("x"), grpc::StatusCode::UNIMPLEMENTED},
      {absl::FailedPreconditionError("no chat template"), grpc::StatusCode::FAILED_PRECONDITION},
  };
  for (const Case& c : cases) {
    grpc::Status s = ToGrpcStatus(c.in);
    EXPECT_EQ(s.error_code(), c.out) << c.in;
    EXPECT_EQ(s.error_message(), std::string(c.in.message()));
  }
  EXPECT_TRUE(ToGrpcStatus(absl::OkStatus()).ok());
}

TEST(StatusMappingTest, FinishReasons) {
  EXPECT_EQ(ToProtoFinishReason(FinishReason::kNone), v1::FINISH_REASON_UNSPECIFIED);
  EXPECT_EQ(ToProtoFinishReason(FinishReason::kStop), v1::FINISH_REASON_STOP);
  EXPECT_EQ(ToProtoFinishReason(FinishReason::kLength), v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(ToProtoFinishReason(FinishReason::kAborted), v1::FINISH_REASON_ABORTED);
}

}  // namespace
}  // namespace loom
