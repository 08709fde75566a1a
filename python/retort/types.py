"""Typed results of the control calls: plain dataclasses built from the retort.v1 replies.

Field names are those of `retortctl ... --json` (the C++ client), one naming for both clients;
`Status.to_dict()` gives the same object `retortctl status --json` prints (a test keeps them
equal). Job states are the names the coordinator uses in logs, `retortctl` and metrics:
"waiting", "running", "paused", "stopping", "stopped", "completed", "failed" ("unspecified"
for an unset value), derived from the proto's JobState value names.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from ._stubs import pb

# Job states in which the job will not train again.
TERMINAL_STATES = frozenset({"stopped", "completed", "failed"})


def state_name(value: int) -> str:
    """"running" for JOB_STATE_RUNNING (rpc/job_state.cc spells them the same way)."""
    return str(pb.JobState.Name(value)).removeprefix("JOB_STATE_").lower()


JOB_STATES = tuple(state_name(v) for v in pb.JobState.values() if v != pb.JOB_STATE_UNSPECIFIED)


def device_name(d: Any) -> str:
    """A retort.v1 Device as the worker's --devices names it (tools/retortctl.cc the same)."""
    if d.name:
        return str(d.name)
    return "cpu" if d.kind == "cpu" else f"{d.kind}:{d.index}"


@dataclass(frozen=True)
class JobFailure:
    """Why a job failed: the first recurring failure a member (or the pre-flight checks) hit."""

    kind: str  # "recurring" or "transient"
    message: str
    member_id: str
    node: str
    local_rank: int
    step: int  # the member's last completed step; the failing step is step + 1
    phase: str  # "setup", "data", "step" or "preflight"
    unix_ms: int

    @staticmethod
    def from_proto(f: Any) -> JobFailure:
        return JobFailure(
            kind="recurring" if f.kind == pb.FAILURE_KIND_RECURRING else "transient",
            message=f.message, member_id=f.member_id, node=f.node, local_rank=f.local_rank,
            step=f.step, phase=f.phase, unix_ms=f.unix_ms)


@dataclass(frozen=True)
class Member:
    """One worker as the coordinator sees it. rank is -1 while it is not in a generation.
    devices: what the worker announced when it joined ("cpu", "cuda:0", ...)."""

    id: str
    rank: int
    node: str
    local_rank: int
    data_address: str
    step: int
    epoch: int
    loss: float
    samples_per_second: float
    last_heartbeat_ms_ago: int
    draining: bool
    generation: int  # the generation the member last reported
    devices: list[str] = field(default_factory=list)
    # Its share of the last step's global batch, and samples per second of its own compute
    # (its waits excluded): what straggler rebalancing follows.
    local_batch: int = 0
    compute_samples_per_second: float = 0.0

    @staticmethod
    def from_proto(m: Any) -> Member:
        return Member(
            id=m.member_id, rank=m.rank, node=m.node, local_rank=m.local_rank,
            data_address=m.data_address, step=m.step, epoch=m.epoch, loss=m.metrics.loss,
            samples_per_second=m.metrics.samples_per_second,
            last_heartbeat_ms_ago=m.last_heartbeat_ms_ago, draining=m.draining,
            generation=m.generation, devices=[device_name(d) for d in m.devices],
            local_batch=m.local_batch,
            compute_samples_per_second=m.metrics.compute_samples_per_second)


@dataclass(frozen=True)
class Checkpoint:
    id: int
    step: int


@dataclass(frozen=True)
class Evaluation:
    """One evaluation on the test split during training (all ranks' parts combined)."""

    step: int
    epoch: int
    samples: int
    top1: float
    top5: float

    @staticmethod
    def from_proto(e: Any) -> Evaluation | None:
        if e.step == 0:
            return None
        return Evaluation(step=e.step, epoch=e.epoch, samples=e.samples, top1=e.top1,
                          top5=e.top5)


