#include "tools/ctl_trace.h"

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "common/args.h"
#include "common/file_util.h"
#include "rpc/grpc_status.h"
#include "tools/trace_merge.h"

namespace retort::tools {

int RequestTrace(v1::ControlService::Stub& stub, const std::string& coordinator,
                 const std::string& steps, int64_t timeout_ms, bool json,
                 const std::function<void(grpc::ClientContext*)>& prepare_call) {
  if (steps.empty()) {
    std::fprintf(stderr, "retortctl: trace needs --steps A:B (or: trace merge DIR)\n");
    return 2;
  }
  auto window = ParseStepWindow("--steps", steps);
  if (!window.ok()) {
    std::fprintf(stderr, "retortctl: %s\n", window.status().message().c_str());
    return 2;
  }
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms));
  if (prepare_call) prepare_call(&ctx);
  v1::TraceRequest req;
  req.set_first_step(window->first);
  req.set_last_step(window->second);
  v1::TraceResponse resp;
  grpc::Status s = stub.Trace(&ctx, req, &resp);
  if (!s.ok()) {
    std::fprintf(stderr, "retortctl: trace %s: %s\n", coordinator.c_str(),
                 FromGrpcStatus(s).ToString().c_str());
    return 1;
  }
  if (json)
    std::cout << nlohmann::json{{"first_step", resp.first_step()},
                                {"last_step", resp.last_step()},
                                {"message", resp.message()}}
                     .dump()
              << std::endl;
  else
    std::printf("%s\nthen: retortctl trace merge OUTPUT_DIR/traces\n", resp.message().c_str());
  return 0;
}

int MergeTraces(const std::string& dir, const std::string& steps, const std::string& out,
                bool json) {
  if (dir.empty()) {
    std::fprintf(stderr, "retortctl: trace merge needs the traces folder (trace merge DIR)\n");
    return 2;
  }
  std::string window;
  if (!steps.empty()) {
    auto w = ParseStepWindow("--steps", steps);
    if (!w.ok()) {
      std::fprintf(stderr, "retortctl: %s\n", w.status().message().c_str());
      return 2;
    }
    window = std::to_string(w->first) + ":" + std::to_string(w->second);
  }
  auto files = FindTraceFiles(dir, window);
  if (!files.ok()) {
    std::fprintf(stderr, "retortctl: trace merge: %s\n", files.status().message().c_str());
    return 1;
  }
  std::vector<nlohmann::json> docs;
  for (const std::string& f : *files) {
    std::ifstream in(f);
    std::stringstream ss;
    ss << in.rdbuf();
    auto doc = nlohmann::json::parse(ss.str(), nullptr, false);
    if (doc.is_discarded()) {
      std::fprintf(stderr, "retortctl: trace merge: %s is not JSON\n", f.c_str());
      return 1;
    }
    docs.push_back(std::move(doc));
  }
  auto merged = MergeTraceDocuments(docs);
  if (!merged.ok()) {
    std::fprintf(stderr, "retortctl: trace merge: %s\n", merged.status().message().c_str());
    return 1;
  }
  std::string path = out;
  if (path.empty()) {
    std::string w = window.empty() ? (*files)[0] : window;
    if (window.empty()) {  // trace-A-B-...: take A-B from the first file's name
      const std::string name = w.substr(w.rfind('/') + 1);
      const auto a = name.find('-') + 1, b = name.find('-', name.find('-', a) + 1);
      w = name.substr(a, b - a);
    } else {
      w[w.find(':')] = '-';
    }
    path = dir + "/trace-merged-" + w + ".json";
  }
  Status s = WriteFileAtomically(path, merged->dump() + "\n");
  if (!s.ok()) {
    std::fprintf(stderr, "retortctl: trace merge: writing %s: %s\n", path.c_str(),
                 s.message().c_str());
    return 1;
  }
  if (json)
    std::cout << nlohmann::json{{"merged", path}, {"files", *files}}.dump() << std::endl;
  else
    std::printf(
        "merged %zu rank trace(s) into %s (open in https://ui.perfetto.dev or "
        "chrome://tracing)\n",
        files->size(), path.c_str());
  return 0;
}

}  // namespace retort::tools
