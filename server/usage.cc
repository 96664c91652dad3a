#include "server/usage.h"

#include <string_view>

#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "kernels/cpu/cpu_features.h"

#ifndef LOOM_VERSION
#define LOOM_VERSION "unknown"
#endif

namespace loom {
namespace {

constexpr char kUsage[] = R"(loomd serves a Llama-family model over gRPC and the OpenAI HTTP API.

Usage: loomd [--model=PATH] [flags]

Common flags:
  --model=PATH               a .gguf file or a Hugging Face model folder
                             (default: the bundled SmolLM2-135M-Instruct GGUF)
  --host=ADDR                address to listen on (default 0.0.0.0: every interface)
  --port=N, --http_port=N    gRPC port (50051) and HTTP port (8080: OpenAI API,
                             /metrics, /healthz, /readyz)
  --device=auto|cpu|cuda     where steps run (auto: CUDA when a GPU is usable)
  --threads=N                CPU threads (default: every core)
  --max_model_len=N          longest prompt plus output (default: the model's)
  --served_model_name=NAME   the model name clients see
  --chat_template=FILE       a Jinja chat template in place of the model's
  --api_keys_file=FILE       require API keys, "key [tenant]" a line
  --tls_cert_file=FILE, --tls_key_file=FILE
                             TLS on both ports

Every flag with its default: loomd --helpfull. The contract (flags, limits,
metrics, exit codes): docs/api.md. Version, build and CPU: loomd --version.
)";

}  // namespace

std::string ShortUsage() { return kUsage; }

std::string VersionText() {
#ifdef NDEBUG
  const char* build = "release (optimized, NDEBUG)";
#else
  const char* build = "debug (assertions on)";
#endif
#ifdef LOOM_HAVE_CUDA
  const char* cuda =
      "built in (--device=auto uses it when a GPU and its driver are usable at run time)";
#else
  const char* cuda = "not built (this binary runs on the CPU only)";
#endif
  namespace kc = kernels::cpu;
  return absl::StrCat("loomd ", LOOM_VERSION, "\nbuild: ", build, "\nCPU: ", kc::CpuModelName(),
                      "\nCPU features: ", kc::CpuFeatureNames(),
                      " (kernels: ", kc::SimdName(kc::DetectedSimd()), ")\nCUDA backend: ", cuda,
                      "\n");
}

bool WantsShortUsage(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--") return false;
    if (arg == "--help" || arg == "-help" || arg == "-h") return true;
  }
  return false;
}

void ConfigureUsage() {
  absl::SetProgramUsageMessage(kUsage);
  absl::FlagsUsageConfig config;
  config.contains_help_flags = [](absl::string_view path) {
    return absl::EndsWith(path, "server/main.cc");
  };
  config.contains_helpshort_flags = config.contains_help_flags;
  config.version_string = [] { return VersionText(); };
  absl::SetFlagsUsageConfig(config);
}

}  // namespace loom
