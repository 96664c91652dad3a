#include "server/grpc_auth.h"

#include <string_view>

namespace loom {

absl::StatusOr<Caller> AuthenticateCall(const ApiKeyStore* keys,
                                        const grpc::CallbackServerContext& context) {
  if (keys == nullptr) {
    return Caller{};
  }
  const auto& metadata = context.client_metadata();
  const auto it = metadata.find("authorization");
  return keys->Authenticate(it == metadata.end()
                                ? std::string_view()
                                : std::string_view(it->second.data(), it->second.size()));
}

}  // namespace loom
