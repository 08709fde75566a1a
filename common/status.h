// Status and StatusOr: expected failures at boundaries (leveldb/absl style), without
// depending on absl so that collectives/ and trainer/ build on a box with only LibTorch.
// Codes mirror the canonical gRPC codes so control-plane adapters map them one to one.
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <utility>

namespace retort {

enum class StatusCode : int {
  kOk = 0,
  kCancelled = 1,
  kUnknown = 2,
  kInvalidArgument = 3,
  kDeadlineExceeded = 4,
  kNotFound = 5,
  kAlreadyExists = 6,
  kPermissionDenied = 7,
  kResourceExhausted = 8,
  kFailedPrecondition = 9,
  kAborted = 10,
  kOutOfRange = 11,
  kUnimplemented = 12,
  kInternal = 13,
  kUnavailable = 14,
  kDataLoss = 15,
  kUnauthenticated = 16,
};

const char* StatusCodeName(StatusCode code);

// Value type; cheap to copy when OK. Thread-compatible.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "INVALID_ARGUMENT: message" (or "OK").
  std::string ToString() const;
  // Returns a copy whose message is prefixed with `context: `.
  Status WithContext(const std::string& context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline std::ostream& operator<<(std::ostream& os, const Status& s) { return os << s.ToString(); }

Status InvalidArgumentError(std::string message);
Status NotFoundError(std::string message);
Status AlreadyExistsError(std::string message);
Status FailedPreconditionError(std::string message);
Status AbortedError(std::string message);
Status DeadlineExceededError(std::string message);
Status UnavailableError(std::string message);
Status InternalError(std::string message);
Status DataLossError(std::string message);
Status ResourceExhaustedError(std::string message);
Status OutOfRangeError(std::string message);
Status CancelledError(std::string message);
Status UnimplementedError(std::string message);
// The control plane's refusals of callers (rpc/authorizer.h, member secrets).
Status UnauthenticatedError(std::string message);
Status PermissionDeniedError(std::string message);

// Holds either a value or a non-OK Status.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(Status status) : status_(std::move(status)) {  // NOLINT: implicit by design
    if (status_.ok()) status_ = InternalError("StatusOr constructed from OK status without value");
  }
  StatusOr(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  // Precondition: ok().
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace retort

#define RETORT_STATUS_CONCAT_INNER(a, b) a##b
#define RETORT_STATUS_CONCAT(a, b) RETORT_STATUS_CONCAT_INNER(a, b)

// Returns from the enclosing function if `expr` (a Status) is not OK.
#define RETORT_RETURN_IF_ERROR(expr)                 \
  do {                                               \
    ::retort::Status retort_status_ = (expr);        \
    if (!retort_status_.ok()) return retort_status_; \
  } while (0)

// `lhs = value of expr` (a StatusOr), or returns its error.
#define RETORT_ASSIGN_OR_RETURN(lhs, expr) \
  RETORT_ASSIGN_OR_RETURN_IMPL(RETORT_STATUS_CONCAT(retort_statusor_, __LINE__), lhs, expr)
#define RETORT_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return tmp.status();                \
  lhs = std::move(tmp).value()
