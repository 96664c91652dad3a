#include "server/grpc_server.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"

namespace loom {
namespace {

int ToMillis(absl::Duration d) { return static_cast<int>(absl::ToInt64Milliseconds(d)); }

void ApplyOptions(const GrpcServerOptions& options, grpc::ServerBuilder& builder) {
  builder.SetMaxReceiveMessageSize(options.max_receive_bytes);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, ToMillis(options.keepalive_time));
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, ToMillis(options.keepalive_timeout));
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS,
                             options.keepalive_permit_without_calls ? 1 : 0);
  // Clients may ping as often as the server does without being dropped.
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
                             ToMillis(std::min(options.keepalive_time, absl::Seconds(10))));
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, options.max_concurrent_streams);
}

}  // namespace

absl::StatusOr<std::unique_ptr<GrpcServer>> GrpcServer::Start(const std::string& host, int port,
                                                              GenerationService& service,
                                                              const GrpcServerOptions& options) {
  grpc::EnableDefaultHealthCheckService(true);
  if (options.reflection) {
    grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  }
  grpc::ServerBuilder builder;
  ApplyOptions(options, builder);
  // IPv6 literals need brackets in a gRPC target.
  const std::string address = host.find(':') != std::string::npos
                                  ? absl::StrCat("[", host, "]:", port)
                                  : absl::StrCat(host, ":", port);
  int bound_port = 0;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &bound_port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || bound_port == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen for gRPC on ", address));
  }
  auto grpc_server = std::unique_ptr<GrpcServer>(new GrpcServer(std::move(server), bound_port));
  // The default health service reports "" as SERVING from the start; the
  // daemon is not ready until its owner says so.
  grpc_server->SetServing(false);
  return grpc_server;
}

GrpcServer::~GrpcServer() { Shutdown(absl::Now()); }

void GrpcServer::SetServing(bool serving) {
  grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService();
  health->SetServingStatus("", serving);
  health->SetServingStatus(kGenerationServiceName, serving);
}

void GrpcServer::Shutdown(absl::Time deadline) {
  if (shut_down_) {
    return;
  }
  shut_down_ = true;
  server_->Shutdown(absl::ToChronoTime(deadline));
  server_->Wait();
}

}  // namespace loom
