#include "engine/output_processor.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/base/internal/raw_logging.h"

namespace loom {

OutputProcessor::OutputProcessor(std::shared_ptr<const Detokenizer> detokenizer,
                                 EngineObserver* observer)
    : detokenizer_(std::move(detokenizer)), observer_(observer) {
  ABSL_RAW_CHECK(detokenizer_ != nullptr, "OutputProcessor needs a detokenizer");
}

void OutputProcessor::Add(RequestId id, RequestHandle handle, const RequestParams& params,
                          std::shared_ptr<OutputSink> sink) {
  Request request;
  request.id = id;
  request.sink = std::move(sink);
  request.stopping = params.stopping;
  request.want_logprobs = params.sampling.num_logprobs >= 0;
  if (params.prompt_logprobs >= 0 && !params.prompt_token_ids.empty()) {
    request.prompt_logprobs.resize(params.prompt_token_ids.size() - 1);
    request.prompt_logprobs_pending = true;
    request.first_prompt_token_id = params.prompt_token_ids[0];
  }
  request.arrival_time = params.arrival_time;
  request.tenant = params.tenant;
  request.usage.prompt_tokens = static_cast<uint32_t>(params.prompt_token_ids.size());
  const int32_t n = std::max(params.n, 1);
  request.samples.reserve(n);
  for (int32_t i = 0; i < n; ++i) {
    request.samples.emplace_back(
        detokenizer_->NewStream(),
        StopStringMatcher(params.stopping.stop, params.stopping.include_stop_str_in_output));
  }
  request.num_unfinished = n;
  const bool inserted = requests_.emplace(handle, std::move(request)).second;
  ABSL_RAW_CHECK(inserted, "scheduler handle reused");
  handle_of_id_[id] = handle;
}

std::optional<RequestHandle> OutputProcessor::FindHandle(RequestId id) const {
  auto it = handle_of_id_.find(id);
  if (it == handle_of_id_.end()) return std::nullopt;
  return it->second;
}

OutputProcessor::StepOutcome OutputProcessor::ProcessStep(const UpdateOutput& update,
                                                          absl::Time now) {
  StepOutcome outcome;
  for (const StartedRequest& started : update.started) {
    auto it = requests_.find(started.handle);
    if (it == requests_.end()) continue;
    Usage& usage = it->second.usage;
    usage.queue_seconds = absl::ToDoubleSeconds(started.scheduled_time - it->second.arrival_time);
    usage.cached_prompt_tokens = static_cast<uint32_t>(started.num_cached_prompt_tokens);
    outcome.num_started_prompt_tokens += usage.prompt_tokens;
  }

  for (const PromptLogprobsUpdate& prompt : update.prompt_logprobs) StorePromptLogprobs(prompt);

  absl::flat_hash_map<std::pair<RequestHandle, uint32_t>, const FinishedSeq*> finishes;
  for (const FinishedSeq& finished : update.finished) {
    finishes[{finished.handle, finished.index}] = &finished;
  }

  // One output per request that progressed, in the order the tokens came.
  std::vector<std::pair<RequestHandle, RequestOutput>> outputs;
  absl::flat_hash_map<RequestHandle, size_t> output_slot;
  auto output_for = [&](RequestHandle handle) -> RequestOutput& {
    auto [it, inserted] = output_slot.try_emplace(handle, outputs.size());
    if (inserted) outputs.emplace_back(handle, RequestOutput{});
    return outputs[it->second].second;
  };

  inter_token_seconds_.clear();
  for (const NewToken& token : update.new_tokens) {
    auto it = requests_.find(token.handle);
    if (it == requests_.end()) continue;
    Request& request = it->second;
    if (token.index >= request.samples.size() || request.samples[token.index].finished) continue;
    auto finish = finishes.find({token.handle, token.index});
    AppendToken(request, token, finish == finishes.end() ? nullptr : finish->second, now,
                output_for(token.handle), outcome.stop_string_ends);
  }
  // A token-based finish always comes with its token; this only keeps the
  // books straight should a finish arrive alone.
  for (const FinishedSeq& finished : update.finished) {
    auto it = requests_.find(finished.handle);
    if (it == requests_.end() || finished.index >= it->second.samples.size()) continue;
    Sample& sample = it->second.samples[finished.index];
    if (sample.finished) continue;
    SampleDelta& delta = DeltaFor(output_for(finished.handle), finished.index);
    delta.text += sample.matcher.Flush() + sample.decoder->Flush();
    EndSample(it->second, sample, delta, finished.reason, finished.stop_reason);
  }
  if (observer_ != nullptr && !inter_token_seconds_.empty()) {
    observer_->OnInterTokenLatencies(inter_token_seconds_);
  }

  for (auto& [handle, output] : outputs) {
    Request& request = requests_.at(handle);
    if (request.num_unfinished > 0) {
      request.sink->Push(std::move(output));
      continue;
    }
    const bool length = std::any_of(request.samples.begin(), request.samples.end(),
                                    [](const Sample& s) { return s.length_limited; });
    Finish(handle, std::move(output), absl::OkStatus(),
           length ? FinishLabel::kLength : FinishLabel::kStop, now);
    ++outcome.num_finished;
  }
  return outcome;
}

void OutputProcessor::StorePromptLogprobs(const PromptLogprobsUpdate& update) {
  auto it = requests_.find(update.handle);
  if (it == requests_.end() || !it->second.prompt_logprobs_pending) return;
  std::vector<TokenLogprobs>& stored = it->second.prompt_logprobs;
  for (size_t i = 0; i < update.entries.size(); ++i) {
    const size_t slot = static_cast<size_t>(update.first_position - 1) + i;
    if (slot >= stored.size()) break;
    const PromptTokenLogprob& entry = update.entries[i];
    stored[slot] = TokenLogprobs{entry.token_id, entry.logprob, entry.top, entry.rank};
  }
}

void OutputProcessor::AppendToken(Request& request, const NewToken& token,
                                  const FinishedSeq* finish, absl::Time now, RequestOutput& output,
                                  std::vector<SampleRef>& stop_string_ends) {
  Sample& sample = request.samples[token.index];
  SampleDelta& delta = DeltaFor(output, token.index);
  if (request.stopping.max_tokens == 0) {
    // Only the prompt was to be scored: the token sampled after it is not
    // output, and the sample ends on its length.
    if (request.prompt_logprobs_pending) {
      output.prompt_logprobs = std::move(request.prompt_logprobs);
      output.first_prompt_token_id = request.first_prompt_token_id;
      request.prompt_logprobs_pending = false;
    }
    if (!request.first_token_time) request.first_token_time = now;
    EndSample(request, sample, delta, FinishReason::kLength, "");
    return;
  }
  ++sample.num_tokens;
  ++request.usage.completion_tokens;
  delta.token_ids.push_back(token.token_id);
  if (request.prompt_logprobs_pending) {
    output.prompt_logprobs = std::move(request.prompt_logprobs);
    output.first_prompt_token_id = request.first_prompt_token_id;
    request.prompt_logprobs_pending = false;
  }
  if (request.want_logprobs)
    delta.logprobs.push_back({token.token_id, token.logprob, token.top, 0});
  if (!request.first_token_time) request.first_token_time = now;
  if (sample.num_tokens > 1) {
    inter_token_seconds_.push_back(absl::ToDoubleSeconds(now - sample.last_token_time));
  }
  sample.last_token_time = now;

  // The text of a stop token (EOS or stop_token_ids) is left out, as a stop
  // string is, unless the client asked for it. The token that completes a
  // constraint is output, not a stop token.
  const bool stopped_by_token =
      finish != nullptr && finish->reason == FinishReason::kStop && !finish->completes_constraint;
  std::string text;
  if (!stopped_by_token || request.stopping.include_stop_str_in_output) {
    text = sample.decoder->Append(token.token_id);
  }
  StopStringMatcher::Result match =
      sample.matcher.Append(text, sample.num_tokens >= request.stopping.min_tokens);
  delta.text += match.text;
  if (match.stop_string) {
    if (finish == nullptr) stop_string_ends.push_back({token.handle, token.index});
    EndSample(request, sample, delta, FinishReason::kStop, std::move(*match.stop_string));
  } else if (finish != nullptr) {
    delta.text += sample.matcher.Flush() + sample.decoder->Flush();
    EndSample(request, sample, delta, finish->reason, finish->stop_reason);
  }
}

SampleDelta& OutputProcessor::DeltaFor(RequestOutput& output, uint32_t index) {
  for (SampleDelta& delta : output.samples) {
    if (delta.index == index) return delta;
  }
  SampleDelta& delta = output.samples.emplace_back();
  delta.index = index;
  return delta;
}

void OutputProcessor::EndSample(Request& request, Sample& sample, SampleDelta& delta,
                                FinishReason reason, std::string stop_reason) {
  sample.finished = true;
  sample.length_limited = reason == FinishReason::kLength;
  --request.num_unfinished;
  delta.finish_reason = reason;
  delta.stop_reason = std::move(stop_reason);
}

bool OutputProcessor::Fail(RequestHandle handle, const absl::Status& status, absl::Time now) {
  auto it = requests_.find(handle);
  if (it == requests_.end()) return false;
  RequestOutput output;
  for (uint32_t i = 0; i < it->second.samples.size(); ++i) {
    Sample& sample = it->second.samples[i];
    if (sample.finished) continue;
    sample.finished = true;
    SampleDelta& delta = output.samples.emplace_back();
    delta.index = i;
    delta.finish_reason = FinishReason::kAborted;
  }
  it->second.num_unfinished = 0;
  Finish(handle, std::move(output), status, FinishLabelFor(status), now);
  return true;
}

void OutputProcessor::Finish(RequestHandle handle, RequestOutput output, const absl::Status& status,
                             FinishLabel label, absl::Time now) {
  auto it = requests_.find(handle);
  ABSL_RAW_CHECK(it != requests_.end(), "finishing an untracked request");
  Request& request = it->second;
  request.usage.total_seconds = absl::ToDoubleSeconds(now - request.arrival_time);
  if (request.first_token_time) {
    request.usage.time_to_first_token_seconds =
        absl::ToDoubleSeconds(*request.first_token_time - request.arrival_time);
  }
  output.finished = true;
  output.status = status;
  output.usage = request.usage;
  // Counted before the sink sees it: a client holding its reply finds it in /metrics.
  if (observer_ != nullptr) observer_->OnRequestFinished(label, request.usage, request.tenant);
  request.sink->Push(std::move(output));
  handle_of_id_.erase(request.id);
  requests_.erase(it);
}

std::vector<RequestHandle> OutputProcessor::handles() const {
  std::vector<RequestHandle> handles;
  handles.reserve(requests_.size());
  for (const auto& [handle, request] : requests_) handles.push_back(handle);
  return handles;
}

}  // namespace loom
