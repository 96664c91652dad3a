// gRPC server reflection (grpc.reflection.v1 and v1alpha: list the services,
// hand out the file descriptors of a file, symbol or extension) over the
// protobuf descriptors linked into loomd. loomd answers it itself rather than
// through gRPC's plugin so that --reflection=auth can ask for an API key, as
// the generation RPCs do, before a caller learns the API's shape.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "grpcpp/impl/service_type.h"
#include "server/api_keys.h"

namespace loom {

struct ReflectionOptions {
  // What list_services answers: the full names of the services on the port.
  std::vector<std::string> services;
  // Non-null: every reflection stream needs a valid key (UNAUTHENTICATED
  // otherwise, before any answer). Must outlive the service.
  const ApiKeyStore* api_keys = nullptr;
};

// Answers one reflection request; the part both protocol versions share.
class ReflectionIndex {
 public:
  explicit ReflectionIndex(std::vector<std::string> services) : services_(std::move(services)) {}

  const std::vector<std::string>& services() const { return services_; }
  // The serialized FileDescriptorProto of the file, then of every file it
  // depends on, directly or not, each once. NOT_FOUND naming what is missing.
  absl::StatusOr<std::vector<std::string>> FileByName(const std::string& name) const;
  absl::StatusOr<std::vector<std::string>> FileContainingSymbol(const std::string& symbol) const;
  absl::StatusOr<std::vector<std::string>> FileContainingExtension(const std::string& type,
                                                                   int32_t number) const;
  absl::StatusOr<std::vector<int32_t>> ExtensionNumbers(const std::string& type) const;

 private:
  std::vector<std::string> services_;
};

class ReflectionService {
 public:
  explicit ReflectionService(ReflectionOptions options);
  ~ReflectionService();

  ReflectionService(const ReflectionService&) = delete;
  ReflectionService& operator=(const ReflectionService&) = delete;

  // Both protocol versions, to register on the server.
  grpc::Service* v1();
  grpc::Service* v1alpha();

 private:
  ReflectionIndex index_;
  std::unique_ptr<grpc::Service> v1_;
  std::unique_ptr<grpc::Service> v1alpha_;
};

}  // namespace loom
