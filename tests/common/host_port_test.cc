// The one reading of "host:port" (common/host_port.h).
#include "common/host_port.h"

#include <gtest/gtest.h>

namespace retort {
namespace {

TEST(HostPortTest, SplitsHostAndPortInEveryForm) {
  struct Case {
    const char* address;
    const char* host;
    const char* port;
  };
  for (const Case& c :
       {Case{"10.0.0.2:7070", "10.0.0.2", "7070"}, Case{"localhost", "localhost", ""},
        Case{"[::1]:7070", "::1", "7070"}, Case{"[fe80::1]", "fe80::1", ""}, Case{"::1", "::1", ""},
        Case{":7070", "", "7070"}, Case{"[::1", "[::1", ""}}) {
    const HostPort hp = SplitHostPort(c.address);
    EXPECT_EQ(hp.host, c.host) << c.address;
    EXPECT_EQ(hp.port, c.port) << c.address;
  }
}

}  // namespace
}  // namespace retort
