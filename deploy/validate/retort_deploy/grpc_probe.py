"""A Kubernetes `grpc:` probe, run from this machine: grpc.health.v1.Health/Check on
ADDRESS:PORT for a service name ("" = the server's overall status), plain TCP, as the kubelet
does. The messages are encoded by hand (one string field in, one enum field out) so that only
the grpcio package is needed, not generated health stubs.

check() returns the serving status name (SERVING, NOT_SERVING, SERVICE_UNKNOWN, UNKNOWN), or
the gRPC status code name when the call failed (NOT_FOUND for a service the server does not
know, UNAVAILABLE when nothing listens, DEADLINE_EXCEEDED). Kubernetes counts only SERVING as
success. Any thread; each call opens and closes its own channel.
"""
import grpc

_STATUS = {0: "UNKNOWN", 1: "SERVING", 2: "NOT_SERVING", 3: "SERVICE_UNKNOWN"}
_METHOD = "/grpc.health.v1.Health/Check"
# The kubelet does not go through an HTTP proxy; neither does this probe.
_OPTIONS = [("grpc.enable_http_proxy", 0)]


def _request(service):
    data = service.encode()
    if not data:
        return b""
    length, varint = len(data), b""
    while True:
        byte = length & 0x7F
        length >>= 7
        varint += bytes([byte | (0x80 if length else 0)])
        if not length:
            return b"\x0a" + varint + data


def _status(response):
    # HealthCheckResponse { ServingStatus status = 1; }: b"" (UNKNOWN) or b"\x08" + enum value.
    if len(response) >= 2 and response[0] == 0x08:
        return _STATUS.get(response[1], f"status {response[1]}")
    return "UNKNOWN"


def check(address, port, service="", timeout_s=1.0):
    """The serving status, or the failed call's gRPC code name (see the module doc)."""
    with grpc.insecure_channel(f"{address}:{port}", options=_OPTIONS) as channel:
        call = channel.unary_unary(_METHOD)
        try:
            return _status(call(_request(service), timeout=timeout_s))
        except grpc.RpcError as error:
            return error.code().name
