"""The exceptions of the retort package. Every failed call to the coordinator raises a
RetortRpcError subclass chosen by its gRPC status code, carrying the coordinator's own message;
`except retort.RetortError` catches everything this package raises on purpose."""
from __future__ import annotations

import grpc


class RetortError(Exception):
    """Base of every error this package raises."""


class JobSpecError(RetortError, ValueError):
    """A job spec the coordinator's rules refuse; the message names the field."""


class BinaryNotFoundError(RetortError, FileNotFoundError):
    """A retort program (retort-coordinator, retort-run, ...) is not built or not found; the
    message says how to build it."""


class JobEndedError(RetortError):
    """wait() or run(): the job ended in a state other than the one waited for."""

    def __init__(self, message: str, state: str) -> None:
        super().__init__(message)
        self.state = state


class JobFailedError(JobEndedError):
    """The job failed; `failure` is the coordinator's first recurring failure (or None)."""

    def __init__(self, message: str, failure: object = None) -> None:
        super().__init__(message, "failed")
        self.failure = failure


class RetortRpcError(RetortError):
    """A call to the coordinator failed. `code` is the gRPC status code, `details` the
    coordinator's (or gRPC's) message, `method` the call, `address` the coordinator."""

    def __init__(self, code: grpc.StatusCode, details: str, method: str, address: str) -> None:
        super().__init__(f"{method} {address}: {code.name}: {details}")
        self.code = code
        self.details = details
        self.method = method
        self.address = address


class Unavailable(RetortRpcError):
    """UNAVAILABLE: the coordinator cannot be reached (not running, wrong address, TLS
    handshake refused); also CANCELLED, which a call gets when the coordinator shuts down
    under it or ends a TLS 1.3 handshake late (this client never cancels a call itself)."""


class DeadlineExceeded(RetortRpcError, TimeoutError):
    """DEADLINE_EXCEEDED: no answer within the call's deadline."""


class Unauthenticated(RetortRpcError):
    """UNAUTHENTICATED: the call proves no role (no client certificate or token)."""


class PermissionDenied(RetortRpcError):
    """PERMISSION_DENIED: the caller proves the other role (a worker certificate calling
    ControlService)."""


class InvalidArgument(RetortRpcError, ValueError):
    """INVALID_ARGUMENT or OUT_OF_RANGE: the request is refused as malformed."""


class NotFound(RetortRpcError):
    """NOT_FOUND: e.g. drain of a member that does not exist."""


class FailedPrecondition(RetortRpcError):
    """FAILED_PRECONDITION or ABORTED: the job's state does not allow the call now."""


class ResourceExhausted(RetortRpcError):
    """RESOURCE_EXHAUSTED: a limit of the coordinator (e.g. watch streams per host)."""


class IncompatibleCoordinator(RetortRpcError):
    """UNIMPLEMENTED: the coordinator does not serve the retort.v1 call this package makes."""


_BY_CODE: dict[grpc.StatusCode, type[RetortRpcError]] = {
    grpc.StatusCode.UNAVAILABLE: Unavailable,
    grpc.StatusCode.CANCELLED: Unavailable,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceeded,
    grpc.StatusCode.UNAUTHENTICATED: Unauthenticated,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDenied,
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgument,
    grpc.StatusCode.OUT_OF_RANGE: InvalidArgument,
    grpc.StatusCode.NOT_FOUND: NotFound,
    grpc.StatusCode.FAILED_PRECONDITION: FailedPrecondition,
    grpc.StatusCode.ABORTED: FailedPrecondition,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhausted,
    grpc.StatusCode.UNIMPLEMENTED: IncompatibleCoordinator,
}


def error_from_grpc(error: grpc.RpcError, method: str, address: str) -> RetortRpcError:
    """The RetortRpcError subclass for a failed gRPC call."""
    code = error.code() if isinstance(error, grpc.Call) else grpc.StatusCode.UNKNOWN
    details = (error.details() if isinstance(error, grpc.Call) else None) or str(error)
    return _BY_CODE.get(code, RetortRpcError)(code, details, method, address)
