#include "server/grpc_server.h"

#include <algorithm>
#include <fstream>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/security/tls_certificate_provider.h"
#include "grpcpp/security/tls_credentials_options.h"
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

// IPv6 literals need brackets in a gRPC target.
std::string Address(const std::string& host, int port) {
  return host.find(':') != std::string::npos ? absl::StrCat("[", host, "]:", port)
                                             : absl::StrCat(host, ":", port);
}

// A PEM file the TLS flags name must be readable at start: a typo fails here,
// not at every handshake.
absl::Status CheckPemFile(const char* flag, const std::string& path) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("-----BEGIN ", 0) == 0) {
      return absl::OkStatus();
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--", flag, "=", path, ": not a readable PEM file"));
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> Credentials(
    const GrpcServerOptions& options) {
  if (options.tls_cert_file.empty()) {
    return grpc::InsecureServerCredentials();
  }
  const bool mtls = !options.tls_client_ca_file.empty();
  for (const auto& [flag, path] : {std::pair{"tls_cert_file", &options.tls_cert_file},
                                   std::pair{"tls_key_file", &options.tls_key_file},
                                   std::pair{"tls_client_ca_file", &options.tls_client_ca_file}}) {
    if (!path->empty()) {
      if (absl::Status st = CheckPemFile(flag, *path); !st.ok()) {
        return st;
      }
    }
  }
  const unsigned refresh =
      static_cast<unsigned>(std::max<int64_t>(1, absl::ToInt64Seconds(options.tls_refresh)));
  auto provider =
      mtls ? std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
                 options.tls_key_file, options.tls_cert_file, options.tls_client_ca_file, refresh)
           : std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
                 options.tls_key_file, options.tls_cert_file, refresh);
  grpc::experimental::TlsServerCredentialsOptions tls(provider);
  tls.watch_identity_key_cert_pairs();
  if (mtls) {
    tls.watch_root_certs();
    tls.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  } else {
    tls.set_cert_request_type(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  }
  return grpc::experimental::TlsServerCredentials(tls);
}

}  // namespace

absl::StatusOr<std::unique_ptr<GrpcServer>> GrpcServer::Start(const std::string& host, int port,
                                                              GenerationService& service,
                                                              const GrpcServerOptions& options) {
  grpc::EnableDefaultHealthCheckService(true);
  // Before the reflection plugin: builders made after it serve reflection.
  std::unique_ptr<grpc::Server> health_server;
  int health_port = 0;
  if (!options.tls_cert_file.empty() && options.health_port >= 0) {
    grpc::ServerBuilder health_builder;
    const std::string health_address = Address(host, options.health_port);
    health_builder.AddListeningPort(health_address, grpc::InsecureServerCredentials(),
                                    &health_port);
    health_server = health_builder.BuildAndStart();
    if (health_server == nullptr || health_port == 0) {
      return absl::UnavailableError(
          absl::StrCat("cannot listen for gRPC health on ", health_address));
    }
  }
  if (options.reflection) {
    grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  }
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials = Credentials(options);
  if (!credentials.ok()) {
    return credentials.status();
  }
  grpc::ServerBuilder builder;
  ApplyOptions(options, builder);
  const std::string address = Address(host, port);
  int bound_port = 0;
  builder.AddListeningPort(address, *credentials, &bound_port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || bound_port == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen for gRPC on ", address));
  }
  auto grpc_server = std::unique_ptr<GrpcServer>(
      new GrpcServer(std::move(server), bound_port, std::move(health_server), health_port));
  // The default health service reports "" as SERVING from the start; the
  // daemon is not ready until its owner says so.
  grpc_server->SetServing(false);
  return grpc_server;
}

GrpcServer::~GrpcServer() { Shutdown(absl::Now()); }

void GrpcServer::SetServing(bool serving) {
  for (grpc::Server* server : {server_.get(), health_server_.get()}) {
    if (server == nullptr) {
      continue;
    }
    grpc::HealthCheckServiceInterface* health = server->GetHealthCheckService();
    health->SetServingStatus("", serving);
    health->SetServingStatus(kGenerationServiceName, serving);
  }
}

void GrpcServer::Shutdown(absl::Time deadline) {
  if (shut_down_) {
    return;
  }
  shut_down_ = true;
  server_->Shutdown(absl::ToChronoTime(deadline));
  server_->Wait();
  if (health_server_ != nullptr) {
    health_server_->Shutdown(absl::ToChronoTime(deadline));
    health_server_->Wait();
  }
}

}  // namespace loom
