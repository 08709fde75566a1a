// Without TLS the coordinator serves loopback only, unless told --insecure-listen.
#include "coordinator/listen_policy.h"

#include <gtest/gtest.h>

namespace retort::coordinator {
namespace {

TEST(ListenPolicyTest, LoopbackAddressesAreRecognised) {
  for (const char* a :
       {"127.0.0.1:7070", "127.3.2.1:0", "localhost:7070", "[::1]:7070", "unix:/tmp/retort.sock"})
    EXPECT_TRUE(IsLoopbackListenAddress(a)) << a;
  for (const char* a : {"0.0.0.0:7070", "[::]:7070", ":7070", "*:7070", "10.0.0.2:7070",
                        "coordinator.example:7070", "128.0.0.1:7070"})
    EXPECT_FALSE(IsLoopbackListenAddress(a)) << a;
}

TEST(ListenPolicyTest, OtherAddressesNeedTlsOrInsecureListen) {
  EXPECT_TRUE(CheckListenPolicy("127.0.0.1:7070", false, false).ok());
  Status refused = CheckListenPolicy("0.0.0.0:7070", false, false);
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("0.0.0.0:7070"), std::string::npos);
  EXPECT_NE(refused.message().find("--insecure-listen"), std::string::npos);
  EXPECT_TRUE(CheckListenPolicy("0.0.0.0:7070", true, false).ok());
  EXPECT_TRUE(CheckListenPolicy("0.0.0.0:7070", false, true).ok());
}

}  // namespace
}  // namespace retort::coordinator
