#!/usr/bin/env python3
"""The stamp every benchmark result line carries: which code ran, where, under what load, when.

Contract: `context(repo)` returns a dict with exactly these keys, all strings except `load`:
  commit   `git rev-parse --short HEAD` of `repo`, plus "-dirty" when tracked files differ from
           HEAD (result files, bench/**/*.jsonl, do not count: appending results is not a code
           change); "unknown" outside a git checkout.
  machine  "<CPU model>, <N> cores, <M> GiB, <GPU name(s) or 'no GPU'>".
  load     the 1-minute load average when called (float, 2 decimals).
  date     the UTC time when called, ISO 8601 to the second ("2026-11-28T14:03:00Z").
Run as a program it prints that dict as one JSON object. Standard library only, so any python3
can run it. Usage: bench_context.py [--repo DIR]
"""
import argparse
import datetime
import json
import os
import pathlib
import shutil
import subprocess
from typing import Union

Stamp = dict[str, Union[str, float]]

_RESULT_FILES = ":(exclude,glob)bench/**/*.jsonl"


def _run(args: list[str], cwd: pathlib.Path) -> str:
    """stdout of `args` run in `cwd`, stripped; "" when it fails or cannot start."""
    try:
        done = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def commit(repo: pathlib.Path) -> str:
    """Short HEAD hash, "-dirty" appended when tracked non-result files are modified."""
    head = _run(["git", "rev-parse", "--short", "HEAD"], repo)
    if not head:
        return "unknown"
    changed = _run(["git", "status", "--porcelain", "--untracked-files=no", "--", ".",
                    _RESULT_FILES], repo)
    return head + ("-dirty" if changed else "")


def _cpu_model() -> str:
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def _memory_gib() -> int:
    try:
        for line in pathlib.Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / (1 << 20))
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _gpus() -> str:
    """GPU names as nvidia-smi reports them ("2x NVIDIA H100" for several alike), or "no GPU"."""
    if shutil.which("nvidia-smi") is None:
        return "no GPU"
    names = _run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                 pathlib.Path.cwd()).splitlines()
    names = [n.strip() for n in names if n.strip()]
    if not names:
        return "no GPU"
    distinct = sorted(set(names))
    return ", ".join(f"{names.count(n)}x {n}" if names.count(n) > 1 else n for n in distinct)


def machine() -> str:
    """One line naming the CPU, its core count, the memory and the GPUs."""
    return f"{_cpu_model()}, {os.cpu_count()} cores, {_memory_gib()} GiB, {_gpus()}"


def context(repo: pathlib.Path) -> Stamp:
    """The stamp (see the module docstring) for code in `repo`, taken now."""
    now = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
    return {
        "commit": commit(repo),
        "machine": machine(),
        "load": round(os.getloadavg()[0], 2),
        "date": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=pathlib.Path,
                        default=pathlib.Path(__file__).resolve().parent.parent)
    print(json.dumps(context(parser.parse_args().repo), separators=(",", ":")))


if __name__ == "__main__":
    main()
