#include "common/args.h"

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "common/logging.h"

namespace retort {

StatusOr<int64_t> ParseInt64(const std::string& text, const std::string& what) {
  if (text.empty()) return InvalidArgumentError(what + ": empty value, expected an integer");
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (errno == ERANGE) return InvalidArgumentError(what + ": '" + text + "' is out of range");
  if (*end != '\0') return InvalidArgumentError(what + ": '" + text + "' is not an integer");
  return static_cast<int64_t>(v);
}

StatusOr<double> ParseDouble(const std::string& text, const std::string& what) {
  if (text.empty()) return InvalidArgumentError(what + ": empty value, expected a number");
  errno = 0;
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (errno == ERANGE || *end != '\0')
    return InvalidArgumentError(what + ": '" + text + "' is not a number");
  return v;
}

StatusOr<std::pair<int64_t, int64_t>> ParseStepWindow(const std::string& flag,
                                                      const std::string& text) {
  const auto colon = text.find(':');
  auto first = ParseInt64(text.substr(0, colon), flag);
  auto last = colon == std::string::npos ? first : ParseInt64(text.substr(colon + 1), flag);
  if (!first.ok() || !last.ok() || *first < 1 || *last < *first)
    return InvalidArgumentError(flag + ": '" + text + "' is not A:B with 1 <= A <= B");
  return std::make_pair(*first, *last);
}

ArgParser::ArgParser(std::string usage, std::string summary)
    : usage_(std::move(usage)), summary_(std::move(summary)) {}

void ArgParser::AddString(const std::string& name, std::string* out, const std::string& help) {
  flags_.push_back(
      {name, help, out->empty() ? "" : "\"" + *out + "\"", false, [out](const std::string& v) {
         *out = v;
         return Status::Ok();
       }});
}

void ArgParser::AddInt(const std::string& name, int64_t* out, const std::string& help) {
  flags_.push_back({name, help, std::to_string(*out), false, [out, name](const std::string& v) {
                      RETORT_ASSIGN_OR_RETURN(*out, ParseInt64(v, "--" + name));
                      return Status::Ok();
                    }});
}

void ArgParser::AddInt(const std::string& name, int* out, const std::string& help) {
  flags_.push_back({name, help, std::to_string(*out), false, [out, name](const std::string& v) {
                      RETORT_ASSIGN_OR_RETURN(int64_t x, ParseInt64(v, "--" + name));
                      if (x < INT_MIN || x > INT_MAX)
                        return InvalidArgumentError("--" + name + ": '" + v + "' is out of range");
                      *out = static_cast<int>(x);
                      return Status::Ok();
                    }});
}

void ArgParser::AddDouble(const std::string& name, double* out, const std::string& help) {
  std::ostringstream def;
  def << *out;
  flags_.push_back({name, help, def.str(), false, [out, name](const std::string& v) {
                      RETORT_ASSIGN_OR_RETURN(*out, ParseDouble(v, "--" + name));
                      return Status::Ok();
                    }});
}

void ArgParser::AddBool(const std::string& name, bool* out, const std::string& help) {
  flags_.push_back({name, help, *out ? "true" : "false", true, [out, name](const std::string& v) {
                      if (v == "true" || v == "1" || v == "yes")
                        *out = true;
                      else if (v == "false" || v == "0" || v == "no")
                        *out = false;
                      else
                        return InvalidArgumentError("--" + name + ": '" + v +
                                                    "' is not true or false");
                      return Status::Ok();
                    }});
}

void ArgParser::AddStringList(const std::string& name, std::vector<std::string>* out,
                              const std::string& help) {
  flags_.push_back({name, help + " (repeatable)", "", false, [out](const std::string& v) {
                      out->push_back(v);
                      return Status::Ok();
                    }});
}

void ArgParser::AddPositional(const std::string& name, std::string* out, const std::string& help,
                              bool required) {
  positionals_.push_back({name, help, required, out});
}

void ArgParser::AddLogLevel(const std::string& default_level) {
  LogLevel level;
  if (ParseLogLevel(default_level, &level)) SetLogLevel(level);
  flags_.push_back({"log-level", "debug, info, warning or error", "\"" + default_level + "\"",
                    false, [](const std::string& v) {
                      LogLevel parsed;
                      if (!ParseLogLevel(v, &parsed)) {
                        return InvalidArgumentError("--log-level: '" + v +
                                                    "' is not debug, info, warning or error");
                      }
                      SetLogLevel(parsed);
                      return Status::Ok();
                    }});
}

ArgParser::Flag* ArgParser::Find(const std::string& name) {
  for (auto& f : flags_)
    if (f.name == name) return &f;
  return nullptr;
}

StatusOr<bool> ArgParser::Parse(int argc, char** argv, int first) {
  size_t next_positional = 0;
  for (int i = first; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(Help().c_str(), stdout);
      return false;
    }
    if (arg.size() > 2 && arg.compare(0, 2, "--") == 0) {
      std::string name = arg.substr(2), value;
      bool has_value = false;
      auto eq = name.find('=');
      if (eq != std::string::npos) {
        value = name.substr(eq + 1);
        name = name.substr(0, eq);
        has_value = true;
      }
      Flag* f = Find(name);
      if (f == nullptr && !has_value && name.compare(0, 3, "no-") == 0) {
        Flag* neg = Find(name.substr(3));
        if (neg != nullptr && neg->is_bool) {
          RETORT_RETURN_IF_ERROR(neg->set("false"));
          continue;
        }
      }
      if (f == nullptr) return InvalidArgumentError("unknown flag --" + name + " (see --help)");
      if (!has_value) {
        if (f->is_bool) {
          value = "true";
        } else {
          if (i + 1 >= argc)
            return InvalidArgumentError("flag --" + name + " needs a value (see --help)");
          value = argv[++i];
        }
      }
      Status s = f->set(value);
      if (!s.ok()) return Status(s.code(), s.message() + " (see --help)");
      continue;
    }
    if (next_positional >= positionals_.size())
      return InvalidArgumentError("unexpected argument '" + arg + "' (see --help)");
    *positionals_[next_positional++].out = arg;
  }
  for (size_t p = next_positional; p < positionals_.size(); ++p)
    if (positionals_[p].required)
      return InvalidArgumentError("missing argument <" + positionals_[p].name + "> (see --help)");
  return true;
}

std::optional<int> ArgParser::ParseOrExitCode(int argc, char** argv, const char* program) {
  StatusOr<bool> parsed = Parse(argc, argv);
  if (!parsed.ok()) {
    std::fprintf(stderr, "%s: %s\n", program, parsed.status().message().c_str());
    return 2;
  }
  if (!*parsed) return 0;
  return std::nullopt;
}

std::string ArgParser::Help() const {
  std::ostringstream os;
  os << "Usage: " << usage_ << "\n\n" << summary_ << "\n";
  if (!positionals_.empty()) {
    os << "\nArguments:\n";
    for (const auto& p : positionals_)
      os << "  " << p.name << (p.required ? "" : " (optional)") << "\n      " << p.help << "\n";
  }
  os << "\nFlags:\n";
  for (const auto& f : flags_) {
    os << "  --" << f.name << (f.is_bool ? "" : "=VALUE");
    if (!f.default_text.empty()) os << "  (default: " << f.default_text << ")";
    os << "\n      " << f.help << "\n";
  }
  os << "  --help\n      Show this help and exit.\n";
  if (!epilog_.empty()) os << "\n" << epilog_ << "\n";
  return os.str();
}

}  // namespace retort
