#include "common/file_util.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

namespace retort {
namespace {

std::string TempDir() {
  char tmpl[] = "/tmp/retort_file_util_XXXXXX";
  return mkdtemp(tmpl);
}

TEST(FileUtilTest, AtomicWriteReplacesContentAndLeavesNoTemp) {
  std::string dir = TempDir();
  std::string path = dir + "/state.json";
  ASSERT_TRUE(WriteFileAtomically(path, "one").ok());
  ASSERT_TRUE(WriteFileAtomically(path, "two").ok());
  auto read = ReadFileToString(path);
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(*read, "two");
  // Only state.json remains in the directory.
  int entries = 0;
  for (const char* name : {"state.json"}) entries += PathExists(dir + "/" + name);
  EXPECT_EQ(entries, 1);
}

TEST(FileUtilTest, MissingFileIsNotFound) {
  auto read = ReadFileToString("/nonexistent/retort/file");
  EXPECT_EQ(read.status().code(), StatusCode::kNotFound);
  EXPECT_NE(read.status().message().find("/nonexistent/retort/file"), std::string::npos);
}

TEST(FileUtilTest, WriteIntoMissingDirectoryFailsWithoutCreatingTarget) {
  Status s = WriteFileAtomically("/nonexistent/retort/x", "data");
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_FALSE(PathExists("/nonexistent/retort/x"));
}

TEST(FileUtilTest, MakeDirectoriesIsIdempotentAndRejectsFiles) {
  std::string dir = TempDir() + "/a/b/c";
  ASSERT_TRUE(MakeDirectories(dir).ok());
  ASSERT_TRUE(MakeDirectories(dir).ok());
  ASSERT_TRUE(WriteFileAtomically(dir + "/f", "x").ok());
  EXPECT_EQ(MakeDirectories(dir + "/f").code(), StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace retort
