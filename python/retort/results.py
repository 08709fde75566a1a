"""A run folder as plain Python objects (the layout of tools/run_layout.h):

    run = retort.read_run("retort-out")
    run.result.student_top1          # result.json (None until the job completed)
    run.metrics[-1]["loss"]          # metrics.jsonl, one dict per completed step
    run.metrics_frame()              # the same as a pandas DataFrame (pandas installed)

metrics.jsonl may hold the step in flight at a member's failure twice (old and next
generation); metrics_by_step() keeps the last line of each step.
"""
from __future__ import annotations

import json
import os
import pathlib
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class RunResult:
    """result.json, written by rank 0 when the job completed."""

    job: str
    steps: int
    evaluated: bool
    student: str
    student_weights: str
    metrics: str
    test_samples: int | None = None
    student_top1: float | None = None
    eval_seconds: float | None = None
    teacher: str | None = None
    teacher_top1: float | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    @staticmethod
    def from_dict(d: dict[str, Any]) -> RunResult:
        return RunResult(job=str(d.get("job", "")), steps=int(d.get("steps", 0)),
                         evaluated=bool(d.get("evaluated", "student_top1" in d)),
                         student=str(d.get("student", "")),
                         student_weights=str(d.get("student_weights", "")),
                         metrics=str(d.get("metrics", "")), test_samples=d.get("test_samples"),
                         student_top1=d.get("student_top1"), eval_seconds=d.get("eval_seconds"),
                         teacher=d.get("teacher"), teacher_top1=d.get("teacher_top1"), raw=d)


@dataclass
class Run:
    """What a run folder holds now (a running job's folder can be read too)."""

    folder: pathlib.Path
    job: dict[str, Any] | None  # job.json: the spec retort-run handed the coordinator
    result: RunResult | None  # None while the job has not completed
    metrics: list[dict[str, Any]]

    def metrics_by_step(self) -> list[dict[str, Any]]:
        """One line per step (the last one written for a step that was run twice)."""
        by_step: dict[int, dict[str, Any]] = {}
        for line in self.metrics:
            by_step[int(line.get("step", 0))] = line
        return [by_step[s] for s in sorted(by_step)]

    def metrics_frame(self) -> Any:
        """metrics.jsonl as a pandas DataFrame (step timings flattened to timing.* columns);
        ImportError saying so when pandas is not installed (it is optional)."""
        try:
            import pandas
        except ImportError as error:
            raise ImportError("metrics_frame() needs pandas (pip install pandas); "
                              "Run.metrics has the same data as dicts") from error
        return pandas.json_normalize(self.metrics)


def read_metrics(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """metrics.jsonl as a list of dicts; a torn last line (a writer killed mid-line) is
    skipped, a torn line elsewhere is an error naming the line."""
    p = pathlib.Path(path)
    if not p.exists():
        return []
    lines = p.read_text(encoding="utf-8").splitlines()
    out: list[dict[str, Any]] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError as error:
            if number == len(lines):
                break
            raise ValueError(f"{p}:{number}: not a JSON line ({error.msg})") from None
    return out


def read_run(folder: str | os.PathLike[str]) -> Run:
    """Reads a run folder (retort-run --output-dir, or a job's output_dir)."""
    f = pathlib.Path(folder)
    if not f.is_dir():
        raise FileNotFoundError(f"{f}: no such run folder")
    job = _read_json(f / "job.json")
    result = _read_json(f / "result.json")
    return Run(folder=f, job=job, result=RunResult.from_dict(result) if result else None,
               metrics=read_metrics(f / "metrics.jsonl"))


def _read_json(path: pathlib.Path) -> dict[str, Any] | None:
    if not path.exists():
        return None
    value = json.loads(path.read_text(encoding="utf-8"))
    return value if isinstance(value, dict) else None
