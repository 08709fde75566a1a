"""bench/results_table.py on a made-up bench folder: rows from fixture lines, the latest line
(or the latest run's median) chosen, a metric without a line "not measured", --check on a stale
table; and bench/stamp_lines.py's merge."""
import json
import pathlib
import subprocess
import sys
from typing import Any

import pytest

BENCH = pathlib.Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))
import results_table  # noqa: E402
import stamp_lines  # noqa: E402

STAMP: dict[str, str | float] = {
    "commit": "abc1234", "machine": "Test CPU, 2 cores, 8 GiB, no GPU", "load": 0.5,
    "date": "2026-11-28T10:00:00Z"}


def side(field: str, **match: object) -> dict[str, Any]:
    """A metric side: lines whose fields equal `match`, value from `field`."""
    return {"match": match, "field": field}


def make_bench(tmp_path: pathlib.Path, lines: list[dict[str, Any]],
               extra_metrics: tuple[dict[str, Any], ...] = ()) -> pathlib.Path:
    """A bench folder with one result file, two metrics on it (plus `extra_metrics`) and a
    RESULTS.md holding empty markers."""
    (tmp_path / "area").mkdir()
    (tmp_path / "area" / "results.jsonl").write_text(
        "".join(json.dumps(line) + "\n" for line in lines))
    metrics = [
        {"area": "area", "metric": "write vs dd", "file": "area/results.jsonl",
         "ours": side("ours_MBps", bench="write"), "reference": side("dd_MBps", bench="write"),
         "unit": "MB/s", "better": "higher", "target": {"value": 0.5, "text": ">= 0.5x"}},
        {"area": "area", "metric": "busbw vs mpi", "file": "area/results.jsonl",
         "ours": side("busbw", impl="ours"), "reference": side("busbw", impl="mpi"),
         "combine": "median", "unit": "GB/s", "better": "higher",
         "target": {"value": 1.0, "text": ">= mpi"}},
        *extra_metrics,
    ]
    (tmp_path / "headline_metrics.json").write_text(json.dumps({"metrics": metrics}))
    (tmp_path / "RESULTS.md").write_text(
        f"# Results\n\n{results_table.BEGIN}\n{results_table.END}\n\nmore\n")
    return tmp_path


def rows(bench: pathlib.Path) -> list[list[str]]:
    """The generated table's data rows, split into cells."""
    block, _ = results_table.table(bench)
    return [[c.strip() for c in line.strip("|").split("|")] for line in block.splitlines()[3:-1]]


def run(bench: pathlib.Path, *args: str) -> subprocess.CompletedProcess[str]:
    """results_table.py on `bench` with `args`, output captured."""
    return subprocess.run([sys.executable, str(BENCH / "results_table.py"), "--bench-dir",
                           str(bench), *args], capture_output=True, text=True)


FIXTURE: list[dict[str, Any]] = [
    {"bench": "write", "ours_MBps": 100.0, "dd_MBps": 400.0},  # older: 0.25x, not met
    {"bench": "write", "ours_MBps": 300.0, "dd_MBps": 200.0, **STAMP},  # latest: 1.5x, met
    {"impl": "ours", "busbw": 1.0, "date": "old"},
    {"impl": "ours", "busbw": 2.0},
    {"impl": "ours", "busbw": 4.0},
    {"impl": "ours", "busbw": 3.0},
    {"impl": "mpi", "busbw": 2.0},
    {"context": "load"},
]


def test_rows_come_from_the_latest_line_and_the_latest_runs_median(tmp_path: pathlib.Path) -> None:
    write, busbw = rows(make_bench(tmp_path, FIXTURE))
    assert write == ["area", "write vs dd", "300 MB/s", "200 MB/s", "1.5x", ">= 0.5x", "met",
                     STAMP["date"], STAMP["commit"], STAMP["machine"]]
    # Median of the unstamped run (2, 4, 3), not of the older stamped line.
    assert busbw == ["area", "busbw vs mpi", "3 GB/s", "2 GB/s", "1.5x", ">= mpi", "met",
                     "—", "—", "—"]


def test_not_met_is_marked(tmp_path: pathlib.Path) -> None:
    lines = FIXTURE + [{"bench": "write", "ours_MBps": 10.0, "dd_MBps": 400.0}]
    assert rows(make_bench(tmp_path, lines))[0][4:7] == ["0.025x", ">= 0.5x", "**not met**"]


def test_a_metric_without_a_line_is_not_measured_and_fails_the_check(
        tmp_path: pathlib.Path) -> None:
    bench = make_bench(tmp_path, [line for line in FIXTURE if "impl" not in line])
    busbw = rows(bench)[1]
    assert busbw[2] == "not measured (no line in area/results.jsonl)"
    assert busbw[3:] == ["—", "—", ">= mpi", "—", "—", "—", "—"]
    assert run(bench).returncode == 0  # writes the table, names what is missing
    done = run(bench, "--check")
    assert done.returncode == 1
    assert "missing result line: area / busbw vs mpi" in done.stderr


def test_a_declared_unmeasured_metric_points_at_its_prose(tmp_path: pathlib.Path) -> None:
    gpu: dict[str, Any] = {"area": "gpu", "metric": "step", "file": None,
                           "unmeasured": "needs a GPU",
           "better": "higher", "target": {"value": 1, "text": ">= 1x"}, "see": "gpu/RESULTS.md#x"}
    bench = make_bench(tmp_path, FIXTURE, (gpu,))
    assert rows(bench)[2][2] == "not measured (needs a GPU; see [gpu/RESULTS.md](gpu/RESULTS.md#x))"
    assert run(bench).returncode == 0
    assert run(bench, "--check").returncode == 0


def test_check_detects_a_stale_table(tmp_path: pathlib.Path) -> None:
    bench = make_bench(tmp_path, FIXTURE)
    assert run(bench, "--check").returncode == 1  # markers still empty
    assert run(bench).returncode == 0
    text = (bench / "RESULTS.md").read_text()
    assert text.startswith("# Results\n") and text.endswith("\n\nmore\n")
    assert run(bench, "--check").returncode == 0
    with open(bench / "area" / "results.jsonl", "a") as f:
        f.write(json.dumps({"bench": "write", "ours_MBps": 500.0, "dd_MBps": 250.0}) + "\n")
    done = run(bench, "--check")
    assert done.returncode == 1
    assert "+| area | write vs dd | 500 MB/s | 250 MB/s | 2x |" in done.stdout
    assert "stale" in done.stderr


def test_missing_markers_are_an_error(tmp_path: pathlib.Path) -> None:
    bench = make_bench(tmp_path, FIXTURE)
    (bench / "RESULTS.md").write_text("# Results\n")
    with pytest.raises(ValueError):
        results_table.splice("# Results\n", "table")
    assert run(bench, "--check").returncode != 0


def test_stamp_lines_adds_missing_keys_and_keeps_the_text() -> None:
    assert stamp_lines.stamp_line('{"a":1.50}', STAMP) == (
        '{"a":1.50,"commit":"abc1234","machine":"Test CPU, 2 cores, 8 GiB, no GPU",'
        '"load":0.5,"date":"2026-11-28T10:00:00Z"}')
    assert stamp_lines.stamp_line('{"commit":"x","machine":"m","load":1,"date":"d"}', STAMP) == (
        '{"commit":"x","machine":"m","load":1,"date":"d"}')
    assert json.loads(stamp_lines.stamp_line("{}", STAMP)) == STAMP
    for other in ("not json", "[1, 2]", "{broken"):
        assert stamp_lines.stamp_line(other, STAMP) == other
