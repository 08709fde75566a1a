#include "common/credential_files.h"

#include "common/file_util.h"

namespace retort {
std::string TrimWhitespace(const std::string& s) {
  const char* ws = " \t\r\n";
  const size_t begin = s.find_first_not_of(ws);
  if (begin == std::string::npos) return "";
  return s.substr(begin, s.find_last_not_of(ws) - begin + 1);
}

Status CheckReadableFlagFile(const std::string& path, const char* flag) {
  if (path.empty()) return Status::Ok();
  auto text = ReadFileToString(path);
  if (!text.ok())
    return InvalidArgumentError(std::string("--") + flag + "=" + path + ": " +
                                text.status().message());
  return Status::Ok();
}

StatusOr<std::string> ReadTokenFile(const std::string& path) {
  auto text = ReadFileToString(path);
  if (!text.ok())
    return InvalidArgumentError("token file " + path + ": " + text.status().message());
  std::string token = TrimWhitespace(*text);
  if (token.empty()) return InvalidArgumentError("token file " + path + " holds no token");
  if (token.find_first_of(" \t\r\n") != std::string::npos)
    return InvalidArgumentError("token file " + path + ": a token is one word");
  return token;
}

}  // namespace retort
