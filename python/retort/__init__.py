"""retort: the Python side of the retort elastic knowledge-distillation framework.

- retort.Client: the operators' gRPC control client (status, watch, pause, resume, checkpoint,
  scale, drain, stop, trace, wait), generated from proto/retort/v1/retort.proto.
- retort.JobSpec: load, build and validate job specs with the coordinator's own rules.
- retort.read_run: a run folder (result.json, metrics.jsonl) as Python objects or pandas.
- retort.run / retort.start: one job on this machine through the local launcher retort-run.

Submodules load what they need: `import retort.export` (model export helpers) is separate and
not imported here.
"""
from __future__ import annotations

from importlib import metadata as _metadata

from . import binaries, security
from ._stubs import PROTO_PACKAGE
from .client import Client
from .errors import (BinaryNotFoundError, DeadlineExceeded, FailedPrecondition,
                     IncompatibleCoordinator, InvalidArgument, JobEndedError, JobFailedError,
                     JobSpecError, NotFound, PermissionDenied, ResourceExhausted, RetortError,
                     RetortRpcError, Unauthenticated, Unavailable)
from .jobspec import JobSpec
from .launch import LocalJob, run, start
from .results import Run, RunResult, read_metrics, read_run
from .types import (CheckpointTicket, ControlResult, Evaluation, Event, JobFailure, Member,
                    Status, TraceWindow)

try:
    __version__ = _metadata.version("retort")
except _metadata.PackageNotFoundError:  # pragma: no cover - a package without metadata
    __version__ = "unknown"

__all__ = [
    "binaries", "security", "PROTO_PACKAGE", "Client", "JobSpec", "run", "start", "LocalJob", "Run", "RunResult", "read_run", "read_metrics",
    "Status", "Member", "Event", "JobFailure", "ControlResult", "CheckpointTicket", "TraceWindow",
    "Evaluation",
    "RetortError", "RetortRpcError", "Unavailable", "DeadlineExceeded", "Unauthenticated",
    "PermissionDenied", "InvalidArgument", "NotFound", "FailedPrecondition", "ResourceExhausted",
    "IncompatibleCoordinator", "JobSpecError", "JobEndedError", "JobFailedError",
    "BinaryNotFoundError",
]
