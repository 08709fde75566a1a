// UcxError: which UCX failures reach callers as a failed peer (UNAVAILABLE, the recovery path)
// and which as bugs (INTERNAL).
#include <gtest/gtest.h>

#include "collectives/ucx/ucx_check.h"

namespace retort::collectives::ucx {
namespace {

TEST(UcxErrorTest, APeerThatIsGoneIsUnavailable) {
  for (ucs_status_t gone : {UCS_ERR_CONNECTION_RESET, UCS_ERR_ENDPOINT_TIMEOUT, UCS_ERR_UNREACHABLE,
                            UCS_ERR_NOT_CONNECTED, UCS_ERR_IO_ERROR, UCS_ERR_SHMEM_SEGMENT}) {
    const Status status = UcxError(gone, "ucx: posting a send to rank 1", "f.cc", 7);
    EXPECT_EQ(status.code(), StatusCode::kUnavailable) << ucs_status_string(gone);
    EXPECT_NE(status.message().find("posting a send to rank 1"), std::string::npos);
    EXPECT_NE(status.message().find(ucs_status_string(gone)), std::string::npos);
  }
}

TEST(UcxErrorTest, OtherFailuresKeepTheirMeaning) {
  EXPECT_EQ(UcxError(UCS_ERR_TIMED_OUT, "w", "f.cc", 1).code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(UcxError(UCS_ERR_CANCELED, "w", "f.cc", 1).code(), StatusCode::kAborted);
  EXPECT_EQ(UcxError(UCS_ERR_MESSAGE_TRUNCATED, "w", "f.cc", 1).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(UcxError(UCS_ERR_NO_MEMORY, "w", "f.cc", 1).code(), StatusCode::kInternal);
}

}  // namespace
}  // namespace retort::collectives::ucx
