#include "common/process.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <thread>

namespace retort {
namespace {

// Generous: these children are /bin/sh one-liners, but the machine may be loaded.
Deadline Soon() { return Deadline::AfterMs(30000); }

std::string TempPath(const std::string& name) {
  return "/tmp/retort_process_test_" + std::to_string(::getpid()) + "_" + name;
}

// Output to a fresh file at `path`.
SpawnOptions ToNewFile(const std::string& path) {
  std::remove(path.c_str());
  SpawnOptions options;
  options.output = SpawnOptions::Output::kFile;
  options.output_path = path;
  return options;
}

std::string ReadAll(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(ProcessTest, ExitCodesAndSignals) {
  auto ok = SpawnProcess({"/bin/sh", "-c", "exit 0"});
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(WaitExit(ok->pid, Soon()), 0);
  auto three = SpawnProcess({"/bin/sh", "-c", "exit 3"});
  ASSERT_TRUE(three.ok()) << three.status();
  EXPECT_EQ(WaitExit(three->pid, Soon()), 3);
  // No shell in between (killing it would leave its sleep holding our output open), and its
  // output discarded anyway.
  SpawnOptions quiet;
  quiet.output = SpawnOptions::Output::kDiscard;
  auto sleeper = SpawnProcess({"/bin/sleep", "600"}, quiet);
  ASSERT_TRUE(sleeper.ok()) << sleeper.status();
  EXPECT_EQ(PollExit(sleeper->pid), std::nullopt);
  EXPECT_EQ(WaitExit(sleeper->pid, Deadline::AfterMs(1)), std::nullopt);
  EXPECT_EQ(KillAndWait(sleeper->pid, Soon()), 128 + SIGKILL);
}

TEST(ProcessTest, OutputToAFileIsAppendedAndAPipeIsReadable) {
  const std::string path = TempPath("out");
  const SpawnOptions to_file = ToNewFile(path);
  for (const char* word : {"one", "two"}) {
    auto p =
        SpawnProcess({"/bin/sh", "-c", std::string("echo ") + word + "; echo err >&2"}, to_file);
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ(WaitExit(p->pid, Soon()), 0);
  }
  EXPECT_EQ(ReadAll(path), "one\nerr\ntwo\nerr\n");
  std::remove(path.c_str());

  SpawnOptions to_pipe;
  to_pipe.output = SpawnOptions::Output::kPipe;
  auto p = SpawnProcess({"/bin/sh", "-c", "echo piped"}, to_pipe);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_GE(p->output_fd, 0);
  std::string text;
  char buf[64];
  for (ssize_t n; (n = ::read(p->output_fd, buf, sizeof(buf))) > 0;) text.append(buf, n);
  ::close(p->output_fd);
  EXPECT_EQ(text, "piped\n");
  EXPECT_EQ(WaitExit(p->pid, Soon()), 0);
}

TEST(ProcessTest, AProgramThatCannotRunExits127SayingWhy) {
  const std::string path = TempPath("missing");
  auto p = SpawnProcess({"/nonexistent/program", "--flag"}, ToNewFile(path));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(WaitExit(p->pid, Soon()), 127);
  EXPECT_EQ(ReadAll(path), "cannot run /nonexistent/program: No such file or directory\n");
  std::remove(path.c_str());
  EXPECT_EQ(SpawnProcess({}).status().code(), StatusCode::kInvalidArgument);
}

TEST(ProcessTest, SearchPathAndOwnProcessGroup) {
  SpawnOptions options;
  options.search_path = true;
  options.own_process_group = true;
  // Exits 0 only when its process group (field 5 of /proc/PID/stat) is its own pid.
  auto p = SpawnProcess({"sh", "-c", "read -r _ _ _ _ group _ < /proc/$$/stat; test $group = $$"},
                        options);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(WaitExit(p->pid, Soon()), 0);
}

// Whether `pid` is gone or a zombie (killed, not yet reaped by whoever inherited it).
bool Dead(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const size_t paren = text.rfind(')');
  return text.empty() || (paren != std::string::npos && text.compare(paren + 2, 1, "Z") == 0);
}

TEST(ProcessTest, DieWithParentKillsTheChildWhenItsParentExits) {
  const std::string pid_file = TempPath("orphan");
  std::remove(pid_file.c_str());
  // An intermediate process starts `sleep 600` with die_with_parent, notes its pid and exits.
  auto middle = ForkAndRun([&] {
    SpawnOptions options;
    options.die_with_parent = true;
    options.output = SpawnOptions::Output::kDiscard;
    auto orphan = SpawnProcess({"/bin/sleep", "600"}, options);
    if (!orphan.ok()) return 1;
    std::ofstream(pid_file) << orphan->pid << "\n";
    return 0;
  });
  ASSERT_TRUE(middle.ok()) << middle.status();
  ASSERT_EQ(WaitExit(*middle, Soon()), 0);
  pid_t orphan = 0;
  std::ifstream(pid_file) >> orphan;
  std::remove(pid_file.c_str());
  ASSERT_GT(orphan, 0);
  const Deadline deadline = Soon();
  while (!Dead(orphan) && !deadline.Expired()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(Dead(orphan)) << "pid " << orphan << " outlived the process that started it";
  if (!Dead(orphan)) ::kill(orphan, SIGKILL);
}

TEST(ProcessTest, ForkAndRunExitsWithTheBodysValue) {
  auto pid = ForkAndRun([] { return 7; });
  ASSERT_TRUE(pid.ok()) << pid.status();
  EXPECT_EQ(WaitExit(*pid, Soon()), 7);
}

}  // namespace
}  // namespace retort
