// One unary gRPC call by method name with raw request bytes (grpc::GenericStub), for tests that
// speak to services we have no stub for (grpc.health.v1) or must send exact bytes. Header-only;
// the test links gRPC (e.g. through retort_coordinator).
#pragma once

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace retort::testing {

struct GenericReply {
  bool answered = false;  // the call completed within the wait
  grpc::Status status;    // DEADLINE_EXCEEDED "no reply" when not answered
  std::string bytes;      // the serialized response (when status is OK)
};

// Calls `method` ("/package.Service/Method") with `request` (serialized) under a 5 s call
// deadline, waiting at most `wait` for its completion.
inline GenericReply CallGeneric(const std::shared_ptr<grpc::Channel>& channel,
                                const std::string& method, const std::string& request,
                                std::chrono::milliseconds wait = std::chrono::seconds(10)) {
  grpc::GenericStub generic(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  grpc::Slice slice(request);
  grpc::ByteBuffer req(&slice, 1), resp;
  GenericReply out;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  generic.UnaryCall(&ctx, method, grpc::StubOptions(), &req, &resp, [&](grpc::Status s) {
    std::lock_guard<std::mutex> l(mu);
    out.status = s;
    done = true;
    cv.notify_all();
  });
  std::unique_lock<std::mutex> l(mu);
  out.answered = cv.wait_for(l, wait, [&] { return done; });
  if (!out.answered) {
    ctx.TryCancel();
    cv.wait(l, [&] { return done; });  // the callback still references this frame
    out.status = grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "no reply");
    return out;
  }
  std::vector<grpc::Slice> slices;
  if (out.status.ok() && resp.Dump(&slices).ok())
    for (auto& s : slices) out.bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

// grpc.health.v1: a serialized HealthCheckRequest{service} ("" = the whole server) and the
// serialized responses.
inline const char kHealthCheckMethod[] = "/grpc.health.v1.Health/Check";
inline std::string HealthCheckRequest(const std::string& service) {
  if (service.empty()) return "";
  return std::string("\x0a", 1) + static_cast<char>(service.size()) + service;
}
inline const std::string kHealthServing("\x08\x01", 2), kHealthNotServing("\x08\x02", 2);

}  // namespace retort::testing
