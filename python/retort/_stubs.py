"""The generated retort.v1 modules, imported in one place. They exist only in a built package
(setup.py generates them from proto/retort/v1/retort.proto); a source tree used directly gets an
ImportError saying how to build them."""
from __future__ import annotations

try:
    from retort.v1 import retort_pb2 as pb
    from retort.v1 import retort_pb2_grpc as pb_grpc
except ImportError as error:  # pragma: no cover - depends on how the package was installed
    raise ImportError(
        "retort: the generated retort.v1 stubs are missing; install the package from a retort "
        "checkout (pip install ./python, or scripts/setup) instead of importing python/ directly"
    ) from error

# The protobuf package this client speaks, from the generated descriptor: the coordinator must
# serve the same one (retort.Client.check_version).
PROTO_PACKAGE: str = pb.DESCRIPTOR.package
CONTROL_SERVICE: str = f"{PROTO_PACKAGE}.ControlService"

__all__ = ["pb", "pb_grpc", "PROTO_PACKAGE", "CONTROL_SERVICE"]
