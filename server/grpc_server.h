// The gRPC listener of loomd: GenerationService, grpc.health.v1.Health (Check
// and Watch, for "" and "loom.v1.GenerationService") and server reflection on
// one port. Health starts NOT_SERVING; the owner flips it as the lifecycle of
// DESIGN.md says (SERVING when ready, NOT_SERVING on drain or failure).
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/server.h"
#include "server/generation_service.h"

namespace loom {

inline constexpr char kGenerationServiceName[] = "loom.v1.GenerationService";

class GrpcServer {
 public:
  // Binds host:port (port 0 picks a free one) and starts serving. service must
  // outlive the server.
  static absl::StatusOr<std::unique_ptr<GrpcServer>> Start(const std::string& host, int port,
                                                           GenerationService& service);
  ~GrpcServer();  // Shutdown(now)

  GrpcServer(const GrpcServer&) = delete;
  GrpcServer& operator=(const GrpcServer&) = delete;

  int port() const { return port_; }

  // Health of "" and loom.v1.GenerationService, seen by Check and Watch.
  void SetServing(bool serving);

  // Stops the listener. Calls still running get until deadline to finish and
  // are cancelled then (health Watch streams stay open until then).
  void Shutdown(absl::Time deadline);

 private:
  GrpcServer(std::unique_ptr<grpc::Server> server, int port)
      : server_(std::move(server)), port_(port) {}

  std::unique_ptr<grpc::Server> server_;
  int port_;
  bool shut_down_ = false;
};

}  // namespace loom
