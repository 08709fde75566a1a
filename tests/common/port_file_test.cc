#include "common/port_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

namespace retort {
namespace {

Deadline Soon() { return Deadline::AfterMs(30000); }

TEST(PortFileTest, WaitsForTheFileAndChecksItsContents) {
  const std::string path = "/tmp/retort_port_file_test_" + std::to_string(::getpid());
  std::remove(path.c_str());
  EXPECT_EQ(WaitForPortFile(path, Deadline::AfterMs(30), nullptr).status().code(),
            StatusCode::kDeadlineExceeded);
  EXPECT_EQ(WaitForPortFile(path, Soon(), [] { return true; }).status().code(),
            StatusCode::kFailedPrecondition);
  ASSERT_TRUE(WritePortFile(path, 40123).ok());
  auto port = WaitForPortFile(path, Soon(), [] { return true; });  // written, then exited
  ASSERT_TRUE(port.ok()) << port.status();
  EXPECT_EQ(*port, 40123);
  std::ofstream(path) << "70000\n";
  EXPECT_EQ(WaitForPortFile(path, Soon(), nullptr).status().code(), StatusCode::kDataLoss);
  std::ofstream(path) << "http\n";
  EXPECT_EQ(WaitForPortFile(path, Soon(), nullptr).status().code(), StatusCode::kDataLoss);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace retort
