#include "absl/status/status.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/client_context.h"
#include "tools/loom/commands.h"

namespace loom::cli {

int Health(const std::shared_ptr<grpc::Channel>& channel, const std::string& service,
           absl::Duration timeout, std::ostream& out, std::ostream& err) {
  auto stub = grpc::health::v1::Health::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse response;
  const grpc::Status status = stub->Check(&context, request, &response);
  if (!status.ok()) {
    err << "error: " << absl::StatusCodeToString(static_cast<absl::StatusCode>(status.error_code()))
        << ": " << status.error_message() << "\n";
    return 1;
  }
  out << grpc::health::v1::HealthCheckResponse::ServingStatus_Name(response.status()) << "\n";
  return response.status() == grpc::health::v1::HealthCheckResponse::SERVING ? 0 : 1;
}

}  // namespace loom::cli
