// libFuzzer harness: a restart of the coordinator on a hostile state directory (coordinator/
// job_state_file.h: state.json; coordinator.h Create(): restoring the job, the checkpoint list and
// the previous generation's members; coordinator_checkpoint.cc: reconciling the committed
// checkpoints against their MANIFEST.json files), then joins and ticks on the restored state.
//
// Input: the state.json text; optionally "\n--MANIFEST--\n" and a MANIFEST.json text, written
// into the directory of each checkpoint state.json lists (at most 4), together with each shard
// file that manifest lists under a plain name (at most 4 KiB, of the size it records). Any input
// must give a coordinator or an error, never a crash, a hang or an exception.
#include <google/protobuf/util/json_util.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>

#include <google/protobuf/stubs/logging.h>

#include "common/clock.h"
#include "common/logging.h"
#include "coordinator/coordinator.h"
#include "tests/fuzz/fuzz_checks.h"
#include "tests/fuzz/fuzz_requests.h"
#include "tests/fuzz/fuzz_util.h"

namespace retort {
namespace {

class MemoryStateWriter final : public coordinator::StateFileWriter {
 public:
  Status WriteAtomically(const std::string&, const std::string&) override { return Status::Ok(); }
};

std::string CheckpointDir(const std::string& root, uint64_t id) {
  char name[32];
  std::snprintf(name, sizeof(name), "/ckpt-%08llu", static_cast<unsigned long long>(id));
  return root + name;
}

// The checkpoints state.json lists get `manifest_text` and the shard files it names.
void WriteCheckpoints(const std::string& state_text, std::string_view manifest_text,
                      const std::string& root) {
  v1::CoordinatorState state;
  if (!google::protobuf::util::JsonStringToMessage(state_text, &state).ok()) return;
  std::set<uint64_t> ids(state.committed_checkpoints().begin(),
                         state.committed_checkpoints().end());
  ids.insert(state.last_checkpoint_id());
  v1::CheckpointManifest manifest;
  (void)google::protobuf::util::JsonStringToMessage(std::string(manifest_text), &manifest);
  int written = 0;
  for (uint64_t id : ids) {
    if (written++ == 4) break;
    const std::string dir = CheckpointDir(root, id);
    fuzz::MakeDir(dir);
    fuzz::WriteFile(dir + "/MANIFEST.json", manifest_text);
    int files = 0;
    for (const auto& f : manifest.files()) {
      const std::string& p = f.path();
      if (files == 4 || p.empty() || p.size() > 64 || p.find('/') != std::string::npos ||
          p == "." || p == ".." || f.size_bytes() < 0 || f.size_bytes() > 4096)
        continue;
      fuzz::WriteFile(dir + "/" + p, std::string(static_cast<size_t>(f.size_bytes()), 'x'));
      ++files;
    }
  }
}

}  // namespace
}  // namespace retort

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  retort::fuzz::QuietLogsForFuzzing();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace retort;
  auto [state_text, manifest_text] =
      fuzz::SplitAt({reinterpret_cast<const char*>(data), size}, "\n--MANIFEST--\n");
  const std::string dir = fuzz::ScratchDir() + "/state";
  fuzz::ResetDir(dir);
  fuzz::WriteFile(dir + "/state.json", state_text);
  WriteCheckpoints(std::string(state_text), manifest_text, dir + "/checkpoints");

  // The loader alone, then a whole restart on what it loaded.
  coordinator::JobStateFile store(dir);
  (void)store.Load();
  MemoryStateWriter writer;
  coordinator::CoordinatorOptions opts;
  opts.state_dir = dir;
  opts.settle_ms = 100;
  opts.heartbeat_interval_ms = 500;
  opts.eviction_timeout_ms = 2000;
  opts.rejoin_grace_ms = 1000;
  opts.state_writer = &writer;
  FakeClock clock;
  auto c = coordinator::Coordinator::Create(opts, std::nullopt, &clock);
  if (!c.ok()) return 0;
  (void)(*c)->GetStatus();
  for (const char* node : {"node-a", "node-b"}) {
    v1::JoinRequest join = fuzz::SeedJoin(node);
    join.set_parameter_count(0);  // not known yet: the plan uses the restored count
    auto joined = (*c)->Join(join);
    if (joined.ok() && !joined->member_id().empty()) {
      v1::HeartbeatRequest hb;
      hb.set_member_id(joined->member_id());
      (void)(*c)->Heartbeat(hb);
      v1::GetCheckpointRequest get;
      get.set_member_id(joined->member_id());
      (void)(*c)->GetCheckpoint(get);
    }
    clock.Advance(std::chrono::milliseconds(600));
    (*c)->Tick();
  }
  clock.Advance(std::chrono::milliseconds(1000));
  (*c)->Tick();
  (void)(*c)->GetStatus();
  // A generation formed on restored state has ranks 0..n-1 and a plan that tiles the buffer.
  if (auto g = (*c)->CurrentGeneration()) fuzz::CheckGenerationInvariants(*g);
  return 0;
}
