#include "server/metrics_process.h"

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <system_error>

namespace loom {
namespace {

// The fields of /proc/self/stat after "pid (comm) ": the command name may hold
// spaces and parentheses, so parsing starts after the last ')'.
struct ProcStat {
  uint64_t utime_ticks = 0;
  uint64_t stime_ticks = 0;
  uint64_t start_ticks = 0;  // since boot
};

std::optional<ProcStat> ReadProcStat() {
  std::ifstream in("/proc/self/stat");
  std::string line((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t paren = line.rfind(')');
  if (paren == std::string::npos) {
    return std::nullopt;
  }
  std::istringstream fields(line.substr(paren + 1));
  // Field 3 (state) is the first after the name; utime is 14, stime 15, starttime 22.
  std::string field;
  ProcStat stat;
  for (int index = 3; index <= 22 && fields >> field; ++index) {
    if (index == 14) {
      stat.utime_ticks = std::stoull(field);
    }
    if (index == 15) {
      stat.stime_ticks = std::stoull(field);
    }
    if (index == 22) {
      stat.start_ticks = std::stoull(field);
    }
  }
  if (!fields) {
    return std::nullopt;
  }
  return stat;
}

// Seconds since the epoch at which the machine booted (/proc/stat "btime").
std::optional<double> ReadBootTime() {
  std::ifstream in("/proc/stat");
  std::string key;
  while (in >> key) {
    if (key == "btime") {
      double btime = 0;
      if (in >> btime) {
        return btime;
      }
      return std::nullopt;
    }
    in.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  return std::nullopt;
}

prometheus::MetricFamily Single(const char* name, const char* help, prometheus::MetricType type,
                                double value) {
  prometheus::MetricFamily family{name, help, type, {}};
  prometheus::ClientMetric metric;
  if (type == prometheus::MetricType::Counter) {
    metric.counter.value = value;
  } else {
    metric.gauge.value = value;
  }
  family.metric.push_back(std::move(metric));
  return family;
}

}  // namespace

ProcessCollector::ProcessCollector() {
  const std::optional<ProcStat> stat = ReadProcStat();
  const std::optional<double> boot = ReadBootTime();
  if (stat && boot) {
    start_time_seconds_ =
        *boot + static_cast<double>(stat->start_ticks) / static_cast<double>(sysconf(_SC_CLK_TCK));
  }
}

std::vector<prometheus::MetricFamily> ProcessCollector::Collect() const {
  using prometheus::MetricType;
  std::vector<prometheus::MetricFamily> families;
  families.push_back(Single("process_start_time_seconds",
                            "Start time of the process since the epoch in seconds.",
                            MetricType::Gauge, start_time_seconds_));
  if (const std::optional<ProcStat> stat = ReadProcStat()) {
    const auto ticks = static_cast<double>(stat->utime_ticks + stat->stime_ticks);
    families.push_back(
        Single("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.",
               MetricType::Counter, ticks / static_cast<double>(sysconf(_SC_CLK_TCK))));
  }
  std::ifstream statm("/proc/self/statm");
  double size_pages = 0;
  double resident_pages = 0;
  if (statm >> size_pages >> resident_pages) {
    const auto page = static_cast<double>(sysconf(_SC_PAGESIZE));
    families.push_back(Single("process_virtual_memory_bytes", "Virtual memory size in bytes.",
                              MetricType::Gauge, size_pages * page));
    families.push_back(Single("process_resident_memory_bytes", "Resident memory size in bytes.",
                              MetricType::Gauge, resident_pages * page));
  }
  std::error_code error;
  double open_fds = 0;
  for (std::filesystem::directory_iterator it("/proc/self/fd", error), end; !error && it != end;
       it.increment(error)) {
    ++open_fds;
  }
  if (!error) {
    families.push_back(Single("process_open_fds", "Number of open file descriptors.",
                              MetricType::Gauge, open_fds));
  }
  return families;
}

}  // namespace loom
