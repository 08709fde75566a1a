#include "checkpoint/blob_file.h"

#include "common/checksum.h"
#include "common/file_util.h"

namespace retort::checkpoint {

StatusOr<v1::CheckpointFile> WriteBlobFile(const std::string& dir, const std::string& name,
                                           const std::string& kind, int rank, const void* data,
                                           size_t bytes) {
  RETORT_RETURN_IF_ERROR(MakeDirectories(dir));
  std::string contents(static_cast<const char*>(data), bytes);
  RETORT_RETURN_IF_ERROR(WriteFileAtomically(dir + "/" + name, contents));
  v1::CheckpointFile file;
  file.set_path(name);
  file.set_size_bytes(static_cast<int64_t>(bytes));
  file.set_crc32c(Crc32c(contents));
  file.set_rank(rank);
  file.set_kind(kind);
  return file;
}

const v1::CheckpointFile* FindFileOfKind(const v1::CheckpointManifest& manifest,
                                         const std::string& kind) {
  for (const auto& f : manifest.files())
    if (f.kind() == kind) return &f;
  return nullptr;
}

StatusOr<std::string> ReadBlobFile(const std::string& dir, const v1::CheckpointFile& file) {
  const std::string& p = file.path();
  if (p.empty() || p[0] == '/' || p.find("..") != std::string::npos)
    return DataLossError("checkpoint file path '" + p + "' is not relative without '..'");
  const std::string path = dir + "/" + p;
  RETORT_ASSIGN_OR_RETURN(std::string contents, ReadFileToString(path));
  if (static_cast<int64_t>(contents.size()) != file.size_bytes())
    return DataLossError("checkpoint file " + path + " has " + std::to_string(contents.size()) +
                         " bytes; the manifest says " + std::to_string(file.size_bytes()));
  const uint32_t crc = Crc32c(contents);
  if (crc != file.crc32c())
    return DataLossError("checkpoint file " + path + " fails its CRC32C: manifest " +
                         Crc32cHex(file.crc32c()) + ", file " + Crc32cHex(crc));
  return contents;
}

}  // namespace retort::checkpoint
