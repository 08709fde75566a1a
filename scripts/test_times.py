#!/usr/bin/env python3
"""The slowest tests of a ctest run, from its JUnit report (scripts/test writes
build/ctest-junit.xml): a Markdown table of the N slowest (default 20) with each one's share of
the summed test time, then the sum and, when given, the run's wall time.

Usage: test_times.py REPORT.xml [--top N] [--wall SECONDS]
`scripts/test` prints it after every run; tests/TIMES.md keeps the table of the last full run in
CI's configuration, so that growth is seen in review.
"""
from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("report")
    parser.add_argument("--top", type=int, default=20)
    parser.add_argument("--wall", type=float, help="the run's wall time in seconds")
    args = parser.parse_args()
    try:
        cases = list(ET.parse(args.report).getroot().iter("testcase"))
    except (OSError, ET.ParseError) as e:
        print(f"test_times: cannot read {args.report}: {e}", file=sys.stderr)
        return 2
    rows = sorted(((float(c.get("time") or 0), c.get("name") or "?") for c in cases), reverse=True)
    total = sum(t for t, _ in rows)
    print(f"| # | test | seconds | share of summed test time |")
    print("| ---: | --- | ---: | ---: |")
    for i, (seconds, name) in enumerate(rows[: args.top], 1):
        share = 100 * seconds / total if total else 0
        print(f"| {i} | `{name}` | {seconds:.1f} | {share:.1f}% |")
    line = f"\n{len(rows)} tests, {total / 60:.1f} test-minutes summed"
    if args.wall:
        line += f", {args.wall / 60:.1f} minutes of wall time (ctest -j: tests side by side)"
    print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
