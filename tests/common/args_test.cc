#include "common/args.h"

#include <gtest/gtest.h>

#include <vector>

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

}  // namespace
}  // namespace retort