@dataclass(frozen=True)
class Status:
    """The job as the coordinator reports it (ControlService.Status)."""

    job: str
    state: str
    generation: int
    step: int
    total_steps: int  # 0 when the job trains by epochs and the count is not known yet
    min_workers: int
    max_workers: int
    last_checkpoint_id: int  # 0 = none yet
    last_checkpoint_step: int
    uptime_ms: int
    version: str  # the coordinator's version
    failure: JobFailure | None
    members: list[Member] = field(default_factory=list)
    # After a coordinator restart: the previous generation's members ("node/local_rank") it
    # still waits for before forming a generation.
    awaiting_rejoin: list[str] = field(default_factory=list)
    # Checkpoints that failed to commit since the coordinator started, the run of them since the
    # last commit, and the last error (empty when none failed).
    checkpoint_failures: int = 0
    checkpoint_consecutive_failures: int = 0
    last_checkpoint_failure: str = ""
    last_checkpoint_failure_step: int = 0
    # The newest and the best evaluation during training (None before the first).
    last_evaluation: Evaluation | None = None
    best_evaluation: Evaluation | None = None
    # Samples of each global batch by rank as the members report them (straggler rebalancing);
    # empty until every rank of the generation reported one.
    batch_split: list[int] = field(default_factory=list)

    @property
    def last_checkpoint(self) -> Checkpoint | None:
        if self.last_checkpoint_id == 0:
            return None
        return Checkpoint(self.last_checkpoint_id, self.last_checkpoint_step)

    @property
    def finished(self) -> bool:
        return self.state in TERMINAL_STATES

    def to_dict(self) -> dict[str, Any]:
        """The object `retortctl status --json` prints."""
        return dataclasses.asdict(self)

    @staticmethod
    def from_proto(r: Any) -> Status:
        return Status(
            job=r.job_name, state=state_name(r.state), generation=r.generation, step=r.step,
            total_steps=r.total_steps, min_workers=r.min_workers, max_workers=r.max_workers,
            last_checkpoint_id=r.last_checkpoint_id,
            last_checkpoint_step=r.last_checkpoint_step, uptime_ms=r.uptime_ms,
            version=r.coordinator_version,
            failure=JobFailure.from_proto(r.failure) if r.HasField("failure") else None,
            members=[Member.from_proto(m) for m in r.members],
            awaiting_rejoin=list(r.awaiting_rejoin),
            checkpoint_failures=r.checkpoint_health.failures_total,
            checkpoint_consecutive_failures=r.checkpoint_health.consecutive_failures,
            last_checkpoint_failure=r.checkpoint_health.last_failure,
            last_checkpoint_failure_step=r.checkpoint_health.last_failure_step,
            last_evaluation=Evaluation.from_proto(r.last_evaluation),
            best_evaluation=Evaluation.from_proto(r.best_evaluation),
            batch_split=list(r.batch_split.samples))


@dataclass(frozen=True)
class Event:
    """One event of the coordinator's stream (ControlService.Watch). Client.watch() adds its
    own events of kind "disconnected" and "reconnected" when the coordinator goes away and comes
    back (events in between are not replayed); their unix_ms is the client's clock."""

    unix_ms: int
    kind: str  # "generation", "member_joined", "member_left", "member_evicted", "state", ...
    message: str
    generation: int
    member_id: str
    state: str

    @staticmethod
    def from_proto(e: Any) -> Event:
        return Event(unix_ms=e.unix_ms, kind=e.kind, message=e.message, generation=e.generation,
                     member_id=e.member_id, state=state_name(e.state))


@dataclass(frozen=True)
class ControlResult:
    """The reply of pause, resume, scale, drain and stop."""

    message: str
    state: str

    @staticmethod
    def from_proto(r: Any) -> ControlResult:
        return ControlResult(message=r.message, state=state_name(r.state))


@dataclass(frozen=True)
class CheckpointTicket:
    """checkpoint(): the checkpoint the coordinator will take, and at which step."""

    checkpoint_id: int
    step: int


@dataclass(frozen=True)
class TraceWindow:
    """trace(): the steps every worker will record."""

    first_step: int
    last_step: int
    message: str
