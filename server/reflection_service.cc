#include "server/reflection_service.h"

#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/descriptor.pb.h"
#include "grpc/reflection/v1/reflection.grpc.pb.h"
#include "grpc/reflection/v1alpha/reflection.grpc.pb.h"
#include "server/grpc_auth.h"
#include "server/reactor_sink.h"
#include "server/status_mapping.h"

namespace loom {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::DescriptorPool;
using google::protobuf::FieldDescriptor;
using google::protobuf::FileDescriptor;

const DescriptorPool& Pool() { return *DescriptorPool::generated_pool(); }

// file, then its dependencies depth first, each file once.
void AppendWithDependencies(const FileDescriptor* file, std::set<const FileDescriptor*>& seen,
                            std::vector<std::string>& out) {
  if (!seen.insert(file).second) {
    return;
  }
  google::protobuf::FileDescriptorProto proto;
  file->CopyTo(&proto);
  out.push_back(proto.SerializeAsString());
  for (int i = 0; i < file->dependency_count(); ++i) {
    AppendWithDependencies(file->dependency(i), seen, out);
  }
}

std::vector<std::string> WithDependencies(const FileDescriptor* file) {
  std::set<const FileDescriptor*> seen;
  std::vector<std::string> out;
  AppendWithDependencies(file, seen, out);
  return out;
}

absl::StatusOr<const Descriptor*> FindMessage(const std::string& type) {
  const Descriptor* message = Pool().FindMessageTypeByName(type);
  if (message == nullptr) {
    return absl::NotFoundError(absl::StrCat("message type not found: ", type));
  }
  return message;
}

// The one answer of a request, in either protocol version (their messages
// have the same shape under two packages).
template <typename Request, typename Response>
void Answer(const ReflectionIndex& index, const Request& request, Response& response) {
  response.set_valid_host(request.host());
  *response.mutable_original_request() = request;
  absl::StatusOr<std::vector<std::string>> files = std::vector<std::string>();
  switch (request.message_request_case()) {
    case Request::kListServices:
      for (const std::string& name : index.services()) {
        response.mutable_list_services_response()->add_service()->set_name(name);
      }
      return;
    case Request::kAllExtensionNumbersOfType: {
      absl::StatusOr<std::vector<int32_t>> numbers =
          index.ExtensionNumbers(request.all_extension_numbers_of_type());
      if (numbers.ok()) {
        auto* out = response.mutable_all_extension_numbers_response();
        out->set_base_type_name(request.all_extension_numbers_of_type());
        out->mutable_extension_number()->Assign(numbers->begin(), numbers->end());
        return;
      }
      files = numbers.status();
      break;
    }
    case Request::kFileByFilename:
      files = index.FileByName(request.file_by_filename());
      break;
    case Request::kFileContainingSymbol:
      files = index.FileContainingSymbol(request.file_containing_symbol());
      break;
    case Request::kFileContainingExtension:
      files = index.FileContainingExtension(request.file_containing_extension().containing_type(),
                                            request.file_containing_extension().extension_number());
      break;
    default:
      files = absl::InvalidArgumentError("the request names no reflection query");
      break;
  }
  if (!files.ok()) {
    response.mutable_error_response()->set_error_code(static_cast<int32_t>(files.status().code()));
    response.mutable_error_response()->set_error_message(std::string(files.status().message()));
    return;
  }
  for (std::string& file : *files) {
    response.mutable_file_descriptor_response()->add_file_descriptor_proto(std::move(file));
  }
}

// One reflection stream: read a request, write its answer, until the client
// half-closes. At most one read or write is in flight, so the members need no
// lock; ReactorRelease/ReactorAcquire (reactor_sink.h) show TSan the order
// gRPC gives the callbacks.
template <typename Request, typename Response>
class ReflectionReactor : public grpc::ServerBidiReactor<Request, Response> {
 public:
  ReflectionReactor(const ReflectionIndex& index, const absl::Status& auth) : index_(index) {
    ReactorRelease();
    if (!auth.ok()) {
      this->Finish(ToGrpcStatus(auth));
      return;
    }
    this->StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    ReactorAcquire();
    if (!ok) {
      ReactorRelease();
      this->Finish(grpc::Status::OK);
      return;
    }
    response_.Clear();
    Answer(index_, request_, response_);
    ReactorRelease();
    this->StartWrite(&response_);
  }

