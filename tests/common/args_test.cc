#include "common/args.h"

#include <gtest/gtest.h>

#include <vector>

#include "common/logging.h"

namespace retort {
namespace {

struct Argv {
  explicit Argv(std::vector<std::string> a) : args(std::move(a)) {
    for (auto& s : args) ptrs.push_back(s.data());
  }
  int argc() { return static_cast<int>(ptrs.size()); }
  char** argv() { return ptrs.data(); }
  std::vector<std::string> args;
  std::vector<char*> ptrs;
};

TEST(ArgParserTest, ParsesAllFlagForms) {
  std::string addr = "127.0.0.1:7000", name;
  int64_t port = 1;
  int threads = 2;
  double ratio = 0.5;
  bool json = false, color = true;
  std::vector<std::string> tags;
  ArgParser p("prog [flags] NAME", "test");
  p.AddString("addr", &addr, "address");
  p.AddInt("port", &port, "port");
  p.AddInt("threads", &threads, "threads");
  p.AddDouble("ratio", &ratio, "ratio");
  p.AddBool("json", &json, "json");
  p.AddBool("color", &color, "color");
  p.AddStringList("tag", &tags, "tags");
  p.AddPositional("name", &name, "the name", true);
  Argv a({"prog", "--port=9", "--threads", "4", "--ratio=0.25", "--json", "--no-color", "--tag=a",
          "--tag", "b", "job"});
  auto r = p.Parse(a.argc(), a.argv());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(*r);
  EXPECT_EQ(port, 9);
  EXPECT_EQ(threads, 4);
  EXPECT_DOUBLE_EQ(ratio, 0.25);
  EXPECT_TRUE(json);
  EXPECT_FALSE(color);
  EXPECT_EQ(tags, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(name, "job");
  EXPECT_EQ(addr, "127.0.0.1:7000");
}

TEST(ArgParserTest, BadInputNamesTheFlag) {
  int64_t port = 1;
  ArgParser p("prog", "test");
  p.AddInt("port", &port, "port");
  Argv bad_int({"prog", "--port=abc"});
  auto r = p.Parse(bad_int.argc(), bad_int.argv());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("--port"), std::string::npos);
  EXPECT_EQ(port, 1);

  Argv unknown({"prog", "--prot=3"});
  r = p.Parse(unknown.argc(), unknown.argv());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("unknown flag --prot"), std::string::npos);

  Argv missing({"prog", "--port"});
  r = p.Parse(missing.argc(), missing.argv());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("needs a value"), std::string::npos);
}

TEST(ArgParserTest, HelpListsFlagsAndStopsParsing) {
  int64_t port = 7;
  ArgParser p("prog", "does things");
  p.AddInt("port", &port, "port to listen on");
  std::string help = p.Help();
  EXPECT_NE(help.find("--port=VALUE"), std::string::npos);
  EXPECT_NE(help.find("(default: 7)"), std::string::npos);
  Argv a({"prog", "--help"});
  testing::internal::CaptureStdout();
  auto r = p.Parse(a.argc(), a.argv());
  std::string out = testing::internal::GetCapturedStdout();
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(*r);
  EXPECT_NE(out.find("does things"), std::string::npos);
}

TEST(ArgParserTest, MissingRequiredPositional) {
  std::string id;
  ArgParser p("prog ID", "x");
  p.AddPositional("id", &id, "member id", true);
  Argv a({"prog"});
  auto r = p.Parse(a.argc(), a.argv());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("<id>"), std::string::npos);
}

TEST(ArgParserTest, LogLevelAppliesTheDefaultAndTheFlag) {
  const LogLevel before = GetLogLevel();
  ArgParser p("prog", "x");
  p.AddLogLevel("warning");
  EXPECT_EQ(GetLogLevel(), LogLevel::kWarning);
  Argv a({"prog", "--log-level=debug"});
  auto r = p.Parse(a.argc(), a.argv());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(GetLogLevel(), LogLevel::kDebug);
  Argv bad({"prog", "--log-level=loud"});
  r = p.Parse(bad.argc(), bad.argv());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "--log-level: 'loud' is not debug, info, warning or error (see --help)");
  SetLogLevel(before);
}

TEST(ArgParserTest, ParseOrExitCodeIsTwoOnErrorsZeroOnHelpNoneOtherwise) {
  int n = 0;
  ArgParser p("prog", "x");
  p.AddInt("n", &n, "a number");
  Argv good({"prog", "--n=3"});
  EXPECT_EQ(p.ParseOrExitCode(good.argc(), good.argv(), "prog"), std::nullopt);
  EXPECT_EQ(n, 3);
  Argv bad({"prog", "--n=three"});
  testing::internal::CaptureStderr();
  EXPECT_EQ(p.ParseOrExitCode(bad.argc(), bad.argv(), "prog"), 2);
  EXPECT_EQ(testing::internal::GetCapturedStderr(),
            "prog: --n: 'three' is not an integer (see --help)\n");
  Argv help({"prog", "--help"});
  testing::internal::CaptureStdout();
  EXPECT_EQ(p.ParseOrExitCode(help.argc(), help.argv(), "prog"), 0);
  EXPECT_NE(testing::internal::GetCapturedStdout().find("--n=VALUE"), std::string::npos);
}

}  // namespace
}  // namespace retort
