// The gRPC listener of loomd: GenerationService, grpc.health.v1.Health (Check
// and Watch, for "" and "loom.v1.GenerationService") and server reflection on
// one port. Health starts NOT_SERVING; the owner flips it as the lifecycle of
// DESIGN.md says (SERVING when ready, NOT_SERVING on drain or failure).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/server.h"
#include "server/generation_service.h"
#include "server/reflection_service.h"

namespace loom {

inline constexpr char kGenerationServiceName[] = "loom.v1.GenerationService";

// The listener's transport settings (docs/api.md), all set explicitly rather
// than left to gRPC's defaults.
struct GrpcServerOptions {
  // A larger request message fails with RESOURCE_EXHAUSTED naming the limit.
  int32_t max_receive_bytes = 16 << 20;
  // Pings an idle connection this often and drops it when the ack takes
  // longer than keepalive_timeout; clients may ping without calls in flight.
  absl::Duration keepalive_time = absl::Seconds(60);
  absl::Duration keepalive_timeout = absl::Seconds(20);
  bool keepalive_permit_without_calls = true;
  // HTTP/2 streams (calls) one connection may have open at once.
  int32_t max_concurrent_streams = 1024;
  // gRPC server reflection (grpcurl without .proto files): served to anyone,
  // to callers with a key of api_keys, or not at all.
  enum class Reflection { kOpen, kAuth, kOff };
  Reflection reflection = Reflection::kOpen;
  // The keys reflection asks for under kAuth; must outlive the server.
  const ApiKeyStore* api_keys = nullptr;
  // TLS (all PEM files; empty cert_file = plaintext). The files are watched
  // and re-read every tls_refresh, so that a rotated certificate (cert-manager)
  // serves new handshakes; client_ca_file turns on mTLS: a client must show a
  // certificate that CA signed.
  std::string tls_cert_file = {};
  std::string tls_key_file = {};
  std::string tls_client_ca_file = {};
  absl::Duration tls_refresh = absl::Seconds(5);
  // With TLS: a plaintext listener on this port (on the same host) serving
  // gRPC health alone, for kubelet probes, which cannot speak TLS. -1 = none,
  // 0 picks a free port.
  int32_t health_port = -1;
};

class GrpcServer {
 public:
  // Binds host:port (port 0 picks a free one) and starts serving. service must
  // outlive the server.
  static absl::StatusOr<std::unique_ptr<GrpcServer>> Start(const std::string& host, int port,
                                                           GenerationService& service,
                                                           const GrpcServerOptions& options = {});
  ~GrpcServer();  // Shutdown(now)

  GrpcServer(const GrpcServer&) = delete;
  GrpcServer& operator=(const GrpcServer&) = delete;

  int port() const { return port_; }
  // The health-only listener's port; 0 when there is none.
  int health_port() const { return health_port_; }

  // Health of "" and loom.v1.GenerationService, seen by Check and Watch.
  void SetServing(bool serving);

  // Stops the listener. Calls still running get until deadline to finish and
  // are cancelled then (health Watch streams stay open until then).
  void Shutdown(absl::Time deadline);

 private:
  GrpcServer() = default;

  // Declared before the servers that use them, so that they outlive them.
  std::unique_ptr<ReflectionService> reflection_;  // null with reflection off
  std::unique_ptr<grpc::CallbackGenericService> health_unimplemented_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> health_server_;  // null without one
  int health_port_ = 0;
  bool shut_down_ = false;
};

}  // namespace loom
