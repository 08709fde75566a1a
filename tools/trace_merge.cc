#include "tools/trace_merge.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <regex>
#include <set>

namespace retort::tools {

StatusOr<nlohmann::json> MergeTraceDocuments(const std::vector<nlohmann::json>& docs) {
  nlohmann::json events = nlohmann::json::array();
  std::set<int64_t> taken;
  nlohmann::json ranks = nlohmann::json::array();
  for (size_t d = 0; d < docs.size(); ++d) {
    const nlohmann::json& doc = docs[d];
    if (!doc.is_object() || !doc.contains("traceEvents") || !doc["traceEvents"].is_array())
      return InvalidArgumentError("trace " + std::to_string(d) +
                                  " is not a trace-event object (no traceEvents array)");
    int64_t pid = -1;
    for (const auto& e : doc["traceEvents"])
      if (e.is_object() && e.contains("pid") && e["pid"].is_number_integer()) {
        pid = e["pid"].get<int64_t>();
        break;
      }
    int64_t new_pid = pid;
    while (new_pid < 0 || taken.count(new_pid)) ++new_pid;
    taken.insert(new_pid);
    for (nlohmann::json e : doc["traceEvents"]) {
      if (!e.is_object()) continue;
      e["pid"] = new_pid;
      if (new_pid != pid && e.value("name", "") == "process_name" && e.contains("args"))
        e["args"]["name"] = e["args"].value("name", "") + " (rank " + std::to_string(pid) +
                            " taken by an earlier file)";
      events.push_back(std::move(e));
    }
    nlohmann::json info = doc.value("otherData", nlohmann::json::object());
    info["pid"] = new_pid;
    ranks.push_back(info);
  }
  return nlohmann::json{
      {"traceEvents", events}, {"displayTimeUnit", "ms"}, {"otherData", {{"ranks", ranks}}}};
}

StatusOr<std::vector<std::string>> FindTraceFiles(const std::string& dir,
                                                  const std::string& window) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return NotFoundError("trace folder " + dir + " not found");
  static const std::regex re("trace-([0-9]+)-([0-9]+)-.+\\.json");
  std::map<std::pair<int64_t, int64_t>, std::vector<std::string>> by_window;  // numeric order
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::smatch m;
    const std::string name = e.path().filename().string();
    if (name.rfind("trace-merged", 0) == 0) continue;
    if (std::regex_match(name, m, re))
      by_window[{std::stoll(m[1].str()), std::stoll(m[2].str())}].push_back(e.path());
  }
  if (by_window.empty()) return NotFoundError(dir + " holds no trace-*.json files");
  auto name = [](const std::pair<int64_t, int64_t>& w) {
    return std::to_string(w.first) + ":" + std::to_string(w.second);
  };
  auto it = by_window.begin();
  if (window.empty() && by_window.size() > 1) {
    std::string list;
    for (const auto& [w, f] : by_window) list += " " + name(w);
    return InvalidArgumentError(dir + " holds traces of several windows (" + list.substr(1) +
                                "); name one with --steps A:B");
  }
  if (!window.empty()) {
    it = std::find_if(by_window.begin(), by_window.end(),
                      [&](const auto& entry) { return name(entry.first) == window; });
    if (it == by_window.end()) return NotFoundError(dir + " holds no trace of steps " + window);
  }
  std::sort(it->second.begin(), it->second.end());
  return it->second;
}

}  // namespace retort::tools
