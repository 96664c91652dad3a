#include "server/grpc_server.h"

#include <algorithm>
#include <fstream>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "grpc/health/v1/health.pb.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/security/tls_certificate_provider.h"
#include "grpcpp/security/tls_credentials_options.h"
#include "grpcpp/server_builder.h"

namespace loom {
namespace {

int ToMillis(absl::Duration d) { return static_cast<int>(absl::ToInt64Milliseconds(d)); }

// gRPC sets SO_REUSEPORT by default, which lets a second server bind a port
// that one already serves and take part of its connections.
void NoReusePort(grpc::ServerBuilder& builder) {
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
}

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
  NoReusePort(builder);
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

// Reflection over what the port serves. The health messages' descriptor is
// named here so that its file is linked in and can be described.
std::unique_ptr<ReflectionService> MakeReflection(const GrpcServerOptions& options) {
  using Reflection = GrpcServerOptions::Reflection;
  if (options.reflection == Reflection::kOff) {
    return nullptr;
  }
  ReflectionOptions reflection;
  reflection.services = {
      kGenerationServiceName,
      grpc::health::v1::HealthCheckRequest::descriptor()->file()->package() + ".Health",
      "grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection"};
  reflection.api_keys = options.reflection == Reflection::kAuth ? options.api_keys : nullptr;
  return std::make_unique<ReflectionService>(std::move(reflection));
}

}  // namespace

absl::StatusOr<std::unique_ptr<GrpcServer>> GrpcServer::Start(const std::string& host, int port,
                                                              GenerationService& service,
                                                              const GrpcServerOptions& options) {
  grpc::EnableDefaultHealthCheckService(true);
  auto grpc_server = std::unique_ptr<GrpcServer>(new GrpcServer());
  if (!options.tls_cert_file.empty() && options.health_port >= 0) {
    grpc::ServerBuilder health_builder;
    const std::string health_address = Address(host, options.health_port);
    NoReusePort(health_builder);
    health_builder.AddListeningPort(health_address, grpc::InsecureServerCredentials(),
                                    &grpc_server->health_port_);
    // gRPC starts a server only with a service of its own to poll for; the
    // default health service is added later. One that answers every method
    // with UNIMPLEMENTED, as an unknown method gets anyway, is that service.
    grpc_server->health_unimplemented_ = std::make_unique<grpc::CallbackGenericService>();
    health_builder.RegisterCallbackGenericService(grpc_server->health_unimplemented_.get());
    grpc_server->health_server_ = health_builder.BuildAndStart();
    if (grpc_server->health_server_ == nullptr || grpc_server->health_port_ == 0) {
      return absl::UnavailableError(
          absl::StrCat("cannot listen for gRPC health on ", health_address));
    }
  }
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials = Credentials(options);
  if (!credentials.ok()) {
    return credentials.status();
  }
  grpc::ServerBuilder builder;
  ApplyOptions(options, builder);
  const std::string address = Address(host, port);
  builder.AddListeningPort(address, *credentials, &grpc_server->port_);
  builder.RegisterService(&service);
  grpc_server->reflection_ = MakeReflection(options);
  if (grpc_server->reflection_ != nullptr) {
    builder.RegisterService(grpc_server->reflection_->v1());
    builder.RegisterService(grpc_server->reflection_->v1alpha());
  }
  grpc_server->server_ = builder.BuildAndStart();
  if (grpc_server->server_ == nullptr || grpc_server->port_ == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen for gRPC on ", address));
  }
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
  if (server_ != nullptr) {
    server_->Shutdown(absl::ToChronoTime(deadline));
    server_->Wait();
  }
  if (health_server_ != nullptr) {
    health_server_->Shutdown(absl::ToChronoTime(deadline));
    health_server_->Wait();
  }
}

}  // namespace loom
