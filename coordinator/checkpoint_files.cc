#include "coordinator/checkpoint_files.h"

#include <google/protobuf/util/json_util.h>
#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <system_error>

#include "common/file_util.h"
#include "common/logging.h"

namespace retort::coordinator {
namespace {

constexpr char kManifest[] = "MANIFEST.json";

// What is wrong with `file` given its recorded size, empty when nothing is.
std::string FileProblem(const std::string& file, int64_t size_bytes) {
  struct stat sb;
  if (::stat(file.c_str(), &sb) != 0) return file + " is missing";
  if (sb.st_size != size_bytes)
    return file + " is " + std::to_string(sb.st_size) + " bytes, the manifest says " +
           std::to_string(size_bytes);
  return "";
}

void RemoveTree(const std::filesystem::path& path, const char* what) {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
  if (ec)
    LOG_WARN("coordinator") << "could not delete " << what << " " << path << ": " << ec.message();
}

}  // namespace

std::string CheckpointFiles::DirName(uint64_t id) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "ckpt-%08llu", static_cast<unsigned long long>(id));
  return buf;
}

std::string CheckpointFiles::Problem(uint64_t id) const {
  const std::string path = Dir(id) + "/" + kManifest;
  auto manifest = ReadManifest(id);
  if (!manifest.ok()) {
    if (manifest.status().code() == StatusCode::kDataLoss) return manifest.status().message();
    return path + ": " + manifest.status().message();
  }
  if (manifest->checkpoint_id() != id)
    return path + " names checkpoint " + std::to_string(manifest->checkpoint_id());
  if (manifest->files_size() == 0) return path + " lists no shard file";
  for (const auto& f : manifest->files()) {
    std::string problem = FileProblem(Dir(id) + "/" + f.path(), f.size_bytes());
    if (!problem.empty()) return problem;
  }
  return "";
}

Status CheckpointFiles::CheckFiles(uint64_t id,
                                   const std::vector<v1::CheckpointFile>& files) const {
  for (const auto& f : files) {
    const std::string path = Dir(id) + "/" + f.path();
    if (!FileProblem(path, f.size_bytes()).empty())
      return DataLossError("checkpoint file " + path + " is missing or not " +
                           std::to_string(f.size_bytes()) + " bytes");
  }
  return Status::Ok();
}

Status CheckpointFiles::WriteManifest(const v1::CheckpointManifest& manifest) const {
  std::string json;
  google::protobuf::util::JsonPrintOptions opts;
  opts.preserve_proto_field_names = true;
  opts.add_whitespace = true;
  (void)google::protobuf::util::MessageToJsonString(manifest, &json, opts);
  const std::string dir = Dir(manifest.checkpoint_id());
  RETORT_RETURN_IF_ERROR(MakeDirectories(dir));
  return WriteFileAtomically(dir + "/" + kManifest, json);
}

StatusOr<v1::CheckpointManifest> CheckpointFiles::ReadManifest(uint64_t id) const {
  const std::string path = Dir(id) + "/" + kManifest;
  auto text = ReadFileToString(path);
  if (!text.ok()) return text.status();
  v1::CheckpointManifest manifest;
  auto st = google::protobuf::util::JsonStringToMessage(*text, &manifest);
  if (!st.ok()) return DataLossError(path + " is corrupt: " + std::string(st.message()));
  return manifest;
}

void CheckpointFiles::Remove(uint64_t id) const { RemoveTree(Dir(id), "checkpoint"); }

void CheckpointFiles::RemoveDebris(const std::set<uint64_t>& committed) const {
  std::set<std::string> committed_dirs;
  for (uint64_t id : committed) committed_dirs.insert(DirName(id));
  std::error_code ec;
  std::filesystem::directory_iterator it(root_, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind("ckpt-", 0) != 0 || !it->is_directory()) continue;
    if (committed_dirs.count(name) == 0) {
      LOG_INFO("coordinator") << "removing uncommitted checkpoint directory " << it->path();
      RemoveTree(it->path(), "uncommitted checkpoint");
      continue;
    }
    std::error_code ec2;
    for (std::filesystem::directory_iterator f(it->path(), ec2); !ec2 && f != end;
         f.increment(ec2)) {
      if (f->path().filename().string().find(".tmp") == std::string::npos) continue;
      LOG_INFO("coordinator") << "removing temp file " << f->path();
      std::filesystem::remove(f->path(), ec2);
    }
  }
}

Status ReconcileCheckpoints(const CheckpointFiles& files, bool restart_from_scratch,
                            v1::CoordinatorState* state) {
  files.RemoveDebris(
      {state->committed_checkpoints().begin(), state->committed_checkpoints().end()});
  if (state->committed_checkpoints_size() == 0 && state->last_checkpoint_id() == 0)
    return Status::Ok();
  std::vector<uint64_t> listed(state->committed_checkpoints().begin(),
                               state->committed_checkpoints().end());
  if (listed.empty()) listed.push_back(state->last_checkpoint_id());
  std::vector<uint64_t> usable;
  std::string rejected;
  for (uint64_t id : listed) {
    std::string problem = files.Problem(id);
    if (problem.empty()) {
      usable.push_back(id);
      continue;
    }
    LOG_WARN("coordinator") << "committed checkpoint " << id << " is unusable: " << problem;
    rejected += "\n  checkpoint " + std::to_string(id) + ": " + problem;
  }
  if (usable.empty()) {
    if (!restart_from_scratch)
      return FailedPreconditionError(
          "state.json records " + std::to_string(listed.size()) +
          " committed checkpoint(s) (last at step " +
          std::to_string(state->last_checkpoint_step()) + ") and none can be used:" + rejected +
          "\nRefusing to start the job over from step 0; pass --restart-from-scratch to do so.");
    LOG_WARN("coordinator") << "--restart-from-scratch: forgetting " << listed.size()
                            << " unusable checkpoint(s); the job starts from step 0";
    state->clear_committed_checkpoints();
    state->set_last_checkpoint_id(0);
    state->set_last_checkpoint_step(0);
    return Status::Ok();
  }
  if (usable.size() == listed.size()) return Status::Ok();
  // Fall back to the newest usable one; its step comes from its manifest (usable: it parses).
  state->clear_committed_checkpoints();
  for (uint64_t id : usable) state->add_committed_checkpoints(id);
  const uint64_t newest = usable.back();
  auto manifest = files.ReadManifest(newest);
  const int64_t step = manifest.ok() ? manifest->step() : 0;
  LOG_WARN("coordinator") << "falling back to checkpoint " << newest << " at step " << step
                          << " (newest usable; state.json had checkpoint "
                          << state->last_checkpoint_id() << " at step "
                          << state->last_checkpoint_step() << ")";
  state->set_last_checkpoint_id(newest);
  state->set_last_checkpoint_step(step);
  return Status::Ok();
}

}  // namespace retort::coordinator
