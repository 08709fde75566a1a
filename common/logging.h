// Minimal structured logging to stderr: "2026-11-21T13:00:00.123Z I coordinator] message".
// The minimum level is process-wide and set once by main() (SetLogLevel); logging itself is
// thread-safe (one write(2) per line).
#pragma once

#include <sstream>
#include <string>

namespace retort {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

void SetLogLevel(LogLevel level);
LogLevel GetLogLevel();
// Parses "debug", "info", "warning", "error". Returns false on anything else.
bool ParseLogLevel(const std::string& text, LogLevel* out);

class LogLine {
 public:
  LogLine(LogLevel level, const char* component);
  ~LogLine();
  template <typename T>
  LogLine& operator<<(const T& v) {
    if (enabled_) stream_ << v;
    return *this;
  }

 private:
  bool enabled_;
  std::ostringstream stream_;
};

}  // namespace retort

#define RETORT_LOG(level, component) ::retort::LogLine(::retort::LogLevel::level, component)
#define LOG_DEBUG(component) RETORT_LOG(kDebug, component)
#define LOG_INFO(component) RETORT_LOG(kInfo, component)
#define LOG_WARN(component) RETORT_LOG(kWarning, component)
#define LOG_ERROR(component) RETORT_LOG(kError, component)
