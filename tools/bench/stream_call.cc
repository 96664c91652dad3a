#include "tools/bench/stream_call.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace loom::bench {
namespace {

double Seconds(StreamCall::Clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

StreamCall::StreamCall(v1::GenerateRequest request, Options options,
                       std::function<void(StreamCall&)> on_done)
    : request_(std::move(request)), options_(options), on_done_(std::move(on_done)) {}

void StreamCall::Start(v1::GenerationService::Stub& stub) {
  if (options_.timeout != absl::InfiniteDuration()) {
    context_.set_deadline(absl::ToChronoTime(absl::Now() + options_.timeout));
  }
  start_ = Clock::now();
  stub.async()->GenerateStream(&context_, &request_, this);
  StartRead(&message_);
  StartCall();
}

void StreamCall::OnReadDone(bool ok) {
  if (!ok) return;  // the stream ended; OnDone follows
  const Clock::time_point now = Clock::now();
  ++messages_;
  if (message_.token_ids_size() > 0) {
    if (output_tokens_ == 0) {
      first_token_ = now;
    } else {
      itls_.push_back(Seconds(now - last_token_));
    }
    last_token_ = now;
    output_tokens_ += message_.token_ids_size();
  }
  if (message_.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) {
    finish_reason_ = message_.finish_reason();
  }
  if (message_.has_usage()) {
    has_usage_ = true;
    usage_ = message_.usage();
  }
  if (options_.cancel_after_messages > 0 && messages_ == options_.cancel_after_messages) {
    context_.TryCancel();
  }
  StartRead(&message_);
}

void StreamCall::OnDone(const grpc::Status& status) {
  end_ = Clock::now();
  status_ = status;
  on_done_(*this);
}

double StreamCall::ttft() const { return output_tokens_ > 0 ? Seconds(first_token_ - start_) : 0; }

double StreamCall::e2el() const { return Seconds(end_ - start_); }

RequestRecord ToRecord(const StreamCall& call) {
  RequestRecord r;
  r.ok = call.status().ok();
  r.input_tokens = call.has_usage() ? call.usage().prompt_tokens() : 0;
  r.output_tokens = call.output_tokens();
  r.ttft = call.ttft();
  r.e2el = call.e2el();
  r.itls = call.itls();
  return r;
}

std::string ErrorOf(const StreamCall& call) {
  const grpc::Status& status = call.status();
  return status.ok() ? "" : absl::StrCat(status.error_code(), ": ", status.error_message());
}

}  // namespace loom::bench
