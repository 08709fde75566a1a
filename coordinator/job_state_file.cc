#include "coordinator/job_state_file.h"

#include <google/protobuf/util/json_util.h>

#include "common/file_util.h"

namespace retort::coordinator {
namespace {

class RealStateFileWriter final : public StateFileWriter {
 public:
  Status WriteAtomically(const std::string& path, const std::string& contents) override {
    return WriteFileAtomically(path, contents);
  }
};

}  // namespace

StateFileWriter* DefaultStateFileWriter() {
  static RealStateFileWriter writer;
  return &writer;
}

StatusOr<v1::CoordinatorState> JobStateFile::Load() {
  RETORT_RETURN_IF_ERROR(MakeDirectories(dir_));
  if (!PathExists(path())) return NotFoundError("no state in " + dir_);
  RETORT_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path()));
  v1::CoordinatorState state;
  auto st = google::protobuf::util::JsonStringToMessage(text, &state);
  if (!st.ok())
    return DataLossError("state file " + path() + " is corrupt (" + std::string(st.message()) +
                         "); refusing to start. Move it away to start a new job.");
  // Parses, but holds what the coordinator never writes: a negative parameter count gave every
  // generation a plan of negative ranges.
  if (state.parameter_count() < 0)
    return DataLossError("state file " + path() + " is corrupt (parameter_count " +
                         std::to_string(state.parameter_count()) +
                         " < 0); refusing to start. Move it away to start a new job.");
  return state;
}

Status JobStateFile::Save(const v1::CoordinatorState& state) {
  std::string json;
  google::protobuf::util::JsonPrintOptions opts;
  opts.preserve_proto_field_names = true;
  opts.add_whitespace = true;
  auto st = google::protobuf::util::MessageToJsonString(state, &json, opts);
  if (!st.ok()) return InternalError("serialising coordinator state: " + std::string(st.message()));
  return writer_->WriteAtomically(path(), json);
}

}  // namespace retort::coordinator
