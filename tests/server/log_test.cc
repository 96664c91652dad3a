// The asynchronous logger never makes its callers wait for the reader of its
// file descriptor: with a pipe nobody reads, Log returns, drops what does not
// fit its queue and counts it; once the reader drains the pipe, every line
// that was kept arrives whole.
#include "server/log.h"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/access_log.h"

namespace loom {
namespace {

TEST(AsyncLoggerTest, BlockedPipeDropsAndCountsInsteadOfBlocking) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  constexpr int kLines = 20000;
  constexpr size_t kQueueBytes = 16 << 10;
  uint64_t dropped = 0;
  {
    AsyncLogger logger(fds[1], kQueueBytes);
    // 20,000 lines of ~100 bytes are ~30 times the pipe's 64 KiB plus the
    // queue: the writer blocks on the pipe early. A Log that waited for it
    // would never return, so the bound below is only a hang detector.
    auto logging = std::async(std::launch::async, [&logger] {
      for (int i = 0; i < kLines; ++i) {
        logger.Log(absl::StrCat("line ", i, " ", std::string(80, 'x')));
      }
    });
    ASSERT_EQ(logging.wait_for(std::chrono::seconds(60)), std::future_status::ready)
        << "Log blocked on a pipe nobody reads";
    dropped = logger.dropped();
    EXPECT_GT(dropped, 0U);
    EXPECT_LT(dropped, static_cast<uint64_t>(kLines));

    // Now read: the writer unblocks and the destructor writes what is queued.
    auto reader = std::async(std::launch::async, [fd = fds[0]] {
      std::string all;
      char buffer[65536];
      ssize_t n;
      while ((n = read(fd, buffer, sizeof buffer)) > 0) all.append(buffer, n);
      return all;
    });
    ASSERT_TRUE(logger.Flush(absl::Seconds(60)));
    EXPECT_EQ(logger.written() + logger.dropped(), static_cast<uint64_t>(kLines));
    EXPECT_EQ(logger.dropped(), dropped);
    const uint64_t written = logger.written();
    close(fds[1]);
    const std::string all = reader.get();
    close(fds[0]);
    int whole = 0;
    for (absl::string_view line : absl::StrSplit(all, '\n', absl::SkipEmpty())) {
      EXPECT_THAT(std::string(line), ::testing::EndsWith(std::string(80, 'x')));
      ++whole;
    }
    EXPECT_EQ(static_cast<uint64_t>(whole), written);
  }
}

TEST(AsyncLoggerTest, LinesAreTimestampedAndFlushed) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  AsyncLogger logger(fds[1], 1 << 20);
  logger.Log("hello");
  ASSERT_TRUE(logger.Flush(absl::Seconds(30)));
  char buffer[256];
  const ssize_t n = read(fds[0], buffer, sizeof buffer);
  ASSERT_GT(n, 0);
  const std::string line(buffer, static_cast<size_t>(n));
  // 2026-01-02T03:04:05.678Z hello
  EXPECT_THAT(line, ::testing::MatchesRegex("[0-9-]+T[0-9:.]+Z hello\n"));
  EXPECT_EQ(logger.dropped(), 0U);
  close(fds[0]);
  close(fds[1]);
}

TEST(AccessLogTest, LineCarriesIdMethodStatusTokensAndTimes) {
  Usage usage;
  usage.prompt_tokens = 5;
  usage.completion_tokens = 16;
  usage.queue_seconds = 0.002;
  usage.time_to_first_token_seconds = 0.031;
  usage.total_seconds = 0.412;
  EXPECT_EQ(AccessLogLine("r1", "GenerateStream", absl::OkStatus(), usage),
            "access id=r1 method=GenerateStream status=OK prompt_tokens=5 output_tokens=16 "
            "queue_s=0.002 ttft_s=0.031 total_s=0.412");
  EXPECT_EQ(AccessLogLine("", "Generate", absl::InvalidArgumentError("x"), Usage{}),
            "access id=- method=Generate status=INVALID_ARGUMENT prompt_tokens=0 output_tokens=0 "
            "queue_s=0.000 ttft_s=0.000 total_s=0.000");
}

}  // namespace
}  // namespace loom
