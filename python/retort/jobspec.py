"""Job specs: load, build and validate them with the coordinator's own rules.

The rules (fields, types, ranges, defaults, cross-field rules and pre-flight checks) exist once,
in the coordinator (coordinator/job_spec.h, job_preflight.h); validate() runs
`retort-coordinator --check-job=- --json` on the spec and returns the spec as the coordinator
will run it (defaults filled in) as the generated retort.v1.JobSpec message.

    spec = retort.JobSpec({"name": "kd", "student": {"preset": "fm-student-p7"},
                           "dataset": {"kind": "synthetic"}, "steps": 100})
    job = spec.validate()            # retort.v1 JobSpec; JobSpecError naming the field
    print(job.global_batch)          # 128: the coordinator's default
"""
from __future__ import annotations

import json
import os
import pathlib
import subprocess
from collections.abc import Mapping
from typing import Any

from google.protobuf import json_format

from . import binaries
from ._stubs import pb
from .errors import JobSpecError

CHECK_TIMEOUT_S = 30.0


class JobSpec:
    """A job spec as written: YAML or JSON text (what the coordinator reads), and its fields as
    a dict when they can be read here (JSON, or YAML with PyYAML installed)."""

    def __init__(self, fields: Mapping[str, Any] | None = None, *, text: str | None = None,
                 source: str = "<job spec>") -> None:
        if (fields is None) == (text is None):
            raise TypeError("JobSpec takes fields or text")
        self.source = source
        self.fields: dict[str, Any] | None = None
        if fields is not None:
            self.fields = json.loads(json.dumps(dict(fields)))  # a deep copy of plain values
            self.text = json.dumps(self.fields, indent=2) + "\n"
        else:
            assert text is not None
            self.text = text
            self.fields = _parse_fields(text)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> JobSpec:
        """Reads a YAML or JSON file (not yet validated)."""
        p = pathlib.Path(path)
        return cls(text=p.read_text(encoding="utf-8"), source=str(p))

    @classmethod
    def build(cls, **fields: Any) -> JobSpec:
        """JobSpec.build(name="kd", steps=100, student={"preset": "fm-student-p7"}, ...)."""
        return cls(fields)

    def replace(self, **fields: Any) -> JobSpec:
        """A copy with top-level fields replaced (a nested message is replaced whole)."""
        if self.fields is None:
            raise JobSpecError(f"{self.source}: its fields cannot be read here (YAML needs "
                               "PyYAML); edit the file instead")
        return JobSpec({**self.fields, **fields}, source=self.source)

    def save(self, path: str | os.PathLike[str]) -> pathlib.Path:
        p = pathlib.Path(path)
        p.write_text(self.text, encoding="utf-8")
        return p

    def validate(self, *, check_paths: bool = True,
                 bin_dir: str | os.PathLike[str] | None = None) -> Any:
        """The spec the coordinator would run (a retort.v1.JobSpec message, defaults filled in),
        or JobSpecError with the coordinator's message naming the field. check_paths: also
        check that the dataset and model paths exist on this machine."""
        result = check_job_text(self.text, check_paths=check_paths, bin_dir=bin_dir)
        if not result.get("valid"):
            error = str(result.get("error", "invalid")).removeprefix("<stdin>: ")
            raise JobSpecError(f"{self.source}: {error}")
        job = pb.JobSpec()
        json_format.ParseDict(result["job"], job)
        return job

    def __repr__(self) -> str:
        return f"JobSpec({self.source})"


def check_job_text(text: str, *, check_paths: bool = True,
                   bin_dir: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """The coordinator's verdict on a job spec's text: {"valid": True, "job": {...}} or
    {"valid": False, "error": "..."} (retort-coordinator --check-job --json)."""
    coordinator = binaries.find("retort-coordinator", bin_dir)
    args = [str(coordinator), "--check-job=-", "--json"]
    if not check_paths:
        args.append("--no-check-paths")
    try:
        done = subprocess.run(args, input=text, capture_output=True, text=True,
                              timeout=CHECK_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired as error:
        raise JobSpecError(f"{coordinator} --check-job gave no answer within "
                           f"{CHECK_TIMEOUT_S:.0f} s") from error
    try:
        verdict = json.loads(done.stdout)
    except json.JSONDecodeError:
        raise JobSpecError(f"{coordinator} --check-job failed (exit {done.returncode}): "
                           f"{done.stderr.strip() or done.stdout.strip()}") from None
    if not isinstance(verdict, dict):
        raise JobSpecError(f"{coordinator} --check-job printed {done.stdout!r}")
    return verdict


def _parse_fields(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        try:
            import yaml  # type: ignore[import-untyped,unused-ignore]
        except ImportError:
            return None
        try:
            value = yaml.safe_load(text)
        except yaml.YAMLError:
            return None
    return value if isinstance(value, dict) else None
