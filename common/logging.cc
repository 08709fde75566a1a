#include "common/logging.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <ctime>

namespace retort {
namespace {
std::atomic<int> g_min_level{static_cast<int>(LogLevel::kInfo)};

// Indexed by LogLevel (0..3); '?' for a value outside it.
char LevelChar(LogLevel l) {
  const int i = static_cast<int>(l);
  return i >= 0 && i <= 3 ? "DIWE"[i] : '?';
}
}  // namespace

void SetLogLevel(LogLevel level) { g_min_level = static_cast<int>(level); }
LogLevel GetLogLevel() { return static_cast<LogLevel>(g_min_level.load()); }

bool ParseLogLevel(const std::string& t, LogLevel* out) {
  if (t == "debug")
    *out = LogLevel::kDebug;
  else if (t == "info")
    *out = LogLevel::kInfo;
  else if (t == "warning" || t == "warn")
    *out = LogLevel::kWarning;
  else if (t == "error")
    *out = LogLevel::kError;
  else
    return false;
  return true;
}

LogLine::LogLine(LogLevel level, const char* component)
    : enabled_(static_cast<int>(level) >= g_min_level.load()) {
  if (!enabled_) return;
  auto now = std::chrono::system_clock::now();
  std::time_t secs = std::chrono::system_clock::to_time_t(now);
  int ms = static_cast<int>(
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[64];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
  char msbuf[8];
  std::snprintf(msbuf, sizeof(msbuf), ".%03dZ", ms);
  stream_ << buf << msbuf << ' ' << LevelChar(level) << ' ' << component << "] ";
}

LogLine::~LogLine() {
  if (!enabled_) return;
  stream_ << '\n';
  std::string s = stream_.str();
  ssize_t unused = ::write(2, s.data(), s.size());
  (void)unused;
}

}  // namespace retort
