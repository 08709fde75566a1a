#include "common/enum_names.h"

#include <gtest/gtest.h>

#include "common/status.h"

namespace retort {
namespace {

enum class Color { kRed = 0, kGreen = 5, kBlue = 9 };
constexpr NamedValue<Color> kColors[] = {
    {Color::kRed, "red"}, {Color::kGreen, "green"}, {Color::kBlue, "blue"}};

TEST(EnumNamesTest, NameInFindsEveryEntryAndFallsBackForOthers) {
  EXPECT_STREQ(NameIn(kColors, Color::kRed, "?"), "red");
  EXPECT_STREQ(NameIn(kColors, Color::kGreen, "?"), "green");
  EXPECT_STREQ(NameIn(kColors, Color::kBlue, "?"), "blue");
  EXPECT_STREQ(NameIn(kColors, static_cast<Color>(7), "?"), "?");
  static_assert(NameIn(kColors, Color::kBlue, "?")[0] == 'b', "usable at compile time");
}

TEST(EnumNamesTest, ValueInParsesNamesAndLeavesTheOutputAloneOnUnknownOnes) {
  Color c = Color::kRed;
  EXPECT_TRUE(ValueIn(kColors, "blue", &c));
  EXPECT_EQ(c, Color::kBlue);
  EXPECT_FALSE(ValueIn(kColors, "Blue", &c));
  EXPECT_FALSE(ValueIn(kColors, "", &c));
  EXPECT_EQ(c, Color::kBlue);
}

TEST(EnumNamesTest, StatusCodeNamesCoverEveryCodeIncludingUnauthenticated) {
  EXPECT_STREQ(StatusCodeName(StatusCode::kOk), "OK");
  EXPECT_STREQ(StatusCodeName(StatusCode::kPermissionDenied), "PERMISSION_DENIED");
  EXPECT_STREQ(StatusCodeName(StatusCode::kDataLoss), "DATA_LOSS");
  EXPECT_STREQ(StatusCodeName(StatusCode::kUnauthenticated), "UNAUTHENTICATED");
  EXPECT_STREQ(StatusCodeName(static_cast<StatusCode>(17)), "UNKNOWN");
  EXPECT_STREQ(StatusCodeName(static_cast<StatusCode>(-1)), "UNKNOWN");
  EXPECT_EQ(UnauthenticatedError("no token").ToString(), "UNAUTHENTICATED: no token");
  EXPECT_EQ(PermissionDeniedError("worker role").code(), StatusCode::kPermissionDenied);
}

}  // namespace
}  // namespace retort
