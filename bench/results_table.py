#!/usr/bin/env python3
"""The current-results table of bench/RESULTS.md, generated from the result files.

Contract:
- The headline metrics are defined once, in bench/headline_metrics.json (see its "about").
  Result files are named relative to the bench folder; each holds JSON lines.
- A metric's "ours" and "reference" each select lines whose fields equal every key of their
  "match" and read one numeric "field". With "combine": "latest" (the default) the value is
  that of the last selected line in the file; with "median" it is the median over the selected
  lines of the latest run, a run being the lines that share one stamp "date" (bench/context.sh
  stamps a whole run alike; unstamped lines count as one run: the scripts that repeat rounds
  rewrite their file each run).
- ratio = ours / reference; "met" compares the ratio (or ours, without a reference) with the
  target: >= for "better": "higher", <= for "lower".
- date, commit and machine come from the last selected "ours" line's stamp; a line without
  them shows "—". Nothing is estimated: a metric without a line says "not measured".
- The table goes between the markers below in RESULTS.md. With --check nothing is written and
  the exit status is 1 when the committed table differs from the generated one (a unified
  diff is printed) or when a metric that names a result file finds no line there. Metrics
  with "file": null (figures only in an area's prose, or ones that need a GPU) are listed as
  not measured with their reason; they do not fail the check.
Usage: results_table.py [--check] [--bench-dir DIR]
"""
import argparse
import difflib
import json
import pathlib
import statistics
import sys
from typing import Any, Optional

BEGIN = "<!-- results-table:begin -->"
END = "<!-- results-table:end -->"
NONE = "—"
COLUMNS = ["area", "metric", "ours", "reference", "ratio", "target", "met", "date", "commit",
           "machine"]

Line = dict[str, Any]


def read_lines(path: pathlib.Path) -> list[Line]:
    """The JSON objects of a JSON-lines file, in file order (blank lines skipped)."""
    rows = []
    for number, text in enumerate(path.read_text().splitlines(), 1):
        if text.strip():
            value = json.loads(text)
            if not isinstance(value, dict):
                raise ValueError(f"{path}:{number}: not a JSON object")
            rows.append(value)
    return rows


def select(rows: list[Line], side: dict[str, Any], combine: str) -> tuple[Optional[float],
                                                                         Optional[Line]]:
    """(value, last selected line) for one side of a metric; (None, None) without a line."""
    match = side["match"]
    chosen = [r for r in rows
              if all(k in r and r[k] == v for k, v in match.items()) and side["field"] in r]
    if not chosen:
        return None, None
    last = chosen[-1]
    if combine == "latest":
        return float(last[side["field"]]), last
    if combine == "median":
        run = [r for r in chosen if r.get("date") == last.get("date")]
        return float(statistics.median(r[side["field"]] for r in run)), last
    raise ValueError(f"unknown combine {combine!r}")


def number(value: float, unit: str = "") -> str:
    """A value with 4 significant digits and its unit."""
    text = f"{value:.4g}"
    return f"{text} {unit}".strip()


def cell(text: Any) -> str:
    """A table cell: "—" for missing, pipes escaped."""
    if text is None or text == "":
        return NONE
    return str(text).replace("|", "\\|")


def row(metric: dict[str, Any], bench_dir: pathlib.Path) -> tuple[list[str], Optional[str]]:
    """The table row of one metric, and a problem for --check (a file without a line) or None."""
    target = metric.get("target")
    target_text = target["text"] if target else NONE
    base = [metric["area"], metric["metric"]]
    see = metric.get("see")
    link = f"; see [{see.split('#')[0]}]({see})" if see else ""
    if metric.get("file") is None:
        text = f"not measured ({metric['unmeasured']}{link})"
        return base + [text, NONE, NONE, target_text, NONE, NONE, NONE, NONE], None
    path = bench_dir / metric["file"]
    rows = read_lines(path) if path.exists() else []
    combine = metric.get("combine", "latest")
    unit = metric.get("unit", "")
    ours, line = select(rows, metric["ours"], combine)
    reference: Optional[float] = None
    if metric.get("reference"):
        reference, _ = select(rows, metric["reference"], combine)
    missing = ours is None or (metric.get("reference") is not None and reference is None)
    if missing:
        problem = f"{metric['area']} / {metric['metric']}: no line in {metric['file']}"
        ours_text = f"not measured (no line in {metric['file']})"
        return base + [ours_text, NONE, NONE, target_text, NONE, NONE, NONE, NONE], problem
    assert ours is not None and line is not None
    ratio = ours / reference if reference else None
    judged = ratio if metric.get("reference") else ours
    met = NONE
    if target and judged is not None:
        goal = target["value"]
        ok = judged >= goal if metric["better"] == "higher" else judged <= goal
        met = "met" if ok else "**not met**"
    return base + [
        number(ours, unit),
        number(reference, unit) if reference is not None else NONE,
        f"{ratio:.3g}x" if ratio is not None else NONE,
        target_text, met,
        cell(line.get("date")), cell(line.get("commit")), cell(line.get("machine")),
    ], None


def table(bench_dir: pathlib.Path) -> tuple[str, list[str]]:
    """The markdown table (markers included) and the --check problems."""
    definitions = json.loads((bench_dir / "headline_metrics.json").read_text())
    lines = [BEGIN, "| " + " | ".join(COLUMNS) + " |", "|" + " --- |" * len(COLUMNS)]
    problems = []
    for metric in definitions["metrics"]:
        cells, problem = row(metric, bench_dir)
        lines.append("| " + " | ".join(cell(c) for c in cells) + " |")
        if problem:
            problems.append(problem)
    lines.append(END)
    return "\n".join(lines), problems


def splice(document: str, block: str) -> str:
    """`document` with the text from BEGIN to END (inclusive) replaced by `block`."""
    start, stop = document.find(BEGIN), document.find(END)
    if start < 0 or stop < start:
        raise ValueError(f"RESULTS.md lacks the markers {BEGIN} ... {END}")
    return document[:start] + block + document[stop + len(END):]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 when RESULTS.md's table is stale or a line "
                        "is missing")
    parser.add_argument("--bench-dir", type=pathlib.Path,
                        default=pathlib.Path(__file__).resolve().parent)
    args = parser.parse_args()
    results = args.bench_dir / "RESULTS.md"
    current = results.read_text()
    block, problems = table(args.bench_dir)
    wanted = splice(current, block)
    if not args.check:
        if wanted != current:
            results.write_text(wanted)
        for p in problems:
            print(f"not measured: {p}", file=sys.stderr)
        return 0
    status = 0
    if wanted != current:
        diff = difflib.unified_diff(current.splitlines(), wanted.splitlines(),
                                    f"{results} (committed)", f"{results} (from the result files)",
                                    lineterm="")
        print("\n".join(diff))
        print(f"{results}: the table is stale; run bench/results_table.py", file=sys.stderr)
        status = 1
    for p in problems:
        print(f"missing result line: {p}", file=sys.stderr)
        status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
