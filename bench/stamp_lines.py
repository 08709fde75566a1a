#!/usr/bin/env python3
"""Filter: copies stdin to stdout, adding the run's stamp (bench_context.py) to every JSON
object line.

Contract: the stamp is the JSON object in $RETORT_BENCH_STAMP (bench/context.sh sets it once
per run, so every line of a run carries the same stamp and `load` is the load at its start), or
else bench_context.context() taken when this filter starts. A line that is a JSON object gets
the stamp's keys it does not already have, appended before its closing brace; its own text is
otherwise unchanged (numbers keep their formatting). Every other line passes through as it is.
Each line is flushed as it is written, so a `| stamp_lines.py | tee` pipeline shows progress.
Usage: PROGRAM | stamp_lines.py >> results.jsonl
"""
import json
import os
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import bench_context  # noqa: E402  (beside this file)


def load_stamp() -> bench_context.Stamp:
    """The run's stamp: $RETORT_BENCH_STAMP when set, else one taken now."""
    text = os.environ.get("RETORT_BENCH_STAMP", "")
    if text:
        value = json.loads(text)
        if not isinstance(value, dict):
            raise SystemExit("RETORT_BENCH_STAMP is not a JSON object")
        return value
    return bench_context.context(pathlib.Path(__file__).resolve().parent.parent)


def stamp_line(line: str, stamp: bench_context.Stamp) -> str:
    """`line` (without its newline) with the stamp's missing keys added, if it is a JSON object."""
    text = line.rstrip()
    if not (text.startswith("{") and text.endswith("}")):
        return line
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return line
    if not isinstance(value, dict):
        return line
    extra = {k: v for k, v in stamp.items() if k not in value}
    if not extra:
        return line
    fields = json.dumps(extra, separators=(",", ":"))[1:-1]
    return text[:-1] + ("," if value else "") + fields + "}"


def main() -> None:
    stamp = load_stamp()
    while True:
        line = sys.stdin.readline()
        if not line:
            break
        end = "\n" if line.endswith("\n") else ""
        sys.stdout.write(stamp_line(line.rstrip("\n"), stamp) + end)
        sys.stdout.flush()


if __name__ == "__main__":
    main()