  void OnWriteDone(bool ok) override {
    ReactorAcquire();
    ReactorRelease();
    if (!ok) {
      this->Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "the reflection stream broke"));
      return;
    }
    this->StartRead(&request_);
  }

  void OnDone() override {
    ReactorAcquire();
    delete this;
  }

 private:
  const ReflectionIndex& index_;
  Request request_;
  Response response_;
};

// The service of one protocol version: authenticates each stream as it opens.
template <typename CallbackService, typename Request, typename Response>
class Version : public CallbackService {
 public:
  Version(const ReflectionIndex& index, const ApiKeyStore* api_keys)
      : index_(index), api_keys_(api_keys) {}

 private:
  grpc::ServerBidiReactor<Request, Response>* ServerReflectionInfo(
      grpc::CallbackServerContext* context) override {
    const absl::StatusOr<Caller> caller = AuthenticateCall(api_keys_, *context);
    return new ReflectionReactor<Request, Response>(index_, caller.status());
  }

  const ReflectionIndex& index_;
  const ApiKeyStore* api_keys_;
};

}  // namespace

absl::StatusOr<std::vector<std::string>> ReflectionIndex::FileByName(
    const std::string& name) const {
  const FileDescriptor* file = Pool().FindFileByName(name);
  if (file == nullptr) {
    return absl::NotFoundError(absl::StrCat("file not found: ", name));
  }
  return WithDependencies(file);
}

absl::StatusOr<std::vector<std::string>> ReflectionIndex::FileContainingSymbol(
    const std::string& symbol) const {
  const FileDescriptor* file = Pool().FindFileContainingSymbol(symbol);
  if (file == nullptr) {
    return absl::NotFoundError(absl::StrCat("symbol not found: ", symbol));
  }
  return WithDependencies(file);
}

absl::StatusOr<std::vector<std::string>> ReflectionIndex::FileContainingExtension(
    const std::string& type, int32_t number) const {
  absl::StatusOr<const Descriptor*> message = FindMessage(type);
  if (!message.ok()) {
    return message.status();
  }
  const FieldDescriptor* extension = Pool().FindExtensionByNumber(*message, number);
  if (extension == nullptr) {
    return absl::NotFoundError(absl::StrCat("extension ", number, " of ", type, " not found"));
  }
  return WithDependencies(extension->file());
}

absl::StatusOr<std::vector<int32_t>> ReflectionIndex::ExtensionNumbers(
    const std::string& type) const {
  absl::StatusOr<const Descriptor*> message = FindMessage(type);
  if (!message.ok()) {
    return message.status();
  }
  std::vector<const FieldDescriptor*> extensions;
  Pool().FindAllExtensions(*message, &extensions);
  std::vector<int32_t> numbers;
  numbers.reserve(extensions.size());
  for (const FieldDescriptor* extension : extensions) {
    numbers.push_back(extension->number());
  }
  return numbers;
}

ReflectionService::ReflectionService(ReflectionOptions options)
    : index_(std::move(options.services)),
      v1_(std::make_unique<Version<grpc::reflection::v1::ServerReflection::CallbackService,
                                   grpc::reflection::v1::ServerReflectionRequest,
                                   grpc::reflection::v1::ServerReflectionResponse>>(
          index_, options.api_keys)),
      v1alpha_(
          std::make_unique<Version<grpc::reflection::v1alpha::ServerReflection::CallbackService,
                                   grpc::reflection::v1alpha::ServerReflectionRequest,
                                   grpc::reflection::v1alpha::ServerReflectionResponse>>(
              index_, options.api_keys)) {}

ReflectionService::~ReflectionService() = default;

grpc::Service* ReflectionService::v1() { return v1_.get(); }
grpc::Service* ReflectionService::v1alpha() { return v1alpha_.get(); }

}  // namespace loom
