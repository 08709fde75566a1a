"""retort.run: a job run to completion through retort-run, its folder read back."""
from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

import retort
from conftest import TOOLS


def test_a_job_runs_to_completion(tmp_path: pathlib.Path) -> None:
    lines: list[str] = []
    spec = {"name": "pyrun", "student": {"preset": "fm-student-p7"},
            "dataset": {"kind": "synthetic", "image_size": 28, "num_classes": 10,
                        "synthetic_samples": 256},
            "global_batch": 16, "steps": 3, "threads_per_worker": 1, "evaluate": False}
    run = retort.run(spec, workers=1, output_dir=tmp_path / "out", progress=lines.append,
                     timeout_s=120, bin_dir=TOOLS)
    assert run.result is not None and run.result.steps == 3 and not run.result.evaluated
    assert [m["step"] for m in run.metrics_by_step()] == [1, 2, 3]
    assert any(line.startswith("retort-run:") and "finished" in line for line in lines), lines
    assert pathlib.Path(run.result.student_weights).is_file()


def test_a_refused_spec_and_a_missing_binary_say_why(tmp_path: pathlib.Path) -> None:
    with pytest.raises(retort.JobSpecError, match="global_batch"):
        retort.run({"name": "x", "student": {"preset": "fm-student-p7"}, "global_batch": 0},
                   output_dir=tmp_path, bin_dir=TOOLS)
    with pytest.raises(retort.BinaryNotFoundError, match="scripts/build"):
        retort.binaries.find("retort-no-such-program")


def test_the_example_starts_watches_scales_and_reads_the_result(tmp_path: pathlib.Path) -> None:
    example = pathlib.Path(__file__).resolve().parents[2] / "python" / "examples"
    done = subprocess.run(
        [sys.executable, str(example / "start_watch_scale.py"), "--workers=2", "--steps=20",
         f"--output-dir={tmp_path / 'out'}", f"--bin-dir={TOOLS}"],
        capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "scaled down" in done.stdout and "with 1 worker(s)" in done.stdout, done.stdout
    assert "event generation" in done.stdout, done.stdout
