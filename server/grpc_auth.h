// The API-key check of a gRPC call: its "authorization" metadata against
// --api_keys_file, shared by the generation RPCs and reflection.
#pragma once

#include "absl/status/statusor.h"
#include "grpcpp/server_context.h"
#include "server/api_keys.h"

namespace loom {

// The caller of `context`; with keys == nullptr (auth off) an anonymous one.
// UNAUTHENTICATED as ApiKeyStore::Authenticate says otherwise.
absl::StatusOr<Caller> AuthenticateCall(const ApiKeyStore* keys,
                                        const grpc::CallbackServerContext& context);

}  // namespace loom
