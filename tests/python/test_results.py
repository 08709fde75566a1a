"""Run folders read into Python objects (and pandas when it is installed)."""
from __future__ import annotations

import json
import pathlib

import pytest

import retort


def write_run(folder: pathlib.Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "job.json").write_text(json.dumps({"name": "r", "steps": "3"}))
    lines = [{"step": 1, "loss": 2.0, "world_size": 2, "timing": {"backward": 0.1}},
             {"step": 2, "loss": 1.5, "world_size": 2, "timing": {"backward": 0.1}},
             {"step": 2, "loss": 1.4, "world_size": 1, "timing": {"backward": 0.2}},
             {"step": 3, "loss": 1.0, "world_size": 1, "timing": {"backward": 0.2}}]
    text = "".join(json.dumps(line) + "\n" for line in lines)
    (folder / "metrics.jsonl").write_text(text + '{"step": 4, "lo')  # a torn last line
    (folder / "result.json").write_text(json.dumps(
        {"job": "r", "steps": 3, "evaluated": True, "student": "fm-student-p7",
         "student_weights": str(folder / "student.safetensors"),
         "metrics": str(folder / "metrics.jsonl"), "test_samples": 100, "student_top1": 0.5,
         "eval_seconds": 0.1}))


def test_a_run_folder_as_objects(tmp_path: pathlib.Path) -> None:
    write_run(tmp_path / "run")
    run = retort.read_run(tmp_path / "run")
    assert run.result is not None and run.result.student_top1 == 0.5 and run.result.evaluated
    assert run.result.teacher is None and run.job == {"name": "r", "steps": "3"}
    assert [m["step"] for m in run.metrics] == [1, 2, 2, 3]
    assert [m["loss"] for m in run.metrics_by_step()] == [2.0, 1.4, 1.0]


def test_a_torn_line_inside_the_file_is_an_error(tmp_path: pathlib.Path) -> None:
    (tmp_path / "metrics.jsonl").write_text('{"step": 1\n{"step": 2}\n')
    with pytest.raises(ValueError, match="metrics.jsonl:1"):
        retort.read_metrics(tmp_path / "metrics.jsonl")
    with pytest.raises(FileNotFoundError):
        retort.read_run(tmp_path / "missing")


def test_metrics_as_a_data_frame(tmp_path: pathlib.Path) -> None:
    write_run(tmp_path / "run")
    run = retort.read_run(tmp_path / "run")
    try:
        import pandas  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="needs pandas"):
            run.metrics_frame()
        return
    frame = run.metrics_frame()
    assert list(frame["step"]) == [1, 2, 2, 3] and "timing.backward" in frame.columns
