#include <chrono>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "grpcpp/client_context.h"
#include "loom/v1/generation.grpc.pb.h"
#include "tools/loom/commands.h"

namespace loom::cli {
namespace {

const char* FinishName(v1::FinishReason reason) {
  switch (reason) {
    case v1::FINISH_REASON_STOP:
      return "stop";
    case v1::FINISH_REASON_LENGTH:
      return "length";
    case v1::FINISH_REASON_ABORTED:
      return "aborted";
    default:
      return "unfinished";
  }
}

v1::GenerateRequest MakeRequest(const GenerateOptions& options) {
  v1::GenerateRequest request;
  if (options.chat) {
    v1::ChatMessage* message = request.mutable_messages()->add_messages();
    message->set_role("user");
    message->set_content(options.prompt);
  } else {
    request.set_prompt(options.prompt);
  }
  if (options.max_tokens.has_value()) {
    request.mutable_stopping()->set_max_tokens(*options.max_tokens);
  }
  if (options.temperature.has_value()) {
    request.mutable_sampling()->set_temperature(*options.temperature);
  }
  if (options.top_p.has_value()) {
    request.mutable_sampling()->set_top_p(*options.top_p);
  }
  if (options.seed.has_value()) {
    request.mutable_sampling()->set_seed(*options.seed);
  }
  return request;
}

}  // namespace

int Generate(const std::shared_ptr<grpc::Channel>& channel, const GenerateOptions& options,
             std::ostream& out, std::ostream& err) {
  auto stub = v1::GenerationService::NewStub(channel);
  grpc::ClientContext context;
  if (options.timeout != absl::InfiniteDuration()) {
    context.set_deadline(absl::ToChronoTime(absl::Now() + options.timeout));
  }
  auto reader = stub->GenerateStream(&context, MakeRequest(options));
  v1::GenerateStreamResponse message;
  v1::FinishReason finish = v1::FINISH_REASON_UNSPECIFIED;
  v1::Usage usage;
  while (reader->Read(&message)) {
    out << message.text() << std::flush;
    if (message.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) {
      finish = message.finish_reason();
    }
    if (message.has_usage()) {
      usage = message.usage();
    }
  }
  out << "\n" << std::flush;
  const grpc::Status status = reader->Finish();
  if (!status.ok()) {
    err << "error: " << absl::StatusCodeToString(static_cast<absl::StatusCode>(status.error_code()))
        << ": " << status.error_message() << "\n";
    return 1;
  }
  err << absl::StrFormat("[%s: %d prompt + %d generated tokens, ttft %.3fs, total %.3fs]\n",
                         FinishName(finish), usage.prompt_tokens(), usage.completion_tokens(),
                         usage.time_to_first_token_seconds(), usage.total_seconds());
  return 0;
}

}  // namespace loom::cli
